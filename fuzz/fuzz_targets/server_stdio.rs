//! Fuzz target: lines to serve_stdio over an in-memory duplex (`mcpbench::fuzzing::server_stdio`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::server_stdio(data));
