//! Human durations: `500ms`, `30s`, `2m`, `1m30s`, `1.5s`, `250us`, `0`.

use std::time::Duration;

/// Parses a duration with the project's one grammar (`mock_backend::knobs::parse_duration`).
pub fn parse(s: &str) -> Result<Duration, String> {
    mock_backend::knobs::parse_duration(s).map_err(|e| e.to_string())
}

/// Formats a duration compactly for reports (`1.5s`, `250ms`, `80µs`).
pub fn format(d: Duration) -> String {
    let us = d.as_micros();
    if us >= 1_000_000 {
        format!("{}s", trim_float(d.as_secs_f64()))
    } else if us >= 1000 {
        format!("{}ms", trim_float(us as f64 / 1000.0))
    } else {
        format!("{us}µs")
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert!(parse("30").unwrap_err().contains("unit"));
        assert!(parse("3x").unwrap_err().contains("unit"));
        assert!(parse("ms").is_err());
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_micros(80)), "80µs");
    }
}
