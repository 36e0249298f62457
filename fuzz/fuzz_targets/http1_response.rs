//! Fuzz target: the HTTP/1.1 client's heads, bodies and pipelining against httparse, in any chunking (`mcpbench::fuzzing::http1_response`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::http1_response(data));
