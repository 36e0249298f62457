//! `mcpbench init` against other people's servers: server-everything over stdio and the Python
//! SDK over Streamable HTTP. The written scenario validates and runs with zero errors; tools
//! that cannot answer a trial call here (no network, task augmentation required, a
//! long-running operation) are written commented out with the server's reason.

use super::harness::{Peer, node, python, script, server_everything};
use crate::support::{init_runs_clean, scratch};

#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn init_against_server_everything_over_stdio() {
    let dir = scratch();
    let node = node().display().to_string();
    let se = server_everything().display().to_string();
    let (text, out) = init_runs_clean(
        "server-everything stdio",
        &["--timeout", "3s", "--", &node, &se, "stdio"],
        dir.path(),
    );
    for tool in ["echo", "get-sum", "get-annotated-message"] {
        assert!(
            text.contains(&format!("tool = \"{tool}\"\narguments = ")),
            "{tool}: {text}"
        );
    }
    // Its enum argument becomes a pick over the values.
    assert!(text.contains("messageType = \"${pick:"), "{text}");
    assert!(out.contains("wrote"), "{out}");
}

#[test]
#[ignore = "needs the pinned MCP peers (interop/setup.sh): scripts/test runs this"]
fn init_against_the_python_sdk_over_streamable_http() {
    let mut c = std::process::Command::new(python());
    c.arg(script("servers/py_server.py")).arg("http");
    let mut peer = Peer::spawn("python sdk http (init)", c);
    let url = format!("http://{}/mcp", peer.addr());
    let dir = scratch();
    let (text, _) = init_runs_clean("python sdk http", &[&url], dir.path());
    assert!(text.contains("tool = \"echo\""), "{text}");
}
