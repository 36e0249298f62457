//! Measurement: outcomes (`outcome`), per-worker histogram shards (`recorder`), and the
//! collector that merges shards per interval (`collector`).

pub mod collector;
pub mod outcome;
pub mod recorder;
