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

/// The chart as an `<svg>` element; a note instead when there is nothing to draw.
pub fn line_chart(c: &Chart) -> String {
    let pts = || c.series.iter().flat_map(|s| s.points.iter().copied());
    let ys = |p: (f64, f64)| if c.log_y { p.1.max(1e-9).log10() } else { p.1 };
    if pts().next().is_none() {
        return format!(
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} 60\" width=\"{W}\" height=\"60\"><text x=\"10\" y=\"35\">{}: nothing measured</text></svg>",
            esc(c.title)
        );
    }
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for p in pts() {
        x0 = x0.min(p.0);
        x1 = x1.max(p.0);
        y0 = y0.min(ys(p));
        y1 = y1.max(ys(p));
    }
    if let Some(t) = &c.x_ticks {
        for (x, _) in t {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
        }
    }
    if c.log_y {
        y0 = y0.floor();
        y1 = y1.ceil().max(y0 + 1.0);
    } else {
        y0 = 0.0f64.min(y0);
        y1 = if y1 <= y0 { y0 + 1.0 } else { y1 * 1.1 };
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + ph - (y - y0) / (y1 - y0) * ph;
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
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>"
    );
    // y ticks: every decade (log), or five steps.
    let yticks: Vec<f64> = if c.log_y {
        (y0 as i64..=y1 as i64).map(|e| e as f64).collect()
    } else {
        (0..=4).map(|i| y0 + (y1 - y0) * i as f64 / 4.0).collect()
    };
    for y in yticks {
        let py = sy(y);
        let v = if c.log_y { 10f64.powf(y) } else { y };
        let _ = write!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 6.0,
            py + 4.0,
            esc(&(c.y_format)(v))
        );
    }
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
        let px = sx(x);
        let _ = write!(
            out,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            TOP + ph,
            TOP + ph + 15.0,
            esc(&label)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>",
        LEFT + pw / 2.0,
        H - 8.0,
        esc(c.x_label),
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        esc(c.y_label)
    );
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(ys(*p))))
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
        let lx = LEFT + pw + 12.0;
        let _ = write!(
            out,
            "<line x1=\"{lx}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{}</text>",
            lx + 16.0,
            lx + 22.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
    out.push_str("</svg>");
    out
}
