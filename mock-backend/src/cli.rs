//! The `mock-backend` command: the mock REST backend as a process, for scripts and load tests.
//! The binary target is the root package's (`src/bin/mock-backend.rs`, so that `cargo install`
//! of mcpbench installs it too); its whole program is [`main`].
//!
//! Prints exactly one line, `listening on http://ADDR`, once the socket is bound, so callers can
//! pass `--listen 127.0.0.1:0` and read the port back.

use std::{io::Write as _, net::SocketAddr, process::ExitCode};

use crate::{Config, Knobs, Latency, RouteKnobs, RouteOverride, knobs::parse_error_rate, server};
use clap::Parser;
use tokio::net::TcpListener;

/// Mock REST backend for mcpbench: JSON endpoints with latency, payload and error knobs, and
/// request counters at /stats.
#[derive(Debug, Parser)]
#[command(name = "mock-backend", version)]
struct Args {
    /// Address to listen on; loopback unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// Latency of every route: 5ms | fixed:5ms | uniform:1ms..10ms | lognormal:p50=2ms,p99=20ms
    #[arg(long, value_name = "SPEC")]
    latency: Option<Latency>,
    /// Bytes of "padding" added to every successful response.
    #[arg(long, value_name = "BYTES")]
    payload: Option<usize>,
    /// Probability (0..=1) of answering 500 {"error":"injected failure"}.
    #[arg(long, value_name = "P", value_parser = parse_error_rate)]
    error_rate: Option<f64>,
    /// Per-route override, repeatable: NAME:latency=SPEC,payload=N,error-rate=P
    /// (NAME is contacts, invoices, tickets or echo).
    #[arg(long = "route", value_name = "NAME:KNOBS")]
    routes: Vec<RouteOverride>,
    /// Number of contacts in the data set.
    #[arg(long, default_value_t = server::DEFAULT_CONTACTS)]
    contacts: usize,
    /// Number of invoices (ids 1..=N).
    #[arg(long, default_value_t = server::DEFAULT_INVOICES)]
    invoices: u64,
    /// Seed of the generated data.
    #[arg(long, default_value_t = server::DEFAULT_SEED)]
    seed: u64,
    /// Largest accepted request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = server::DEFAULT_MAX_BODY)]
    max_body: usize,
}

impl Args {
    fn config(&self) -> Config {
        let mut routes = RouteKnobs::default();
        for o in &self.routes {
            routes.apply(o);
        }
        Config {
            defaults: Knobs {
                latency: self.latency,
                payload: self.payload,
                error_rate: self.error_rate,
            },
            routes,
            contacts: self.contacts,
            invoices: self.invoices,
            seed: self.seed,
            max_body: self.max_body,
        }
    }
}

/// The `mock-backend` program: parse the command line, serve until a signal; exit 0, or 2 with
/// a message on stderr (bad flags, the address taken).
pub fn main() -> ExitCode {
    // clap exits with code 2 on bad flags (0 for --help and --version).
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("mock-backend: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mock-backend: {message}");
            ExitCode::from(2)
        }
    }
}

/// Binds, announces the address, serves until SIGINT/SIGTERM.
async fn run(args: Args) -> Result<(), String> {
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    // Install the signal handlers before announcing the address: a script may signal us as
    // soon as it reads the line, and a signal that arrives first would be lost or fatal.
    let shutdown = shutdown_signal().map_err(|e| format!("cannot handle signals: {e}"))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on http://{addr}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write to stdout: {e}"))?;
    crate::serve(listener, args.config(), shutdown)
        .await
        .map_err(|e| e.to_string())
}

/// Completes on Ctrl-C (SIGINT), or SIGTERM on Unix (what `kill` and supervisors send).
///
/// The handlers are registered when this is called, not when the future is first polled.
#[cfg(unix)]
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

/// Completes on Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    Ok(async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    })
}
