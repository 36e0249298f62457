//! The weighted workload mix: which entry a virtual user sends next.

use rand::{Rng, RngExt};

use crate::scenario::WorkItem;

/// Picks workload entries in proportion to their weights.
#[derive(Debug)]
pub struct Mix {
    cumulative: Vec<u64>,
    total: u64,
}

impl Mix {
    pub fn new(items: &[WorkItem]) -> Self {
        let mut acc = 0u64;
        let cumulative = items
            .iter()
            .map(|w| {
                acc += w.weight as u64;
                acc
            })
            .collect();
        Mix {
            cumulative,
            total: acc,
        }
    }

    #[inline]
    pub fn pick<R: Rng>(&self, rng: &mut R) -> usize {
        if self.cumulative.len() == 1 {
            return 0;
        }
        let r = rng.random_range(0..self.total);
        self.cumulative.iter().position(|&c| r < c).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn the_mix_follows_the_weights() {
        let plan = crate::scenario::parse(
            "t.toml",
            "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\nweight = 3\narguments = { message = \"x\" }\n[[workload]]\nmethod = \"tools/list\"\n",
            &|_| None,
        )
        .unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let mix = Mix::new(&plan.workload);
        let n = 40_000;
        let first = (0..n).filter(|_| mix.pick(&mut rng) == 0).count();
        let share = first as f64 / n as f64;
        assert!((share - 0.75).abs() < 0.02, "share {share}");
    }
}
