//! The release binaries, for tests whose figures only a release build shows (a million calls,
//! memory per session).

use std::path::PathBuf;
use std::process::Command;

use super::repo;

/// Builds the release binaries (a no-op when CI built them first); their directory.
pub fn binaries() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "-p", "mcpbench", "--bins"])
        .current_dir(repo())
        .status()
        .expect("cargo");
    assert!(status.success(), "release build failed");
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { repo().join(d) })
        .unwrap_or_else(|| repo().join("target"))
        .join("release")
}
