//! Fuzz target: the WebSocket client's reading of the 101 answer against httparse (`mcpbench::fuzzing::ws_handshake`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::ws_handshake(data));
