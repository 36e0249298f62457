//! A scenario from a command line: the one-line quick test (`mcpbench run URL --tool echo
//! --args '{…}'`, or `-- CMD…` for a stdio server) as the table of a real scenario in the
//! documented format, which a run writes next to its results and then loads like any file.
//! Also the JSON → TOML conversion that scenarios built from JSON (`--args`, the agent's
//! `run` tool) share.

use std::fmt::Write as _;

use serde_json::Value;

/// Virtual users of a quick test unless `--concurrency` says.
pub const DEFAULT_CONCURRENCY: u32 = 8;
/// How long a quick test lasts unless `--duration` says (no warm-up).
pub const DEFAULT_DURATION: &str = "10s";
/// A quick test's request timeout (the scenario format's default, written out to edit).
pub const DEFAULT_TIMEOUT: &str = "10s";

/// Where a quick test's load goes.
#[derive(Debug, Clone, PartialEq)]
pub enum QuickTarget {
    /// An `http(s)://` or `ws(s)://` URL.
    Url(String),
    /// A stdio server: its command line, started in `cwd` (written so that the scenario
    /// runs the same from any directory).
    Command { argv: Vec<String>, cwd: String },
}

/// A quick test as the command line gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quick {
    pub target: QuickTarget,
    /// `tools/call` of this tool; `None`: `tools/list`.
    pub tool: Option<String>,
    /// The call's arguments (a template: `${…}` generators work).
    pub arguments: Option<toml::Table>,
    /// Virtual users (closed loop); with `rate`, the cap on requests in flight.
    pub concurrency: Option<u32>,
    /// Open loop at this many requests per second.
    pub rate: Option<f64>,
    /// As the scenario writes it (`30s`, `2m`).
    pub duration: Option<String>,
}

impl Quick {
    /// The scenario's name, which names its results directory: the tool's, or `tools-list`.
    pub fn name(&self) -> String {
        let Some(tool) = &self.tool else {
            return "tools-list".into();
        };
        let safe: String = tool
            .chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') => c,
                _ => '-',
            })
            .collect();
        match safe.trim_matches(['-', '.']) {
            "" => "tools-call".into(),
            s => s.to_string(),
        }
    }

    /// The scenario as a TOML table: name, `[target]`, `[load]`, one `[[workload]]` entry.
    pub fn table(&self) -> toml::Table {
        let mut target = toml::Table::new();
        match &self.target {
            QuickTarget::Url(u) => {
                target.insert("url".into(), u.as_str().into());
            }
            QuickTarget::Command { argv, cwd } => {
                let argv = argv.iter().map(|a| a.as_str().into()).collect();
                target.insert("command".into(), toml::Value::Array(argv));
                target.insert("cwd".into(), cwd.as_str().into());
            }
        }
        let mut load = toml::Table::new();
        match self.rate {
            Some(rate) => {
                load.insert("model".into(), "open".into());
                load.insert("rate".into(), rate.into());
                if let Some(c) = self.concurrency {
                    load.insert("max_in_flight".into(), i64::from(c).into());
                }
            }
            None => {
                let c = self.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
                load.insert("concurrency".into(), i64::from(c).into());
            }
        }
        let duration = self.duration.as_deref().unwrap_or(DEFAULT_DURATION);
        load.insert("duration".into(), duration.into());
        load.insert("timeout".into(), DEFAULT_TIMEOUT.into());
        let mut work = toml::Table::new();
        match &self.tool {
            Some(tool) => {
                work.insert("method".into(), "tools/call".into());
                work.insert("tool".into(), tool.as_str().into());
                if let Some(a) = &self.arguments {
                    work.insert("arguments".into(), toml::Value::Table(a.clone()));
                }
            }
            None => {
                work.insert("method".into(), "tools/list".into());
            }
        }
        let mut root = toml::Table::new();
        root.insert("name".into(), self.name().into());
        root.insert("target".into(), target.into());
        root.insert("load".into(), load.into());
        let workload = vec![toml::Value::Table(work)];
        root.insert("workload".into(), toml::Value::Array(workload));
        root
    }
}

/// A scenario's table as TOML text, the `[[workload]]` entries last with their values inline
/// (`arguments = { message = "hi" }`, as the documented examples write them).
pub fn text_of(table: &toml::Table) -> Result<String, String> {
    let mut rest = table.clone();
    let work = rest.remove("workload");
    let mut text = toml::to_string(&rest).map_err(|e| format!("cannot write the scenario: {e}"))?;
    let entries = work.as_ref().and_then(toml::Value::as_array);
    for entry in entries
        .into_iter()
        .flatten()
        .filter_map(toml::Value::as_table)
    {
        text.push_str("\n[[workload]]\n");
        for (k, v) in entry {
            let _ = writeln!(text, "{} = {v}", super::overrides::bare_or_quoted(k));
        }
    }
    Ok(text)
}

/// A JSON value as TOML; `at` names it when it has no TOML form (null).
pub fn json_to_toml(v: &Value, at: &str) -> Result<toml::Value, String> {
    Ok(match v {
        Value::Null => {
            return Err(format!(
                "`{at}` is null, which a scenario cannot hold: leave it out"
            ));
        }
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => toml::Value::Integer(i),
            (None, Some(f)) => toml::Value::Float(f),
            _ => return Err(format!("`{at}`: {n} is out of range")),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(a) => toml::Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| json_to_toml(x, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => toml::Value::Table(
            o.iter()
                .map(|(k, x)| Ok((k.clone(), json_to_toml(x, &format!("{at}.{k}"))?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quick test of `target` with every flag left out.
    fn quick(target: QuickTarget) -> Quick {
        Quick {
            target,
            tool: None,
            arguments: None,
            concurrency: None,
            rate: None,
            duration: None,
        }
    }

    /// The plan of a quick test's scenario text.
    fn plan(q: &Quick) -> super::super::Plan {
        let text = text_of(&q.table()).unwrap();
        super::super::parse("q.toml", &text, &|_| None).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn the_defaults_are_a_closed_loop_of_tools_list() {
        let q = quick(QuickTarget::Url("http://127.0.0.1:9/mcp".into()));
        let p = plan(&q);
        assert_eq!(p.name, "tools-list");
        assert_eq!(p.load.concurrency, DEFAULT_CONCURRENCY as usize);
        assert_eq!(p.load.duration, std::time::Duration::from_secs(10));
        assert_eq!(p.load.warmup, std::time::Duration::ZERO);
        assert_eq!(p.workload.len(), 1);
        assert_eq!(p.workload[0].method, super::super::Method::ToolsList);
    }

    #[test]
    fn a_tool_call_at_a_rate_from_a_command() {
        let args = json_to_toml(
            &serde_json::json!({"message": "hi", "n": [1, 2.5]}),
            "--args",
        );
        let q = Quick {
            tool: Some("get/invoice".into()),
            arguments: args.unwrap().as_table().cloned(),
            concurrency: Some(3),
            rate: Some(50.0),
            duration: Some("2s".into()),
            ..quick(QuickTarget::Command {
                argv: vec!["python3".into(), "server.py".into()],
                cwd: "/srv".into(),
            })
        };
        let text = text_of(&q.table()).unwrap();
        assert!(
            text.contains("command = [\"python3\", \"server.py\"]"),
            "{text}"
        );
        assert!(text.contains("max_in_flight = 3"), "{text}");
        assert!(
            text.ends_with(
                "[[workload]]\nmethod = \"tools/call\"\ntool = \"get/invoice\"\n\
                 arguments = { message = \"hi\", n = [1, 2.5] }\n"
            ),
            "{text}"
        );
        let p = plan(&q);
        // Slashes would name a directory: the name keeps the tool readable without them.
        assert_eq!(p.name, "get-invoice");
        assert_eq!(p.load.concurrency, 3);
        assert_eq!(
            p.workload[0].method,
            super::super::Method::ToolsCall {
                tool: "get/invoice".into()
            }
        );
    }

    #[test]
    fn null_has_no_toml_form() {
        let e = json_to_toml(&serde_json::json!({"a": {"b": null}}), "--args").unwrap_err();
        assert_eq!(
            e,
            "`--args.a.b` is null, which a scenario cannot hold: leave it out"
        );
    }
}
