//! Numbers as people compare them: latency in the unit that keeps three significant digits,
//! counts with thousands separators, rates with k/M suffixes, clock times.

use std::time::Duration;

/// Latency in µs as `850µs`, `1.25ms`, `12.5ms`, `125ms`, `1.25s`; `-` for none.
pub fn latency_us(us: f64) -> String {
    if !us.is_finite() || us <= 0.0 {
        return "-".into();
    }
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 10_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else if us < 100_000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else if us < 1_000_000.0 {
        format!("{:.0}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// Latency given in milliseconds (the summary's unit).
pub fn latency_ms(ms: f64) -> String {
    latency_us(ms * 1000.0)
}

/// `1234567` → `1 234 567` (thin-space-free, so columns align in any font).
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A rate per second: `0.5`, `950`, `12.3k`, `1.25M`.
pub fn rate(r: f64) -> String {
    if !r.is_finite() || r <= 0.0 {
        "0".into()
    } else if r < 10.0 {
        format!("{r:.1}")
    } else if r < 10_000.0 {
        format!("{r:.0}")
    } else if r < 1e6 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{:.2}M", r / 1e6)
    }
}

/// `mm:ss`, or `h:mm:ss` from an hour.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// A percentage with a precision that shows small error rates: `0 %`, `0.07 %`, `12.5 %`.
pub fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p == 0.0 {
        "0 %".into()
    } else if p < 1.0 {
        format!("{p:.2} %")
    } else {
        format!("{p:.1} %")
    }
}

/// A percentile's label: `min`, `p50`, `p99.9`, `p99.999`, `max`.
pub fn percentile(p: f64) -> String {
    if p <= 0.0 {
        return "min".into();
    }
    if p >= 100.0 {
        return "max".into();
    }
    let s = format!("{p:.3}");
    format!("p{}", s.trim_end_matches('0').trim_end_matches('.'))
}

/// Where a percentile sits on a "nines" axis: p90 is 1, p99 is 2, p99.9 is 3; the maximum is
/// drawn half a step past p99.999.
pub fn nines(p: f64) -> f64 {
    if p >= 100.0 {
        5.5
    } else {
        -(1.0 - p / 100.0).log10()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_keep_three_significant_digits() {
        assert_eq!(latency_us(850.0), "850µs");
        assert_eq!(latency_us(1234.0), "1.23ms");
        assert_eq!(latency_us(12_345.0), "12.3ms");
        assert_eq!(latency_us(123_456.0), "123ms");
        assert_eq!(latency_us(1_234_567.0), "1.23s");
        assert_eq!(latency_us(0.0), "-");
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1 000");
        assert_eq!(count(1_234_567), "1 234 567");
        assert_eq!(rate(17_482.0), "17.5k");
        assert_eq!(rate(950.2), "950");
        assert_eq!(clock(Duration::from_secs(61)), "01:01");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
        assert_eq!(percent(0.0007), "0.07 %");
        assert_eq!(percentile(0.0), "min");
        assert_eq!(percentile(50.0), "p50");
        assert_eq!(percentile(99.9), "p99.9");
        assert_eq!(percentile(99.999), "p99.999");
        assert_eq!(percentile(100.0), "max");
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
    }
}
