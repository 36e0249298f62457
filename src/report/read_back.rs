//! A finished run read back from its directory — `summary.json`, `timeseries.csv` and
//! `latency.hlog` — so its reports can be rendered again at any time (`mcpbench report DIR`),
//! and are rendered exactly that way at the end of a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use super::files;
use super::spectrum::points;
use super::summary::Summary;

/// Everything the reports show.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub dir: PathBuf,
    pub summary: Summary,
    /// `timeseries.csv`: column name → values, one per interval.
    pub series: BTreeMap<String, Vec<f64>>,
    /// `phase` of each interval.
    pub phases: Vec<String>,
    /// From `latency.hlog`: each operation's ok latency over the whole run (µs), merged
    /// exactly from its intervals, as (percentile, µs) at
    /// [`SPECTRUM`](super::spectrum::SPECTRUM).
    pub spectra: Vec<(String, Vec<(f64, u64)>)>,
    /// From `latency.hlog`: each operation's intervals, for the spread across them.
    pub intervals: Vec<(String, Vec<IntervalPoint>)>,
}

/// One operation in one interval of the log: ok responses and their percentiles (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalPoint {
    /// Where it begins, seconds from the run's start.
    pub start: f64,
    /// Seconds.
    pub length: f64,
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {why}")]
    Bad { path: String, why: String },
}

impl RunFiles {
    /// Reads a run directory (or the directory of a `summary.json`).
    pub fn read(path: &Path) -> Result<RunFiles, ReadError> {
        let dir = if path.is_file() {
            path.parent().unwrap_or(Path::new(".")).to_path_buf()
        } else {
            path.to_path_buf()
        };
        let at = |name: &str| dir.join(name);
        let io = |p: &Path| {
            let path = p.display().to_string();
            move |source| ReadError::Io { path, source }
        };
        let summary = files::read_summary(&at("summary.json")).map_err(io(&at("summary.json")))?;
        let (series, phases) = read_series(&at("timeseries.csv"));
        let log = match std::fs::read(at("latency.hlog")) {
            Ok(bytes) => read_hlog(&bytes).map_err(|why| ReadError::Bad {
                path: at("latency.hlog").display().to_string(),
                why,
            })?,
            Err(_) => Hlog::default(),
        };
        Ok(RunFiles {
            dir,
            summary,
            series,
            phases,
            spectra: log
                .merged
                .iter()
                .map(|(tag, h)| (tag.clone(), points(h)))
                .collect(),
            intervals: log.intervals,
        })
    }

    /// Every run a path names (one run directory, or a directory of them: see
    /// [`files::run_dirs`]).
    pub fn read_side(path: &Path) -> Result<Vec<RunFiles>, ReadError> {
        let dirs = files::run_dirs(path).map_err(|source| ReadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        dirs.iter().map(|d| RunFiles::read(d)).collect()
    }

    /// A column of the time series (empty when absent).
    pub fn column(&self, name: &str) -> &[f64] {
        self.series.get(name).map_or(&[], Vec::as_slice)
    }
}

/// `timeseries.csv` as columns (name → values) and the phase of each row; empty when absent.
pub fn read_series(path: &Path) -> (BTreeMap<String, Vec<f64>>, Vec<String>) {
    match std::fs::read_to_string(path) {
        Ok(text) => read_csv(&text),
        Err(_) => (BTreeMap::new(), Vec::new()),
    }
}

fn read_csv(text: &str) -> (BTreeMap<String, Vec<f64>>, Vec<String>) {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let mut cols: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut phases = Vec::new();
    for line in lines {
        for (name, v) in header.iter().zip(line.split(',')) {
            if *name == "phase" {
                phases.push(v.to_string());
            } else if let Ok(x) = v.parse() {
                cols.entry((*name).to_string()).or_default().push(x);
            }
        }
    }
    (cols, phases)
}

/// An interval log read back: each tag's histograms added, and each interval's figures.
#[derive(Debug, Default)]
pub struct Hlog {
    /// (tag, histogram of every interval added), in first-seen order.
    pub merged: Vec<(String, Histogram<u64>)>,
    pub intervals: Vec<(String, Vec<IntervalPoint>)>,
}

/// One interval of one tag, as logged.
#[derive(Debug, Clone)]
pub struct LoggedInterval {
    pub tag: String,
    /// Seconds since the Unix epoch (the log's base time plus the interval's offset).
    pub start: f64,
    /// Seconds from the log's start time (the run's start).
    pub offset: f64,
    /// Seconds.
    pub length: f64,
    pub hist: Histogram<u64>,
}

/// Every interval of an HdrHistogram interval log (V2, compressed or not), in log order.
pub fn read_intervals(bytes: &[u8]) -> Result<Vec<LoggedInterval>, String> {
    let mut out = Vec::new();
    let mut de = Deserializer::new();
    let mut base = 0.0;
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| format!("unreadable interval log: {e:?}"))?;
        let ilh = match entry {
            LogEntry::BaseTime(t) => {
                base = t.as_secs_f64();
                continue;
            }
            LogEntry::StartTime(t) => {
                if base == 0.0 {
                    base = t.as_secs_f64();
                }
                continue;
            }
            LogEntry::Interval(ilh) => ilh,
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(ilh.encoded_histogram())
            .map_err(|e| format!("bad base64 in an interval: {e}"))?;
        let hist: Histogram<u64> = de
            .deserialize(&mut std::io::Cursor::new(raw))
            .map_err(|e| format!("bad histogram in an interval: {e:?}"))?;
        out.push(LoggedInterval {
            tag: ilh
                .tag()
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            start: base + ilh.start_timestamp().as_secs_f64(),
            offset: ilh.start_timestamp().as_secs_f64(),
            length: ilh.duration().as_secs_f64(),
            hist,
        });
    }
    Ok(out)
}

/// Reads an HdrHistogram interval log: each tag's histograms added, and each interval's
/// figures.
pub fn read_hlog(bytes: &[u8]) -> Result<Hlog, String> {
    let mut out = Hlog::default();
    for i in read_intervals(bytes)? {
        let h = &i.hist;
        let point = IntervalPoint {
            start: i.offset,
            length: i.length,
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
        };
        match out.intervals.iter_mut().find(|(t, _)| *t == i.tag) {
            Some((_, v)) => v.push(point),
            None => out.intervals.push((i.tag.clone(), vec![point])),
        }
        match out.merged.iter_mut().find(|(t, _)| *t == i.tag) {
            Some((_, acc)) => acc.add(h).map_err(|e| format!("{e:?}"))?,
            None => out.merged.push((i.tag, i.hist)),
        }
    }
    Ok(out)
}
