//! `[[workload]]`: what is sent — the method, the tool, its weight in the mix, its argument
//! template (with an optional JSON Lines file of rows), progress.
//!
//! Whether the target has the tool, and whether the generated arguments fit its input schema,
//! is asked of the target before load (`client::workload_fit`), at the [`Place`] kept here.

use std::path::Path;
use std::sync::Arc;

use toml::Spanned;

use super::args::{ArgTemplate, Rows};
use super::check::{key_hint, within};
use super::plan::{Expect, Method, WorkItem};
use super::raw::{RawExpect, RawWorkload};
use super::{ScenarioError, Source};

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// One workload entry; its operation name is added to `ops` (index 0 is the session opening)
/// if it is new.
pub(super) fn work_item(
    src: &Source<'_>,
    w: &Spanned<RawWorkload>,
    ops: &mut Vec<String>,
    env: Env<'_>,
) -> Result<WorkItem, ScenarioError> {
    let raw = w.get_ref();
    let (method, place) = method(src, w)?;
    let weight = match &raw.weight {
        Some(wt) => within(src, wt, 1, None, "workload.weight")?,
        None => 1,
    };
    let rows = raw.rows.as_ref().map(|r| rows(src, r)).transpose()?;
    let arguments = match &raw.arguments {
        None => ArgTemplate::empty(),
        Some(a) => arguments(src, a, env, rows)?,
    };
    let op_name = match &method {
        Method::ToolsList => "tools/list".to_string(),
        Method::ToolsCall { tool } => format!("tools/call:{tool}"),
    };
    let op = ops.iter().position(|o| *o == op_name).unwrap_or_else(|| {
        ops.push(op_name);
        ops.len() - 1
    });
    let expect = raw
        .expect
        .as_ref()
        .map(|e| expect(src, e, &method))
        .transpose()?;
    Ok(WorkItem {
        method,
        weight,
        op,
        arguments,
        progress: raw.progress.as_ref().is_some_and(|p| *p.get_ref()),
        place,
        arguments_place: raw.arguments.as_ref().map(|a| src.place(a.span())),
        expect,
        deterministic: raw.deterministic.as_ref().is_some_and(|d| *d.get_ref()),
        digest: None,
    })
}

/// `expect`: each rule checked against the method it applies to.
fn expect(
    src: &Source<'_>,
    e: &Spanned<RawExpect>,
    method: &Method,
) -> Result<Expect, ScenarioError> {
    let raw = e.get_ref();
    let call = matches!(method, Method::ToolsCall { .. });
    let only = |span: std::ops::Range<usize>, key: &str, for_call: bool| {
        if for_call == call {
            return Ok(());
        }
        let (what, other) = if for_call {
            ("a tools/call result", "tools/list")
        } else {
            ("a tools/list result", "tools/call")
        };
        Err(src.error(
            span,
            format!("expect.{key} applies to {what}, and this entry is {other}"),
            Some("remove it, or move it to an entry of the other method".into()),
        ))
    };
    if let Some(v) = &raw.is_error {
        only(v.span(), "is_error", true)?;
    }
    if let Some(v) = &raw.output_schema {
        only(v.span(), "output_schema", true)?;
    }
    if let Some(v) = &raw.tools {
        only(v.span(), "tools", false)?;
    }
    if let Some(v) = &raw.tenant_tools {
        only(v.span(), "tenant_tools", false)?;
    }
    let pointer = |span: std::ops::Range<usize>, p: &str| {
        if p.is_empty() || p.starts_with('/') {
            Ok(p.to_string())
        } else {
            Err(src.error(
                span,
                format!("`{p}` is not a JSON pointer"),
                Some("pointers start with / and point into the result, e.g. \"/structuredContent/id\" or \"/content/0/text\"".into()),
            ))
        }
    };
    let present = match &raw.present {
        None => Vec::new(),
        Some(v) => v
            .get_ref()
            .iter()
            .map(|p| pointer(v.span(), p))
            .collect::<Result<_, _>>()?,
    };
    let equals = match &raw.equals {
        None => Vec::new(),
        Some(t) => t
            .get_ref()
            .iter()
            .map(|(p, value)| {
                let json = serde_json::to_value(value)
                    .map_err(|e| src.error(t.span(), format!("expect.equals `{p}`: {e}"), None))?;
                Ok((pointer(t.span(), p)?, json))
            })
            .collect::<Result<_, ScenarioError>>()?,
    };
    Ok(Expect {
        is_error: raw.is_error.as_ref().map(|v| *v.get_ref()),
        present,
        equals,
        output_schema: raw.output_schema.as_ref().is_some_and(|v| *v.get_ref()),
        tools: raw.tools.as_ref().map(|v| v.get_ref().clone()),
        tenant_tools: raw
            .tenant_tools
            .as_ref()
            .map(|v| v.get_ref().clone().into_iter().collect())
            .unwrap_or_default(),
    })
}

/// The method (and tool), and where it is written: the tool name for `tools/call`.
fn method(
    src: &Source<'_>,
    w: &Spanned<RawWorkload>,
) -> Result<(Method, super::Place), ScenarioError> {
    let raw = w.get_ref();
    let method = raw.method.as_ref().ok_or_else(|| {
        src.error_at_key(
            w.span(),
            "workload.method",
            "workload entry needs a method",
            key_hint("workload.method"),
        )
    })?;
    match method.get_ref().as_str() {
        "tools/list" => {
            if let Some(t) = &raw.tool {
                return Err(src.error(
                    t.span(),
                    "tools/list takes no tool",
                    Some("remove `tool`, or use method = \"tools/call\"".into()),
                ));
            }
            if let Some(a) = &raw.arguments {
                return Err(src.error(
                    a.span(),
                    "tools/list takes no arguments",
                    Some("remove `arguments`".into()),
                ));
            }
            Ok((Method::ToolsList, src.place(method.span())))
        }
        "tools/call" => {
            let tool = raw.tool.as_ref().ok_or_else(|| {
                src.error(
                    method.span(),
                    "tools/call needs a `tool`",
                    Some("add e.g. tool = \"echo\"".into()),
                )
            })?;
            if tool.get_ref().is_empty() {
                return Err(src.error(
                    tool.span(),
                    "tool name is empty",
                    key_hint("workload.tool"),
                ));
            }
            let call = Method::ToolsCall {
                tool: tool.get_ref().clone(),
            };
            Ok((call, src.place(tool.span())))
        }
        other => Err(src.error(
            method.span(),
            format!("unsupported method `{other}`"),
            key_hint("workload.method"),
        )),
    }
}

/// The entry's rows file (JSON Lines), relative to the scenario file.
fn rows(src: &Source<'_>, r: &Spanned<String>) -> Result<Arc<Rows>, ScenarioError> {
    let base = Path::new(src.name).parent().unwrap_or(Path::new("."));
    let rows = Rows::load(&base.join(r.get_ref())).map_err(|m| {
        src.error(
            r.span(),
            m,
            Some("a JSON Lines file: one JSON object per line".into()),
        )
    })?;
    Ok(Arc::new(rows))
}

/// The argument template; an error names the argument inside the table
/// (`workload[2].arguments.query`).
fn arguments(
    src: &Source<'_>,
    a: &Spanned<toml::Table>,
    env: Env<'_>,
    rows: Option<Arc<Rows>>,
) -> Result<ArgTemplate, ScenarioError> {
    ArgTemplate::compile(a.get_ref(), env, rows).map_err(|e| {
        let table = src.place(a.span()).key;
        let entry = table.strip_suffix("arguments").unwrap_or(&table);
        let key = if e.path.is_empty() {
            format!("{entry}arguments")
        } else {
            format!("{entry}arguments.{}", e.path)
        };
        src.error_at_key(a.span(), &key, e.message, Some(e.hint.to_string()))
    })
}
