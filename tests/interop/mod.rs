//! Interop with other people's MCP implementations and the official conformance suite. These
//! need the pinned peers from `interop/setup.sh` and run in the nextest `full` profile
//! (`scripts/test`, CI).

mod actionlint;
mod clients;
mod conformance;
mod export;
pub(crate) mod harness;
mod init;
mod peers;
