//! Open-loop arrival schedules: when each request is meant to start.
//!
//! A rate profile (piecewise linear, requests per second) is integrated into the expected
//! number of arrivals Λ(t); arrival times are computed arithmetically by inverting it —
//! never stamped at wake-up — so a late generator shows up as lateness, not as a slower
//! schedule. Uniform spacing puts the j-th arrival at Λ⁻¹(j); a Poisson process puts them at
//! Λ⁻¹ of a sum of unit exponentials (time rescaling), which also makes ramps Poisson. Each
//! worker thread takes its share: every W-th uniform arrival, or an independent Poisson
//! process at rate/W (their superposition is Poisson at the full rate).

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::scenario::plan::{Arrival, Profile};

#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Start, seconds.
    t0: f64,
    len: f64,
    r0: f64,
    r1: f64,
    /// Λ at the start of the segment.
    c0: f64,
}

impl Segment {
    fn cum(&self) -> f64 {
        (self.r0 + self.r1) / 2.0 * self.len
    }

    /// Seconds into the segment at which Λ has grown by `x` (0 ≤ x ≤ cum()).
    fn inverse(&self, x: f64) -> f64 {
        let a = (self.r1 - self.r0) / (2.0 * self.len);
        let b = self.r0;
        let tau = if a.abs() < 1e-12 {
            if b > 0.0 { x / b } else { self.len }
        } else {
            // a τ² + b τ − x = 0, the root in [0, len].
            let disc = (b * b + 4.0 * a * x).max(0.0);
            (2.0 * x) / (b + disc.sqrt()).max(f64::MIN_POSITIVE)
        };
        tau.clamp(0.0, self.len)
    }
}

/// Λ and its inverse for a rate profile.
#[derive(Debug, Clone)]
pub struct Cumulative {
    segments: Vec<Segment>,
    total: f64,
    end: f64,
}

impl Cumulative {
    pub fn new(p: &Profile) -> Self {
        let mut segments = Vec::with_capacity(p.stages.len());
        let (mut t0, mut c0, mut from) = (0.0, 0.0, p.start);
        for &(d, to) in &p.stages {
            let seg = Segment {
                t0,
                len: d.as_secs_f64(),
                r0: from.max(0.0),
                r1: to.max(0.0),
                c0,
            };
            c0 += seg.cum();
            t0 += seg.len;
            from = to;
            segments.push(seg);
        }
        Cumulative {
            segments,
            total: c0,
            end: t0,
        }
    }

    /// Expected arrivals over the whole profile.
    pub fn total(&self) -> f64 {
        self.total
    }

    pub fn end(&self) -> f64 {
        self.end
    }

    /// The time (seconds) at which Λ reaches `x`, or `None` past the end of the profile.
    pub fn inverse(&self, x: f64) -> Option<f64> {
        if x > self.total || !x.is_finite() {
            return None;
        }
        let i = self
            .segments
            .partition_point(|s| s.c0 + s.cum() < x)
            .min(self.segments.len().saturating_sub(1));
        let s = self.segments.get(i)?;
        Some(s.t0 + s.inverse(x - s.c0))
    }
}

/// One worker's arrivals: intended start times in seconds since the start of the run. The
/// workers of a run (of every shard of a split run) are lanes: lane `l` of `L` takes global
/// arrival indexes l, l+L, l+2L … (uniform), or a Poisson process of 1/L of the rate.
#[derive(Debug)]
pub struct Arrivals {
    cum: Cumulative,
    arrival: Arrival,
    /// Uniform: this lane's next global arrival index; it takes every `stride`-th.
    next_index: f64,
    stride: f64,
    /// Poisson: position on the Λ axis, and this lane's share of the rate.
    position: f64,
    share: f64,
    rng: SmallRng,
}

impl Arrivals {
    pub fn new(profile: &Profile, arrival: Arrival, lane: usize, lanes: usize, seed: u64) -> Self {
        let w = lanes.max(1) as f64;
        Arrivals {
            cum: Cumulative::new(profile),
            arrival,
            next_index: lane as f64,
            stride: w,
            position: 0.0,
            share: 1.0 / w,
            rng: SmallRng::seed_from_u64(seed ^ (lane as u64).wrapping_mul(0xA24B_AED4_963E_E407)),
        }
    }

    /// The next intended start (seconds since the start), or `None` once the profile is over.
    pub fn next_at(&mut self) -> Option<f64> {
        match self.arrival {
            Arrival::Uniform => {
                let t = self.cum.inverse(self.next_index)?;
                self.next_index += self.stride;
                Some(t)
            }
            Arrival::Poisson => {
                // Exp(1) steps of this worker's process, on the full-rate Λ axis.
                let u: f64 = self.rng.random::<f64>();
                self.position += -(1.0 - u).ln() / self.share;
                self.cum.inverse(self.position)
            }
        }
    }
}

/// How the dispatcher sleeps until the next arrival.
///
/// Tokio's timer ticks in whole milliseconds (a sleep ends at the next tick after its
/// deadline), so a dispatcher on it releases arrivals up to 1 ms late — time that would then be
/// reported as the target's latency. `Precise` sleeps on a Linux timerfd (nanosecond
/// resolution, no timer slack) through the same reactor. `Tokio` is the fallback elsewhere and
/// what tests on tokio's paused clock drive.
#[derive(Debug)]
pub enum DispatchClock {
    Tokio,
    #[cfg(target_os = "linux")]
    Precise(TimerFd),
}

impl DispatchClock {
    /// The most precise clock available here (must be called inside the runtime), waking at
    /// most every `gap` (the scenario's `release_interval`): everything due by then is released
    /// together, which bounds the timer's own cost at high rates.
    pub fn precise(gap: Duration) -> Self {
        #[cfg(target_os = "linux")]
        match TimerFd::new(gap) {
            Ok(t) => return DispatchClock::Precise(t),
            Err(e) => tracing::warn!(error = %e, "no timerfd: arrivals released on 1 ms ticks"),
        }
        DispatchClock::Tokio
    }

    /// Sleeps until `t` (or, precise, until its gap after the last wake-up, if later).
    pub async fn sleep_until(&mut self, t: Instant) {
        match self {
            DispatchClock::Tokio => tokio::time::sleep_until(t.into()).await,
            #[cfg(target_os = "linux")]
            DispatchClock::Precise(fd) => {
                if let Err(e) = fd.sleep_until(t).await {
                    tracing::warn!(error = %e, "timerfd failed: arrivals released on 1 ms ticks");
                    *self = DispatchClock::Tokio;
                    tokio::time::sleep_until(t.into()).await;
                }
            }
        }
    }
}

/// A one-shot Linux timerfd registered with tokio's reactor.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct TimerFd {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    last_wake: Option<Instant>,
    gap: Duration,
}

#[cfg(target_os = "linux")]
impl TimerFd {
    fn new(gap: Duration) -> std::io::Result<Self> {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // Deprecated for descriptors it does not own (tokio#8587); it owns this `OwnedFd` for
        // its whole life, and the sound replacement is `unsafe` (forbidden in this crate).
        #[allow(deprecated)]
        let fd = tokio::io::unix::AsyncFd::with_interest(fd, tokio::io::Interest::READABLE)?;
        Ok(TimerFd {
            fd,
            last_wake: None,
            gap,
        })
    }

    async fn sleep_until(&mut self, t: Instant) -> std::io::Result<()> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        let t = match self.last_wake {
            Some(w) => t.max(w + self.gap),
            None => t,
        };
        // Armed relative to now; a stale expiry (a sleep cancelled earlier) wakes the loop
        // early and it sleeps again.
        while let Some(d) = t
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        {
            let zero = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let value = Timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: d.subsec_nanos().into(),
            };
            timerfd_settime(
                self.fd.get_ref(),
                TimerfdTimerFlags::empty(),
                &Itimerspec {
                    it_interval: zero,
                    it_value: value,
                },
            )?;
            // No read of the expiration count: re-arming resets it, and each expiry is a new
            // edge for the reactor, so clearing the readiness is enough (one syscall less).
            self.fd.readable().await?.clear_ready();
        }
        self.last_wake = Some(Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn all(mut a: Arrivals) -> Vec<f64> {
        std::iter::from_fn(|| a.next_at()).collect()
    }

    #[test]
    fn uniform_constant_rate_is_evenly_spaced_across_workers() {
        let p = Profile::from_secs(100.0, &[(10, 100.0)]);
        let mut merged: Vec<f64> = (0..3)
            .flat_map(|w| all(Arrivals::new(&p, Arrival::Uniform, w, 3, 1)))
            .collect();
        merged.sort_by(f64::total_cmp);
        assert_eq!(merged.len(), 1001, "0, 10 ms, …, 10 s");
        for (j, t) in merged.iter().enumerate() {
            assert!((t - j as f64 / 100.0).abs() < 1e-9, "arrival {j} at {t}");
        }
    }

    #[test]
    fn ramps_follow_the_integrated_rate_per_stage() {
        // 0 → 100/s over 10 s (expected 500), then 100/s for 5 s (500), then 100 → 0 over 5 s (250).
        let p = Profile::from_secs(0.0, &[(10, 100.0), (5, 100.0), (5, 0.0)]);
        let times = all(Arrivals::new(&p, Arrival::Uniform, 0, 1, 1));
        let count = |a: f64, b: f64| times.iter().filter(|&&t| t >= a && t < b).count() as i64;
        assert!((count(0.0, 10.0) - 500).abs() <= 1, "{}", count(0.0, 10.0));
        assert!(
            (count(10.0, 15.0) - 500).abs() <= 1,
            "{}",
            count(10.0, 15.0)
        );
        assert!(
            (count(15.0, 20.0) - 250).abs() <= 1,
            "{}",
            count(15.0, 20.0)
        );
        // Within the ramp, the rate grows linearly: the second half of it holds 3/4 of its arrivals.
        assert!((count(5.0, 10.0) - 375).abs() <= 1);
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "monotone");
        assert!(times.last().is_some_and(|&t| t <= 20.0));
    }

    #[test]
    fn poisson_mean_and_spread_are_within_statistical_bounds() {
        // 200/s for 50 s over 2 workers: N ≈ 10000 (σ = 100); gaps exponential: mean 5 ms, CV 1.
        let p = Profile::from_secs(200.0, &[(50, 200.0)]);
        let mut merged: Vec<f64> = (0..2)
            .flat_map(|w| all(Arrivals::new(&p, Arrival::Poisson, w, 2, 42)))
            .collect();
        merged.sort_by(f64::total_cmp);
        let n = merged.len() as f64;
        assert!((n - 10_000.0).abs() < 400.0, "count {n} beyond 4σ");
        let gaps: Vec<f64> = merged.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        let cv = var.sqrt() / mean;
        assert!((mean - 0.005).abs() < 0.0003, "mean gap {mean}");
        assert!((cv - 1.0).abs() < 0.05, "coefficient of variation {cv}");
        // Counts per second look Poisson too: variance ≈ mean (index of dispersion ≈ 1).
        let mut per_s = [0f64; 50];
        for t in &merged {
            per_s[(*t as usize).min(49)] += 1.0;
        }
        let m = per_s.iter().sum::<f64>() / 50.0;
        let v = per_s.iter().map(|c| (c - m).powi(2)).sum::<f64>() / 49.0;
        assert!((v / m - 1.0).abs() < 0.5, "dispersion {}", v / m);
    }

    #[test]
    fn stage_boundaries_and_zero_rate_stages() {
        // 50/s for 2 s, nothing for 2 s, 50/s for 2 s.
        let p = Profile::from_secs(50.0, &[(2, 50.0), (0, 0.0), (2, 0.0), (0, 50.0), (2, 50.0)]);
        let times = all(Arrivals::new(&p, Arrival::Uniform, 0, 1, 1));
        assert!(
            !times.iter().any(|&t| t > 2.0 + 1e-9 && t < 4.0 - 1e-9),
            "no arrivals in the idle stage"
        );
        let before = times.iter().filter(|&&t| t <= 2.0).count();
        let after = times.iter().filter(|&&t| t >= 4.0).count();
        assert!(
            (before as i64 - 101).abs() <= 1 && (after as i64 - 100).abs() <= 1,
            "{before} {after}"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_precise_clock_never_wakes_early_and_keeps_its_gap() {
        let gap = Duration::from_micros(100);
        let mut clock = DispatchClock::precise(gap);
        assert!(
            matches!(clock, DispatchClock::Precise(_)),
            "timerfd available on Linux"
        );
        for k in 0..50u64 {
            let t = Instant::now() + Duration::from_micros(150 + 37 * k);
            clock.sleep_until(t).await;
            let woke = Instant::now();
            assert!(woke >= t, "woke {:?} early", t - woke);
        }
        // Asked for an instant already past, it still waits out its gap since its last
        // wake-up: due arrivals are batched rather than each costing a wake-up.
        let before = Instant::now();
        clock.sleep_until(before - Duration::from_millis(1)).await;
        clock.sleep_until(before - Duration::from_millis(1)).await;
        assert!(before.elapsed() >= gap);
    }
}
