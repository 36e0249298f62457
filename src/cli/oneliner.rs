//! The quick test: `mcpbench run URL` (or `-- CMD…` for a stdio server) with `--tool NAME
//! --args JSON`, or `tools/list` without a tool — the positional argument told apart from a
//! scenario file, and the test's scenario written into its run directory (`scenario.toml`,
//! the command line's overrides written in), which `run` then loads like any file.

use std::path::{Path, PathBuf};

use crate::driver::RunOptions;
use crate::scenario::{self, Override};

/// The help heading of the quick test's flags.
const QUICK: &str = "Quick test (a URL or -- CMD instead of a scenario file)";

/// A quick test, without a scenario file: what each request is, and a stdio server's command.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct QuickArgs {
    /// Each request calls this tool (`tools/call`); without --tool, each request is
    /// `tools/list`.
    #[arg(long, value_name = "NAME", help_heading = QUICK)]
    pub tool: Option<String>,
    /// The tool's arguments, a JSON object, e.g. '{"message":"hi"}' (default `{}`); `${…}`
    /// generators work as in a scenario (`"${range:1..100}"`).
    #[arg(long, value_name = "JSON", requires = "tool", value_parser = parse_arguments, help_heading = QUICK)]
    pub args: Option<toml::Table>,
    /// After `--`: the command of a stdio server to test, instead of a URL (started in this
    /// directory, one process per virtual user).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--args`: a JSON object, as the scenario's `arguments` table.
fn parse_arguments(s: &str) -> Result<toml::Table, String> {
    let example = "e.g. --args '{\"message\":\"hi\"}'";
    let v: serde_json::Value = serde_json::from_str(s)
        .map_err(|e| format!("not JSON ({e}): give an object, {example}"))?;
    match scenario::json_to_toml(&v, "--args")? {
        toml::Value::Table(t) => Ok(t),
        _ => Err(format!(
            "the arguments are a JSON object (named arguments), {example}"
        )),
    }
}

/// What the positional argument and `-- CMD` name: a scenario file, or a quick test's target.
pub(super) enum Given {
    File(PathBuf),
    Quick(scenario::QuickTarget),
}

/// The scenario file or the quick test's target that the positional argument and `-- CMD`
/// name; a scenario file with the quick test's flags is a usage error.
pub(super) fn given(positional: Option<PathBuf>, q: &QuickArgs) -> Result<Given, String> {
    Ok(Given::Quick(match (positional, q.command.is_empty()) {
        (None, true) => {
            return Err("no scenario or target given: try `mcpbench run \
                 scenarios/quickstart.toml` (built-in servers), `mcpbench run \
                 http://HOST:PORT/mcp` (a quick test of your server), or `mcpbench init URL` \
                 to write a scenario for it"
                .into());
        }
        (None, false) => {
            let cwd = std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory for `-- CMD`: {e}"))?;
            scenario::QuickTarget::Command {
                argv: q.command.clone(),
                cwd: cwd.to_string_lossy().into_owned(),
            }
        }
        (Some(p), no_command) => match url_of(&p)? {
            Some(url) if no_command => scenario::QuickTarget::Url(url),
            Some(url) => {
                return Err(format!(
                    "give the target once: the URL {url}, or after `--` the command of a stdio \
                     server"
                ));
            }
            None if no_command && q.tool.is_none() => return Ok(Given::File(p)),
            None => {
                return Err(format!(
                    "{}: a scenario file has its own target and workload; --tool, --args and \
                     `-- CMD` make a quick test without one (edit the file, or override its \
                     keys with --set KEY=VALUE)",
                    p.display()
                ));
            }
        },
    }))
}

/// The positional argument as a quick test's URL, or `None` for a scenario file; an unknown
/// scheme, or a file that is not there and looks like neither, is an error.
fn url_of(p: &Path) -> Result<Option<String>, String> {
    let Some(s) = p.to_str() else {
        return Ok(None);
    };
    let scheme = s.split_once("://").map(|(scheme, _)| scheme).filter(|sch| {
        !sch.is_empty()
            && sch
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if let Some(scheme) = scheme {
        if !matches!(scheme, "http" | "https" | "ws" | "wss") {
            return Err(format!(
                "`{s}`: mcpbench reaches MCP servers at http://, https://, ws:// or wss:// \
                 URLs, not {scheme}:// (for a stdio server, give its command after `--`)"
            ));
        }
        scenario::parse_url(s).map_err(|e| format!("`{s}`: {e}"))?;
        return Ok(Some(s.to_string()));
    }
    if p.exists() || p.extension().is_some_and(|e| e == "toml") {
        return Ok(None);
    }
    let host = s.split('/').next().unwrap_or_default();
    let port = host.rsplit_once(':').map(|(_, port)| port);
    let hostlike = host == "localhost"
        || port.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    Err(format!(
        "`{s}` is neither a scenario file (there is none) nor a URL (http://, https://, ws:// \
         or wss://){}",
        match hostlike {
            true => format!("; did you mean http://{s}?"),
            false => String::new(),
        }
    ))
}

/// Writes a quick test's scenario, with `overrides` written in, to `scenario.toml` in its run
/// directory (`--output`, else a new one named after the test, which the run then uses), so
/// that the file alone repeats the run; says where.
pub(super) fn write_quick(
    q: &scenario::Quick,
    overrides: &[Override],
    opts: &mut RunOptions,
) -> Result<PathBuf, String> {
    let mut table = q.table();
    scenario::apply_all(&mut table, overrides).map_err(|e| e.to_string())?;
    let text = scenario::text_of(&table)?;
    let now = time::OffsetDateTime::now_utc();
    let root = &opts.results_root;
    let dir = opts
        .output
        .get_or_insert_with(|| crate::report::files::default_dir(root, &q.name(), now));
    let path = dir.join("scenario.toml");
    let command: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| shell_quoted(&a.to_string_lossy()))
        .collect();
    let text = format!(
        "# Written by `mcpbench {}`:\n# a one-line quick test as a scenario. `mcpbench run` this \
         file to repeat the test; edit it to\n# change the test (format: scenarios/README.md, \
         `mcpbench schema scenario`).\n{text}",
        command.join(" ")
    );
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|e| format!("cannot write the scenario {}: {e}", path.display()))?;
    eprintln!(
        "scenario: {} (repeat the test: mcpbench run {0})",
        path.display()
    );
    Ok(path)
}

/// An argument as a POSIX shell reads it back: bare when that is safe, else single-quoted, or
/// `$'…'` with escapes when it holds control characters.
fn shell_quoted(a: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !a.is_empty() && a.chars().all(safe) {
        return a.to_string();
    }
    if !a.chars().any(char::is_control) {
        return format!("'{}'", a.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for c in a.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\'' => out.push_str(r"\'"),
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_apart_from_files() {
        let url = |s: &str| url_of(Path::new(s));
        assert_eq!(url("http://h:1/mcp"), Ok(Some("http://h:1/mcp".into())));
        assert_eq!(url("missing.toml"), Ok(None));
        assert_eq!(url("Cargo.toml"), Ok(None));
        assert!(
            url("http://user:pw@h/mcp")
                .unwrap_err()
                .contains("credentials")
        );
        assert!(
            url("localhost")
                .unwrap_err()
                .ends_with("did you mean http://localhost?")
        );
        assert!(url("some/dir/x").unwrap_err().ends_with("wss://)"));
    }

    #[test]
    fn the_command_line_is_quoted_as_a_shell_reads_it() {
        assert_eq!(shell_quoted("-c"), "-c");
        assert_eq!(shell_quoted("http://h:1/mcp"), "http://h:1/mcp");
        assert_eq!(shell_quoted(r#"{"m":"it's"}"#), r#"'{"m":"it'\''s"}'"#);
        assert_eq!(shell_quoted("A: ${T}"), "'A: ${T}'");
        assert_eq!(shell_quoted(""), "''");
        assert_eq!(shell_quoted("a\nb'"), r"$'a\nb\''");
    }
}
