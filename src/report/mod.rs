//! Results: the one model (`summary`) and its renderings (`text`), and the run directory
//! (`files`).

pub mod files;
pub mod summary;
pub mod text;

pub use summary::Summary;
