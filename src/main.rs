//! The `mcpbench` binary: parse the command line, set up logging, hand over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    mcpbench::cli::execute(mcpbench::cli::Cli::parse())
}
