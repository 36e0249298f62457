//! Fuzz target: the chunked-body decoder against httparse, in any chunking (`mcpbench::fuzzing::chunked`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::chunked(data));
