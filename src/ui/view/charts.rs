//! Charts over time shared by the views: throughput (ok/s, errors/s) and latency percentiles,
//! on one time axis.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Chart, Dataset, GraphType};

use crate::metrics::grid::Phase;
use crate::report::live::Live;
use crate::report::summary::Errors;
use crate::ui::format::{clock, latency_us, percent, rate};

use super::{Theme, placeholder};

/// The measured intervals that fit `width` cells of braille (two points per cell).
fn window(
    live: &Live,
    width: u16,
) -> impl Iterator<Item = &crate::metrics::collector::IntervalSnapshot> {
    let keep = (width as usize * 2).max(2);
    let skip = live.history.len().saturating_sub(keep);
    live.history.iter().skip(skip).map(|s| s.as_ref())
}

/// Nice y-axis labels for a linear range from 0.
fn linear_axis(max: f64, fmt: fn(f64) -> String) -> (f64, Vec<String>) {
    let top = if max <= 0.0 { 1.0 } else { max * 1.1 };
    (top, vec![fmt(0.0), fmt(top / 2.0), fmt(top)])
}

/// Throughput over time (ok/s and errors/s) for every operation or one.
pub(super) fn throughput_chart(
    frame: &mut Frame,
    area: Rect,
    live: &Live,
    op: Option<usize>,
    theme: &Theme,
) {
    let mut ok = Vec::new();
    let mut err = Vec::new();
    let mut warm = Vec::new();
    for s in window(live, area.width.saturating_sub(10)) {
        let secs = s.len().as_secs_f64().max(1e-3);
        let t = s.end.as_secs_f64();
        let (o, e) = match op {
            Some(i) => s.ops.get(i).map_or((0, 0), |x| (x.ok, x.errors)),
            None => (s.ok, s.errors),
        };
        match s.phase {
            Phase::Warmup if op.is_none() => warm.push((t, s.warmup_ended as f64 / secs)),
            Phase::Warmup | Phase::Drain => {}
            Phase::Measured => {
                ok.push((t, o as f64 / secs));
                err.push((t, e as f64 / secs));
            }
        }
    }
    // While running, the last measured interval; at the end, the run's own figure (the
    // summary's: measured ok over the measured window).
    let shown_ok = match (live.finished, op) {
        (true, Some(i)) => live.ops.get(i).map_or(0.0, |o| o.throughput),
        (true, None) => live.totals.throughput,
        (false, _) => ok.last().map_or(0.0, |p| p.1),
    };
    let errors = match op {
        Some(i) => live
            .ops
            .get(i)
            .map_or_else(Errors::default, |o| Errors::of(&[o], &[])),
        None => live.error_rates,
    };
    let mut title = vec![
        Span::raw(if live.finished { " mean " } else { " " }),
        Span::styled(format!("{} ok/s", rate(shown_ok)), theme.ok()),
        Span::raw(if live.finished { " · " } else { " now · " }),
    ];
    title.extend(error_spans(&errors, area.width > 70, theme));
    if !warm.is_empty() && area.width > 50 {
        title.push(Span::styled(" · warm-up", theme.dim()));
    }
    title.push(Span::raw(" "));
    if area.width > 60 {
        title.insert(0, Span::raw(" throughput ·"));
    }
    let title = Line::from(title);
    let block = Block::bordered().title(title);
    if ok.is_empty() && warm.is_empty() {
        return placeholder(frame, area, live, block, theme);
    }
    let max = ok
        .iter()
        .chain(&err)
        .chain(&warm)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let (x0, x1) = time_bounds(live, area.width);
    let (top, labels) = linear_axis(max, rate);
    let mut sets = vec![
        Dataset::default()
            .name("ok/s")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.ok())
            .data(&ok),
    ];
    if err.iter().any(|p| p.1 > 0.0) {
        sets.push(
            Dataset::default()
                .name("errors/s")
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.bad())
                .data(&err),
        );
    }
    if !warm.is_empty() {
        sets.push(
            Dataset::default()
                .name("warm-up")
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.dim())
                .data(&warm),
        );
    }
    let chart = Chart::new(sets)
        .block(block)
        .x_axis(time_axis(x0, x1, theme))
        .y_axis(
            Axis::default()
                .bounds([0.0, top])
                .labels(labels)
                .style(theme.dim()),
        )
        .legend_position(None);
    frame.render_widget(chart, area);
}

/// `errors 1.2 %` and, when `parts`, the kinds that occurred (`· tool 1.0 % · protocol 0.2 %`).
fn error_spans(e: &Errors, parts: bool, theme: &Theme) -> Vec<Span<'static>> {
    let style = if e.failed > 0 {
        theme.bad()
    } else {
        Style::new()
    };
    let mut out = vec![Span::styled(format!("errors {}", percent(e.rate)), style)];
    if parts {
        for (name, r) in e.parts() {
            out.push(Span::styled(
                format!(" · {name} {}", percent(r)),
                theme.dim(),
            ));
        }
    }
    out
}

/// The time axis every chart of a view shares: the intervals of the window (warm-up and the
/// measured window; the drain is not charted) that fit a chart `width` cells wide.
fn time_bounds(live: &Live, width: u16) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for s in window(live, width.saturating_sub(10)).filter(|s| s.phase != Phase::Drain) {
        lo = lo.min(s.end.as_secs_f64());
        hi = hi.max(s.end.as_secs_f64());
    }
    if lo > hi {
        (0.0, 1.0)
    } else if hi - lo < 1.0 {
        (lo - 1.0, hi)
    } else {
        (lo, hi)
    }
}

/// The x axis of a chart over time: the window's bounds, labelled with the clock.
fn time_axis<'a>(x0: f64, x1: f64, theme: &Theme) -> Axis<'a> {
    let t = |s: f64| clock(std::time::Duration::from_secs_f64(s.max(0.0)));
    Axis::default()
        .bounds([x0, x1])
        .labels([t(x0), t(x1)])
        .style(theme.dim())
}

/// Log-scale y axis for latencies in µs: bounds in log10, whole decades, one label each (at
/// most five).
pub(super) fn log_axis(lo_us: f64, hi_us: f64) -> ([f64; 2], Vec<String>) {
    let lo = lo_us.max(1.0).log10().floor();
    let hi = hi_us.max(lo_us).max(1.0).log10().ceil().max(lo + 1.0);
    let decades = (hi - lo) as usize;
    let n = decades.min(4);
    let labels = (0..=n)
        .map(|i| latency_us(10f64.powf(lo + (hi - lo) * i as f64 / n as f64)))
        .collect();
    ([lo, hi], labels)
}

const PERCENTILES: [&str; 5] = ["p50", "p90", "p95", "p99", "p99.9"];

/// Latency over time (p50, p90, p95, p99, p99.9 of ok responses per interval), log scale.
pub(super) fn latency_chart(
    frame: &mut Frame,
    area: Rect,
    live: &Live,
    op: Option<usize>,
    theme: &Theme,
) {
    let mut series: [Vec<(f64, f64)>; 5] = Default::default();
    for s in window(live, area.width.saturating_sub(10)) {
        if s.phase != Phase::Measured {
            continue;
        }
        let v = match op {
            Some(i) => match s.ops.get(i) {
                Some(o) if o.ok > 0 => [o.p50_us, o.p90_us, o.p95_us, o.p99_us, o.p999_us],
                _ => continue,
            },
            None if s.ok > 0 => [s.p50_us, s.p90_us, s.p95_us, s.p99_us, s.p999_us],
            None => continue,
        };
        let t = s.end.as_secs_f64();
        for (k, us) in v.iter().enumerate() {
            series[k].push((t, (*us).max(1) as f64));
        }
    }
    let last = |k: usize| series[k].last().map_or(0.0, |p| p.1);
    // The title is the legend: each percentile in its series' colour, with its last value.
    let inner = area.width.saturating_sub(4) as usize;
    let text = |k: usize| format!("{} {} ", PERCENTILES[k], latency_us(last(k)));
    // p50 and the tail first when room is short; shown in percentile order.
    let mut shown = [false; 5];
    let mut used = 1;
    for k in [0, 3, 4, 2, 1] {
        let n = text(k).chars().count();
        if used + n <= inner {
            used += n;
            shown[k] = true;
        }
    }
    let mut title = vec![Span::raw(" ")];
    for k in (0..5).filter(|k| shown[*k]) {
        title.push(Span::styled(text(k), theme.series(k)));
    }
    if used + 8 <= inner {
        title.insert(0, Span::raw(" latency"));
    }
    let title = Line::from(title);
    let block = Block::bordered().title(title);
    if series[0].is_empty() {
        return placeholder(frame, area, live, block, theme);
    }
    let lo = series[0].iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let hi = series[4].iter().map(|p| p.1).fold(0.0, f64::max);
    let (bounds, labels) = log_axis(lo, hi);
    let logged: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| s.iter().map(|(t, v)| (*t, v.log10())).collect())
        .collect();
    let (x0, x1) = time_bounds(live, area.width);
    let sets = logged
        .iter()
        .enumerate()
        .map(|(k, data)| {
            Dataset::default()
                .name(PERCENTILES[k])
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.series(k))
                .data(data)
        })
        .collect();
    let chart = Chart::new(sets)
        .block(block)
        .x_axis(time_axis(x0, x1, theme))
        .y_axis(
            Axis::default()
                .bounds(bounds)
                .labels(labels)
                .style(theme.dim()),
        )
        .legend_position(None);
    frame.render_widget(chart, area);
}
