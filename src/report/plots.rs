//! The plots of a finished run's report, as inline SVG: the latency spectrum per operation;
//! throughput, latency and outcomes over time; the target's processes; open-loop lateness.

use super::read_back::RunFiles;
use super::svg::{Chart, Series, line_chart};
use super::text::ms;

/// A latency axis' tick label.
pub(crate) fn latency_label(ms_value: f64) -> String {
    ms(ms_value)
}

/// A rate or count axis' tick label (`12k` from ten thousand up).
pub(crate) fn rate_label(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

/// The plots, each an `<svg>` element: latency spectrum per operation, throughput, latency
/// and failures over time, the target's processes (when watched), open-loop lateness and drops.
pub(crate) fn plots(run: &RunFiles) -> Vec<String> {
    let m = Measured::of(run);
    let mut out = vec![
        line_chart(&spectrum(run)),
        line_chart(&throughput(&m)),
        line_chart(&latency(&m)),
        line_chart(&outcomes(&m)),
    ];
    if !run.summary.target_processes.is_empty() {
        out.push(line_chart(&target_processes(&m)));
    }
    if run.summary.load.model == "open" {
        out.push(line_chart(&open_loop(&m)));
    }
    out
}

/// Spectrum: x in "nines" (p90 = 1, p99 = 2…), the maximum half a step past p99.999.
fn nines(p: f64) -> f64 {
    if p >= 100.0 {
        5.5
    } else {
        -(1.0 - p / 100.0).log10()
    }
}

/// The latency spectrum of ok responses, one line per operation.
fn spectrum(run: &RunFiles) -> Chart<'static> {
    Chart {
        title: "Latency spectrum of ok responses, per operation (log scale)",
        x_label: "percentile",
        y_label: "latency",
        log_y: true,
        x_ticks: Some(vec![
            (0.0, "min".into()),
            (nines(50.0), "p50".into()),
            (1.0, "p90".into()),
            (2.0, "p99".into()),
            (3.0, "p99.9".into()),
            (4.0, "p99.99".into()),
            (5.0, "p99.999".into()),
            (5.5, "max".into()),
        ]),
        y_format: latency_label,
        series: run
            .spectra
            .iter()
            .map(|(op, pts)| Series {
                name: op.clone(),
                points: pts
                    .iter()
                    .map(|(p, us)| (nines(*p), (*us).max(1) as f64 / 1000.0))
                    .collect(),
            })
            .collect(),
    }
}

/// The time series' measured intervals: a column against the interval's end.
struct Measured<'a> {
    run: &'a RunFiles,
    /// Each interval's end, seconds since the start.
    t: &'a [f64],
    /// Whether each interval is in the measured window.
    measured: Vec<bool>,
}

impl<'a> Measured<'a> {
    /// The run's time series.
    fn of(run: &'a RunFiles) -> Self {
        Measured {
            run,
            t: run.column("t_end_s"),
            measured: run.phases.iter().map(|p| p == "measured").collect(),
        }
    }

    /// A column's values at the end of each measured interval.
    fn over_time(&self, col: &str) -> Vec<(f64, f64)> {
        self.t
            .iter()
            .zip(self.run.column(col))
            .zip(&self.measured)
            .filter(|(_, m)| **m)
            .map(|((x, y), _)| (*x, *y))
            .collect()
    }

    /// A counting column per second of each measured interval.
    fn per_second(&self, col: &str) -> Vec<(f64, f64)> {
        let starts = self.run.column("t_start_s");
        self.t
            .iter()
            .zip(starts)
            .zip(self.run.column(col))
            .zip(&self.measured)
            .filter(|(_, m)| **m)
            .map(|(((end, start), v), _)| (*end, v / (end - start).max(1e-3)))
            .collect()
    }

    /// A column's positive values over time (for a log scale).
    fn positive(&self, col: &str) -> Vec<(f64, f64)> {
        self.over_time(col)
            .into_iter()
            .filter(|p| p.1 > 0.0)
            .collect()
    }
}

/// A line of a chart.
fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.into(),
        points,
    }
}

/// A chart over the run's time, linear and labelled as rates or counts.
fn over_time(title: &'static str, y_label: &'static str, series: Vec<Series>) -> Chart<'static> {
    Chart {
        title,
        x_label: "seconds since start",
        y_label,
        log_y: false,
        x_ticks: None,
        y_format: rate_label,
        series,
    }
}

/// Ok responses and errors per second.
fn throughput(m: &Measured) -> Chart<'static> {
    over_time(
        "Throughput over time (measured intervals)",
        "per second",
        vec![
            series("ok/s", m.over_time("ok_per_s")),
            series("errors/s", m.per_second("errors")),
        ],
    )
}

/// p50, p99 and p99.9 of ok responses per interval, on a log scale.
fn latency(m: &Measured) -> Chart<'static> {
    Chart {
        title: "Latency over time: p50 and p99 of ok responses per interval (log scale)",
        x_label: "seconds since start",
        y_label: "latency",
        log_y: true,
        x_ticks: None,
        y_format: latency_label,
        series: vec![
            series("p50", m.positive("p50_ms")),
            series("p99", m.positive("p99_ms")),
            series("p99.9", m.positive("p999_ms")),
        ],
    }
}

/// Requests ended per interval: ok, errors, dropped.
fn outcomes(m: &Measured) -> Chart<'static> {
    over_time(
        "Outcomes over time: requests ended per interval",
        "requests",
        vec![
            series("ok", m.over_time("ok")),
            series("errors", m.over_time("errors")),
            series("dropped", m.over_time("dropped")),
        ],
    )
}

/// The target's CPU time and memory beside the generator's CPU time.
fn target_processes(m: &Measured) -> Chart<'static> {
    over_time(
        "The target's processes: CPU time per interval and resident memory",
        "CPU ms / memory MB",
        vec![
            series("target CPU ms", m.over_time("target_cpu_ms")),
            series("generator CPU ms", m.over_time("cpu_ms")),
            series("target memory MB", m.over_time("target_rss_mb")),
        ],
    )
}

/// Open loop: the generator's release lateness and the arrivals it dropped.
fn open_loop(m: &Measured) -> Chart<'static> {
    over_time(
        "Open loop: the generator's release lateness p99 and dropped arrivals",
        "lateness p99 (ms) / dropped",
        vec![
            series("lateness p99 ms", m.over_time("late_p99_ms")),
            series("dropped", m.over_time("dropped")),
        ],
    )
}
