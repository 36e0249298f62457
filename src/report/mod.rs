//! Results: the one model (`summary`), how a run's measurements become one (`build`), its
//! renderings (`text`), the run directory (`files`), and the live view watchers of a running
//! test read (`live`).

pub mod ab;
pub mod build;
pub mod compare;
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
