//! Fuzz target: the envelope scanner against serde_json (`mcpbench::fuzzing::envelope`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::envelope(data));
