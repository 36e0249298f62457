//! Command-line interface: `run`, `serve`, `validate`, `probe`.
//!
//! Exit codes: 0 success; 1 thresholds breached or regression (reserved); 2 usage or runtime
//! error (including an interrupted run, whose partial results are still written).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::driver::{self, RunOptions};
use crate::protocol::jsonrpc::Codec;
use crate::scenario::{self, Target};
use crate::server::{self, ResponseMode};

#[derive(Debug, Parser)]
#[command(
    name = "mcpbench",
    version,
    about = "Load generator and reference server for MCP servers and gateways"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario and write its results.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Directory for this run's results (default: `results/<UTC time>-<name>`).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Where default run directories go.
        #[arg(long, default_value = "results")]
        results_root: PathBuf,
        /// JSON decoder for responses: scan (default), serde-json or simd-json.
        #[arg(long, default_value = "scan")]
        codec: Codec,
        /// Generator threads (default: the scenario's, else one per core).
        #[arg(long)]
        workers: Option<usize>,
        /// No per-second progress lines.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Serve the reference MCP server: Streamable HTTP at /mcp, HTTP+SSE at /sse + /messages,
    /// WebSocket at /ws (subprotocol mcp); or one session on stdin/stdout with --stdio.
    Serve {
        /// Address to listen on; loopback unless you say otherwise.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Base URL of the REST backend for REST-backed tools; without it a mock backend is
        /// started in-process on 127.0.0.1.
        #[arg(long)]
        backend: Option<String>,
        /// Answer requests as JSON or as SSE streams.
        #[arg(long, default_value = "json")]
        response: ResponseMode,
        /// Synthetic tools added to tools/list.
        #[arg(long, default_value_t = 0)]
        catalog: usize,
        /// Tools per tools/list page.
        #[arg(long, default_value_t = 100)]
        page_size: usize,
        /// Extra host names accepted in Host and Origin headers (`*` accepts any).
        #[arg(long = "allow-host")]
        allow_hosts: Vec<String>,
        /// Runtime threads.
        #[arg(long)]
        threads: Option<usize>,
        /// Serve one MCP session on stdin/stdout (one JSON message per line) instead of
        /// listening; exits when stdin closes.
        #[arg(long, conflicts_with_all = ["listen", "tls_cert", "tls_key"])]
        stdio: bool,
        /// Serve HTTPS/WSS (ALPN h2 and http/1.1) with this PEM certificate chain.
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The PEM private key of --tls-cert.
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Also serve the official conformance suite's fixtures: `test_*` tools, prompts,
        /// resources, completions and logging (the benchmark catalog is unchanged).
        #[arg(long)]
        conformance: bool,
    },
    /// Check a scenario file without running it.
    Validate { scenario: PathBuf },
    /// Open one MCP session on a Streamable HTTP endpoint with mcpbench's client, list the
    /// tools, call the ones asked for, and print one line (exit 0 ok, 1 failed, 2 usage). Under
    /// the official conformance suite (MCP_CONFORMANCE_SCENARIO set) the scenario decides what
    /// to call.
    Probe {
        /// The endpoint, e.g. http://127.0.0.1:8080/mcp.
        url: String,
        /// The revision to offer (handshake era) or to use (2026-07-28).
        #[arg(long, default_value = "2025-11-25")]
        protocol: crate::protocol::version::Revision,
        /// A tool to call, optionally with JSON arguments: `--call echo`,
        /// `--call 'echo={"message":"hi"}'`. Repeatable.
        #[arg(long = "call", value_name = "TOOL[=JSON]", value_parser = crate::probe::parse_call)]
        calls: Vec<(String, serde_json::Value)>,
        /// An extra HTTP header, `Name: value` (repeatable).
        #[arg(long = "header", short = 'H', value_parser = crate::probe::parse_header)]
        headers: Vec<(String, String)>,
        /// Bound on connecting and on each exchange.
        #[arg(long, default_value = "10s", value_parser = crate::scenario::duration::parse)]
        timeout: std::time::Duration,
        /// https: accept any certificate (self-signed test servers only).
        #[arg(long)]
        insecure: bool,
    },
}

/// Runs the parsed command.
pub fn execute(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Probe {
            url,
            protocol,
            calls,
            headers,
            timeout,
            insecure,
        } => crate::probe::command(crate::probe::ProbeOptions {
            url,
            protocol,
            calls,
            headers,
            timeout,
            insecure,
        }),
        Command::Validate { scenario } => match scenario::load(&scenario) {
            Ok(plan) => {
                let target = match &plan.target {
                    Target::Embedded(_) => "the built-in reference server".to_string(),
                    Target::Remote(r) => r.describe(),
                };
                println!(
                    "{}: ok — {} workload entries against {}, {} virtual users for {}",
                    scenario.display(),
                    plan.workload.len(),
                    target,
                    plan.load.concurrency,
                    scenario::duration::format(plan.load.duration)
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Run {
            scenario,
            output,
            results_root,
            codec,
            workers,
            quiet,
        } => {
            let plan = match scenario::load(&scenario) {
                Ok(p) => Arc::new(p),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let opts = RunOptions {
                output,
                results_root,
                codec,
                progress: !quiet,
                workers,
                scenario_file: scenario.display().to_string(),
                ..RunOptions::default()
            };
            let interrupt = CancellationToken::new();
            watch_ctrl_c(interrupt.clone());
            if plan.find_max.is_some() {
                return match driver::findmax::find_max(plan, &opts, interrupt) {
                    Ok((report, dir)) => {
                        print!("{}", driver::findmax::render(&report, &dir));
                        if report.interrupted {
                            ExitCode::from(2)
                        } else {
                            ExitCode::SUCCESS
                        }
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::from(2)
                    }
                };
            }
            match driver::run(plan, &opts, interrupt) {
                Ok(out) => {
                    print!("{}", driver::render(&out));
                    if out.summary.interrupted {
                        eprintln!(
                            "interrupted: partial results written to {}",
                            out.dir.display()
                        );
                        ExitCode::from(2)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Serve {
            listen,
            backend,
            response,
            catalog,
            page_size,
            allow_hosts,
            threads,
            stdio,
            tls_cert,
            tls_key,
            conformance,
        } => serve(Serve {
            listen,
            backend,
            response,
            catalog,
            page_size,
            allow_hosts,
            threads,
            stdio,
            tls: tls_cert.zip(tls_key),
            conformance,
        }),
    }
}

/// Cancels `token` on the first Ctrl-C; a second Ctrl-C exits at once.
fn watch_ctrl_c(token: CancellationToken) {
    let _ = std::thread::Builder::new().name("mcpbench-signals".into()).spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ninterrupted: stopping, writing what was measured (Ctrl-C again to quit at once)");
                token.cancel();
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        });
    });
}

/// `serve`'s options.
struct Serve {
    listen: SocketAddr,
    backend: Option<String>,
    response: ResponseMode,
    catalog: usize,
    page_size: usize,
    allow_hosts: Vec<String>,
    threads: Option<usize>,
    stdio: bool,
    /// Certificate chain and key (PEM).
    tls: Option<(PathBuf, PathBuf)>,
    conformance: bool,
}

fn serve(o: Serve) -> ExitCode {
    let mut config = server::Config {
        conformance: o.conformance,
        response: o.response,
        catalog: o.catalog,
        page_size: o.page_size,
        backend: o.backend,
        ..server::Config::default()
    };
    config.allowed_hosts.extend(o.allow_hosts);
    if let Some((cert, key)) = &o.tls {
        match server::tls::load_pem(cert, key) {
            Ok(tls) => config.tls = Some(tls),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let threads = o
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if o.stdio {
        // stdout carries MCP messages only; everything else goes to stderr.
        return match server::run_stdio(
            config,
            mock_backend::Config::default(),
            threads,
            signalled(),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        };
    }
    let servers = match server::EmbeddedServers::launch(server::Launch {
        listen: o.listen,
        config,
        backend: mock_backend::Config::default(),
        threads,
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // The first line is parsed by scripts and tests: keep its shape. One write, errors
    // ignored: a reader that stops after the first line must not make this panic.
    let banner = format!(
        "listening on {} (backend {})\nalso: {} (HTTP+SSE, 2024-11-05), {} (WebSocket, subprotocol mcp)\n",
        servers.mcp_url(),
        servers.backend_url,
        servers.sse_url(),
        servers.ws_url()
    );
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
    drop(out);
    wait_for_ctrl_c();
    drop(servers);
    ExitCode::SUCCESS
}

/// Blocks until SIGINT (or SIGTERM on Unix).
fn wait_for_ctrl_c() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(signalled());
}

/// Completes on SIGINT (or SIGTERM on Unix). Nothing is registered until it is first polled,
/// so it can be made outside a runtime.
async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
