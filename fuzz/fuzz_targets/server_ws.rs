//! Fuzz target: raw frames to the reference server's /ws after an upgrade (`mcpbench::fuzzing::server_ws`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::server_ws(data));
