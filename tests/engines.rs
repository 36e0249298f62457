//! The workers' event loop and a task per virtual user (`[load] engine`) measure the same: a
//! server that expires its sessions, closes its connections and now and then answers with an
//! SSE stream sends every event-loop user through each of its hand-overs (a session to reopen,
//! a connection to reconnect, an answer that is not plain JSON), and both engines count every
//! request, in the same classes, and reopen every expired session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::raw_http::{self, ThreadServer, read_request};
use crate::support::{run_in, scratch};

/// Calls a session answers before the server forgets it (the next one gets 404).
const SESSION_CALLS: u64 = 5;
/// Every this many responses on a connection say `Connection: close` and end it.
const CONNECTION_RESPONSES: u64 = 7;
/// Every this many calls are answered with an SSE stream.
const SSE_EVERY: u64 = 11;
const USERS: u64 = 6;
const REQUESTS: u64 = 600;

#[derive(Default)]
struct Churn {
    sessions: Mutex<HashMap<String, u64>>,
    next_session: AtomicU64,
    calls: AtomicU64,
}

fn start() -> ThreadServer {
    let churn = Arc::new(Churn::default());
    raw_http::start(2, move |s| serve(s, churn.clone()))
}

async fn serve(mut s: TcpStream, churn: Arc<Churn>) {
    let mut buf = Vec::new();
    let mut responses = 0u64;
    while let Some((head, body)) = read_request(&mut s, &mut buf).await {
        responses += 1;
        let close = responses.is_multiple_of(CONNECTION_RESPONSES);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .map(|v| v.trim().to_string());
        let reply = answer(&churn, &v, session);
        let (status, kind, extra, text) = reply;
        let connection = if close { "Connection: close\r\n" } else { "" };
        let out = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n{extra}{connection}Content-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if s.write_all(out.as_bytes()).await.is_err() || close {
            return;
        }
    }
}

/// Status line, content type, extra headers and body for one request.
fn answer(
    churn: &Churn,
    v: &serde_json::Value,
    session: Option<String>,
) -> (&'static str, &'static str, String, String) {
    let id = v["id"].clone();
    let json = "application/json";
    match v["method"].as_str().unwrap_or_default() {
        "initialize" => {
            let sid = format!("s-{}", churn.next_session.fetch_add(1, Ordering::Relaxed));
            churn.sessions.lock().unwrap().insert(sid.clone(), 0);
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"churn","version":"0"}}}}}}"#
            );
            ("200 OK", json, format!("Mcp-Session-Id: {sid}\r\n"), body)
        }
        m if m.starts_with("notifications/") => {
            ("202 Accepted", json, String::new(), String::new())
        }
        "tools/list" => {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"work","inputSchema":{{"type":"object"}}}}]}}}}"#
            );
            ("200 OK", json, String::new(), body)
        }
        _ => {
            // A session past its calls (or unknown) is gone: 404, as a server that expired it.
            let mut sessions = churn.sessions.lock().unwrap();
            let live = session.as_ref().and_then(|s| sessions.get_mut(s));
            let Some(n) = live else {
                return ("404 Not Found", json, String::new(), String::new());
            };
            *n += 1;
            if *n > SESSION_CALLS {
                sessions.remove(session.as_deref().unwrap_or_default());
                return ("404 Not Found", json, String::new(), String::new());
            }
            let message = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"done"}}]}}}}"#
            );
            if churn
                .calls
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(SSE_EVERY)
            {
                let ev = format!("event: message\ndata: {message}\n\n");
                return ("200 OK", "text/event-stream", String::new(), ev);
            }
            ("200 OK", json, String::new(), message)
        }
    }
}

/// One run against a fresh server: its summary.
fn run(engine: &str) -> mcpbench::report::summary::Summary {
    let server = start();
    let text = format!(
        "name = \"churn\"\n[target]\nurl = \"http://{}/mcp\"\n[load]\nconcurrency = {USERS}\nrequests = {REQUESTS}\ntimeout = \"5s\"\nworkers = 2\nengine = \"{engine}\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"work\"\n",
        server.addr
    );
    let dir = scratch();
    run_in(&text, dir.path()).expect("the run finishes").summary
}

#[test]
fn the_event_loop_and_a_task_per_user_count_the_same() {
    for engine in ["auto", "tasks"] {
        let s = run(engine);
        let op = &s
            .operations
            .iter()
            .find(|o| o.name == "tools/call:work")
            .unwrap();
        let line = mcpbench::report::text::outcomes_line(&op.outcomes);
        assert_eq!(s.totals.started, REQUESTS, "{engine}: every request sent");
        assert_eq!(s.totals.unaccounted, 0, "{engine}");
        assert_eq!(op.started, op.completed + op.failed, "{engine}: {line}");
        // Each session answers SESSION_CALLS calls, then one 404 that expires it.
        let expired = s.sessions.expired;
        let per = SESSION_CALLS + 1;
        assert!(
            (REQUESTS / per - USERS..=REQUESTS / per).contains(&expired),
            "{engine}: {expired} expiries"
        );
        assert_eq!(
            line,
            format!("ok {}, http(404) {expired}", REQUESTS - expired),
            "{engine}: only answers and expiries"
        );
        assert!(
            s.sessions.opened >= expired && s.sessions.opened <= USERS + expired,
            "{engine}: every expired session reopened: {:?}",
            s.sessions
        );
        assert!(
            s.sessions.connections > USERS,
            "{engine}: connections were closed and remade"
        );
        assert!(op.streamed > 0, "{engine}: SSE answers were read");
        match engine {
            "auto" => {
                assert_eq!(s.generator.engine.as_deref(), Some("event_loop"));
                assert!(
                    s.generator.handovers.unwrap() >= expired,
                    "{:?}",
                    s.generator
                );
            }
            _ => assert_eq!(s.generator.engine.as_deref(), Some("tasks")),
        }
    }
}

/// A target that answers every call with an SSE stream: each event-loop user is handed over at
/// each request until its returns are spent, then stays in its task — and the loop, with no
/// user left in it, only waits for those tasks. The run finishes and counts every request.
#[test]
fn users_whose_every_answer_is_sse_stay_in_their_tasks() {
    const CALLS: u64 = 400;
    let text = format!(
        "name = \"always-sse\"\n[embedded]\nresponse = \"sse\"\n[load]\nconcurrency = 4\nrequests = {CALLS}\ntimeout = \"5s\"\nworkers = 1\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = {{ message = \"hi\" }}\n"
    );
    let dir = scratch();
    let s = run_in(&text, dir.path()).expect("the run finishes").summary;
    let op = s
        .operations
        .iter()
        .find(|o| o.name == "tools/call:echo")
        .unwrap();
    assert_eq!(s.totals.started, CALLS);
    assert_eq!(op.outcomes.ok, CALLS, "every answer read");
    assert_eq!(op.streamed, CALLS, "every answer was a stream");
    assert_eq!(s.generator.engine.as_deref(), Some("event_loop"));
    // Each of the 4 users is handed over once per request while it has returns left (16),
    // then never again: far fewer hand-overs than requests.
    let handovers = s.generator.handovers.unwrap();
    assert!(
        (4..=4 * 17).contains(&handovers),
        "{handovers} hand-overs for {CALLS} requests"
    );
}
