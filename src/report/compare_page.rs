//! A comparison as a page (`mcpbench compare --html FILE`): the verdict counts and budgets as
//! tiles, each operation's latency spectra of both sides overlaid, then every metric with its
//! verdict (coloured on the page).

use super::compare::{Budget, Comparison, Delta, Verdict};
use super::document::{Block, Tile, first_seen, html};
use super::plots::{spectrum_axis, spectrum_series};
use super::read_back::RunFiles;
use super::svg::{Axis, Chart, Unit, line_chart};

/// The comparison of `base` and `current` (the runs of each side) as one self-contained page.
pub fn page(c: &Comparison, base: &[RunFiles], current: &[RunFiles]) -> String {
    html(&document(c, base, current))
}

fn document(c: &Comparison, base: &[RunFiles], current: &[RunFiles]) -> Vec<Block> {
    let count = |v: Verdict| c.deltas.iter().filter(|d| d.verdict == v).count();
    let mut tiles = vec![
        Tile::new(
            count(Verdict::Regressed).to_string(),
            "regressed",
            "clear of the noise and past the change or budget",
        )
        .bad(count(Verdict::Regressed) > 0),
        Tile::new(count(Verdict::Improved).to_string(), "improved", ""),
        Tile::new(
            count(Verdict::Unchanged).to_string(),
            "unchanged",
            format!("min change {:.0} %", c.min_change * 100.0),
        ),
    ];
    for b in &c.budgets {
        let breached = budget_breached(c, b);
        tiles.push(
            Tile::new(
                if breached.is_empty() {
                    "held"
                } else {
                    "breached"
                },
                format!("budget {} {}", b.metric, b.written),
                breached.join(", "),
            )
            .bad(!breached.is_empty()),
        );
    }
    let mut doc = vec![
        Block::Heading("mcpbench compare".into()),
        Block::Tiles(tiles),
        Block::List(vec![
            format!("base: {}", c.base.join(", ")),
            format!("current: {}", c.current.join(", ")),
        ]),
        Block::Heading("Latency spectra".into()),
    ];
    for op in operations(c) {
        doc.push(Block::Chart(spectra(&op, base, current)));
    }
    doc.push(Block::Heading("Every metric".into()));
    doc.push(table(c));
    if !c.unmatched.is_empty() {
        doc.push(Block::Para(format!(
            "In only one of the sides: {}",
            c.unmatched.join(", ")
        )));
    }
    doc
}

/// The operations compared, in order.
fn operations(c: &Comparison) -> Vec<String> {
    first_seen(c.deltas.iter().map(|d| d.operation.as_str()))
}

/// The operations whose regression breached budget `b`.
fn budget_breached(c: &Comparison, b: &Budget) -> Vec<String> {
    c.deltas
        .iter()
        .filter(|d| d.metric == b.metric && d.verdict == Verdict::Regressed)
        .map(|d| d.operation.clone())
        .collect()
}

/// One operation's spectrum in every run of both sides (`base`, `current`; numbered when a
/// side has several runs).
fn spectra(op: &str, base: &[RunFiles], current: &[RunFiles]) -> String {
    let mut series = Vec::new();
    for (side, runs) in [("base", base), ("current", current)] {
        for (i, run) in runs.iter().enumerate() {
            if let Some((_, pts)) = run.spectra.iter().find(|(name, _)| name == op) {
                let name = if runs.len() == 1 {
                    side.to_string()
                } else {
                    format!("{side} {}", i + 1)
                };
                series.push(spectrum_series(&name, pts));
            }
        }
    }
    line_chart(&Chart {
        title: format!("{op}: latency spectrum of ok responses, base and current (log scale)"),
        x: spectrum_axis(),
        y: Axis::log("latency", Unit::Latency),
        series,
        marks: Vec::new(),
    })
}

/// Every metric: both values, the change, the statistic, the verdict.
fn table(c: &Comparison) -> Block {
    let value = super::compare::shown;
    let row = |d: &Delta| {
        vec![
            d.operation.clone(),
            d.metric.to_string(),
            value(d.base, d.unit),
            value(d.current, d.unit),
            d.change
                .map_or("-".into(), |c| format!("{:+.1} %", c * 100.0)),
            d.statistic.map_or("-".into(), |t| format!("{t:.1}")),
            d.verdict.word().into(),
        ]
    };
    Block::Table {
        head: [
            "operation",
            "metric",
            "base",
            "current",
            "change",
            "t",
            "verdict",
        ]
        .map(String::from)
        .to_vec(),
        rows: c.deltas.iter().map(row).collect(),
    }
}
