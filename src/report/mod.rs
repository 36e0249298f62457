//! Results: the one model (`summary`), how a run's measurements become one (`build`), its
//! renderings (`text`; Prometheus and JUnit: `export`), the run directory (`files`), and the
//! live view watchers of a running test read (`live`). A finished run read back (`read_back`)
//! is rendered as report.md and report.html (`document`, its `plots` drawn by `svg`); runs
//! compared (`compare`, its page `compare_page`) and merged (`merge`); A/B comparisons (`ab`, drawn by `ab_page`) and find-max sweeps
//! (`sweep`); thresholds judged (`verdict`); what only the time line shows (`diagnose`). Below
//! them all: markup escaping (`escape`) and the latency spectrum's percentiles (`spectrum`).

pub mod ab;
pub mod ab_page;
pub mod build;
pub mod compare;
pub mod compare_page;
pub mod diagnose;
pub mod document;
mod escape;
pub mod export;
pub mod files;
pub mod live;
pub mod merge;
mod plots;
pub mod read_back;
pub mod spectrum;
pub mod summary;
pub mod svg;
pub mod sweep;
pub mod text;
pub mod verdict;

pub use summary::Summary;
