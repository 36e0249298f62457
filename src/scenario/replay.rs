//! `[replay]`: a recorded trace ([`crate::trace`]) as the workload. Its distinct requests
//! (method, tool, arguments) become the workload entries; `mode = "weighted"` draws them in
//! proportion to how often they were recorded, `mode = "timing"` plays each recorded session
//! as a virtual user at the recorded times (divided by `speed`), optionally looped.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use toml::Spanned;

use super::args::ArgTemplate;
use super::check::key_hint;
use super::plan::{Method, Replay, WorkItem};
use super::raw::RawReplay;
use super::{Place, ScenarioError, Source};
use crate::trace::Trace;

/// The trace's workload, and the timing of its sessions unless it is replayed as a mix.
pub(super) struct Replayed {
    pub workload: Vec<WorkItem>,
    pub timing: Option<Replay>,
}

/// The trace's distinct requests as the workload (their operations registered in `ops`),
/// and in the timed mode its sessions' scripts.
pub(super) fn replay(
    src: &Source<'_>,
    r: &Spanned<RawReplay>,
    ops: &mut Vec<String>,
) -> Result<Replayed, ScenarioError> {
    let raw = r.get_ref();
    let trace = read_trace(src, raw)?;
    let (timing, speed) = mode(src, raw)?;
    let check = raw.check.as_ref().is_none_or(|c| *c.get_ref());
    let place = src.place(raw.trace.span());
    let (distinct, entry_item) = distinct_requests(&trace);
    let workload = distinct
        .into_iter()
        .map(|d| work_item(d, ops, &place, check))
        .collect();
    let timing = timing.then(|| scripts(raw, &trace, &entry_item, speed));
    Ok(Replayed { workload, timing })
}

/// The trace `[replay] trace` names (relative to the scenario), with at least one request.
fn read_trace(src: &Source<'_>, raw: &RawReplay) -> Result<Trace, ScenarioError> {
    let base = Path::new(src.name).parent().unwrap_or(Path::new("."));
    let file = raw.trace.get_ref();
    let trace = Trace::read(&base.join(file)).map_err(|e| {
        src.error(
            raw.trace.span(),
            e.to_string(),
            Some("a trace written by `mcpbench record` or `mcpbench trace from-audit`".into()),
        )
    })?;
    if trace.entries.is_empty() {
        return Err(src.error(raw.trace.span(), format!("{file} has no requests"), None));
    }
    Ok(trace)
}

/// `mode` (timed, the default, or weighted) and the timed mode's `speed` (and `loop`, which
/// only it takes).
fn mode(src: &Source<'_>, raw: &RawReplay) -> Result<(bool, f64), ScenarioError> {
    let timing = match &raw.mode {
        None => true,
        Some(m) => super::check::one_of(
            src,
            m,
            "replay mode",
            "replay.mode",
            &[("timing", true), ("weighted", false)],
        )?,
    };
    let speed = match &raw.speed {
        None => 1.0,
        Some(s) if timing && s.get_ref().is_finite() && *s.get_ref() > 0.0 => *s.get_ref(),
        Some(s) if timing => {
            return Err(src.error(
                s.span(),
                "speed must be above zero (2.0 replays twice as fast)",
                key_hint("replay.speed"),
            ));
        }
        Some(s) => {
            return Err(src.error(
                s.span(),
                "speed applies to mode = \"timing\"",
                Some("remove it: a weighted replay's pace is the [load]'s".into()),
            ));
        }
    };
    if let Some(l) = raw.looped.as_ref().filter(|_| !timing) {
        return Err(src.error(
            l.span(),
            "loop applies to mode = \"timing\"",
            Some("remove it: a weighted replay runs for the [load]'s duration".into()),
        ));
    }
    Ok((timing, speed))
}

/// One distinct request of a trace, with its recorded answers.
struct Distinct {
    method: Method,
    arguments: serde_json::Value,
    count: u32,
    digest: Option<String>,
    same: bool,
}

/// The distinct requests, in order of first appearance, and for each trace entry the index
/// of its request.
fn distinct_requests(trace: &Trace) -> (Vec<Distinct>, Vec<usize>) {
    let mut distinct: Vec<Distinct> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut entry_item = Vec::with_capacity(trace.entries.len());
    for e in &trace.entries {
        let (method, arguments) = match e.method.as_str() {
            "tools/list" => (Method::ToolsList, serde_json::Value::Null),
            _ => (
                Method::ToolsCall {
                    tool: e.params["name"].as_str().unwrap_or_default().to_string(),
                },
                match &e.params["arguments"] {
                    serde_json::Value::Null => serde_json::json!({}),
                    a => a.clone(),
                },
            ),
        };
        let key = format!("{}\u{0}{}\u{0}{}", e.method, e.params["name"], arguments);
        let i = *index.entry(key).or_insert_with(|| {
            distinct.push(Distinct {
                method,
                arguments,
                count: 0,
                digest: e.digest.clone(),
                same: true,
            });
            distinct.len() - 1
        });
        let d = &mut distinct[i];
        d.count += 1;
        // Only an answer recorded the same every time is one to hold the replay to.
        if d.digest != e.digest || e.outcome == "error" {
            d.same = false;
        }
        entry_item.push(i);
    }
    (distinct, entry_item)
}

/// A distinct request as a workload entry weighted by its count, its operation registered;
/// its recorded digest kept when `check` and it was always the same.
fn work_item(d: Distinct, ops: &mut Vec<String>, place: &Place, check: bool) -> WorkItem {
    let op_name = match &d.method {
        Method::ToolsList => "tools/list".to_string(),
        Method::ToolsCall { tool } => format!("tools/call:{tool}"),
    };
    let op = ops.iter().position(|o| *o == op_name).unwrap_or_else(|| {
        ops.push(op_name);
        ops.len() - 1
    });
    WorkItem {
        arguments: match &d.method {
            Method::ToolsList => ArgTemplate::empty(),
            Method::ToolsCall { .. } => ArgTemplate::json(&d.arguments),
        },
        method: d.method,
        weight: d.count,
        op,
        progress: false,
        place: place.clone(),
        arguments_place: None,
        expect: None,
        deterministic: false,
        digest: d.digest.filter(|_| check && d.same),
    }
}

/// The timed replay: each recorded session's requests at their times divided by `speed`, and
/// the length of one pass when it loops.
fn scripts(raw: &RawReplay, trace: &Trace, entry_item: &[usize], speed: f64) -> Replay {
    // Sessions in order of their numbers; each its requests in order of time.
    let mut sessions: Vec<u64> = trace.entries.iter().map(|e| e.session).collect();
    sessions.sort_unstable();
    sessions.dedup();
    let mut scripts = vec![Vec::new(); sessions.len()];
    for (e, &item) in trace.entries.iter().zip(entry_item) {
        let s = sessions.binary_search(&e.session).unwrap_or(0);
        scripts[s].push((e.t / speed, item));
    }
    // One pass lasts the trace plus its mean gap, so that a loop does not put the first
    // request on top of the last.
    let span = trace.span() / speed;
    let gap = span / trace.entries.len() as f64;
    Replay {
        trace: raw.trace.get_ref().clone(),
        scripts: Arc::new(scripts),
        period: raw
            .looped
            .as_ref()
            .is_some_and(|l| *l.get_ref())
            .then_some((span + gap).max(0.001)),
        speed,
    }
}
