//! Measurement: outcomes (`outcome`), per-worker histogram shards (`recorder`), the interval
//! grid of a run (`grid`), the collector that merges shards per interval (`collector`), and
//! the target's own resources sampled from procfs per interval (`target`).
//! Nothing here knows a transport: transports fill [`recorder::TransportCounts`].

pub mod collector;
pub mod grid;
pub mod outcome;
pub mod recorder;
pub mod target_procs;
