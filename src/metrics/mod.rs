//! Measurement: outcomes (`outcome`), per-worker histogram shards (`recorder`), the interval
//! grid of a run (`grid`), and the collector that merges shards per interval (`collector`).
//! Nothing here knows a transport: transports fill [`recorder::TransportCounts`].

pub mod collector;
pub mod grid;
pub mod outcome;
pub mod recorder;
