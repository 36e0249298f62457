//! The `mock-backend` binary: the mock REST backend as a process. Its command line lives in the
//! `mock-backend` crate (`mock_backend::cli`); the binary is this package's so that
//! `cargo install mcpbench` installs it beside `mcpbench`.

fn main() -> std::process::ExitCode {
    mock_backend::cli::main()
}
