//! The latency spectrum: the percentiles the dashboard and the reports show alike, and a
//! histogram's latency at each of them.

/// Percentiles of the latency spectrum (0 is the minimum, 100 the maximum), in the dashboard
/// and the reports alike.
pub const SPECTRUM: [f64; 12] = [
    0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
];

/// A histogram's latency at each percentile of [`SPECTRUM`]: `(percentile, µs)`.
pub(crate) fn points(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    SPECTRUM
        .iter()
        .map(|&p| (p, h.value_at_quantile(p / 100.0)))
        .collect()
}
