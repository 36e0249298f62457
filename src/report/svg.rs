//! Line charts as SVG written directly: axes with readable ticks (linear, or log for
//! latencies), one polyline per series, a legend. No JavaScript, no fonts to fetch.

use std::fmt::Write;

use super::escape::esc;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart to draw.
#[derive(Debug, Clone)]
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Log scale on y (values must be > 0).
    pub log_y: bool,
    /// Fixed x ticks (position, label); otherwise five evenly spaced.
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// Formats a y value for its tick label.
    pub y_format: fn(f64) -> String,
    pub series: Vec<Series>,
}

/// Colours that read on white, one per series.
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const W: f64 = 720.0;
const H: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 45.0;

/// Width and height of the plotting area.
const PW: f64 = W - LEFT - RIGHT;
const PH: f64 = H - TOP - BOTTOM;

/// The chart as an `<svg>` element; a note instead when there is nothing to draw.
pub fn line_chart(c: &Chart) -> String {
    if c.series.iter().all(|s| s.points.is_empty()) {
        return format!(
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} 60\" width=\"{W}\" height=\"60\"><text x=\"10\" y=\"35\">{}: nothing measured</text></svg>",
            esc(c.title)
        );
    }
    let f = Frame::of(c);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = write!(
        out,
        "<text x=\"{LEFT}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>",
        esc(c.title)
    );
    let _ = write!(
        out,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{PW}\" height=\"{PH}\" fill=\"none\" stroke=\"#999\"/>"
    );
    f.y_ticks(&mut out, c);
    f.x_ticks(&mut out, c);
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>",
        LEFT + PW / 2.0,
        H - 8.0,
        esc(c.x_label),
        TOP + PH / 2.0,
        TOP + PH / 2.0,
        esc(c.y_label)
    );
    for (i, s) in c.series.iter().enumerate() {
        f.series(&mut out, i, s);
    }
    out.push_str("</svg>");
    out
}

/// The ranges the plotting area shows (y as log10 on a log scale), and where a point lands.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    log_y: bool,
}

impl Frame {
    /// The ranges of a chart with something to draw: its points and fixed x ticks; y from 0
    /// with a tenth of headroom (linear) or whole decades (log).
    fn of(c: &Chart) -> Frame {
        let mut f = Frame {
            x0: f64::MAX,
            x1: f64::MIN,
            y0: f64::MAX,
            y1: f64::MIN,
            log_y: c.log_y,
        };
        for p in c.series.iter().flat_map(|s| s.points.iter().copied()) {
            f.x0 = f.x0.min(p.0);
            f.x1 = f.x1.max(p.0);
            f.y0 = f.y0.min(f.y(p));
            f.y1 = f.y1.max(f.y(p));
        }
        if let Some(t) = &c.x_ticks {
            for (x, _) in t {
                f.x0 = f.x0.min(*x);
                f.x1 = f.x1.max(*x);
            }
        }
        if c.log_y {
            f.y0 = f.y0.floor();
            f.y1 = f.y1.ceil().max(f.y0 + 1.0);
        } else {
            f.y0 = 0.0f64.min(f.y0);
            f.y1 = if f.y1 <= f.y0 { f.y0 + 1.0 } else { f.y1 * 1.1 };
        }
        if f.x1 <= f.x0 {
            f.x1 = f.x0 + 1.0;
        }
        f
    }

    /// A point's y on the chart's scale.
    fn y(&self, p: (f64, f64)) -> f64 {
        if self.log_y {
            p.1.max(1e-9).log10()
        } else {
            p.1
        }
    }

    /// Where x lands, in pixels.
    fn sx(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * PW
    }

    /// Where y (on the chart's scale) lands, in pixels.
    fn sy(&self, y: f64) -> f64 {
        TOP + PH - (y - self.y0) / (self.y1 - self.y0) * PH
    }

    /// Horizontal grid lines with their labels: every decade (log), or five steps.
    fn y_ticks(&self, out: &mut String, c: &Chart) {
        let (y0, y1) = (self.y0, self.y1);
        let yticks: Vec<f64> = if c.log_y {
            (y0 as i64..=y1 as i64).map(|e| e as f64).collect()
        } else {
            (0..=4).map(|i| y0 + (y1 - y0) * i as f64 / 4.0).collect()
        };
        for y in yticks {
            let py = self.sy(y);
            let v = if c.log_y { 10f64.powf(y) } else { y };
            let _ = write!(
                out,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LEFT + PW,
                LEFT - 6.0,
                py + 4.0,
                esc(&(c.y_format)(v))
            );
        }
    }

    /// Vertical grid lines with their labels: the chart's fixed ticks, or five evenly spaced.
    fn x_ticks(&self, out: &mut String, c: &Chart) {
        let (x0, x1) = (self.x0, self.x1);
        let decimals = if x1 - x0 < 10.0 { 1 } else { 0 };
        let xticks = c.x_ticks.clone().unwrap_or_else(|| {
            (0..=4)
                .map(|i| {
                    let x = x0 + (x1 - x0) * i as f64 / 4.0;
                    (x, format!("{x:.decimals$}"))
                })
                .collect()
        });
        for (x, label) in xticks {
            let px = self.sx(x);
            let _ = write!(
                out,
                "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                TOP + PH,
                TOP + PH + 15.0,
                esc(&label)
            );
        }
    }

    /// The `i`-th series: its line (a dot for a single point) and its legend entry.
    fn series(&self, out: &mut String, i: usize, s: &Series) {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", self.sx(p.0), self.sy(self.y(*p))))
            .collect();
        if path.len() == 1 {
            let _ = write!(
                out,
                "<circle cx=\"{}\" r=\"3\" fill=\"{color}\" cy=\"{}\"/>",
                path[0].split(',').next().unwrap_or("0"),
                path[0].split(',').nth(1).unwrap_or("0")
            );
        } else {
            let _ = write!(
                out,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\" points=\"{}\"/>",
                path.join(" ")
            );
        }
        let ly = TOP + 12.0 + i as f64 * 16.0;
        let lx = LEFT + PW + 12.0;
        let _ = write!(
            out,
            "<line x1=\"{lx}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{}</text>",
            lx + 16.0,
            lx + 22.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
}
