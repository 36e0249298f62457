//! Command-line interface: `run`, `serve`, `validate`.
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
        /// Directory for this run's results (default: results/<UTC time>-<name>).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Where default run directories go.
        #[arg(long, default_value = "results")]
        results_root: PathBuf,
        /// JSON decoder for responses: serde-json or simd-json.
        #[arg(long, default_value = "serde-json")]
        codec: Codec,
        /// Generator threads (default: the scenario's, else one per core).
        #[arg(long)]
        workers: Option<usize>,
        /// No per-second progress lines.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Serve the reference MCP server (Streamable HTTP at /mcp).
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
    },
    /// Check a scenario file without running it.
    Validate { scenario: PathBuf },
}

/// Runs the parsed command.
pub fn execute(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Validate { scenario } => match scenario::load(&scenario) {
            Ok(plan) => {
                let target = match &plan.target {
                    Target::Embedded(_) => "the built-in reference server".to_string(),
                    Target::Http(h) => h.url.clone(),
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
        } => serve(
            listen,
            backend,
            response,
            catalog,
            page_size,
            allow_hosts,
            threads,
        ),
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

fn serve(
    listen: SocketAddr,
    backend: Option<String>,
    response: ResponseMode,
    catalog: usize,
    page_size: usize,
    allow_hosts: Vec<String>,
    threads: Option<usize>,
) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = threads {
        builder.worker_threads(t.max(1));
    }
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {listen}: {e}");
                return ExitCode::from(2);
            }
        };
        let addr = listener.local_addr().unwrap_or(listen);
        let (down_tx, down_rx) = tokio::sync::watch::channel(false);
        let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|d| *d).await;
        };
        let mut backend_task = None;
        let backend_url = match backend {
            Some(b) => b,
            None => {
                let l = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("error: cannot start the mock backend: {e}");
                        return ExitCode::from(2);
                    }
                };
                let url = format!(
                    "http://{}",
                    l.local_addr().map(|a| a.to_string()).unwrap_or_default()
                );
                backend_task = Some(tokio::spawn(mock_backend::serve(
                    l,
                    mock_backend::Config::default(),
                    wait(down_rx.clone()),
                )));
                url
            }
        };
        let mut config = server::Config {
            response,
            catalog,
            page_size,
            backend: Some(backend_url.clone()),
            ..server::Config::default()
        };
        config.allowed_hosts.extend(allow_hosts);
        println!("listening on http://{addr}/mcp (backend {backend_url})");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let server = tokio::spawn(server::serve(listener, config, wait(down_rx)));
        let _ = tokio::signal::ctrl_c().await;
        let _ = down_tx.send(true);
        let _ = server.await;
        if let Some(b) = backend_task {
            let _ = b.await;
        }
        ExitCode::SUCCESS
    })
}
