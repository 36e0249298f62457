//! The grammar mcpbench and its mock REST backend share: human durations (`1m30s`), latency
//! distributions ([`Latency`]), and the [`Knobs`] of a REST route — how slow, how large
//! (`payload`) and how flaky (`error_rate`) it is.
//!
//! Every knob parses from the same strings the command lines accept, so scenario files, flags
//! and tests share one grammar and one set of error messages. Both crates depend on this one;
//! neither reaches into the other for it.

use std::{fmt, str::FromStr, time::Duration};

use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

/// z-score of the 99th percentile of the standard normal distribution: for a log-normal delay,
/// `ln p99 = mu + Z99 * sigma`.
const Z99: f64 = 2.326_347_874;

/// Longest single sampled delay. A heavy log-normal tail must not park a request (and its
/// connection) for hours; one minute is already far beyond any useful backend latency.
pub const MAX_LATENCY: Duration = Duration::from_secs(60);

/// What a knob string got wrong, phrased so the user learns the expected form.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KnobError {
    #[error(
        "invalid duration {input:?}: expected a number with a unit (ns, us, µs, ms, s, m, h) such as \"5ms\" or \"1m30s\", or \"0\""
    )]
    Duration { input: String },
    #[error(
        "invalid latency {input:?}: expected \"5ms\", \"fixed:5ms\", \"uniform:1ms..10ms\" or \"lognormal:p50=2ms,p99=20ms\""
    )]
    LatencyForm { input: String },
    #[error("invalid uniform latency: min {min:?} is greater than max {max:?}")]
    UniformOrder { min: Duration, max: Duration },
    #[error("invalid lognormal latency: p99 {p99:?} is below p50 {p50:?}")]
    LogNormalOrder { p50: Duration, p99: Duration },
    #[error("invalid lognormal latency: p50 must be greater than zero")]
    LogNormalZero,
    #[error("invalid error rate {input:?}: expected a probability between 0 and 1, such as 0.01")]
    ErrorRate { input: String },
    #[error("invalid payload {input:?}: expected a number of bytes")]
    Payload { input: String },
}

/// A delay distribution applied before a route answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Latency {
    /// Always the same delay.
    Fixed(Duration),
    /// Uniformly distributed in `min..=max`.
    Uniform { min: Duration, max: Duration },
    /// Log-normal with the given median and 99th percentile: the long-tailed shape real backends
    /// have, specified by the two numbers people actually know about their services.
    LogNormal { p50: Duration, p99: Duration },
}

impl Latency {
    /// Rejects distributions that cannot be sampled (reversed bounds, zero log-normal median).
    pub fn validate(&self) -> Result<(), KnobError> {
        match *self {
            Latency::Fixed(_) => Ok(()),
            Latency::Uniform { min, max } if min > max => Err(KnobError::UniformOrder { min, max }),
            Latency::Uniform { .. } => Ok(()),
            Latency::LogNormal { p50, .. } if p50.is_zero() => Err(KnobError::LogNormalZero),
            Latency::LogNormal { p50, p99 } if p99 < p50 => {
                Err(KnobError::LogNormalOrder { p50, p99 })
            }
            Latency::LogNormal { .. } => Ok(()),
        }
    }

    /// Draws one delay, capped at [`MAX_LATENCY`]. Invalid distributions (see
    /// [`Latency::validate`]) degrade to a sensible value instead of panicking.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let d = match *self {
            Latency::Fixed(d) => d,
            Latency::Uniform { min, max } if min < max => rng.random_range(min..=max),
            Latency::Uniform { min, .. } => min,
            Latency::LogNormal { p50, p99 } => {
                let (mu, sigma) = lognormal_params(p50, p99);
                let z: f64 = rng.sample(StandardNormal);
                Duration::try_from_secs_f64((mu + sigma * z).exp()).unwrap_or(MAX_LATENCY)
            }
        };
        d.min(MAX_LATENCY)
    }
}

/// `mu = ln p50`, `sigma = (ln p99 - ln p50) / z(0.99)`, in seconds.
fn lognormal_params(p50: Duration, p99: Duration) -> (f64, f64) {
    let mu = p50.as_secs_f64().ln();
    let sigma = ((p99.as_secs_f64().ln() - mu) / Z99).max(0.0);
    (mu, sigma)
}

impl FromStr for Latency {
    type Err = KnobError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let form_error = || KnobError::LatencyForm {
            input: s.to_owned(),
        };
        let latency = match s.split_once(':') {
            // A bare word is more likely a misspelt form than a duration: say which forms exist.
            None => Latency::Fixed(parse_duration(s).map_err(|_| form_error())?),
            Some(("fixed", d)) => Latency::Fixed(parse_duration(d)?),
            Some(("uniform", range)) => {
                let (min, max) = range.split_once("..").ok_or_else(form_error)?;
                Latency::Uniform {
                    min: parse_duration(min)?,
                    max: parse_duration(max)?,
                }
            }
            Some(("lognormal", params)) => {
                let (mut p50, mut p99) = (None, None);
                for part in params.split(',') {
                    match part.split_once('=') {
                        Some(("p50", d)) if p50.is_none() => p50 = Some(parse_duration(d)?),
                        Some(("p99", d)) if p99.is_none() => p99 = Some(parse_duration(d)?),
                        _ => return Err(form_error()),
                    }
                }
                Latency::LogNormal {
                    p50: p50.ok_or_else(form_error)?,
                    p99: p99.ok_or_else(form_error)?,
                }
            }
            Some(_) => return Err(form_error()),
        };
        latency.validate()?;
        Ok(latency)
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Latency::Fixed(d) => write!(f, "fixed:{d:?}"),
            Latency::Uniform { min, max } => write!(f, "uniform:{min:?}..{max:?}"),
            Latency::LogNormal { p50, p99 } => write!(f, "lognormal:p50={p50:?},p99={p99:?}"),
        }
    }
}

/// Parses `"250us"`, `"1.5ms"`, `"2s"`, `"1m"`, `"1h"`, compounds such as `"1m30s"`, or `"0"`.
///
/// A unit is required for anything but zero: a bare `"5"` is ambiguous and a common typo. This
/// is the project's one duration grammar: scenario files use it too.
pub fn parse_duration(input: &str) -> Result<Duration, KnobError> {
    let error = || KnobError::Duration {
        input: input.to_owned(),
    };
    let s = input.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(split);
        let value: f64 = number.parse().map_err(|_| error())?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let scale = match &tail[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(error()),
        };
        total += value * scale;
        rest = &tail[unit_end..];
    }
    if s.is_empty() {
        return Err(error());
    }
    Duration::try_from_secs_f64(total).map_err(|_| error())
}

/// Formats a duration compactly for people (`1.5s`, `250ms`, `80µs`).
pub fn format_duration(d: Duration) -> String {
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

/// Parses a probability in `0..=1`.
pub fn parse_error_rate(input: &str) -> Result<f64, KnobError> {
    match input.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(KnobError::ErrorRate {
            input: input.to_owned(),
        }),
    }
}

/// The behaviour knobs of one route; `None` means "inherit" (from the defaults, then off).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Knobs {
    /// Delay before answering.
    pub latency: Option<Latency>,
    /// Bytes of `"padding"` added to successful JSON responses, to model large payloads.
    pub payload: Option<usize>,
    /// Probability in `0..=1` of answering 500 instead of the real response.
    pub error_rate: Option<f64>,
}

impl Knobs {
    /// `self` overriding `base` field by field: a route that only sets a latency keeps the
    /// global payload and error rate.
    pub fn over(&self, base: &Knobs) -> Knobs {
        Knobs {
            latency: self.latency.or(base.latency),
            payload: self.payload.or(base.payload),
            error_rate: self.error_rate.or(base.error_rate),
        }
    }

    /// Checks the latency distribution and that the error rate is a probability.
    pub fn validate(&self) -> Result<(), KnobError> {
        if let Some(latency) = &self.latency {
            latency.validate()?;
        }
        match self.error_rate {
            Some(p) if !(0.0..=1.0).contains(&p) => Err(KnobError::ErrorRate {
                input: p.to_string(),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{SeedableRng, rngs::Xoshiro256PlusPlus};

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_durations_in_every_unit() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("15ns"), Ok(Duration::from_nanos(15)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("5ms"), Ok(ms(5)));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1s500ms"), Ok(ms(1500)));
    }

    #[test]
    fn rejects_bad_durations_with_the_expected_form() {
        for bad in ["", "5", "ms", "-5ms", "5xs", "1e3ms", "5 ms extra", "."] {
            let err = parse_duration(bad).expect_err(bad).to_string();
            assert!(
                err.contains("expected a number with a unit"),
                "{bad}: {err}"
            );
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn parses_every_latency_form() {
        assert_eq!("5ms".parse(), Ok(Latency::Fixed(ms(5))));
        assert_eq!("fixed:5ms".parse(), Ok(Latency::Fixed(ms(5))));
        assert_eq!(
            "uniform:1ms..10ms".parse(),
            Ok(Latency::Uniform {
                min: ms(1),
                max: ms(10)
            })
        );
        let lognormal = Ok(Latency::LogNormal {
            p50: ms(2),
            p99: ms(20),
        });
        assert_eq!("lognormal:p50=2ms,p99=20ms".parse(), lognormal);
        assert_eq!("lognormal:p99=20ms,p50=2ms".parse(), lognormal);
    }

    #[test]
    fn rejects_bad_latencies_with_explanations() {
        for bad in [
            "gaussian:5ms",
            "uniform:1ms-10ms",
            "lognormal:p50=2ms",
            "lognormal:p50=2ms,p90=5ms",
            "lognormal:p50=2ms,p50=3ms,p99=9ms",
        ] {
            let err = bad.parse::<Latency>().expect_err(bad).to_string();
            assert!(
                err.contains("expected \"5ms\", \"fixed:5ms\""),
                "{bad}: {err}"
            );
        }
        let err = "uniform:10ms..1ms".parse::<Latency>().unwrap_err();
        assert!(err.to_string().contains("greater than max"), "{err}");
        let err = "lognormal:p50=20ms,p99=2ms".parse::<Latency>().unwrap_err();
        assert!(
            err.to_string().contains("p99 2ms is below p50 20ms"),
            "{err}"
        );
        let err = "lognormal:p50=0,p99=2ms".parse::<Latency>().unwrap_err();
        assert_eq!(err, KnobError::LogNormalZero);
        let err = "fixed:5parsecs".parse::<Latency>().unwrap_err();
        assert!(matches!(err, KnobError::Duration { .. }), "{err}");
    }

    #[test]
    fn latency_display_round_trips() {
        for s in [
            "fixed:5ms",
            "uniform:1ms..10ms",
            "lognormal:p50=2ms,p99=20ms",
        ] {
            let l: Latency = s.parse().unwrap();
            assert_eq!(l.to_string().parse::<Latency>(), Ok(l));
        }
    }

    /// The empirical quantile at `q` of sorted samples.
    fn quantile(sorted: &[Duration], q: f64) -> f64 {
        sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)].as_secs_f64()
    }

    #[test]
    fn lognormal_samples_hit_requested_percentiles() {
        let latency = Latency::LogNormal {
            p50: ms(2),
            p99: ms(20),
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut samples: Vec<Duration> = (0..100_000).map(|_| latency.sample(&mut rng)).collect();
        samples.sort_unstable();
        let p50 = quantile(&samples, 0.50);
        let p99 = quantile(&samples, 0.99);
        assert!((p50 / 0.002 - 1.0).abs() < 0.05, "p50 = {p50}");
        assert!((p99 / 0.020 - 1.0).abs() < 0.05, "p99 = {p99}");
    }

    #[test]
    fn lognormal_with_equal_percentiles_is_constant() {
        let latency = Latency::LogNormal {
            p50: ms(3),
            p99: ms(3),
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..100 {
            let d = latency.sample(&mut rng).as_secs_f64();
            assert!((d - 0.003).abs() < 1e-9, "{d}");
        }
    }

    #[test]
    fn uniform_samples_stay_in_range_and_spread() {
        let latency = Latency::Uniform {
            min: ms(1),
            max: ms(10),
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let samples: Vec<Duration> = (0..10_000).map(|_| latency.sample(&mut rng)).collect();
        assert!(samples.iter().all(|d| (ms(1)..=ms(10)).contains(d)));
        assert!(samples.iter().any(|d| *d < ms(2)));
        assert!(samples.iter().any(|d| *d > ms(9)));
    }

    #[test]
    fn samples_are_capped() {
        let latency = Latency::Fixed(Duration::from_secs(3600));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        assert_eq!(latency.sample(&mut rng), MAX_LATENCY);
    }

    #[test]
    fn error_rate_must_be_a_probability() {
        assert_eq!(parse_error_rate("0"), Ok(0.0));
        assert_eq!(parse_error_rate("1"), Ok(1.0));
        assert_eq!(parse_error_rate("0.25"), Ok(0.25));
        for bad in ["-0.1", "1.5", "NaN", "often"] {
            let err = parse_error_rate(bad).expect_err(bad).to_string();
            assert!(err.contains("between 0 and 1"), "{err}");
        }
    }

    #[test]
    fn route_knobs_override_field_by_field() {
        let defaults = Knobs {
            latency: Some(Latency::Fixed(ms(5))),
            payload: Some(100),
            error_rate: Some(0.5),
        };
        let route = Knobs {
            error_rate: Some(0.0),
            ..Knobs::default()
        };
        let merged = route.over(&defaults);
        assert_eq!(merged.latency, Some(Latency::Fixed(ms(5))));
        assert_eq!(merged.payload, Some(100));
        assert_eq!(merged.error_rate, Some(0.0));
    }

    #[test]
    fn formats_durations_compactly() {
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_micros(80)), "80µs");
        assert_eq!(parse_duration(&format_duration(ms(1500))), Ok(ms(1500)));
    }
}
