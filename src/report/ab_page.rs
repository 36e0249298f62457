//! An A/B comparison as a document (report.md, report.html): what each gateway costs, at a
//! glance first — headline tiles per target and level, then per level and operation the
//! latency spectra overlaid, the added latency per percentile with its 95 % interval, each
//! slice's p50 by round (drift and the interleaving visible), time upstream against the rest
//! where a timing header said; for a sweep, added latency and throughput ratio against the
//! level with the ceiling guard's verdict marked; the tables last.

use std::path::Path;

use super::ab::{AbLevel, AbReport, Comparison, Estimate, METRICS, level_text, lines};
use super::document::{Block, Tile, first_seen, html, markdown};
use super::plots::{nines, spectrum_axis, spectrum_series};
use super::read_back::RunFiles;
use super::svg::{Axis, Bars, Chart, Series, Unit, bar_chart, line_chart};

/// Writes `ab.json`, `report.md` and `report.html` into `dir`.
pub fn write(r: &AbReport, dir: &Path) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(r).map_err(std::io::Error::other)? + "\n";
    std::fs::write(dir.join("ab.json"), json)?;
    let doc = document(r, dir);
    std::fs::write(dir.join("report.md"), markdown(&doc))?;
    std::fs::write(dir.join("report.html"), html(&doc))
}

/// The comparison as a document; `dir` is where its targets' merged results are (their
/// spectra are drawn when they are there).
pub fn document(r: &AbReport, dir: &Path) -> Vec<Block> {
    let mut doc = vec![Block::Heading(format!("mcpbench A/B: {}", r.scenario))];
    doc.push(Block::Tiles(tiles(r)));
    doc.push(Block::List(vec![
        format!("baseline {} · compared {}", r.baseline(), r.targets[1..].join(", ")),
        format!(
            "{} rounds per level, each one {:.1} s slice per target in rotating order; 95 % confidence intervals by Student's t over the rounds' paired differences",
            r.rounds, r.slice_seconds
        ),
    ]));
    doc.push(Block::Heading("Verdict".into()));
    doc.push(Block::List(lines(r)));
    if r.levels.len() > 1 {
        doc.push(Block::Heading("Against the level".into()));
        doc.extend(sweep_charts(r).into_iter().map(Block::Chart));
    }
    let sweep = r.levels.len() > 1;
    for lv in &r.levels {
        doc.push(Block::Heading(format!("Level {}", level_text(r, lv.level))));
        if let Some(why) = &lv.upstream_bound {
            doc.push(Block::Para(format!("Upstream-bound: {why}.")));
        }
        let merged = if sweep {
            dir.join(format!("L{}", lv.level))
        } else {
            dir.to_path_buf()
        };
        for op in operations(lv) {
            doc.extend(
                level_charts(r, lv, &op, &merged)
                    .into_iter()
                    .map(Block::Chart),
            );
        }
        if let Some(b) = upstream_bars(r, lv) {
            doc.push(Block::Chart(b));
        }
        doc.push(table(r, lv));
    }
    doc
}

/// The operations compared at a level, in the order they first appear.
fn operations(lv: &AbLevel) -> Vec<String> {
    first_seen(lv.comparisons.iter().map(|c| c.operation.as_str()))
}

/// A latency difference in ms as a signed figure in µs or ms.
fn added(ms: f64) -> String {
    if ms.abs() < 1.0 {
        format!("{:+.0} µs", ms * 1000.0)
    } else {
        format!("{ms:+.2} ms")
    }
}

fn interval(e: &Estimate, f: fn(f64) -> String) -> String {
    format!("95 % CI {} … {}", f(e.low), f(e.high))
}

/// Per target and level (the first operation, named when there are several): added p50,
/// added p99, throughput ratio.
fn tiles(r: &AbReport) -> Vec<Tile> {
    let mut t = Vec::new();
    for lv in &r.levels {
        let Some(first) = lv.comparisons.first().map(|c| c.operation.clone()) else {
            continue;
        };
        let several = operations(lv).len() > 1;
        for c in lv.comparisons.iter().filter(|c| c.operation == first) {
            let mut at = format!("{} · {}", c.target, level_text(r, lv.level));
            if several {
                at = format!("{at} · {first}");
            }
            for m in ["p50", "p99"] {
                if let Some(d) = c.deltas.iter().find(|d| d.metric == m) {
                    t.push(
                        Tile::new(
                            added(d.added_ms.mean),
                            format!("added {m} · {at}"),
                            match lv.upstream_bound {
                                Some(_) => {
                                    format!("upstream-bound; {}", interval(&d.added_ms, added))
                                }
                                None => interval(&d.added_ms, added),
                            },
                        )
                        .bad(lv.upstream_bound.is_some()),
                    );
                }
            }
            if let Some(x) = &c.throughput_ratio {
                let ratio = |v: f64| format!("×{v:.2}");
                t.push(Tile::new(
                    ratio(x.mean),
                    format!("throughput · {at}"),
                    format!("of {}'s; {}", r.baseline(), interval(x, ratio)),
                ));
            }
        }
    }
    t
}

/// The charts of one operation at one level.
fn level_charts(r: &AbReport, lv: &AbLevel, op: &str, merged: &Path) -> Vec<String> {
    let at = level_text(r, lv.level);
    let comps: Vec<&Comparison> = lv
        .comparisons
        .iter()
        .filter(|c| c.operation == op)
        .collect();
    let mut out = Vec::new();
    // Spectra: each target's merged result, or the compared percentiles when not merged.
    let mut spectra: Vec<Series> = r
        .targets
        .iter()
        .filter_map(|t| {
            let run = RunFiles::read(&merged.join(t)).ok()?;
            let (_, pts) = run.spectra.iter().find(|(name, _)| name == op)?;
            Some(spectrum_series(t, pts))
        })
        .collect();
    if spectra.len() < r.targets.len() {
        spectra = compared_percentiles(r, &comps);
    }
    out.push(line_chart(&Chart {
        title: format!("{op} at {at}: latency spectrum of ok responses per target (log scale)"),
        x: spectrum_axis(),
        y: Axis::log("latency", Unit::Latency),
        series: spectra,
        marks: Vec::new(),
    }));
    out.push(line_chart(&Chart {
        title: format!(
            "{op} at {at}: latency added over {} per percentile (95 % intervals)",
            r.baseline()
        ),
        x: percentile_axis(),
        y: Axis::linear("added latency", Unit::Latency),
        series: comps
            .iter()
            .map(|c| {
                let mut s = Series::new(&c.target, Vec::new());
                for (i, d) in METRICS.iter().enumerate() {
                    if let Some(d) = c.deltas.iter().find(|x| x.metric == *d) {
                        s.points.push((i as f64, d.added_ms.mean));
                        s.err.push((d.added_ms.low, d.added_ms.high));
                    }
                }
                s
            })
            .collect(),
        marks: Vec::new(),
    }));
    out.push(line_chart(&by_round(r, lv, op, &at)));
    out
}

/// The compared percentiles (p50 … p99.9), by their means over the rounds, as spectra.
fn compared_percentiles(r: &AbReport, comps: &[&Comparison]) -> Vec<Series> {
    let line = |name: &str, pick: &dyn Fn(&super::ab::Delta) -> f64, c: &Comparison| {
        // `p99.9` is the 99.9th percentile: its place on the spectrum's axis.
        let pts = c
            .deltas
            .iter()
            .filter_map(|d| Some((nines(d.metric.strip_prefix('p')?.parse().ok()?), pick(d))))
            .collect();
        Series::new(name, pts)
    };
    let mut out = Vec::new();
    if let Some(first) = comps.first() {
        out.push(line(r.baseline(), &|d| d.baseline_ms, first));
    }
    for c in comps {
        out.push(line(&c.target, &|d| d.target_ms, c));
    }
    out
}

/// The compared percentiles as evenly spaced categories.
fn percentile_axis() -> Axis {
    Axis {
        ticks: Some(
            METRICS
                .iter()
                .enumerate()
                .map(|(i, m)| (i as f64, m.to_string()))
                .collect(),
        ),
        ..Axis::linear("percentile", Unit::Of(""))
    }
}

/// Each slice's p50 by round, one line per target.
fn by_round(r: &AbReport, lv: &AbLevel, op: &str, at: &str) -> Chart {
    let series = r
        .targets
        .iter()
        .map(|t| {
            let mut pts: Vec<(f64, f64)> = lv
                .slices
                .iter()
                .filter(|s| &s.target == t)
                .filter_map(|s| {
                    let o = s.ops.iter().find(|o| o.name == op)?;
                    Some(((s.round + 1) as f64, o.latency_ms?[0]))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series::new(t, pts)
        })
        .collect();
    Chart {
        title: format!("{op} at {at}: p50 of each slice by round and target (order rotates)"),
        x: Axis::linear("round", Unit::Of("")),
        y: Axis::linear("p50", Unit::Latency),
        series,
        marks: Vec::new(),
    }
}

/// Where a target's timing header said how long it waited upstream: its p50 split into time
/// upstream and the rest (its own work and the extra hop).
fn upstream_bars(r: &AbReport, lv: &AbLevel) -> Option<String> {
    let rows: Vec<(String, Vec<f64>)> = lv
        .comparisons
        .iter()
        .filter_map(|c| {
            let up = c.upstream_p50_ms?;
            let p50 = c.deltas.iter().find(|d| d.metric == "p50")?.target_ms;
            Some((
                format!("{} · {}", c.target, c.operation),
                vec![up.min(p50), (p50 - up).max(0.0)],
            ))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    Some(bar_chart(&Bars {
        title: format!(
            "p50 at {} split by the timing header: time upstream and the rest (own work and the hop)",
            level_text(r, lv.level)
        ),
        axis: Axis::linear("p50", Unit::Latency),
        parts: vec!["upstream".into(), "the rest".into()],
        rows,
    }))
}

/// A sweep: added p50 and p99 (with intervals) and the throughput ratio against the level,
/// levels where the baseline was at its own capacity marked.
fn sweep_charts(r: &AbReport) -> Vec<String> {
    let Some(op) = r.levels.iter().find_map(|l| l.comparisons.first()) else {
        return Vec::new();
    };
    let op = op.operation.clone();
    let marks: Vec<(f64, String)> = r
        .levels
        .iter()
        .filter(|l| l.upstream_bound.is_some())
        .map(|l| (l.level, "upstream-bound".into()))
        .collect();
    let x = if r.level == "rate" {
        Axis::linear("offered load", Unit::Of("requests/s"))
    } else {
        Axis::linear("virtual users", Unit::Of(""))
    };
    let per_level = |t: &str, pick: &dyn Fn(&Comparison) -> Option<Estimate>| {
        let mut s = Series::new(t, Vec::new());
        for lv in &r.levels {
            let c = lv
                .comparisons
                .iter()
                .find(|c| c.target == t && c.operation == op);
            if let Some(e) = c.and_then(pick) {
                s.points.push((lv.level, e.mean));
                s.err.push((e.low, e.high));
            }
        }
        s
    };
    let added_at = |m: &'static str| {
        move |c: &Comparison| c.deltas.iter().find(|d| d.metric == m).map(|d| d.added_ms)
    };
    let mut latency = Vec::new();
    let mut ratio = Vec::new();
    for t in &r.targets[1..] {
        latency.push(Series {
            name: format!("{t} p50"),
            ..per_level(t, &added_at("p50"))
        });
        latency.push(Series {
            name: format!("{t} p99"),
            ..per_level(t, &added_at("p99"))
        });
        ratio.push(per_level(t, &|c: &Comparison| c.throughput_ratio));
    }
    vec![
        line_chart(&Chart {
            title: format!(
                "{op}: latency added over {} against the level",
                r.baseline()
            ),
            x: x.clone(),
            y: Axis::linear("added latency", Unit::Latency),
            series: latency,
            marks: marks.clone(),
        }),
        line_chart(&Chart {
            title: format!(
                "{op}: throughput as a share of {}'s against the level",
                r.baseline()
            ),
            x,
            y: Axis::linear("throughput ratio", Unit::Of("×")),
            series: ratio,
            marks,
        }),
    ]
}

/// Every figure of a level, as a table.
fn table(r: &AbReport, lv: &AbLevel) -> Block {
    let mut rows = Vec::new();
    for c in &lv.comparisons {
        for d in &c.deltas {
            rows.push(vec![
                format!("{} · {}", c.target, c.operation),
                d.metric.clone(),
                format!("{:.3}", d.baseline_ms),
                format!("{:.3}", d.target_ms),
                format!("{:+.3}", d.added_ms.mean),
                format!("{:+.3} … {:+.3}", d.added_ms.low, d.added_ms.high),
            ]);
        }
        if let Some(t) = &c.throughput_ratio {
            rows.push(vec![
                format!("{} · {}", c.target, c.operation),
                "throughput ratio".into(),
                String::new(),
                String::new(),
                format!("×{:.3}", t.mean),
                format!("×{:.3} … ×{:.3}", t.low, t.high),
            ]);
        }
    }
    Block::Table {
        head: vec![
            "target · operation".into(),
            "metric".into(),
            format!("{} ms", r.baseline()),
            "target ms".into(),
            "added ms".into(),
            "95 % CI".into(),
        ],
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ab::tests::{report, slice};

    /// A sweep's page without merged results: tiles per level, the sweep's two charts, per
    /// level the spectra from the compared percentiles (both targets), the added latency with
    /// its error bars, the slices by round, and the table.
    #[test]
    fn a_sweep_page_leads_with_tiles_and_draws_every_chart() {
        let level = |base: f64| {
            (0..6)
                .flat_map(|r| {
                    [
                        slice("direct", r, base, 1000.0, 0),
                        slice("gateway", r, base + 0.05 + [0.001, -0.001][r % 2], 900.0, 0),
                    ]
                })
                .collect::<Vec<_>>()
        };
        let r = report("vus", vec![(1.0, level(0.1)), (8.0, level(0.2))]);
        let doc = document(&r, Path::new("/nonexistent"));
        let Some(Block::Tiles(tiles)) = doc.get(1) else {
            panic!("tiles first: {doc:?}");
        };
        assert_eq!(tiles.len(), 6, "added p50, p99, throughput × 2 levels");
        assert_eq!(tiles[0].value, "+50 µs");
        assert_eq!(
            tiles[0].label, "added p50 · gateway · c=1",
            "one operation: not named"
        );
        let charts: Vec<&String> = doc
            .iter()
            .filter_map(|b| match b {
                Block::Chart(svg) => Some(svg),
                _ => None,
            })
            .collect();
        assert_eq!(charts.len(), 2 + 2 * 3, "{doc:?}");
        assert!(charts[2].contains(">direct<") && charts[2].contains(">gateway<"));
        // Without merged results, the spectra are the five compared percentiles per target.
        assert_eq!(charts[2].matches("<polyline").count(), 2, "{}", charts[2]);
        assert_eq!(charts[2].matches("<circle").count(), 10, "{}", charts[2]);
        assert_eq!(
            charts[0].matches("<path").count(),
            4,
            "error bars: 2 lines × 2 levels"
        );
        let tables = doc.iter().filter(|b| matches!(b, Block::Table { .. }));
        assert_eq!(tables.count(), 2);
    }
}
