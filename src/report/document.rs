//! The report of a finished run as one neutral document — headings, paragraphs, tables,
//! lists, charts — rendered as Markdown (`report.md`, fit for a pull-request comment; charts
//! left out) and as one self-contained HTML file (`report.html`, charts as inline SVG).

use std::fmt::Write;

use super::escape::esc;
use super::plots::plots;
use super::read_back::RunFiles;
use super::summary::{Latency, Operation, Summary};
use super::text::{describe_load, ms, outcomes_line};

/// One piece of a report.
#[derive(Debug, Clone)]
pub enum Block {
    Heading(String),
    Para(String),
    List(Vec<String>),
    Table {
        head: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// An SVG chart (HTML only).
    Chart(String),
    /// Headline figures, large, before the tables.
    Tiles(Vec<Tile>),
}

/// Names in the order they first appear, each once (operations over a report's rows).
pub(crate) fn first_seen<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}

/// A headline figure: its value, what it is, and a line of context.
#[derive(Debug, Clone)]
pub struct Tile {
    pub value: String,
    pub label: String,
    pub note: String,
    /// Marked as a problem (a breach, errors, a regression).
    pub bad: bool,
}

impl Tile {
    pub fn new(
        value: impl Into<String>,
        label: impl Into<String>,
        note: impl Into<String>,
    ) -> Tile {
        Tile {
            value: value.into(),
            label: label.into(),
            note: note.into(),
            bad: false,
        }
    }

    pub fn bad(mut self, bad: bool) -> Tile {
        self.bad = bad;
        self
    }
}

/// The report's content.
pub fn document(run: &RunFiles) -> Vec<Block> {
    let s = &run.summary;
    let mut doc = vec![
        Block::Heading(format!("mcpbench: {}", s.scenario.name)),
        Block::Tiles(tiles(s)),
        about(s),
    ];
    if !s.thresholds.is_empty() {
        doc.push(Block::Heading("Thresholds".into()));
        doc.push(thresholds(s));
    }
    operations(s, &mut doc);
    doc.push(Block::Heading("Generator and sessions".into()));
    doc.push(generator_and_sessions(s));
    if !s.shards.is_empty() {
        doc.push(Block::Heading("Merged runs, each on its own".into()));
        doc.push(Block::List(
            s.shards.iter().map(super::text::health_line).collect(),
        ));
    }
    if !s.notes.is_empty() {
        doc.push(Block::Heading("Notes".into()));
        doc.push(Block::List(s.notes.clone()));
    }
    doc.push(Block::Heading("Plots".into()));
    doc.extend(plots(run).into_iter().map(Block::Chart));
    doc
}

/// The run's headline: ok/s, latency, errors by class, what a request cost the generator and
/// the target.
fn tiles(s: &Summary) -> Vec<Tile> {
    let mut t = vec![Tile::new(
        format!("{:.0}", s.totals.throughput),
        "ok responses/s",
        format!("{} ok of {} started", s.totals.ok, s.totals.started),
    )];
    if let Some(l) = &s.totals.latency {
        t.push(Tile::new(ms(l.p50_ms), "p50", "ok responses"));
        t.push(Tile::new(ms(l.p95_ms), "p95", "ok responses"));
        t.push(Tile::new(
            ms(l.p99_ms),
            "p99",
            format!("max {}", ms(l.max_ms)),
        ));
    }
    let e = &s.errors;
    let parts: Vec<String> = e
        .parts()
        .iter()
        .map(|(n, r)| format!("{n} {:.2}%", r * 100.0))
        .collect();
    t.push(
        Tile::new(
            format!("{:.2}%", e.rate * 100.0),
            "error rate",
            if parts.is_empty() {
                format!("of {} calls", e.calls)
            } else {
                parts.join(" · ")
            },
        )
        .bad(e.failed > 0),
    );
    if let Some(c) = s.generator.cpu_us_per_request {
        t.push(Tile::new(
            format!("{c:.1} µs"),
            "generator CPU per request",
            "user + system",
        ));
    }
    for p in &s.target_processes {
        if let Some(c) = p.cpu_us_per_request {
            t.push(Tile::new(
                format!("{c:.1} µs"),
                "target CPU per request",
                p.name.clone(),
            ));
        }
    }
    let breached = s.thresholds.iter().filter(|t| !t.passed).count();
    if !s.thresholds.is_empty() {
        t.push(
            Tile::new(
                format!("{}/{}", s.thresholds.len() - breached, s.thresholds.len()),
                "thresholds held",
                if breached > 0 {
                    "see Thresholds"
                } else {
                    "all held"
                },
            )
            .bad(breached > 0),
        );
    }
    t
}

/// What ran: when, against which target, under which load, for how long.
fn about(s: &Summary) -> Block {
    let mut about = vec![
        format!("started {} · mcpbench {}", s.started_at, s.mcpbench_version),
        format!(
            "target {} ({}) · {} · HTTP/{} · protocol {} offered, {} negotiated",
            s.target.url,
            s.target.kind,
            s.target.transport,
            s.target.http,
            s.target.protocol_offered,
            s.target.protocol_negotiated
        ),
        format!(
            "load: {} · {:.0}s ({:.0}s warm-up excluded) · timeout {:.1}s · sessions {} · {} worker threads",
            describe_load(s),
            s.load.duration_seconds,
            s.load.warmup_seconds,
            s.load.timeout_seconds,
            s.load.sessions,
            s.load.workers
        ),
        format!(
            "measured {:.1}s{}",
            s.measured_seconds,
            if s.interrupted {
                " — stopped early: partial results"
            } else {
                ""
            }
        ),
    ];
    if let Some(sh) = &s.shard {
        about.push(super::text::shard_line(sh));
    }
    Block::List(about)
}

/// Each threshold: held or breached (on a shard: on its share), its condition, the measured
/// value.
fn thresholds(s: &Summary) -> Block {
    Block::Table {
        head: vec![
            "result".into(),
            "threshold".into(),
            "condition".into(),
            "measured".into(),
        ],
        rows: s
            .thresholds
            .iter()
            .map(|t| {
                vec![
                    match (t.passed, s.shard.is_some()) {
                        (true, false) => "held",
                        (false, false) => "BREACHED",
                        (true, true) => "held on this shard's share",
                        (false, true) => "not on this shard's share",
                    }
                    .into(),
                    t.name.clone(),
                    t.condition.clone(),
                    match (t.value, t.unit.as_str()) {
                        (None, _) => super::text::unmeasured(t),
                        (Some(v), "ms") => ms(v),
                        (Some(v), "B") => super::text::bytes(v),
                        (Some(v), "") => format!("{:.3} %", v * 100.0),
                        (Some(v), u) => format!("{v:.1}{u}"),
                    },
                ]
            })
            .collect(),
    }
}

/// The operations (and tenants) table, their details, the total and the errors.
fn operations(s: &Summary, doc: &mut Vec<Block>) {
    doc.push(Block::Heading("Operations".into()));
    doc.push(op_table(
        "operation",
        s.operations.iter().filter(|o| o.started > 0),
    ));
    if !s.tenants.is_empty() {
        doc.push(Block::Heading("By tenant".into()));
        doc.push(op_table("tenant", s.tenants.iter()));
    }
    let details = super::text::op_details(s);
    if !details.is_empty() {
        doc.push(Block::List(details));
    }
    let t = &s.totals;
    doc.push(Block::Para(format!(
        "Total: {} started = {} completed + {} failed + {} cancelled; {:.1} ok/s over {:.1}s{}.",
        t.started,
        t.completed,
        t.failed,
        t.cancelled,
        t.throughput,
        s.measured_seconds,
        t.latency.as_ref().map_or(String::new(), |l| format!(
            "; latency p50 {} p95 {} p99 {} p99.9 {}",
            ms(l.p50_ms),
            ms(l.p95_ms),
            ms(l.p99_ms),
            ms(l.p999_ms)
        ))
    )));
    doc.push(Block::Para(format!(
        "{}.",
        super::text::errors_line(&s.errors).replacen("errors", "Errors", 1)
    )));
}

/// The generator's health and the sessions: workers and CPU, sessions and connections,
/// open-loop drops and lateness, the start, the target's processes.
fn generator_and_sessions(s: &Summary) -> Block {
    let g = &s.generator;
    let mut health = vec![
        format!(
            "{} worker threads; CPU {} per request",
            g.workers,
            g.cpu_us_per_request
                .map_or("not reported".into(), |c| format!("{c:.2} µs"))
        ),
        format!(
            "sessions: {} opened, {} expired and reopened; {} connections; {} unmatched and {} late responses",
            s.sessions.opened,
            s.sessions.expired,
            s.sessions.connections,
            s.sessions.unmatched_responses,
            s.sessions.late_responses
        ),
    ];
    if s.load.model == "open" {
        health.push(format!(
            "open loop: {} arrivals dropped; release lateness {}",
            s.totals.dropped,
            g.lateness.as_ref().map_or("-".into(), |l| format!(
                "p50 {} p99 {} max {}",
                ms(l.p50_ms),
                ms(l.p99_ms),
                ms(l.max_ms)
            ))
        ));
    }
    if let Some(st) = &s.start {
        health.push(super::text::start_line(st));
    }
    health.extend(s.target_processes.iter().map(super::text::target_line));
    health.extend(
        s.target_memory_per_session
            .iter()
            .map(super::text::session_memory_line),
    );
    Block::List(health)
}

/// The per-operation table (or per-tenant: `first` names the first column).
fn op_table<'a>(first: &str, ops: impl Iterator<Item = &'a Operation>) -> Block {
    let lat = |l: Option<&Latency>, f: fn(&Latency) -> f64| l.map_or("-".into(), |l| ms(f(l)));
    Block::Table {
        head: [
            first, "requests", "ok/s", "p50", "p90", "p95", "p99", "p99.9", "max", "outcomes",
        ]
        .map(String::from)
        .to_vec(),
        rows: ops
            .map(|o| {
                let l = o.latency.as_ref();
                vec![
                    o.name.clone(),
                    o.started.to_string(),
                    format!("{:.1}", o.throughput),
                    lat(l, |l| l.p50_ms),
                    lat(l, |l| l.p90_ms),
                    lat(l, |l| l.p95_ms),
                    lat(l, |l| l.p99_ms),
                    lat(l, |l| l.p999_ms),
                    lat(l, |l| l.max_ms),
                    outcomes_line(&o.outcomes),
                ]
            })
            .collect(),
    }
}

/// Markdown (GitHub-flavoured); charts are left to the HTML report.
pub fn markdown(doc: &[Block]) -> String {
    let mut out = String::new();
    let cell = |s: &str| s.replace('|', "\\|");
    for b in doc {
        match b {
            Block::Heading(h) if out.is_empty() => {
                let _ = writeln!(out, "# {h}\n");
            }
            Block::Heading(h) if h == "Plots" => {
                let _ = writeln!(
                    out,
                    "## Plots\n\nSee `report.html` in the same directory.\n"
                );
            }
            Block::Heading(h) => {
                let _ = writeln!(out, "## {h}\n");
            }
            Block::Para(p) => {
                let _ = writeln!(out, "{p}\n");
            }
            Block::Tiles(tiles) => {
                for t in tiles {
                    let _ = writeln!(out, "- **{}** {} ({})", t.value, t.label, t.note);
                }
                out.push('\n');
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {i}");
                }
                out.push('\n');
            }
            Block::Table { head, rows } => {
                let _ = writeln!(
                    out,
                    "| {} |",
                    head.iter().map(|h| cell(h)).collect::<Vec<_>>().join(" | ")
                );
                let align: Vec<&str> = head
                    .iter()
                    .enumerate()
                    .map(|(i, _)| if i == 0 { "---" } else { "---:" })
                    .collect();
                let _ = writeln!(out, "|{}|", align.join("|"));
                for r in rows {
                    let _ = writeln!(
                        out,
                        "| {} |",
                        r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
                    );
                }
                out.push('\n');
            }
            Block::Chart(_) => {}
        }
    }
    out
}

/// One self-contained HTML page: inline CSS, inline SVG, nothing fetched.
pub fn html(doc: &[Block]) -> String {
    let title = match doc.first() {
        Some(Block::Heading(h)) => esc(h),
        _ => "mcpbench report".into(),
    };
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\"><title>{title}</title>\n<style>{STYLE}</style></head><body>\n"
    );
    let mut first = true;
    for b in doc {
        match b {
            Block::Heading(h) => {
                let tag = if first { "h1" } else { "h2" };
                let _ = writeln!(out, "<{tag}>{}</{tag}>", esc(h));
            }
            Block::Para(p) => {
                let _ = writeln!(out, "<p>{}</p>", esc(p));
            }
            Block::List(items) => {
                out.push_str("<ul>");
                for i in items {
                    let _ = write!(out, "<li>{}</li>", esc(i));
                }
                out.push_str("</ul>\n");
            }
            Block::Tiles(tiles) => html_tiles(&mut out, tiles),
            Block::Table { head, rows } => html_table(&mut out, head, rows),
            Block::Chart(svg) => {
                out.push_str("<figure class=\"scroll\">");
                out.push_str(svg);
                out.push_str("</figure>\n");
            }
        }
        first = false;
    }
    out.push_str("</body></html>\n");
    out
}

/// The page's style: fits a phone's width (tables scroll in their own box, charts scale),
/// follows the reader's light or dark preference, prints without backgrounds or page breaks
/// inside a chart.
const STYLE: &str = "\
:root{--fg:#1b1b1b;--bg:#fff;--muted:#5f6368;--line:#d0d0d0;--grid:#ececec;--head:#f3f3f3;--tile:#f6f7f9;--bad:#b3261e;--good:#1b7f3b}\
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#16181c;--muted:#a0a4ab;--line:#3a3d43;--grid:#2a2d33;--head:#23262b;--tile:#1f2227;--bad:#ff8a80;--good:#7fd89a}}\
*{box-sizing:border-box}\
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:var(--fg);background:var(--bg);padding:0 1em;line-height:1.4}\
h1{font-size:1.6em;overflow-wrap:anywhere}h2{margin-top:1.6em;border-bottom:1px solid var(--line);padding-bottom:.2em}\
li{overflow-wrap:anywhere}\
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:.6em;margin:1em 0}\
.tile{background:var(--tile);border:1px solid var(--line);border-radius:8px;padding:.6em .8em;min-width:0}\
.tile .v{font-size:1.7em;font-weight:600;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}\
.tile .l{font-weight:600}.tile .n{color:var(--muted);font-size:.85em;overflow-wrap:anywhere}\
.tile.bad{border-color:var(--bad)}.tile.bad .v{color:var(--bad)}\
.scroll{overflow-x:auto;max-width:100%}\
table{border-collapse:collapse;margin:.5em 0 1em;font-variant-numeric:tabular-nums}\
td,th{border:1px solid var(--line);padding:3px 8px;text-align:right;white-space:nowrap}\
td:first-child,th:first-child{text-align:left}th{background:var(--head)}td.bad{color:var(--bad);font-weight:600}td.good{color:var(--good)}\
figure{margin:1em 0}svg.chart{display:block;width:100%;min-width:480px;height:auto;color:var(--fg)}\
svg.chart text{fill:currentColor}svg.chart .grid{stroke:var(--grid)}svg.chart .frame{stroke:var(--muted)}\
svg.chart .mark{stroke:var(--muted)}\
@media print{:root{--fg:#000;--bg:#fff;--tile:#fff;--head:#eee}body{max-width:none;margin:0}figure,.tile,tr{break-inside:avoid}.scroll{overflow:visible}}";

/// Headline tiles.
fn html_tiles(out: &mut String, tiles: &[Tile]) {
    out.push_str("<div class=\"tiles\">");
    for t in tiles {
        let _ = write!(
            out,
            "<div class=\"tile{}\"><div class=\"v\">{}</div><div class=\"l\">{}</div><div class=\"n\">{}</div></div>",
            if t.bad { " bad" } else { "" },
            esc(&t.value),
            esc(&t.label),
            esc(&t.note)
        );
    }
    out.push_str("</div>\n");
}

/// A table in a box that scrolls sideways on its own when the window is narrower.
fn html_table(out: &mut String, head: &[String], rows: &[Vec<String>]) {
    out.push_str("<div class=\"scroll\"><table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            // Verdicts read at a glance: a regression or breach red, an improvement green.
            let class = match c.as_str() {
                "regressed" | "BREACHED" | "breaks" => " class=\"bad\"",
                "improved" => " class=\"good\"",
                _ => "",
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></div>\n");
}

/// Writes `report.md` and `report.html` into the run's directory.
pub fn write(run: &RunFiles) -> std::io::Result<()> {
    let doc = document(run);
    std::fs::write(run.dir.join("report.md"), markdown(&doc))?;
    std::fs::write(run.dir.join("report.html"), html(&doc))
}
