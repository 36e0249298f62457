//! Fuzz target: the WebSocket client's framing against tungstenite, in any chunking (`mcpbench::fuzzing::ws_client`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpbench::fuzzing::ws_client(data));
