//! Human durations: `500ms`, `30s`, `2m`, `1m30s`, `1.5s`, `250us`, `0`.

use std::time::Duration;

/// Parses a duration; the error says which forms are accepted.
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return Err(format!("`{s}` is not a duration"));
        }
        let n: f64 = rest[..num_end]
            .parse()
            .map_err(|_| format!("`{s}` is not a duration"))?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("`{s}` needs a unit (ms, s, m, h)")),
            u => {
                return Err(format!(
                    "`{s}`: unknown unit `{u}` (use ns, us, ms, s, m or h)"
                ));
            }
        };
        total += n * scale;
        rest = &rest[unit_end..];
    }
    if !total.is_finite() || total > 1e9 {
        return Err(format!("`{s}` is too long"));
    }
    Ok(Duration::from_secs_f64(total))
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
        assert!(parse("3x").unwrap_err().contains("unknown unit"));
        assert!(parse("ms").is_err());
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_micros(80)), "80µs");
    }
}
