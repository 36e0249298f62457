//! The interval grid of a run: where each interval of the time series begins and ends.
//!
//! Intervals are anchored at the three moments that matter: the start, the end of warm-up and
//! the end of the run. Warm-up is cut into intervals from the start, the measured window from
//! the end of warm-up, the drain from the end; the last interval of a phase may be shorter. So
//! no interval mixes warm-up with measured requests (a warm-up of 1.5 s with 1 s intervals
//! gives intervals of 1 s and 0.5 s, then whole seconds again), and the first measured
//! interval is a whole one.

use std::time::Duration;

/// The phase of the run an interval lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Before the end of warm-up: not measured.
    Warmup,
    /// From the end of warm-up to the end of the run.
    #[default]
    Measured,
    /// After the end: requests still in flight finish.
    Drain,
}

/// See the module docs. All offsets are from the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    interval: Duration,
    warmup: Duration,
    duration: Duration,
    /// Intervals in warm-up, and in warm-up and the measured window together.
    warmup_intervals: u64,
    run_intervals: u64,
}

impl Grid {
    /// `interval` is at least 1 ms; `warmup` at most `duration`.
    pub fn new(interval: Duration, warmup: Duration, duration: Duration) -> Self {
        let interval = interval.max(Duration::from_millis(1));
        let warmup = warmup.min(duration);
        let count = |len: Duration| len.as_nanos().div_ceil(interval.as_nanos()) as u64;
        let warmup_intervals = count(warmup);
        Grid {
            interval,
            warmup,
            duration,
            warmup_intervals,
            run_intervals: warmup_intervals + count(duration - warmup),
        }
    }

    /// Where interval `k` ends.
    pub fn end(&self, k: u64) -> Duration {
        let after =
            |from: Duration, j: u64| from + self.interval * (j + 1).min(u32::MAX as u64) as u32;
        if k < self.warmup_intervals {
            after(Duration::ZERO, k).min(self.warmup)
        } else if k < self.run_intervals {
            after(self.warmup, k - self.warmup_intervals).min(self.duration)
        } else {
            after(self.duration, k - self.run_intervals)
        }
    }

    /// Where interval `k` begins.
    pub fn start(&self, k: u64) -> Duration {
        if k == 0 {
            Duration::ZERO
        } else {
            self.end(k - 1)
        }
    }

    pub fn phase(&self, k: u64) -> Phase {
        if k < self.warmup_intervals {
            Phase::Warmup
        } else if k < self.run_intervals {
            Phase::Measured
        } else {
            Phase::Drain
        }
    }

    /// The nominal interval length.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn boundaries_fall_on_the_end_of_warmup_and_of_the_run() {
        let g = Grid::new(ms(1000), ms(1500), ms(4000));
        let ends: Vec<u64> = (0..7).map(|k| g.end(k).as_millis() as u64).collect();
        assert_eq!(ends, [1000, 1500, 2500, 3500, 4000, 5000, 6000]);
        let phases: Vec<Phase> = (0..7).map(|k| g.phase(k)).collect();
        use Phase::*;
        assert_eq!(
            phases,
            [Warmup, Warmup, Measured, Measured, Measured, Drain, Drain]
        );
        assert_eq!(g.start(2), ms(1500));
        assert_eq!(g.start(0), Duration::ZERO);
    }

    #[test]
    fn whole_intervals_when_everything_divides() {
        let g = Grid::new(ms(1000), ms(2000), ms(10_000));
        for k in 0..12 {
            assert_eq!(g.end(k), ms(1000 * (k + 1)), "interval {k}");
        }
        assert_eq!(g.phase(1), Phase::Warmup);
        assert_eq!(g.phase(2), Phase::Measured);
        assert_eq!(g.phase(10), Phase::Drain);
        let no_warmup = Grid::new(ms(1000), Duration::ZERO, ms(3000));
        assert_eq!(no_warmup.phase(0), Phase::Measured);
        assert_eq!(no_warmup.end(0), ms(1000));
    }
}
