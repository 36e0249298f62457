//! `mcpbench run FILE --local-shards N`: the scenario run as N shard processes of this binary
//! on this machine (past one process's open-file limit), started together (`--start-at`),
//! each into `DIR/shard-I`, then merged into `DIR` as `mcpbench merge` does: the table and
//! exit code as for one run. A signal is passed on to the shards, which still write their
//! results; what they wrote is merged.

use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime};

use super::signals::watch_signals;
use super::{EXIT_ERROR, EXIT_FAILED, SummaryFormat, error};
use crate::driver::{self, RunOptions, RunOutput};
use crate::scenario::{self, Override, Shard};
use crate::ui::Display;

/// How long ahead of now the shards are told to start: time to start N processes and for each
/// to resolve and preflight the target.
const LEAD: Duration = Duration::from_secs(3);

/// The flags of `run` that a shard is given differently (its own output, quiet), with whether
/// each takes a value.
const REPLACED: &[(&str, bool)] = &[
    ("--local-shards", true),
    ("--output", true),
    ("-o", true),
    ("--quiet", false),
    ("-q", false),
];

/// What the parent run was given besides the scenario.
pub(super) struct Split<'a> {
    pub shards: usize,
    pub file: &'a Path,
    pub overrides: &'a [Override],
    pub opts: RunOptions,
    pub format: SummaryFormat,
    pub display: Display,
}

/// Runs the scenario as `shards` local processes and merges them.
pub(super) fn run(s: Split<'_>) -> ExitCode {
    let (whole, first) = match plans(&s) {
        Ok(p) => p,
        Err(e) => return error(e),
    };
    if let Err(e) = driver::check_local_split(&whole, &first, &s.opts) {
        return error(e);
    }
    let dir = s.opts.output.clone().unwrap_or_else(|| {
        crate::report::files::default_dir(
            &s.opts.results_root,
            &whole.name,
            time::OffsetDateTime::now_utc(),
        )
    });
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return error(format_args!("cannot create {}: {e}", dir.display()));
    }
    let start = driver::start::rfc3339(SystemTime::now() + LEAD);
    if !matches!(s.display, Display::Quiet) {
        eprintln!(
            "{} local shards, starting at {start}, into {}/shard-0 … shard-{}",
            s.shards,
            dir.display(),
            s.shards - 1
        );
    }
    let interrupt = driver::Interrupt::default();
    watch_signals(interrupt.clone(), Display::Quiet);
    let args = child_args(std::env::args_os().skip(1));
    let mut children = Vec::new();
    for i in 0..s.shards {
        match spawn(&args, (i, s.shards), &start, &dir) {
            Ok(c) => children.push(c),
            Err(e) => {
                stop(&children, 2);
                wait_all(&mut children, &interrupt);
                return error(format_args!("cannot start shard {i}/{}: {e}", s.shards));
            }
        }
    }
    let codes = wait_all(&mut children, &interrupt);
    conclude(&dir, &codes, s.format, &interrupt)
}

/// The whole plan and its first (largest) shard, refused where a split makes no sense.
fn plans(s: &Split<'_>) -> Result<(scenario::Plan, scenario::Plan), String> {
    if s.shards < 2 {
        return Err(format!(
            "--local-shards {} is one run: give 2 or more, or leave it out",
            s.shards
        ));
    }
    let whole =
        scenario::load_finished(s.file, s.overrides, Shard::WHOLE).map_err(|e| e.to_string())?;
    if matches!(whole.target, scenario::Target::Embedded(_)) {
        return Err(format!(
            "--local-shards: {} has no [target], and each shard would start an embedded server \
             of its own ({} servers, merged as one): start one (`mcpbench serve --listen \
             127.0.0.1:8080 &`) and give --url http://127.0.0.1:8080/mcp",
            s.file.display(),
            s.shards
        ));
    }
    let first = Shard {
        index: 0,
        count: s.shards,
    };
    let first = scenario::load_finished(s.file, s.overrides, first)
        .map_err(|e| format!("--local-shards {}: {e}", s.shards))?;
    Ok((whole, first))
}

/// This process's arguments for a shard: the flags it is given its own way left out.
fn child_args(argv: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in argv {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let text = a.to_string_lossy();
        let replaced = REPLACED.iter().find(|(flag, _)| {
            text == *flag
                || (flag.starts_with("--") && text.starts_with(&format!("{flag}=")))
                || (*flag == "-o" && text.starts_with("-o") && !text.starts_with("--"))
        });
        match replaced {
            Some((flag, value)) => skip_value = *value && text == *flag,
            None => out.push(a),
        }
    }
    out
}

/// Starts shard `i` of `n`: quiet, into `dir/shard-I`, its stderr passed on line by line
/// with its name, in a process group of its own (the parent passes signals on, once each).
fn spawn(
    args: &[OsString],
    (i, n): (usize, usize),
    start: &str,
    dir: &Path,
) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(args)
        .arg("--shard")
        .arg(format!("{i}/{n}"))
        .arg("--start-at")
        .arg(start)
        .arg("--output")
        .arg(dir.join(format!("shard-{i}")))
        .arg("--quiet")
        .env_remove("MCPBENCH_SHARD")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if line.is_empty() {
                    continue;
                }
                eprintln!("shard {i}/{n}: {line}");
            }
        });
    }
    Ok(child)
}

/// Sends SIGINT to every shard still running, for the `nth` time (a shard drains on the
/// first, cancels on the second).
fn stop(children: &[Child], nth: u8) {
    for c in children {
        let pid = rustix::process::Pid::from_child(c);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    }
    tracing::debug!(nth, "signal passed on to the local shards");
}

/// Waits for every shard, passing on each signal the parent gets; their exit codes (`None`:
/// killed by a signal).
fn wait_all(children: &mut [Child], interrupt: &driver::Interrupt) -> Vec<Option<i32>> {
    let mut codes = vec![None; children.len()];
    let mut done = vec![false; children.len()];
    let mut passed = 0u8;
    while done.iter().any(|d| !d) {
        let asked = u8::from(interrupt.is_requested()) + u8::from(interrupt.is_hurried());
        if asked > passed {
            passed = asked;
            stop(children, passed);
        }
        for (i, c) in children.iter_mut().enumerate() {
            if !done[i]
                && let Ok(Some(status)) = c.try_wait()
            {
                done[i] = true;
                codes[i] = status.code();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    codes
}

/// Merges what the shards wrote into `dir` and says how the run ended, as one run does:
/// interrupted (2), a shard that failed (2), thresholds breached by the whole (1), else 0.
fn conclude(
    dir: &Path,
    codes: &[Option<i32>],
    format: SummaryFormat,
    interrupt: &driver::Interrupt,
) -> ExitCode {
    let n = codes.len();
    let written: Vec<PathBuf> = (0..n)
        .map(|i| dir.join(format!("shard-{i}")))
        .filter(|d| d.join("summary.json").is_file())
        .collect();
    let failed: Vec<String> = codes
        .iter()
        .enumerate()
        .filter(|(_, c)| !matches!(c, Some(0) | Some(1)))
        .map(|(i, c)| match c {
            Some(code) => format!("shard {i}/{n} exited with {code}"),
            None => format!("shard {i}/{n} was killed"),
        })
        .collect();
    if written.len() < 2 {
        return error(format_args!(
            "{} of {n} local shards wrote results, too few to merge ({}); see the shards' \
             errors above",
            written.len(),
            if failed.is_empty() {
                "none failed".to_string()
            } else {
                failed.join(", ")
            }
        ));
    }
    let summary = match crate::report::merge::merge(&written, dir, written.len() < n) {
        Ok(s) => s,
        Err(e) => {
            return error(format_args!(
                "merging the local shards into {}: {e}",
                dir.display()
            ));
        }
    };
    let breached = summary.breached().next().is_some();
    let out = RunOutput {
        summary,
        dir: dir.to_path_buf(),
    };
    match format.render(&out) {
        Ok(text) => print!("{text}"),
        Err(e) => return error(e),
    }
    if interrupt.is_requested() {
        eprintln!("interrupted: partial results written to {}", dir.display());
        return ExitCode::from(EXIT_ERROR);
    }
    if !failed.is_empty() {
        return error(format_args!(
            "{}: the merged result is partial ({} of {n} shards)",
            failed.join(", "),
            written.len()
        ));
    }
    if breached {
        eprintln!("thresholds breached: results written to {}", dir.display());
        return ExitCode::from(EXIT_FAILED);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_gets_the_flags_but_its_own_output_and_display() {
        let argv = "run s.toml --local-shards 2 -o out --quiet -c 8 --output=x -q \
                    --source-address 127.0.0.0/30 --local-shards=3 -oy --set load.think=1s";
        let got: Vec<String> = child_args(argv.split(' ').map(OsString::from))
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            got,
            [
                "run",
                "s.toml",
                "-c",
                "8",
                "--source-address",
                "127.0.0.0/30",
                "--set",
                "load.think=1s"
            ]
        );
    }
}
