//! Charts as SVG written directly (no JavaScript, no fonts to fetch): line charts with error
//! bars and marked positions, and stacked horizontal bars. Axes take nice ticks (1-2-5 steps,
//! linear or log) and carry their unit; colours are Okabe–Ito's colour-blind-safe six, solid
//! then dashed, so twelve series stay apart; every line and point has a hover title with its
//! exact value. Colours of text and grid come from the page (`currentColor`, CSS classes), so
//! a dark page keeps them readable. The chart scales to its box (viewBox).

use std::fmt::Write;

use super::escape::esc;

/// One line of a chart.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Error bars: the low and high value at each point (empty: none).
    pub err: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            err: Vec::new(),
        }
    }
}

/// What an axis' values are, for its label and tick labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// Latency given in ms, shown in µs, ms or s, whichever reads best for the range.
    Latency,
    /// A plain quantity with this unit after the axis label (`""`: none), e.g. `"s"`, `"/s"`.
    Of(&'static str),
}

/// One axis.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: &'static str,
    pub unit: Unit,
    /// Log scale (values must be > 0).
    pub log: bool,
    /// Fixed ticks (position, label) instead of nice ones.
    pub ticks: Option<Vec<(f64, String)>>,
}

impl Axis {
    pub fn linear(label: &'static str, unit: Unit) -> Axis {
        Axis {
            label,
            unit,
            log: false,
            ticks: None,
        }
    }

    pub fn log(label: &'static str, unit: Unit) -> Axis {
        Axis {
            log: true,
            ..Axis::linear(label, unit)
        }
    }
}

/// A line chart to draw.
#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Positions on x to mark with a vertical line and a label (a knee, a limit).
    pub marks: Vec<(f64, String)>,
}

/// Okabe & Ito's colour-blind-safe palette (without black and yellow, which vanish on one of
/// the two backgrounds); series 7–12 repeat it dashed.
const COLORS: [&str; 6] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
];

/// The `i`-th series' stroke: its colour and, from the seventh on, a dash pattern.
pub fn style(i: usize) -> (&'static str, &'static str) {
    let dash = if (i / COLORS.len()) % 2 == 1 {
        " stroke-dasharray=\"6 3\""
    } else {
        ""
    };
    (COLORS[i % COLORS.len()], dash)
}

const W: f64 = 800.0;
const H: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 46.0;
const PW: f64 = W - LEFT - RIGHT;
const PH: f64 = H - TOP - BOTTOM;

/// Points with hover titles of their own, per series, at most (beyond, only the line's).
const TITLED_POINTS: usize = 600;

/// The opening `<svg>` of a chart `h` high, with its title (smaller when long, so it fits
/// the width); `aria-label` is read by screen readers.
fn open(out: &mut String, h: f64, title: &str) {
    let size = (15.0 * 84.0 / title.chars().count().max(1) as f64).clamp(10.5, 15.0);
    let _ = write!(
        out,
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {h}\" role=\"img\" aria-label=\"{t}\" font-family=\"system-ui,sans-serif\" font-size=\"13\"><title>{t}</title><text class=\"title\" x=\"{LEFT}\" y=\"20\" font-size=\"{size:.1}\" font-weight=\"bold\">{t}</text>",
        t = esc(title)
    );
}

/// The chart as an `<svg>` element; a note instead when there is nothing to draw.
pub fn line_chart(c: &Chart) -> String {
    let mut out = String::new();
    if c.series.iter().all(|s| s.points.is_empty()) {
        open(&mut out, 60.0, &c.title);
        out.push_str("<text x=\"64\" y=\"46\">nothing measured</text></svg>");
        return out;
    }
    let f = Frame::of(c);
    open(&mut out, H, &c.title);
    let _ = write!(
        out,
        "<rect class=\"frame\" x=\"{LEFT}\" y=\"{TOP}\" width=\"{PW}\" height=\"{PH}\" fill=\"none\"/>"
    );
    f.ticks(&mut out, c);
    for (x, label) in &c.marks {
        let px = f.x.px(*x, LEFT, PW);
        let _ = write!(
            out,
            "<line class=\"mark\" x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke-dasharray=\"2 3\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"11\">{}</text>",
            TOP + PH,
            px + 3.0,
            TOP + 12.0,
            esc(label)
        );
    }
    for (i, s) in c.series.iter().enumerate() {
        f.series(&mut out, i, s, c);
        legend(&mut out, i, &s.name);
    }
    out.push_str("</svg>");
    out
}

/// The `i`-th legend entry, right of the plotting area (never over the data).
fn legend(out: &mut String, i: usize, name: &str) {
    let (color, dash) = style(i);
    let ly = TOP + 8.0 + i as f64 * 17.0;
    let lx = LEFT + PW + 14.0;
    let _ = write!(
        out,
        "<line x1=\"{lx}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"3\"{dash}/><text class=\"legend\" font-size=\"12\" x=\"{}\" y=\"{}\">{}<title>{}</title></text>",
        lx + 22.0,
        lx + 28.0,
        ly + 4.0,
        esc(&shorten(name, 24)),
        esc(name)
    );
}

/// Tick labels computed as nice numbers are `tick`; an axis' own labels (`p99`) `tick fixed`.
fn tick_class(a: &Axis) -> &'static str {
    if a.ticks.is_some() {
        "tick fixed"
    } else {
        "tick"
    }
}

/// A legend or row label cut to `n` characters (the hover title keeps the whole name).
fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// One axis' range, scale and ticks.
struct Scale {
    /// The range shown, in the axis' scale (log10 of the value on a log axis).
    lo: f64,
    hi: f64,
    log: bool,
    /// Ticks: the value (in data units) and its label.
    ticks: Vec<(f64, String)>,
    /// The axis label with its unit, e.g. `latency (µs)`.
    label: String,
    /// Data value → displayed value (ms → µs, say), for hover titles.
    show: f64,
    unit: &'static str,
}

impl Scale {
    /// A scale over the data values `v` (and fixed ticks, if any).
    fn of(a: &Axis, v: impl Iterator<Item = f64>, from_zero: bool) -> Scale {
        let (mut min, mut max) = (f64::MAX, f64::MIN);
        for x in v.filter(|x| x.is_finite() && (!a.log || *x > 0.0)) {
            min = min.min(x);
            max = max.max(x);
        }
        if let Some(t) = &a.ticks {
            for (x, _) in t {
                min = min.min(*x);
                max = max.max(*x);
            }
        }
        if min > max {
            (min, max) = (1.0, 1.0);
        }
        let (show, unit) = display_unit(a.unit, max);
        let label = if unit.is_empty() {
            a.label.to_string()
        } else {
            format!("{} ({unit})", a.label)
        };
        let mut s = Scale {
            lo: 0.0,
            hi: 1.0,
            log: a.log,
            ticks: Vec::new(),
            label,
            show,
            unit,
        };
        if let Some(t) = &a.ticks {
            s.set_range(min, max);
            s.ticks = t.clone();
        } else if a.log {
            let (lo, hi, ticks) = log_ticks(min * show, max * show);
            s.set_range(lo / show, hi / show);
            s.ticks = ticks.into_iter().map(|t| (t / show, number(t))).collect();
        } else {
            let lo = if from_zero { min.min(0.0) } else { min };
            let (lo, hi, step) = nice_range(lo * show, max * show, 5);
            s.set_range(lo / show, hi / show);
            s.ticks = steps(lo, hi, step)
                .map(|t| (t / show, number_at(t, step)))
                .collect();
        }
        s
    }

    fn set_range(&mut self, lo: f64, hi: f64) {
        let f = |x: f64| if self.log { x.max(1e-12).log10() } else { x };
        (self.lo, self.hi) = (f(lo), f(hi));
        if self.hi <= self.lo {
            self.hi = self.lo + 1.0;
        }
    }

    /// Where a data value lands, in pixels from `start` over `len`.
    fn px(&self, v: f64, start: f64, len: f64) -> f64 {
        let v = if self.log { v.max(1e-12).log10() } else { v };
        start + (v - self.lo) / (self.hi - self.lo) * len
    }

    /// A data value as its hover text, in the axis' unit.
    fn text(&self, v: f64) -> String {
        let d = v * self.show;
        let t = if d.abs() >= 100.0 || d == d.trunc() {
            format!("{d:.0}")
        } else if d.abs() >= 1.0 {
            format!("{d:.2}")
        } else {
            format!("{d:.4}")
        };
        if self.unit.is_empty() {
            t
        } else {
            format!("{t} {}", self.unit)
        }
    }
}

/// The factor and unit a latency axis shows its ms values in; other units as given.
fn display_unit(u: Unit, max: f64) -> (f64, &'static str) {
    match u {
        Unit::Latency if max < 1.0 => (1000.0, "µs"),
        Unit::Latency if max >= 10_000.0 => (0.001, "s"),
        Unit::Latency => (1.0, "ms"),
        Unit::Of(unit) => (1.0, unit),
    }
}

/// A range from `lo` to `hi` widened to whole nice steps (1, 2 or 5 × 10ⁿ), about `n` of them.
pub fn nice_range(lo: f64, hi: f64, n: usize) -> (f64, f64, f64) {
    let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * 0.999)
        .unwrap_or(10.0 * mag);
    let lo = (lo / step).floor() * step;
    let mut hi = (hi / step).ceil() * step;
    if hi <= lo {
        hi = lo + step;
    }
    (lo, hi, step)
}

/// The ticks from `lo` to `hi` every `step` (exact multiples, no drift).
fn steps(lo: f64, hi: f64, step: f64) -> impl Iterator<Item = f64> {
    let first = (lo / step).round() as i64;
    let last = (hi / step).round() as i64;
    (first..=last).map(move |k| k as f64 * step)
}

/// A log range from `min` to `max` (> 0) widened to 1-2-5 values, with its ticks: 1, 2 and 5
/// of each decade over up to two decades, whole decades beyond.
pub fn log_ticks(min: f64, max: f64) -> (f64, f64, Vec<f64>) {
    let below = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        [5.0, 2.0, 1.0]
            .iter()
            .map(|m| m * d)
            .find(|t| *t <= v * 1.0001)
            .unwrap_or(d)
    };
    let above = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * d)
            .find(|t| *t >= v * 0.9999)
            .unwrap_or(10.0 * d)
    };
    let (lo, mut hi) = (below(min.max(1e-12)), above(max.max(1e-12)));
    if hi <= lo {
        hi = above(lo * 1.5);
    }
    let decades = (hi / lo).log10();
    let mults: &[f64] = if decades <= 2.5 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let (e0, e1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let ticks = (e0..=e1)
        .flat_map(|e| mults.iter().map(move |m| m * 10f64.powi(e)))
        .filter(|t| *t >= lo * 0.9999 && *t <= hi * 1.0001)
        .collect();
    (lo, hi, ticks)
}

/// A tick label: no more decimals than the value needs (`0.05`, `2`, `500`), thousands as `k`
/// from 10 000 (`15k`).
pub fn number(v: f64) -> String {
    let s = if v.abs() >= 10_000.0 && (v / 1000.0).fract() == 0.0 {
        format!("{}k", v / 1000.0)
    } else {
        let t = format!("{v:.6}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if s == "-0" { "0".into() } else { s }
}

/// A tick label of a linear axis stepping by `step` (its decimals follow the step).
fn number_at(v: f64, step: f64) -> String {
    if step >= 1000.0 && (step / 1000.0).fract() == 0.0 && v != 0.0 {
        return format!("{}k", v / 1000.0);
    }
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    number(format!("{v:.decimals$}").parse().unwrap_or(v))
}

/// A line chart's two scales.
struct Frame {
    x: Scale,
    y: Scale,
}

impl Frame {
    fn of(c: &Chart) -> Frame {
        let pts = || c.series.iter().flat_map(|s| s.points.iter().copied());
        let errs = c.series.iter().flat_map(|s| s.err.iter());
        let ys = pts()
            .map(|p| p.1)
            .chain(errs.flat_map(|e| [e.0, e.1]))
            .collect::<Vec<_>>();
        let xs = pts().map(|p| p.0).chain(c.marks.iter().map(|m| m.0));
        Frame {
            x: Scale::of(&c.x, xs, false),
            y: Scale::of(&c.y, ys.into_iter(), true),
        }
    }

    fn sx(&self, v: f64) -> f64 {
        self.x.px(v, LEFT, PW)
    }

    fn sy(&self, v: f64) -> f64 {
        TOP + PH - self.y.px(v, 0.0, PH)
    }

    /// Grid lines with tick labels on both axes, and the axis labels.
    fn ticks(&self, out: &mut String, c: &Chart) {
        for (v, label) in &self.y.ticks {
            let py = self.sy(*v);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\"/><text class=\"{}\" data-axis=\"y\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LEFT + PW,
                tick_class(&c.y),
                LEFT - 6.0,
                py + 4.0,
                esc(label)
            );
        }
        for (v, label) in &self.x.ticks {
            let px = self.sx(*v);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\"/><text class=\"{}\" data-axis=\"x\" x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                TOP + PH,
                tick_class(&c.x),
                TOP + PH + 16.0,
                esc(label)
            );
        }
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>",
            LEFT + PW / 2.0,
            H - 8.0,
            esc(&self.x.label),
            TOP + PH / 2.0,
            TOP + PH / 2.0,
            esc(&self.y.label)
        );
    }

    /// The `i`-th series: its line (a dot for a single point), error bars, hover titles.
    fn series(&self, out: &mut String, i: usize, s: &Series, c: &Chart) {
        let (color, dash) = style(i);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| !self.y.log || p.1 > 0.0)
            .map(|p| (self.sx(p.0), self.sy(p.1)))
            .collect();
        let _ = write!(out, "<g class=\"series\"><title>{}</title>", esc(&s.name));
        if pts.len() > 1 {
            out.push_str("<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"");
            out.push_str(color);
            out.push('"');
            out.push_str(dash);
            out.push_str(" points=\"");
            for (x, y) in &pts {
                let _ = write!(out, "{x:.1},{y:.1} ");
            }
            out.push_str("\"/>");
        }
        for (e, p) in s.err.iter().zip(&s.points) {
            let (x, lo, hi) = (self.sx(p.0), self.sy(e.0), self.sy(e.1));
            let _ = write!(
                out,
                "<path stroke=\"{color}\" stroke-width=\"1.3\" d=\"M{x:.1},{lo:.1}V{hi:.1}M{:.1},{lo:.1}h8M{:.1},{hi:.1}h8\"/>",
                x - 4.0,
                x - 4.0
            );
        }
        let titled = s.points.len() <= TITLED_POINTS;
        for (k, p) in s.points.iter().enumerate() {
            if self.y.log && p.1 <= 0.0 || !(titled || s.points.len() == 1) {
                continue;
            }
            let (px, py) = (self.sx(p.0), self.sy(p.1));
            let r = if s.points.len() == 1 || !s.err.is_empty() {
                3.5
            } else {
                2.5
            };
            let fill = if s.points.len() == 1 || !s.err.is_empty() {
                color
            } else {
                "transparent"
            };
            let x_text = match &c.x.ticks {
                Some(_) => String::new(),
                None => format!(" at {} {}", c.x.label, self.x.text(p.0)),
            };
            let ci = s
                .err
                .get(k)
                .map(|e| format!(" (95 % CI {} … {})", self.y.text(e.0), self.y.text(e.1)))
                .unwrap_or_default();
            let _ = write!(
                out,
                "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"{r}\" fill=\"{fill}\"><title>{}: {}{ci}{x_text}</title></circle>",
                esc(&s.name),
                self.y.text(p.1)
            );
        }
        out.push_str("</g>");
    }
}

/// Horizontal stacked bars: one row per category, one segment per part.
#[derive(Debug, Clone)]
pub struct Bars {
    pub title: String,
    pub axis: Axis,
    /// The parts' names (legend), in stacking order.
    pub parts: Vec<String>,
    /// Each row: its label and the parts' values (a missing part is 0).
    pub rows: Vec<(String, Vec<f64>)>,
}

/// The bars as an `<svg>` element; a note instead when there is nothing to draw.
pub fn bar_chart(b: &Bars) -> String {
    let mut out = String::new();
    let totals: Vec<f64> = b.rows.iter().map(|r| r.1.iter().sum()).collect();
    if b.rows.is_empty() {
        open(&mut out, 60.0, &b.title);
        out.push_str("<text x=\"64\" y=\"46\">nothing measured</text></svg>");
        return out;
    }
    let (row_h, left) = (28.0, 170.0);
    let h = TOP + b.rows.len() as f64 * row_h + BOTTOM;
    let pw = W - left - RIGHT;
    let x = Scale::of(&b.axis, totals.iter().copied(), true);
    open(&mut out, h, &b.title);
    let bottom = h - BOTTOM;
    for (v, label) in &x.ticks {
        let px = x.px(*v, left, pw);
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{bottom}\"/><text class=\"tick\" data-axis=\"x\" x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            bottom + 16.0,
            esc(label)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        left + pw / 2.0,
        h - 8.0,
        esc(&x.label)
    );
    for (r, (label, parts)) in b.rows.iter().enumerate() {
        let y = TOP + r as f64 * row_h + 4.0;
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}<title>{}</title></text>",
            left - 6.0,
            y + 13.0,
            esc(&shorten(label, 22)),
            esc(label)
        );
        let mut at = 0.0;
        for (k, v) in parts.iter().enumerate() {
            let (x0, x1) = (x.px(at, left, pw), x.px(at + v, left, pw));
            at += v;
            let name = b.parts.get(k).map(String::as_str).unwrap_or("");
            let _ = write!(
                out,
                "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{}\" fill=\"{}\"><title>{}: {} {}</title></rect>",
                (x1 - x0).max(0.0),
                row_h - 8.0,
                style(k).0,
                esc(label),
                esc(name),
                x.text(*v)
            );
        }
    }
    for (k, name) in b.parts.iter().enumerate() {
        legend(&mut out, k, name);
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_step_by_one_two_five() {
        assert_eq!(nice_range(0.0, 14_900.0, 5), (0.0, 15_000.0, 5_000.0));
        assert_eq!(nice_range(0.0, 6.8, 5), (0.0, 8.0, 2.0));
        assert_eq!(nice_range(3.0, 6.8, 5), (3.0, 7.0, 1.0));
        let s = Scale::of(
            &Axis::linear("rate", Unit::Of("/s")),
            [3730.0, 14_900.0].into_iter(),
            true,
        );
        let labels: Vec<&str> = s.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0", "5k", "10k", "15k"]);
        assert_eq!(s.label, "rate (/s)");
    }

    #[test]
    fn log_ticks_are_one_two_five_and_latency_picks_its_unit() {
        let (lo, hi, t) = log_ticks(0.043, 0.71);
        assert_eq!((lo, hi), (0.02, 1.0));
        assert_eq!(t, [0.02, 0.05, 0.1, 0.2, 0.5, 1.0]);
        let s = Scale::of(
            &Axis::log("latency", Unit::Latency),
            [0.043, 0.71].into_iter(),
            true,
        );
        let labels: Vec<&str> = s.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["20", "50", "100", "200", "500", "1000"]);
        assert_eq!(s.label, "latency (µs)");
        let (lo, hi, wide) = log_ticks(0.05, 4000.0);
        assert_eq!((lo, hi), (0.05, 5000.0));
        assert_eq!(wide, [0.1, 1.0, 10.0, 100.0, 1000.0]);
    }

    #[test]
    fn labels_carry_no_float_noise() {
        assert_eq!(number_at(0.30000000000000004, 0.1), "0.3");
        assert_eq!(number(0.05), "0.05");
        assert_eq!(number(20_000.0), "20k");
        assert_eq!(number(7459.0), "7459");
    }

    #[test]
    fn twelve_series_have_twelve_styles() {
        let styles: std::collections::HashSet<_> = (0..12).map(style).collect();
        assert_eq!(styles.len(), 12);
    }

    #[test]
    fn every_point_has_a_hover_title_and_error_bars_draw() {
        let mut s = Series::new("a <b>", vec![(1.0, 2.0), (2.0, 3.0)]);
        s.err = vec![(1.5, 2.5), (2.0, 4.0)];
        let svg = line_chart(&Chart {
            title: "t".into(),
            x: Axis::linear("level", Unit::Of("")),
            y: Axis::linear("added", Unit::Latency),
            series: vec![s],
            marks: vec![(1.5, "knee".into())],
        });
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(
            svg.contains("a &lt;b&gt;: 2 ms (95 % CI 1.50 ms … 2.50 ms)"),
            "{svg}"
        );
        assert!(svg.contains(">knee</text>"));
        assert_eq!(svg.matches("<path").count(), 2);
    }
}
