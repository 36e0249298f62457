//! Fuzz target: raw bytes to the reference server over TCP (`mcpbench::fuzzing::server_http`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::server_http(data));
