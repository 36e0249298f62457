//! Streamable HTTP, handshake era, beyond the basics of `reference_server`: JSON-RPC batches
//! per revision, 2025-11-25 priming events, progress streams, and cancellation
//! (mcp-protocol.md §2.3, §3.3, §7.2).

use std::collections::HashSet;

use mcpbench::server::{Config, ResponseMode};
use serde_json::{Value, json};

use crate::support::{Streamed, initialize, launch, post, servers, wait_until};

fn session(sid: &str, rev: &'static str) -> Vec<(&'static str, String)> {
    let mut h = vec![("Mcp-Session-Id", sid.to_string())];
    if rev != "2025-03-26" {
        h.push(("MCP-Protocol-Version", rev.to_string()));
    }
    h
}

fn refs<'a>(h: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    h.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

fn call(id: u64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
}

fn progress_call(id: u64, steps: u64, interval_ms: u64, token: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "progress", "arguments": {"steps": steps, "interval_ms": interval_ms},
        "_meta": {"progressToken": token}}})
    .to_string()
}

#[test]
fn batches_are_accepted_only_in_2025_03_26_sessions() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let (sid, _) = initialize(a, "2025-03-26");
    let h = session(&sid, "2025-03-26");
    let h = refs(&h);

    let r = post(
        a,
        &h,
        &format!(
            r#"[{{"jsonrpc":"2.0","id":2,"method":"ping"}},{},{{"jsonrpc":"2.0","method":"notifications/initialized"}}]"#,
            call(3, "echo", json!({"message": "in a batch"}))
        ),
    );
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let v = r.json();
    let arr = v.as_array().expect("a batch is answered with an array");
    assert_eq!(
        arr.len(),
        2,
        "one response per request, none for the notification"
    );
    assert_eq!(arr[0], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    assert_eq!(arr[1]["id"], 3);
    assert_eq!(arr[1]["result"]["content"][0]["text"], "in a batch");

    let only_notes = post(
        a,
        &h,
        r#"[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":99,"result":{}}]"#,
    );
    assert_eq!((only_notes.status, only_notes.body.len()), (202, 0));

    let init = post(
        a,
        &h,
        r#"[{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"0"}}},{"jsonrpc":"2.0","id":5,"method":"ping"}]"#,
    );
    let v = init.json();
    assert_eq!(v[0]["id"], 4);
    assert_eq!(
        v[0]["error"]["code"], -32600,
        "initialize must not be batched"
    );
    assert_eq!(v[1]["result"], json!({}));

    let bad_items = post(a, &h, r#"[1, {"jsonrpc":"2.0","id":6,"method":"nope"}]"#).json();
    assert_eq!(bad_items[0]["error"]["code"], -32600);
    assert_eq!(bad_items[1]["error"]["code"], -32601);
    let empty = post(a, &h, "[]");
    assert_eq!(
        (empty.status, empty.json()["error"]["code"].as_i64()),
        (400, Some(-32600))
    );
    let broken = post(a, &h, "[{");
    assert_eq!(
        (broken.status, broken.json()["error"]["code"].as_i64()),
        (400, Some(-32700))
    );

    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#;
    assert_eq!(post(a, &[], batch).status, 400, "no session");
    for rev in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let (sid, _) = initialize(a, rev);
        let h = session(&sid, rev);
        let r = post(a, &refs(&h), batch);
        assert_eq!(r.status, 400, "{rev} has no batches");
        assert_eq!(r.json()["error"]["code"], -32600, "{rev}");
    }
}

#[test]
fn batches_stream_in_sse_mode_and_when_they_carry_progress() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let (sid, _) = initialize(srv.mcp_addr, "2025-03-26");
    let h = session(&sid, "2025-03-26");
    let body = format!(
        r#"[{},{{"jsonrpc":"2.0","id":2,"method":"ping"}}]"#,
        progress_call(1, 3, 1, json!("b"))
    );
    let mut s = Streamed::post(srv.mcp_addr, &refs(&h), &body);
    assert_eq!(s.status, 200);
    assert!(
        s.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut msgs = Vec::new();
    while let Some(m) = s.next_message() {
        msgs.push(m);
    }
    let notes: Vec<&Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(notes.len(), 3);
    assert!(
        msgs[..3]
            .iter()
            .all(|m| m["method"] == "notifications/progress"),
        "{msgs:?}"
    );
    let ids: HashSet<i64> = msgs[3..]
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, HashSet::from([1, 2]));

    let srv = servers(ResponseMode::Sse, 0, 100, Default::default());
    let (sid, _) = initialize(srv.mcp_addr, "2025-03-26");
    let h = session(&sid, "2025-03-26");
    let mut s = Streamed::post(
        srv.mcp_addr,
        &refs(&h),
        r#"[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":8,"method":"ping"}]"#,
    );
    assert!(
        s.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let ids: Vec<Value> = std::iter::from_fn(|| s.next_message())
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, [json!(7), json!(8)], "one event per response");
}

#[test]
fn sse_streams_open_with_a_priming_event_only_in_2025_11_25() {
    let srv = servers(ResponseMode::Sse, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let mut r = Streamed::post(a, &[], init);
    let sid = r.header("mcp-session-id").unwrap().to_string();
    let priming = r.next_event().unwrap();
    assert!(
        priming.id.is_some() && priming.data.as_deref() == Some(""),
        "{priming:?}"
    );
    let msg = r.next_event().unwrap();
    assert!(msg.id.is_some());
    assert_eq!(msg.json()["result"]["protocolVersion"], "2025-11-25");

    let h = session(&sid, "2025-11-25");
    let mut seen = HashSet::new();
    seen.insert(priming.id.unwrap());
    seen.insert(msg.id.unwrap());
    for i in 0..3 {
        let mut r = Streamed::post(
            a,
            &refs(&h),
            &format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, 10 + i),
        );
        let p = r.next_event().unwrap();
        assert_eq!(p.data.as_deref(), Some(""), "every stream is primed");
        let m = r.next_event().unwrap();
        assert_eq!(m.json()["id"], 10 + i);
        for id in [p.id.unwrap(), m.id.unwrap()] {
            assert!(
                seen.insert(id.clone()),
                "event id {id} reused within the session"
            );
        }
    }

    for rev in ["2025-03-26", "2025-06-18"] {
        let (sid, _) = initialize(a, rev);
        let h = session(&sid, rev);
        let mut r = Streamed::post(a, &refs(&h), r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
        let ev = r.next_event().unwrap();
        assert_eq!(ev.id, None, "{rev}: no event ids");
        assert_eq!(
            ev.json()["result"],
            json!({}),
            "{rev}: the first event is the response"
        );
        assert!(r.next_event().is_none());
    }
}

#[test]
fn progress_is_streamed_even_in_json_mode() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    for (rev, token) in [("2025-11-25", json!("tok-1")), ("2025-06-18", json!(42))] {
        let (sid, _) = initialize(a, rev);
        let h = session(&sid, rev);
        let mut s = Streamed::post(a, &refs(&h), &progress_call(5, 4, 2, token.clone()));
        assert_eq!(s.status, 200);
        assert!(
            s.header("content-type")
                .unwrap()
                .starts_with("text/event-stream"),
            "{rev}"
        );
        assert_eq!(s.header("x-accel-buffering"), Some("no"));
        let mut events = Vec::new();
        while let Some(e) = s.next_event() {
            events.push(e);
        }
        let primed = events[0].data.as_deref() == Some("");
        assert_eq!(primed, rev == "2025-11-25", "{rev}: {events:?}");
        let msgs: Vec<Value> = events
            .iter()
            .filter(|e| e.data.as_deref().is_some_and(|d| !d.is_empty()))
            .map(|e| e.json())
            .collect();
        assert_eq!(msgs.len(), 5, "{rev}: 4 notifications then the response");
        for (i, m) in msgs[..4].iter().enumerate() {
            assert_eq!(m["method"], "notifications/progress");
            assert_eq!(m["params"]["progressToken"], token);
            assert_eq!(
                m["params"]["progress"],
                i as u64 + 1,
                "strictly increasing from 1"
            );
            assert_eq!(m["params"]["total"], 4);
        }
        assert_eq!(msgs[4]["id"], 5);
        assert_eq!(
            msgs[4]["result"]["content"][0]["text"],
            "done after 4 steps"
        );
    }

    // Without a token the call just answers, as JSON.
    let (sid, _) = initialize(a, "2025-11-25");
    let h = session(&sid, "2025-11-25");
    let r = post(
        a,
        &refs(&h),
        &call(6, "progress", json!({"steps": 2, "interval_ms": 1})),
    );
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(
        r.json()["result"]["content"][0]["text"],
        "done after 2 steps"
    );
    let bad = post(
        a,
        &refs(&h),
        &call(7, "progress", json!({"steps": 0, "interval_ms": 1})),
    )
    .json();
    assert_eq!(bad["result"]["isError"], true, "steps is 1..=1000");
    let bad_token = post(
        a,
        &refs(&h),
        &progress_call(8, 1, 1, json!({"not": "a token"})),
    )
    .json();
    assert_eq!(bad_token["error"]["code"], -32602);
}

fn cancel(id: u64) -> String {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "test"}}).to_string()
}

#[test]
fn cancelled_requests_get_no_response_and_stop() {
    for mode in [ResponseMode::Json, ResponseMode::Sse] {
        let srv = launch(Config {
            response: mode,
            ..Config::default()
        });
        let a = srv.mcp_addr;
        let state = srv.state().clone();
        let (sid, _) = initialize(a, "2025-11-25");
        let h = session(&sid, "2025-11-25");
        let hh = h.clone();
        let slow =
            std::thread::spawn(move || post(a, &refs(&hh), &call(7, "sleep", json!({"ms": 5000}))));
        wait_until("the sleep call to start", || state.active_calls() == 1);
        let unknown = post(a, &refs(&h), &cancel(999));
        assert_eq!(unknown.status, 202, "unknown ids are ignored silently");
        assert_eq!(state.active_calls(), 1, "an unknown id cancels nothing");
        assert_eq!(post(a, &refs(&h), &cancel(7)).status, 202);
        let r = slow.join().unwrap();
        match mode {
            ResponseMode::Json => {
                assert_eq!(
                    (r.status, r.body.len()),
                    (202, 0),
                    "a cancelled JSON request: 202, no body"
                );
            }
            ResponseMode::Sse => {
                assert_eq!(r.status, 200);
                let text = String::from_utf8(r.body).unwrap();
                assert!(
                    !text.contains("event: message"),
                    "no response on the stream: {text:?}"
                );
                assert!(text.starts_with("id: "), "only the priming event: {text:?}");
            }
        }
        wait_until("the cancelled call to be freed", || {
            state.active_calls() == 0
        });
        let late = post(a, &refs(&h), &cancel(7));
        assert_eq!(late.status, 202, "a late cancel is ignored");
        let ok = post(
            a,
            &refs(&h),
            &call(8, "echo", json!({"message": "still fine"})),
        )
        .message();
        assert_eq!(ok["result"]["content"][0]["text"], "still fine");
    }
}

#[test]
fn cancelling_a_progress_stream_ends_it_without_a_response() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let (sid, _) = initialize(a, "2025-11-25");
    let h = session(&sid, "2025-11-25");
    let mut s = Streamed::post(a, &refs(&h), &progress_call(3, 1000, 20, json!("long")));
    let first = s.next_message().unwrap();
    assert_eq!(first["params"]["progress"], 1);
    assert_eq!(post(a, &refs(&h), &cancel(3)).status, 202);
    let mut last = 1;
    while let Some(m) = s.next_message() {
        assert_eq!(
            m["method"], "notifications/progress",
            "no response after a cancel: {m}"
        );
        let p = m["params"]["progress"].as_u64().unwrap();
        assert!(p > last);
        last = p;
    }
    assert!(last < 1000, "the stream ended early");
    wait_until("the call to be freed", || srv.state().active_calls() == 0);
}

#[test]
fn deleting_a_session_cancels_its_calls() {
    let srv = servers(ResponseMode::Json, 0, 100, Default::default());
    let a = srv.mcp_addr;
    let state = srv.state().clone();
    let (sid, _) = initialize(a, "2025-11-25");
    let h = session(&sid, "2025-11-25");
    let hh = h.clone();
    let slow =
        std::thread::spawn(move || post(a, &refs(&hh), &call(7, "sleep", json!({"ms": 60000}))));
    wait_until("the sleep call to start", || state.active_calls() == 1);
    let del = crate::support::http(a, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"");
    assert_eq!(del.status, 200);
    assert_eq!(slow.join().unwrap().status, 202);
    wait_until("the call to be freed", || state.active_calls() == 0);
}
