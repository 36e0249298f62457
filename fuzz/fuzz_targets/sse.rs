//! Fuzz target: the SSE decoder against the WHATWG rules, in any chunking (`mcpbench::fuzzing::sse`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::sse(data));
