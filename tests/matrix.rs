//! Every transport × every revision it supports (× HTTP/1.1 and HTTP/2, JSON and SSE
//! responses, per-VU and shared sessions), client ↔ reference server: short, bounded runs
//! with zero errors and the right negotiated revision.

use std::sync::Arc;

use mcpbench::driver::{self, RunOptions};
use mcpbench::report::Summary;
use mcpbench::server::ResponseMode;

use crate::support::{scratch, servers};

const HANDSHAKE: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const STREAMABLE: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];
const ALL: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// Runs a short closed-loop scenario with `target` (a `[target]` table body) and `load_extra`.
pub fn run(label: &str, target: &str, load_extra: &str, workload: &str) -> Summary {
    let text = format!(
        "name = \"matrix\"\n[target]\n{target}\n[load]\nconcurrency = 3\nduration = \"600ms\"\ntimeout = \"5s\"\nworkers = 1\n{load_extra}\n{workload}"
    );
    let dir = scratch();
    crate::support::run_in(&text, dir.path())
        .unwrap_or_else(|e| panic!("{label}: {e}"))
        .summary
}

const WORKLOAD: &str = "[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\nweight = 3\narguments = { message = \"m-${seq}\" }\n[[workload]]\nmethod = \"tools/list\"\n";

/// Zero errors, some work done, the expected revision.
pub fn clean(s: &Summary, revision: &str, label: &str) {
    let t = &s.totals;
    assert!(t.ok > 10, "{label}: only {} ok: {:?}", t.ok, s.operations);
    assert_eq!(
        (t.failed, t.cancelled, t.unaccounted),
        (0, 0, 0),
        "{label}: {:#?}",
        s.operations
    );
    for op in &s.operations {
        assert_eq!(op.outcomes.tool_error, 0, "{label} {}", op.name);
        assert!(
            op.outcomes.rpc_error.is_empty(),
            "{label} {}: {:?}",
            op.name,
            op.outcomes.rpc_error
        );
    }
    assert_eq!(s.target.protocol_negotiated, revision, "{label}");
    let open = if revision == "2026-07-28" {
        "server/discover"
    } else {
        "initialize"
    };
    assert!(
        s.operations
            .iter()
            .any(|o| o.name == open && o.outcomes.ok > 0),
        "{label}: no {open}: {:?}",
        s.operations
    );
}

#[test]
fn streamable_http_revisions_json_sse_http1_http2() {
    for mode in [ResponseMode::Json, ResponseMode::Sse] {
        let srv = servers(mode, 0, 100, Default::default());
        for rev in STREAMABLE {
            for http in ["1.1", "2"] {
                let label = format!("streamable-http {mode:?} {rev} HTTP/{http}");
                let s = run(
                    &label,
                    &format!(
                        "url = \"{}\"\nprotocol = \"{rev}\"\nhttp = \"{http}\"",
                        srv.mcp_url()
                    ),
                    "",
                    WORKLOAD,
                );
                clean(&s, rev, &label);
                assert_eq!(s.target.http, http);
                // Every session the run opened (preflight's, each user's) was ended by DELETE.
                assert_eq!(
                    srv.state().open_sessions(),
                    0,
                    "{label}: sessions left open"
                );
                let echo = s
                    .operations
                    .iter()
                    .find(|o| o.name == "tools/call:echo")
                    .unwrap();
                if mode == ResponseMode::Sse {
                    assert_eq!(
                        echo.streamed, echo.started,
                        "{label}: SSE responses are counted as streamed"
                    );
                }
            }
        }
    }
}

/// A session shared by the virtual users of a worker is ended once, by the last of them.
#[test]
fn shared_http_sessions_are_ended_by_their_last_user() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    for http in ["1.1", "2"] {
        let label = format!("streamable-http shared HTTP/{http}");
        let s = run(
            &label,
            &format!(
                "url = \"{}\"\nprotocol = \"2025-11-25\"\nhttp = \"{http}\"",
                srv.mcp_url()
            ),
            "sessions = \"shared\"",
            WORKLOAD,
        );
        clean(&s, "2025-11-25", &label);
        assert_eq!(s.sessions.opened, 1, "{label}: one shared session");
        assert_eq!(
            srv.state().open_sessions(),
            0,
            "{label}: shared session left open"
        );
    }
}

#[test]
fn stdio_revisions_per_vu_and_shared() {
    let exe = env!("CARGO_BIN_EXE_mcpbench");
    for rev in ALL {
        for sessions in ["per-vu", "shared"] {
            let label = format!("stdio {rev} {sessions}");
            let s = run(
                &label,
                &format!("command = [\"{exe}\", \"serve\", \"--stdio\"]\nprotocol = \"{rev}\""),
                &format!("sessions = \"{sessions}\""),
                WORKLOAD,
            );
            clean(&s, rev, &label);
            let expected_sessions = if sessions == "shared" { 1 } else { 3 };
            assert_eq!(
                s.sessions.opened, expected_sessions,
                "{label}: one child per VU, or one shared"
            );
        }
    }
}

/// HTTP/2 sessions sharing connections (`sessions_per_connection`): 300 sessions on one worker,
/// 100 per connection, open 3 connections (the first session of each opens it), each session
/// its own; no errors, and nothing expired (every request carried its own session's id).
#[test]
fn h2_sessions_share_connections() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let text = format!(
        "name = \"h2-lanes\"\n[target]\nurl = \"http://{}/mcp\"\nhttp = \"2\"\n\
         sessions_per_connection = 100\n[load]\nconcurrency = 300\nduration = \"1500ms\"\n\
         think = \"200ms\"\ntimeout = \"10s\"\nworkers = 1\n{WORKLOAD}",
        srv.mcp_addr
    );
    let dir = scratch();
    let s = crate::support::run_in(&text, dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .summary;
    clean(&s, "2025-11-25", "h2 lanes");
    assert_eq!(s.target.http, "2");
    assert_eq!(s.sessions.opened, 300, "{:?}", s.sessions);
    assert_eq!(s.sessions.connections, 3, "{:?}", s.sessions);
    assert_eq!(s.sessions.expired, 0, "{:?}", s.sessions);
}

#[test]
fn websocket_revisions_per_vu_and_shared() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    for rev in ALL {
        for sessions in ["per-vu", "shared"] {
            let label = format!("websocket {rev} {sessions}");
            let s = run(
                &label,
                &format!("url = \"ws://{}/ws\"\nprotocol = \"{rev}\"", srv.mcp_addr),
                &format!("sessions = \"{sessions}\""),
                WORKLOAD,
            );
            clean(&s, rev, &label);
        }
    }
}

#[test]
fn legacy_sse_per_vu_and_shared() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    for rev in HANDSHAKE {
        for sessions in ["per-vu", "shared"] {
            let label = format!("legacy sse {rev} {sessions}");
            let s = run(
                &label,
                &format!(
                    "transport = \"sse\"\nurl = \"http://{}/sse\"\nprotocol = \"{rev}\"",
                    srv.mcp_addr
                ),
                &format!("sessions = \"{sessions}\""),
                WORKLOAD,
            );
            clean(&s, rev, &label);
        }
    }
}

/// `protocol = "auto"` finds 2026-07-28 on the reference server over each transport, and
/// counter-offers are honoured (offering a revision the server doesn't know gets its newest).
#[test]
fn auto_negotiation_finds_the_newest_revision() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let exe = env!("CARGO_BIN_EXE_mcpbench");
    for (label, target) in [
        (
            "http auto",
            format!("url = \"{}\"\nprotocol = \"auto\"", srv.mcp_url()),
        ),
        (
            "ws auto",
            format!("url = \"ws://{}/ws\"\nprotocol = \"auto\"", srv.mcp_addr),
        ),
        (
            "stdio auto",
            format!("command = [\"{exe}\", \"serve\", \"--stdio\"]\nprotocol = \"auto\""),
        ),
    ] {
        let s = run(label, &target, "", WORKLOAD);
        clean(&s, "2026-07-28", label);
        assert_eq!(s.target.protocol_offered, "auto");
    }
}

/// The `progress` tool streams notifications before its result on every transport; the client
/// counts them per call and times the first one.
#[test]
fn progress_streams_on_every_transport() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let exe = env!("CARGO_BIN_EXE_mcpbench");
    let workload = "[[workload]]\nmethod = \"tools/call\"\ntool = \"progress\"\nprogress = true\narguments = { steps = 3, interval_ms = 5 }\n";
    for (label, target, rev) in [
        (
            "http 2025-11-25",
            format!("url = \"{}\"", srv.mcp_url()),
            "2025-11-25",
        ),
        (
            "http 2026-07-28",
            format!("url = \"{}\"\nprotocol = \"2026-07-28\"", srv.mcp_url()),
            "2026-07-28",
        ),
        (
            "stdio",
            format!("command = [\"{exe}\", \"serve\", \"--stdio\"]"),
            "2025-11-25",
        ),
        (
            "websocket",
            format!("url = \"ws://{}/ws\"", srv.mcp_addr),
            "2025-11-25",
        ),
        (
            "legacy sse",
            format!("transport = \"sse\"\nurl = \"http://{}/sse\"", srv.mcp_addr),
            "2024-11-05",
        ),
    ] {
        let s = run(label, &target, "", workload);
        clean(&s, rev, label);
        let op = s
            .operations
            .iter()
            .find(|o| o.name == "tools/call:progress")
            .unwrap();
        assert_eq!(op.streamed, op.outcomes.ok, "{label}: every call streamed");
        assert_eq!(
            op.events,
            op.outcomes.ok * 4,
            "{label}: 3 progress notifications + the response per call"
        );
        let fe = op.first_event.as_ref().expect("time to first event");
        let lat = op.latency.as_ref().unwrap();
        assert!(
            fe.p50_ms <= lat.p50_ms,
            "{label}: the first event comes before the response"
        );
    }
}

/// A request past its timeout is counted as `timeout` and cancelled: `notifications/cancelled`
/// in the handshake era and on stdio; closing the stream for 2026-07-28 HTTP.
#[test]
fn timeouts_are_counted_and_cancelled() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let exe = env!("CARGO_BIN_EXE_mcpbench");
    let workload =
        "[[workload]]\nmethod = \"tools/call\"\ntool = \"sleep\"\narguments = { ms = 2000 }\n";
    for (label, target, cancels) in [
        ("http legacy", format!("url = \"{}\"", srv.mcp_url()), true),
        (
            "http 2026",
            format!("url = \"{}\"\nprotocol = \"2026-07-28\"", srv.mcp_url()),
            false,
        ),
        (
            "stdio",
            format!("command = [\"{exe}\", \"serve\", \"--stdio\"]"),
            true,
        ),
        (
            "websocket",
            format!("url = \"ws://{}/ws\"", srv.mcp_addr),
            true,
        ),
    ] {
        let text = format!(
            "name = \"t\"\n[target]\n{target}\n[load]\nconcurrency = 2\nduration = \"700ms\"\ntimeout = \"150ms\"\nworkers = 1\n{workload}"
        );
        let plan = mcpbench::scenario::parse("t.toml", &text, &|_| None).unwrap();
        let dir = scratch();
        let opts = RunOptions {
            output: Some(dir.path().join("run")),
            ..RunOptions::default()
        };
        let s = driver::run(
            Arc::new(plan),
            &opts,
            mcpbench::driver::Interrupt::default(),
        )
        .unwrap()
        .summary;
        let op = s
            .operations
            .iter()
            .find(|o| o.name == "tools/call:sleep")
            .unwrap();
        assert!(op.outcomes.timeout >= 2, "{label}: {:?}", op.outcomes);
        assert_eq!(
            op.started, op.outcomes.timeout,
            "{label}: all timed out, none lost"
        );
        assert_eq!(
            s.sessions.cancels_sent > 0,
            cancels,
            "{label}: cancels sent {}",
            s.sessions.cancels_sent
        );
    }
}

/// TLS: HTTPS over HTTP/1.1 and HTTP/2 (ALPN), WSS, and legacy SSE over HTTPS, trusting the
/// test's own freshly minted certificate (`ca`) or skipping verification (`insecure`); a client
/// that trusts only the system roots is refused with a clear error.
#[test]
fn tls_https_h1_h2_wss_and_trust() {
    let dir = scratch();
    let (cert, key) = crate::support::self_signed(dir.path());
    let tls = mcpbench::server::tls::load_pem(&cert, &key).expect("minted certificate loads");
    let srv = mcpbench::server::EmbeddedServers::launch(mcpbench::server::Launch {
        listen: "127.0.0.1:0".parse().unwrap(),
        config: mcpbench::server::Config {
            tls: Some(tls),
            ..Default::default()
        },
        backend: mock_backend::Config::default(),
        threads: 2,
    })
    .expect("TLS server starts");
    let a = srv.mcp_addr;
    let ca = format!("tls = {{ ca = \"{}\" }}", cert.display());
    for (label, target, rev, http) in [
        (
            "https HTTP/1.1",
            format!("url = \"https://{a}/mcp\"\n{ca}"),
            "2025-11-25",
            "1.1",
        ),
        (
            "https HTTP/2",
            format!("url = \"https://{a}/mcp\"\nhttp = \"2\"\n{ca}"),
            "2025-11-25",
            "2",
        ),
        (
            "https HTTP/2 2026-07-28",
            format!("url = \"https://{a}/mcp\"\nhttp = \"2\"\nprotocol = \"2026-07-28\"\n{ca}"),
            "2026-07-28",
            "2",
        ),
        (
            "wss",
            format!("url = \"wss://{a}/ws\"\n{ca}"),
            "2025-11-25",
            "1.1",
        ),
        (
            "https legacy sse, insecure",
            format!("transport = \"sse\"\nurl = \"https://{a}/sse\"\ntls = {{ insecure = true }}"),
            "2024-11-05",
            "1.1",
        ),
    ] {
        let s = run(label, &target, "", WORKLOAD);
        clean(&s, rev, label);
        assert_eq!(s.target.http, http, "{label}");
    }
    // Not trusted: the system roots don't know the test certificate.
    let text =
        format!("[target]\nurl = \"https://{a}/mcp\"\n[load]\nduration = \"1s\"\n{WORKLOAD}");
    let plan = mcpbench::scenario::parse("t.toml", &text, &|_| None).unwrap();
    let err = driver::run(
        Arc::new(plan),
        &RunOptions::default(),
        mcpbench::driver::Interrupt::default(),
    )
    .expect_err("untrusted certificate");
    let msg = err.to_string();
    assert!(
        msg.contains("the server's certificate is not trusted")
            || msg.contains("no usable root certificates"),
        "{msg}"
    );
}
