//! Splitting one scenario over several generator processes (`--shard I/N`): each shard runs
//! its exact share, and the shards together are the scenario.
//!
//! The split is by global index, so it holds for every load shape without rounding:
//! - virtual users: shard I runs users I, I+N, I+2N … of the scenario's users, each with the
//!   global index it has in an unsplit run — its credentials, its random stream, and when a
//!   concurrency profile counts it in (a user is active while its index is below the level);
//! - open-loop arrivals: shard I takes arrivals I, I+N, I+2N … of the uniform sequence, or a
//!   Poisson process of 1/N of the rate with its own seed (independent Poisson processes add
//!   up to one of the sum of their rates);
//! - request counts, `max_in_flight` and `max_queued`: N parts differing by at most one, the
//!   remainder on the first shards.

use std::fmt;

/// Shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// The most shards: request ids of shard I start at I·2^40 and must stay exact in
/// JavaScript numbers (2^53).
pub const MAX_SHARDS: usize = 8192;

impl Default for Shard {
    fn default() -> Self {
        Shard::WHOLE
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// An unsplit run.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// `I/N`, 0 ≤ I < N ≤ [`MAX_SHARDS`].
    pub fn parse(text: &str) -> Result<Shard, String> {
        let (i, n) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}`: expected INDEX/COUNT, e.g. 0/4 (indexes from 0)"))?;
        let count = Self::count(n)?;
        let index: usize = i.trim().parse().map_err(|_| {
            format!("`{text}`: the index `{i}` is not a number (INDEX/COUNT, e.g. 0/4)")
        })?;
        if index >= count {
            return Err(format!(
                "`{text}`: shards are numbered from 0, so shard {index} of {count} does not \
                 exist (the last is {}/{count})",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// A shard count: 1 ≤ N ≤ [`MAX_SHARDS`].
    pub fn count(text: &str) -> Result<usize, String> {
        let count: usize = text
            .trim()
            .parse()
            .map_err(|_| format!("the shard count `{text}` is not a number"))?;
        if !(1..=MAX_SHARDS).contains(&count) {
            return Err(format!(
                "{count} shards: between 1 and {MAX_SHARDS} (ids of shard I start at I·2^40)"
            ));
        }
        Ok(count)
    }

    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// This shard's part of `total`: parts differ by at most one, the first shards take the
    /// remainder.
    pub fn share(&self, total: u64) -> u64 {
        let n = self.count as u64;
        total / n + u64::from((self.index as u64) < total % n)
    }

    /// The global index of this shard's `local`-th virtual user.
    pub fn global(&self, local: usize) -> usize {
        self.index + self.count * local
    }

    /// Open-loop arrivals of worker `worker` of `workers` in this shard: it takes global
    /// arrival indexes `offset`, `offset + stride` …; the workers of every shard together take
    /// each index exactly once (whatever each shard's own number of workers).
    pub fn lane(&self, worker: usize, workers: usize) -> (usize, usize) {
        (
            self.index + self.count * worker,
            self.count * workers.max(1),
        )
    }

    /// Mixed into the run's seed: shards started at the same instant draw different numbers.
    pub fn seed(&self) -> u64 {
        (self.index as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)
    }

    /// The first request id of this shard's sessions (plus one): shards use disjoint id
    /// ranges, so that a gateway's logs tell them apart.
    pub fn id_base(&self) -> u64 {
        (self.index as u64) << 40
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses_with_the_fix() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert!(Shard::parse("4/4").unwrap_err().contains("the last is 3/4"));
        assert!(Shard::parse("1/0").unwrap_err().contains("between 1"));
        assert!(Shard::parse("4").unwrap_err().contains("INDEX/COUNT"));
        assert!(Shard::parse("a/4").unwrap_err().contains("not a number"));
    }

    /// The shares add up to the whole, differ by at most one, remainder first.
    #[test]
    fn shares_add_up() {
        for n in 1..=9usize {
            for total in [0u64, 1, 7, 100, 1_000_003] {
                let parts: Vec<u64> = (0..n)
                    .map(|i| Shard { index: i, count: n }.share(total))
                    .collect();
                assert_eq!(parts.iter().sum::<u64>(), total);
                assert!(parts.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
            }
        }
    }

    /// Every global user index and arrival index is taken by exactly one (shard, worker).
    #[test]
    fn users_and_arrival_lanes_cover_each_index_once() {
        let users = 103usize;
        for n in [1usize, 2, 4, 7] {
            let mut seen = vec![0u32; users];
            for i in 0..n {
                let s = Shard { index: i, count: n };
                for local in 0..s.share(users as u64) as usize {
                    seen[s.global(local)] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{n} shards: {seen:?}");
            // Arrival lanes, with a different number of workers on each shard.
            let mut taken = vec![0u32; 1000];
            for i in 0..n {
                let s = Shard { index: i, count: n };
                let workers = 1 + i % 3;
                for w in 0..workers {
                    let (offset, stride) = s.lane(w, workers);
                    for k in (offset..1000).step_by(stride) {
                        taken[k] += 1;
                    }
                }
            }
            assert!(taken.iter().all(|&c| c == 1), "{n} shards");
        }
    }
}
