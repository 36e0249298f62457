//! `mcpbench record` (a transparent proxy in front of one upstream, writing a trace) and
//! `mcpbench trace` (traces converted from an audit log, redacted, summarised).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use super::error;
use super::serve::{FrontArgs, UpstreamArgs, front};
use crate::server;

/// `record`'s command line.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The server to record: http(s)://… (Streamable HTTP, either era), sse+http(s)://…
    /// (HTTP+SSE), ws(s)://… or stdio:COMMAND ARGS…. Its tools keep their names.
    #[arg(long, value_name = "TARGET")]
    pub upstream: String,
    /// The trace to write (replaced if it exists).
    #[arg(long, short, value_name = "FILE", alias = "out")]
    pub output: PathBuf,
    /// Write arguments as received, secrets included (the trace is then refused by
    /// readers until `mcpbench trace redact` has run on it).
    #[arg(long)]
    pub keep_secrets: bool,
    #[command(flatten)]
    pub front: FrontArgs,
    #[command(flatten)]
    pub upstream_args: UpstreamArgs,
}

/// `trace`'s command line.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

/// `mcpbench trace …`.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Convert a gateway's audit log (`mcpbench serve --audit FILE`) into a trace.
    ///
    /// Invocations become tools/call entries and discoveries tools/list, at their arrival
    /// times, in the sessions the log names. The log needs the arguments
    /// (`--audit-arguments`) unless --empty-arguments. Denied and rate-limited calls are left
    /// out (and counted).
    #[command(
        name = "from-audit",
        after_help = "Examples:\n  mcpbench trace from-audit audit.jsonl --output session.trace.jsonl\n  \
            mcpbench trace from-audit audit.jsonl -o session.trace.jsonl --empty-arguments"
    )]
    FromAudit {
        /// The audit log (JSON lines).
        audit: PathBuf,
        /// The trace to write.
        #[arg(long, short, value_name = "FILE")]
        output: PathBuf,
        /// Replay calls whose arguments were not logged (`"[redacted]"`) with `{}`.
        #[arg(long)]
        empty_arguments: bool,
    },
    /// Replace secret-looking values in a trace's params with `"[redacted]"`, in place.
    #[command(after_help = "Examples:\n  mcpbench trace redact session.trace.jsonl")]
    Redact {
        /// The trace, rewritten in place.
        file: PathBuf,
    },
    /// Summarise a trace: requests, sessions, span, and outcomes per method and tool.
    #[command(after_help = "Examples:\n  mcpbench trace show session.trace.jsonl")]
    Show {
        /// The trace to summarise.
        file: PathBuf,
    },
}

/// `record`: the gateway in front of one upstream, its tools under their own names, every
/// tools/list and tools/call written to the trace; then says what the trace holds.
pub(super) fn record(o: RecordArgs) -> ExitCode {
    let shown = crate::trace::record::printable_target(&o.upstream);
    let mut config = server::Config {
        identity: Some(server::Identity {
            name: "mcpbench-record".into(),
            title: "mcpbench record".into(),
            instructions: format!(
                "Records the requests made to {shown}: its tools, called through this proxy."
            ),
        }),
        // One page: the upstream was listed whole, and a trace should hold no cursor of ours.
        page_size: usize::MAX,
        ..server::Config::default()
    };
    if let Err(e) = o.front.configure(&mut config) {
        return error(e);
    }
    let threads = o.front.threads();
    let timeout = o.upstream_args.upstream_timeout;
    // The gateway's spec is NAME=TARGET; the name is never shown (no prefix).
    let spec = match crate::gateway::UpstreamSpec::parse(
        &format!("recorded={}", o.upstream),
        timeout,
        &o.upstream_args.tls(),
    ) {
        Ok(s) => s,
        Err(crate::gateway::GatewayError::Spec { reason, .. }) => {
            return error(format_args!("--upstream {}: {reason}", o.upstream));
        }
        Err(e) => return error(e),
    };
    let gw =
        match crate::gateway::Gateway::start_transparent(spec, &o.upstream_args.options(threads)) {
            Ok(gw) => gw,
            Err(crate::gateway::GatewayError::Upstream { reason, .. }) => {
                return error(format_args!("upstream {shown}: {reason}"));
            }
            Err(e) => return error(e),
        };
    if let Some(s) = gw.started.first() {
        eprintln!(
            "upstream {shown}: {} tools, {} ({:.1} ms)",
            s.tools,
            s.revision,
            s.took.as_secs_f64() * 1000.0
        );
    }
    let header = crate::trace::record::header("record", Some(shown));
    let recorder =
        match server::trace_recorder::Recorder::create(&o.output, &header, o.keep_secrets) {
            Ok(r) => r,
            Err(e) => {
                return error(format_args!(
                    "cannot create the trace {}: {e}",
                    o.output.display()
                ));
            }
        };
    if o.keep_secrets {
        eprintln!(
            "warning: --keep-secrets: arguments are written as received, secrets included; \
             readers refuse {} until `mcpbench trace redact` has run on it",
            o.output.display()
        );
    }
    config.proxy = Some(gw.clone());
    config.record = Some(recorder.clone());
    // The banner says clients may come: only once every server thread's upstream session is
    // open, so that no recorded call pays for opening one (a stdio upstream's start).
    let ready = move || {
        if !gw.wait_warm(threads, timeout) {
            eprintln!("warning: not every upstream session opened within {timeout:?}");
        }
    };
    let code = front(&o.front, config, threads, Some((recorder.clone(), &ready)));
    match recorder.finish() {
        Ok(r) => eprintln!(
            "recorded {} request{} from {} session{} to {}",
            r.entries,
            if r.entries == 1 { "" } else { "s" },
            r.sessions,
            if r.sessions == 1 { "" } else { "s" },
            o.output.display()
        ),
        Err(e) => return error(format_args!("{}: {e}", o.output.display())),
    }
    code
}

/// `trace from-audit | redact | show`.
pub(super) fn trace(command: TraceCommand) -> ExitCode {
    match command {
        TraceCommand::FromAudit {
            audit,
            output,
            empty_arguments,
        } => from_audit(&audit, &output, empty_arguments),
        TraceCommand::Redact { file } => match crate::trace::redact_file(&file) {
            Ok(n) => {
                println!(
                    "{}: {n} value{} redacted",
                    file.display(),
                    if n == 1 { "" } else { "s" }
                );
                ExitCode::SUCCESS
            }
            Err(e) => error(e),
        },
        TraceCommand::Show { file } => match crate::trace::Trace::read(&file) {
            Ok(t) => {
                print!(
                    "{}",
                    crate::trace::record::show(&t, &file.display().to_string())
                );
                ExitCode::SUCCESS
            }
            Err(e) => error(e),
        },
    }
}

/// `trace from-audit`: the audit log converted into a trace; says what it holds and what was
/// left out.
fn from_audit(audit: &Path, output: &Path, empty_arguments: bool) -> ExitCode {
    let name = audit.display().to_string();
    let read = std::fs::File::open(audit)
        .map_err(|source| crate::trace::TraceError::Io {
            path: name.clone(),
            source,
        })
        .and_then(|f| {
            crate::trace::record::from_audit(std::io::BufReader::new(f), &name, empty_arguments)
        });
    let (entries, c) = match read {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    let header = crate::trace::record::header("audit", None);
    if let Err(e) = crate::trace::record::write(output, &header, &entries) {
        return error(e);
    }
    let span = entries.iter().map(|e| e.t).fold(0.0, f64::max);
    println!(
        "{}: {} tools/call and {} tools/list from {} session{} over {span:.3} s (from {name})",
        output.display(),
        c.calls,
        c.lists,
        c.sessions,
        if c.sessions == 1 { "" } else { "s" },
    );
    if c.denied + c.rate_limited > 0 {
        println!(
            "left out: {} denied and {} rate-limited invocations (they never reached a tool)",
            c.denied, c.rate_limited
        );
    }
    if c.redacted > 0 {
        println!("{} secret-looking values redacted", c.redacted);
    }
    ExitCode::SUCCESS
}
