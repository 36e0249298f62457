//! Results: the one model (`summary`), how a run's measurements become one (`build`), its
//! renderings (`text`), and the run directory (`files`).

pub mod build;
pub mod files;
pub mod summary;
pub mod text;

pub use summary::Summary;
