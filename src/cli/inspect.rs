//! The commands that look rather than load: `init` (a starter scenario from a server's tools),
//! `probe` (one session, or a gateway's tenant isolation), `validate`, `doctor` (this
//! machine), and what describes mcpbench itself: `schema`, `completions`, `man`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Cli, EXIT_FAILED, error};
use crate::driver::{self, RunOptions};
use crate::probe::init::InitOptions;
use crate::probe::{self, ProbeError, ProbeOptions};
use crate::protocol::version::Revision;
use crate::scenario::{self, Target};

/// `completions`' command line.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    pub shell: clap_complete::Shell,
}

/// `schema`'s command line.
#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Which schema.
    pub which: SchemaKind,
}

/// `validate`'s command line.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The scenario file (TOML) to check.
    pub scenario: PathBuf,
    /// Also connect to a remote target: the tools the workload calls exist and the
    /// generated arguments fit their input schemas.
    #[arg(long)]
    pub connect: bool,
    #[command(flatten)]
    pub overrides: super::Overrides,
}

/// `probe`'s command line.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The endpoint, e.g. http://127.0.0.1:8080/mcp.
    pub url: String,
    /// The revision to offer (handshake era) or to use (2026-07-28).
    #[arg(
        long,
        default_value = "2025-11-25",
        value_parser = super::values::one_of::<Revision>(Revision::ALL.map(Revision::as_str))
    )]
    pub protocol: Revision,
    /// A tool to call, optionally with JSON arguments: `--call echo`,
    /// `--call 'echo={"message":"hi"}'`. Repeatable.
    #[arg(long = "call", value_name = "TOOL[=JSON]", value_parser = probe::parse_call)]
    pub calls: Vec<(String, serde_json::Value)>,
    /// An extra HTTP header, `Name: value` (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = probe::parse_header)]
    pub headers: Vec<(String, String)>,
    /// Bound on connecting and on each exchange.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "10s", value_parser = mcpbench_knobs::parse_duration)]
    pub timeout: std::time::Duration,
    /// https: accept any certificate (self-signed test servers only).
    #[arg(long)]
    pub insecure: bool,
    /// Check the gateway at URL as a hostile tenant would, with the credentials of two or
    /// more tenants from FILE (TOML: `[[tenant]] name, token | headers`): requests without
    /// credentials or with a token in the query string, another tenant's session used,
    /// listened on and ended (POST, GET, DELETE), session ids guessed, and with --upstream
    /// any tenant credential reaching the upstream. A pass/fail table; exit 1 if a check
    /// fails.
    #[arg(long, value_name = "FILE")]
    pub tenants: Option<PathBuf>,
    /// With --tenants: the `mcpbench serve` the gateway fronts (its URL), which says which
    /// credentials reached it: none may be a tenant's.
    #[arg(long, value_name = "URL", requires = "tenants")]
    pub upstream: Option<String>,
    /// With --tenants: how the checks are printed.
    #[arg(long, default_value = "text", requires = "tenants")]
    pub format: TableFormat,
}

/// `doctor`'s command line.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// The virtual users (connections to one target) you plan: what the open-file, port
    /// and accept-queue checks size for.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1000,
        allow_negative_numbers = true,
        value_parser = super::values::Number::<u64>::at_least(1, "virtual users")
    )]
    pub concurrency: u64,
    /// Skip what takes time: the timer measurement and the 1 s sample of the cores' load.
    #[arg(long)]
    pub quick: bool,
    /// How the findings are printed; JSON: {schema_version, concurrency, quick, findings:
    /// [{check, value, verdict (ok | info | warn), detail, fix (null when nothing to do)}]}.
    #[arg(long, default_value = "text")]
    pub format: TableFormat,
}

/// Output of `doctor` and `probe --tenants`: a table, or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    /// A table.
    Text,
    Json,
}

/// The JSON Schemas `mcpbench schema` prints, as committed (compiled in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaKind {
    /// The scenario format (scenarios/schema.json).
    Scenario,
    /// summary.json, the result of a run (results/schema.json).
    Summary,
}

impl SchemaKind {
    /// The schema, as committed.
    pub fn text(self) -> &'static str {
        match self {
            SchemaKind::Scenario => include_str!("../../scenarios/schema.json"),
            SchemaKind::Summary => include_str!("../../results/schema.json"),
        }
    }
}

/// `init`: writes the starter scenario and says what is in it.
pub(super) fn init(o: &InitOptions) -> ExitCode {
    match crate::probe::init::run(o) {
        Ok(w) => {
            println!(
                "wrote {}: tools/list and {} tool{} ({} negotiated)",
                w.path.display(),
                w.kept.len(),
                if w.kept.len() == 1 { "" } else { "s" },
                w.revision
            );
            for (tool, why) in &w.left_out {
                println!("  left out (commented): {tool}: {why}");
            }
            println!("run it: mcpbench run {}", w.path.display());
            ExitCode::SUCCESS
        }
        Err(e) => error(e),
    }
}

/// `validate`: the file with the overrides applied as `run` applies them, and (embedded
/// target, or `--connect`) the workload against the target's tools.
pub(super) fn validate(a: &ValidateArgs) -> ExitCode {
    let file = a.scenario.as_path();
    let plan = match a.overrides.list().and_then(|o| {
        scenario::load_finished(file, &o, scenario::Shard::WHOLE).map_err(|e| e.to_string())
    }) {
        Ok(p) => p,
        Err(e) => return error(e),
    };
    let embedded = matches!(plan.target, Target::Embedded(_));
    let target = match &plan.target {
        Target::Embedded(_) => "the built-in reference server".to_string(),
        Target::Remote(r) => r.describe(),
    };
    let mut checked = String::new();
    if embedded || a.connect {
        let opts = RunOptions {
            scenario_file: file.display().to_string(),
            ..RunOptions::default()
        };
        match driver::runtime().and_then(|rt| driver::check(&plan, &opts, &rt)) {
            Ok(c) => {
                checked = format!(
                    "; {} tools listed, {} negotiated",
                    c.preflight.tools.len(),
                    c.preflight.revision
                )
            }
            Err(e) => return error(e),
        }
    }
    println!(
        "{}: ok — {} workload entries against {}{checked}, {} virtual users for {}",
        file.display(),
        plan.workload.len(),
        target,
        plan.load.concurrency,
        mcpbench_knobs::format_duration(plan.load.duration)
    );
    ExitCode::SUCCESS
}

/// `probe`: one session with mcpbench's client, or with --tenants a gateway's tenant
/// isolation checked.
pub(super) fn probe(a: ProbeArgs) -> ExitCode {
    let o = ProbeOptions {
        url: a.url,
        protocol: a.protocol,
        calls: a.calls,
        headers: a.headers,
        timeout: a.timeout,
        insecure: a.insecure,
    };
    match a.tenants {
        Some(file) => probe_tenants(o, &file, a.upstream, a.format),
        None => probe_session(o),
    }
}

/// `probe` of one session: without `--call`, the conformance scenario named in
/// [`probe::SCENARIO_ENV`] (if any) decides what to call. Prints one line; exit 0 ok, 1 failed, 2 usage.
fn probe_session(mut o: ProbeOptions) -> ExitCode {
    if o.calls.is_empty()
        && let Ok(scenario) = std::env::var(probe::SCENARIO_ENV)
    {
        match probe::scenario_calls(&scenario) {
            Some(calls) => o.calls = calls,
            None => {
                return error(format_args!(
                    "probe: mcpbench does not take part in conformance scenario `{scenario}` \
                     (interactive and OAuth flows are out of scope for a load generator)"
                ));
            }
        }
    }
    match probe::run(&o) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(ProbeError::Usage(e)) => error(e),
        Err(ProbeError::Failed(e)) => {
            eprintln!("probe failed: {}: {e}", o.url);
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `probe --tenants`: the isolation checks as a table or JSON; exit 1 if one failed.
fn probe_tenants(
    probe: ProbeOptions,
    file: &Path,
    upstream: Option<String>,
    format: TableFormat,
) -> ExitCode {
    let tenants = match probe::tenants::load(file, &|v| std::env::var(v).ok()) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    let url = probe.url.clone();
    let o = probe::tenants::TenantsOptions {
        probe,
        tenants,
        upstream,
    };
    match probe::tenants::run(&o) {
        Ok(checks) => {
            match format {
                TableFormat::Text => print!("{}", probe::tenants::table(&url, &checks)),
                TableFormat::Json => println!("{:#}", probe::tenants::to_json(&url, &checks)),
            }
            let failed = checks
                .iter()
                .any(|c| c.verdict == probe::tenants::Verdict::Fail);
            if failed {
                ExitCode::from(EXIT_FAILED)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(ProbeError::Usage(e)) => error(e),
        Err(ProbeError::Failed(e)) => {
            eprintln!("probe failed: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `doctor`: the findings as a table or JSON; exit 1 if any would make measurements
/// unreliable.
pub(super) fn doctor(a: DoctorArgs, soft_files_at_start: u64) -> ExitCode {
    let o = crate::doctor::Options {
        concurrency: a.concurrency,
        quick: a.quick,
        soft_files_at_start,
    };
    let report = crate::doctor::examine(&o);
    match a.format {
        TableFormat::Text => print!("{}", crate::doctor::render_text(&report)),
        TableFormat::Json => match serde_json::to_string_pretty(&report) {
            Ok(j) => println!("{j}"),
            Err(e) => return error(e),
        },
    }
    if report.warnings() > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// `schema`: the JSON Schema asked for, on stdout.
pub(super) fn schema(which: SchemaKind) -> ExitCode {
    print!("{}", which.text());
    ExitCode::SUCCESS
}

/// `completions`: the shell's completion script, on stdout.
pub(super) fn completions(shell: clap_complete::Shell) -> ExitCode {
    use clap::CommandFactory;
    clap_complete::generate(
        shell,
        &mut Cli::command(),
        "mcpbench",
        &mut std::io::stdout(),
    );
    ExitCode::SUCCESS
}

/// `man`: the man page (roff), on stdout.
pub(super) fn man() -> ExitCode {
    use clap::CommandFactory;
    match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => error(e),
    }
}
