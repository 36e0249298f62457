//! The plots of a finished run's report, as inline SVG: the latency spectrum per operation;
//! throughput, latency and outcomes over time; the target's processes; open-loop lateness.

use super::read_back::RunFiles;
use super::svg::{Axis, Chart, Series, Unit, line_chart};

/// The plots, each an `<svg>` element: latency spectrum per operation, throughput, latency
/// and outcomes over time, the target's processes (when watched), open-loop lateness.
pub(crate) fn plots(run: &RunFiles) -> Vec<String> {
    let m = Measured::of(run);
    let mut charts = vec![spectrum(run), throughput(&m), latency(&m), outcomes(&m)];
    if !run.summary.target_processes.is_empty() {
        charts.extend(target_processes(&m));
    }
    if run.summary.load.model == "open" {
        charts.push(open_loop(&m));
    }
    charts.extend(shards(run));
    charts.iter().map(line_chart).collect()
}

/// Merged shards: each shard's ok/s and p99 per interval, read from its own directory when it
/// is still there (its time line shifted by how late it started).
fn shards(run: &RunFiles) -> Vec<Chart> {
    let mut ok = Vec::new();
    let mut p99 = Vec::new();
    for (i, h) in run.summary.shards.iter().enumerate() {
        let dir = std::path::Path::new(&h.dir);
        let Ok(shard) = RunFiles::read(dir).or_else(|_| RunFiles::read(&run.dir.join(dir))) else {
            continue;
        };
        let name = match &h.shard {
            Some(s) => format!("shard {}/{}", s.index + 1, s.count),
            None => format!("run {}", i + 1),
        };
        let late = h.late_seconds.unwrap_or(0.0);
        let m = Measured::of(&shard);
        let shift = |v: Vec<(f64, f64)>| v.into_iter().map(|(t, y)| (t + late, y)).collect();
        ok.push(series(&name, shift(m.over_time("ok_per_s"))));
        p99.push(series(&name, shift(m.positive("p99_ms"))));
    }
    if ok.is_empty() {
        return Vec::new();
    }
    vec![
        over_time(
            "Each merged shard's throughput per interval: ok responses per second",
            Axis::linear("rate", Unit::Of("/s")),
            ok,
        ),
        over_time(
            "Each merged shard's p99 of ok responses per interval (log scale)",
            Axis::log("latency", Unit::Latency),
            p99,
        ),
    ]
}

/// Spectrum: x in "nines" (p90 = 1, p99 = 2…), the maximum half a step past p99.999.
pub(crate) fn nines(p: f64) -> f64 {
    if p >= 100.0 {
        5.5
    } else {
        -(1.0 - p / 100.0).log10()
    }
}

/// The latency spectrum of ok responses, one line per operation.
pub(crate) fn spectrum_axis() -> Axis {
    Axis {
        ticks: Some(vec![
            (nines(50.0), "p50".into()),
            (1.0, "p90".into()),
            (2.0, "p99".into()),
            (3.0, "p99.9".into()),
            (4.0, "p99.99".into()),
            (5.0, "p99.999".into()),
            (5.5, "max".into()),
        ]),
        ..Axis::linear("percentile", Unit::Of(""))
    }
}

/// A spectrum's points (percentile, µs) as a line of a spectrum chart.
pub(crate) fn spectrum_series(name: &str, pts: &[(f64, u64)]) -> Series {
    let points = pts
        .iter()
        .map(|(p, us)| (nines(*p), (*us).max(1) as f64 / 1000.0))
        .collect();
    Series::new(name, points)
}

/// The latency spectrum of ok responses, one line per operation.
fn spectrum(run: &RunFiles) -> Chart {
    Chart {
        title: "Latency spectrum of ok responses, per operation (log scale)".into(),
        x: spectrum_axis(),
        y: Axis::log("latency", Unit::Latency),
        series: run
            .spectra
            .iter()
            .map(|(op, pts)| spectrum_series(op, pts))
            .collect(),
        marks: Vec::new(),
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

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series::new(name, points)
}

/// A chart over the run's measured time, linear from zero.
fn over_time(title: &str, y: Axis, series: Vec<Series>) -> Chart {
    Chart {
        title: title.into(),
        x: Axis::linear("time since start", Unit::Of("s")),
        y,
        series,
        marks: Vec::new(),
    }
}

/// Ok responses and errors per second.
fn throughput(m: &Measured) -> Chart {
    over_time(
        "Throughput per interval: ok responses and errors per second",
        Axis::linear("rate", Unit::Of("/s")),
        vec![
            series("ok/s", m.over_time("ok_per_s")),
            series("errors/s", m.per_second("errors")),
        ],
    )
}

/// p50, p99 and p99.9 of ok responses per interval, on a log scale.
fn latency(m: &Measured) -> Chart {
    over_time(
        "Latency of ok responses per interval: p50, p99 and p99.9 (log scale)",
        Axis::log("latency", Unit::Latency),
        vec![
            series("p50", m.positive("p50_ms")),
            series("p99", m.positive("p99_ms")),
            series("p99.9", m.positive("p999_ms")),
        ],
    )
}

/// Requests ended per interval: ok, errors, dropped.
fn outcomes(m: &Measured) -> Chart {
    over_time(
        "Requests ended per interval: ok, errors and dropped",
        Axis::linear("requests", Unit::Of("")),
        vec![
            series("ok", m.over_time("ok")),
            series("errors", m.over_time("errors")),
            series("dropped", m.over_time("dropped")),
        ],
    )
}

/// The target's CPU time beside the generator's, and the target's resident memory.
fn target_processes(m: &Measured) -> [Chart; 2] {
    [
        over_time(
            "CPU time per interval: the target's processes and the generator",
            Axis::linear("CPU time", Unit::Of("ms")),
            vec![
                series("target", m.over_time("target_cpu_ms")),
                series("generator", m.over_time("cpu_ms")),
            ],
        ),
        over_time(
            "Resident memory of the target's processes",
            Axis::linear("memory", Unit::Of("MB")),
            vec![series("target", m.over_time("target_rss_mb"))],
        ),
    ]
}

/// Open loop: how late the generator released its arrivals.
fn open_loop(m: &Measured) -> Chart {
    over_time(
        "Open loop: the generator's release lateness p99 per interval",
        Axis::linear("lateness", Unit::Latency),
        vec![series("lateness p99", m.over_time("late_p99_ms"))],
    )
}
