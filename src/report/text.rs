//! The summary as a terminal table.

use std::fmt::Write;

use super::summary::{Latency, Operation, Outcomes, Summary};

/// A latency in milliseconds as every text view prints it (3 significant digits, ms or s).
pub fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2}s", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}ms")
    } else if v >= 10.0 {
        format!("{v:.1}ms")
    } else {
        format!("{v:.2}ms")
    }
}

/// Per-operation figures beside the table: open-loop service time, streams, time upstream.
pub fn op_details(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    for op in &s.operations {
        if let Some(sv) = &op.service {
            out.push(format!(
                "{}: service time (from the actual send) p50 {} p99 {} max {}; the table times from the intended start",
                op.name,
                ms(sv.p50_ms),
                ms(sv.p99_ms),
                ms(sv.max_ms)
            ));
        }
        if let Some(fe) = &op.first_event {
            out.push(format!(
                "{}: {} streamed responses, {} events, first event p50 {} p99 {}",
                op.name,
                op.streamed,
                op.events,
                ms(fe.p50_ms),
                ms(fe.p99_ms)
            ));
        }
        if let Some(u) = &op.upstream {
            let own = op
                .latency
                .as_ref()
                .map(|l| {
                    format!(
                        "; the rest of the median, {}, is the target's own (and the network's)",
                        ms((l.p50_ms - u.p50_ms).max(0.0))
                    )
                })
                .unwrap_or_default();
            out.push(format!(
                "{}: time upstream (the target's timing header, {} responses) p50 {} p99 {}{own}",
                op.name,
                u.count,
                ms(u.p50_ms),
                ms(u.p99_ms)
            ));
        }
    }
    out
}

/// Non-zero outcome counts, e.g. `ok 1200, http(500) 3, protocol(wrong_id) 1`.
pub fn outcomes_line(o: &Outcomes) -> String {
    let mut parts = Vec::new();
    let mut push = |name: String, n: u64| {
        if n > 0 {
            parts.push(format!("{name} {n}"));
        }
    };
    push("ok".into(), o.ok);
    push("tool_error".into(), o.tool_error);
    for (code, n) in &o.rpc_error {
        push(format!("rpc_error({code})"), *n);
    }
    push("input_required".into(), o.input_required);
    push("assertion".into(), o.assertion);
    push("divergence".into(), o.divergence);
    for (status, n) in &o.http {
        let label = status.parse().map_or_else(
            |_| format!("http({status})"),
            crate::metrics::outcome::http_label,
        );
        push(label, *n);
    }
    push("timeout".into(), o.timeout);
    push("hang".into(), o.hang);
    push("connect".into(), o.connect);
    push("io".into(), o.io);
    for (kind, n) in &o.protocol {
        push(format!("protocol({kind})"), *n);
    }
    push("cancelled".into(), o.cancelled);
    for (kind, n) in &o.local {
        push(format!("local({kind})"), *n);
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// Seconds as the scenario writes them (`2s`, `1.5s`, `500ms`).
fn dur(secs: f64) -> String {
    mcpbench_knobs::format_duration(std::time::Duration::from_secs_f64(secs.max(0.0)))
}

/// Width of the operation column: with the rest, a row fits 100 columns.
const NAME: usize = 26;

/// `name`, cut to [`NAME`] characters with an ellipsis (the files keep it whole).
fn short(name: &str) -> String {
    if name.chars().count() <= NAME {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(NAME - 1).collect();
        s.push('…');
        s
    }
}

/// The table's head: at most 100 columns.
fn head(out: &mut String) {
    let _ = writeln!(
        out,
        "{:<NAME$} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "operation", "requests", "ok/s", "p50", "p90", "p95", "p99", "p99.9", "max"
    );
}

/// One operation: its figures, then (when anything but ok happened) its outcomes below.
fn row(out: &mut String, op: &Operation) {
    let lat = |f: fn(&Latency) -> f64| {
        op.latency
            .as_ref()
            .map(|l| ms(f(l)))
            .unwrap_or_else(|| "-".into())
    };
    let _ = writeln!(
        out,
        "{:<NAME$} {:>9} {:>9.1} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        short(&op.name),
        op.started,
        op.throughput,
        lat(|l| l.p50_ms),
        lat(|l| l.p90_ms),
        lat(|l| l.p95_ms),
        lat(|l| l.p99_ms),
        lat(|l| l.p999_ms),
        lat(|l| l.max_ms),
    );
    if op.outcomes.ok != op.started {
        let _ = writeln!(out, "    {}", outcomes_line(&op.outcomes));
    }
}

/// `errors 1.20% of 12 000 calls (tool 1.00% · protocol 0.20%)`: the headline error rate
/// (workload requests and session openings) and its parts.
pub fn errors_line(e: &super::summary::Errors) -> String {
    let mut line = format!("errors {:.2}% of {} calls", e.rate * 100.0, e.calls);
    let parts = e.parts();
    if !parts.is_empty() {
        let parts: Vec<String> = parts
            .iter()
            .map(|(n, r)| format!("{n} {:.2}%", r * 100.0))
            .collect();
        let _ = write!(line, " ({})", parts.join(" · "));
    }
    line
}

pub(crate) fn describe_load(s: &Summary) -> String {
    let l = &s.load;
    let p = &l.profile;
    let level = |v: f64| {
        if l.model == "open" {
            format!("{v:.0}/s")
        } else {
            format!("{v:.0}")
        }
    };
    let shape = if p.stages.len() == 1 && (p.stages[0].target - p.start).abs() < f64::EPSILON {
        level(p.start)
    } else {
        std::iter::once(level(p.start))
            .chain(p.stages.iter().map(|st| level(st.target)))
            .collect::<Vec<_>>()
            .join("→")
    };
    if l.model == "open" {
        format!(
            "open loop {} {} arrivals (≤ {} in flight)",
            shape,
            l.arrival.as_deref().unwrap_or("poisson"),
            l.concurrency
        )
    } else {
        let plural = if shape == "1" { "" } else { "s" };
        match l.open_rate {
            Some(r) => format!("{shape} virtual user{plural} started at {r}/s"),
            None => format!("{shape} virtual user{plural}"),
        }
    }
}

/// Renders the end-of-run report.
pub fn render(s: &Summary) -> String {
    let mut out = String::new();
    title(&mut out, s);
    let _ = writeln!(out);
    head(&mut out);
    for op in s.operations.iter().filter(|o| o.started > 0) {
        row(&mut out, op);
    }
    for line in op_details(s) {
        let _ = writeln!(out, "  {line}");
    }
    if !s.tenants.is_empty() {
        let _ = writeln!(out, "by tenant (every operation of its users):");
        for t in &s.tenants {
            row(&mut out, t);
        }
    }
    let _ = writeln!(out);
    totals(&mut out, s);
    session_opening(&mut out, s);
    sessions(&mut out, s);
    for p in &s.target_processes {
        let _ = writeln!(out, "{}", target_line(p));
    }
    if let Some(m) = &s.target_memory_per_session {
        let _ = writeln!(out, "{}", session_memory_line(m));
    }
    if !s.shards.is_empty() {
        let _ = writeln!(out, "merged runs, each on its own:");
        for h in &s.shards {
            let _ = writeln!(out, "  {}", health_line(h));
        }
    }
    for n in &s.notes {
        let _ = writeln!(out, "note: {n}");
    }
    thresholds(&mut out, s);
    out
}

/// What ran against what, for how long; stopped early, a shard, a late start.
fn title(out: &mut String, s: &Summary) {
    let load = describe_load(s);
    let limit = crate::scenario::plan::REQUESTS_ONLY_LIMIT.as_secs_f64();
    let bound = match s.load.requests {
        Some(n) if s.load.duration_seconds >= limit => format!("{n} requests"),
        Some(n) => format!("{n} requests within {:.0}s", s.load.duration_seconds),
        None => dur(s.load.duration_seconds),
    };
    let _ = writeln!(
        out,
        "mcpbench {}: {} target {} ({}, protocol {} negotiated), {}, {}{}",
        s.scenario.name,
        s.target.kind,
        s.target.url,
        s.target.transport,
        s.target.protocol_negotiated,
        load,
        bound,
        if s.load.warmup_seconds > 0.0 {
            format!(" ({} warm-up excluded)", dur(s.load.warmup_seconds))
        } else {
            String::new()
        },
    );
    if s.interrupted {
        let _ = writeln!(out, "INTERRUPTED: partial results");
    }
    if let Some(sh) = &s.shard {
        let _ = writeln!(out, "{}", shard_line(sh));
    }
    if let Some(st) = &s.start {
        let _ = writeln!(out, "{}", start_line(st));
    }
}

/// The workload's total and errors; open loop: drops and the generator's lateness.
fn totals(out: &mut String, s: &Summary) {
    let t = &s.totals;
    let _ = writeln!(
        out,
        "total: {} started = {} completed + {} failed + {} cancelled{}; {:.1} ok/s over {:.1}s",
        t.started,
        t.completed,
        t.failed,
        t.cancelled,
        if t.unaccounted != 0 {
            format!(" (UNACCOUNTED {})", t.unaccounted)
        } else {
            String::new()
        },
        t.throughput,
        s.measured_seconds,
    );
    let _ = writeln!(out, "{}", errors_line(&s.errors));
    if t.dropped > 0 || s.load.model == "open" {
        let _ = write!(
            out,
            "open loop: {} arrivals dropped (max_in_flight {})",
            t.dropped, s.load.concurrency
        );
        if let Some(l) = &s.generator.lateness {
            let _ = write!(
                out,
                "; generator lateness p50 {} p99 {} max {}",
                ms(l.p50_ms),
                ms(l.p99_ms),
                ms(l.max_ms)
            );
        }
        let _ = writeln!(out);
    }
}

/// The session openings, apart from the total (when there were any).
fn session_opening(out: &mut String, s: &Summary) {
    let o = &s.session_opening;
    if o.started == 0 {
        return;
    }
    let name = s
        .operations
        .first()
        .map_or("initialize", |op| op.name.as_str());
    let _ = write!(
        out,
        "session opening ({name}, not in the total): {} started = {} completed + {} failed + {} cancelled",
        o.started, o.completed, o.failed, o.cancelled
    );
    if let Some(l) = s.operations.first().and_then(|op| op.latency.as_ref()) {
        let _ = write!(out, "; p50 {} p99 {}", ms(l.p50_ms), ms(l.p99_ms));
    }
    let _ = writeln!(out);
}

/// Sessions and connections, stray responses, the generator's CPU and peak memory.
fn sessions(out: &mut String, s: &Summary) {
    let se = &s.sessions;
    let _ = write!(
        out,
        "sessions: {} opened, {} expired (404) and reopened; {} connections",
        se.opened, se.expired, se.connections
    );
    if se.unmatched_responses + se.late_responses + se.duplicate_responses > 0 {
        let _ = write!(
            out,
            "; {} unmatched, {} late and {} duplicate responses",
            se.unmatched_responses, se.late_responses, se.duplicate_responses
        );
    }
    if let Some(cpu) = s.generator.cpu_us_per_request {
        let _ = write!(
            out,
            "; generator CPU {cpu:.2} µs/request on {} worker threads",
            s.generator.workers
        );
    }
    if let Some(n) = s.generator.handovers {
        let _ = write!(out, " (event loop, {n} hand-overs to tasks)");
    }
    if let Some(b) = s.generator.peak_rss_bytes {
        let _ = write!(out, ", peak memory {:.1} MiB", b as f64 / 1_048_576.0);
    }
    let _ = writeln!(out);
}

/// One of the target's processes as the run watched it.
pub fn target_line(p: &crate::metrics::target_procs::TargetProcess) -> String {
    let mb = |b: u64| b as f64 / 1_048_576.0;
    let mut line = format!("target {}: CPU {:.2} s", p.name, p.cpu_seconds);
    if let Some(c) = p.cpu_us_per_request {
        let _ = write!(line, " ({c:.2} µs/request)");
    }
    let _ = write!(
        line,
        ", memory {:.1} → {:.1} MB (peak {:.1}), {} fds, {} threads at most",
        mb(p.rss_first_bytes),
        mb(p.rss_last_bytes),
        mb(p.rss_peak_bytes),
        p.fds_max,
        p.threads_max
    );
    if p.exited {
        line.push_str("; exited during the run");
    }
    line
}

/// The target's memory per session opened, or why it was not measured.
pub fn session_memory_line(m: &super::summary::SessionMemory) -> String {
    let over = format!(
        "{} sessions opened, {} samples",
        m.sessions_opened, m.samples
    );
    match (m.bytes_per_session, &m.unmeasured) {
        (Some(b), _) => format!("target memory per session opened: {} ({over})", bytes(b)),
        (None, why) => format!(
            "target memory per session opened: not measured, {} ({over})",
            why.as_deref().unwrap_or("no line through the samples")
        ),
    }
}

/// A size in bytes, binary units from a KiB up (negative: it shrank).
pub fn bytes(b: f64) -> String {
    match b.abs() {
        a if a < 1024.0 => format!("{b:.0} B"),
        a if a < 1_048_576.0 => format!("{:.1} KiB", b / 1024.0),
        _ => format!("{:.1} MiB", b / 1_048_576.0),
    }
}

/// A threshold without a value: why, when known.
pub fn unmeasured(t: &super::summary::ThresholdResult) -> String {
    t.unjudged.as_ref().map_or_else(
        || "nothing measured".into(),
        |w| format!("not measured: {w}"),
    )
}

/// What part of the scenario a shard ran.
pub fn shard_line(sh: &super::summary::ShardInfo) -> String {
    let (i, n) = (sh.index, sh.count);
    format!(
        "shard {i}/{n} of a split run: it ran 1 in {n} of the virtual users (numbers {i}, {}, \
         {} …) or arrivals of the profile above; the in-flight bound and request count shown \
         are its share; `mcpbench merge` joins the {n} shards",
        i + n,
        i + 2 * n
    )
}

/// The start a run agreed with others, and whether it kept it.
pub fn start_line(st: &super::summary::StartInfo) -> String {
    format!(
        "start agreed ({}) at {}: {}",
        st.by,
        st.agreed,
        if st.late_seconds > 0.0 {
            format!(
                "LATE by {:.3}s (began on the next interval)",
                st.late_seconds
            )
        } else {
            "on time".into()
        }
    )
}

/// One merged run as it went on its own: its share, start, errors and generator health.
pub fn health_line(h: &super::summary::ShardHealth) -> String {
    let mut line = match &h.shard {
        Some(s) => format!("shard {}/{} {}", s.index, s.count, h.dir),
        None => h.dir.clone(),
    };
    let _ = write!(
        line,
        ": {} started, {} ok, error rate {:.2}%",
        h.started,
        h.ok,
        h.error_rate * 100.0
    );
    if h.dropped > 0 {
        let _ = write!(line, ", {} dropped", h.dropped);
    }
    match h.late_seconds {
        Some(l) if l > 0.0 => {
            let _ = write!(line, "; started LATE by {l:.3}s");
        }
        Some(_) => line.push_str("; started on time"),
        None => {
            let _ = write!(line, "; started {}", h.started_at);
        }
    }
    if let Some(c) = h.cpu_us_per_request {
        let _ = write!(line, "; CPU {c:.2} µs/request");
    }
    if let Some(l) = h.lateness_p99_ms {
        let _ = write!(line, "; release lateness p99 {}", ms(l));
    }
    if h.interrupted {
        line.push_str("; INTERRUPTED");
    }
    line
}

/// `thresholds: 2 of 3 held` and one line each, the breached ones marked.
fn thresholds(out: &mut String, s: &Summary) {
    if s.thresholds.is_empty() {
        return;
    }
    let held = s.thresholds.iter().filter(|t| t.passed).count();
    let _ = writeln!(
        out,
        "thresholds: {held} of {} held{}",
        s.thresholds.len(),
        if s.shard.is_some() {
            " on this shard's share (not a verdict: `mcpbench merge` judges the whole)"
        } else if held < s.thresholds.len() {
            " — BREACHED (exit code 1)"
        } else {
            ""
        }
    );
    for t in &s.thresholds {
        let value = match (t.value, t.unit.as_str()) {
            (None, _) => unmeasured(t),
            (Some(v), "ms") => ms(v),
            (Some(v), "B") => bytes(v),
            (Some(v), "") => format!("{:.3}%", v * 100.0),
            (Some(v), unit) => format!("{v:.1}{unit}"),
        };
        let _ = writeln!(
            out,
            "  {} {} {}: {value}",
            if t.passed { "ok  " } else { "FAIL" },
            t.name,
            t.condition
        );
    }
}
