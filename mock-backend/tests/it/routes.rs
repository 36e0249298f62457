//! Every route's happy path and its error answers.

use hyper::{Method, StatusCode, header::ALLOW};
use mock_backend::Config;
use serde_json::json;

use crate::support::{Server, request};

#[tokio::test]
async fn health_is_ok() {
    let server = Server::start(Config::default()).await;
    let reply = server.get("/health").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.content_type(), Some("application/json"));
    assert_eq!(reply.json(), json!({"status": "ok"}));
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn contacts_search_is_case_insensitive_and_decoded() {
    let server = Server::start(Config::default()).await;
    let reply = server.get("/contacts?q=LEANNE+gra%68am").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.content_type(), Some("application/json"));
    let v = reply.json();
    assert_eq!(v["query"], "LEANNE graham");
    assert_eq!(v["total"], 1);
    let leanne = &v["results"][0];
    assert_eq!(leanne["id"], 1);
    assert_eq!(leanne["name"], "Leanne Graham");
    assert_eq!(leanne["email"], "Sincere@april.biz");
    assert!(leanne["phone"].is_string());
    assert_eq!(leanne["company"], "Romaguera-Crona");
}

#[tokio::test]
async fn contacts_limit_defaults_caps_and_validates() {
    let server = Server::start(Config {
        contacts: 250,
        ..Config::default()
    })
    .await;
    let v = server.get("/contacts").await.json();
    assert_eq!(v["total"], 250);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(10));

    let v = server.get("/contacts?limit=3").await.json();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(3));

    let v = server.get("/contacts?limit=1000").await.json();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(100));

    let reply = server.get("/contacts?limit=lots").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("limit"))
    );
}

#[tokio::test]
async fn invoices_are_deterministic_and_bounded() {
    let server = Server::start(Config {
        invoices: 50,
        ..Config::default()
    })
    .await;
    let first = server.get("/invoices/7").await;
    assert_eq!(first.status, StatusCode::OK);
    let v = first.json();
    assert_eq!(v["id"], 7);
    for field in ["customer", "currency", "status", "issued"] {
        assert!(v[field].is_string(), "{field}: {v}");
    }
    let lines = v["lines"].as_array().expect("lines");
    let sum: u64 = lines
        .iter()
        .map(|l| l["quantity"].as_u64().unwrap_or(0) * l["unit_cents"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(v["amount_cents"].as_u64(), Some(sum));
    assert_eq!(server.get("/invoices/7").await.body, first.body);
    assert_eq!(server.get("/invoices/50").await.status, StatusCode::OK);

    for bad in [
        "/invoices/0",
        "/invoices/51",
        "/invoices/abc",
        "/invoices/",
        "/invoices/-1",
    ] {
        let reply = server.get(bad).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{bad}");
        assert_eq!(reply.json(), json!({"error": "invoice not found"}), "{bad}");
    }
}

#[tokio::test]
async fn tickets_get_increasing_ids() {
    let server = Server::start(Config::default()).await;
    let a = server
        .post(
            "/tickets",
            r#"{"title":"Printer on fire","priority":"high","body":"smoke"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED);
    let a = a.json();
    assert_eq!(a["title"], "Printer on fire");
    assert_eq!(a["priority"], "high");
    assert_eq!(a["status"], "open");

    let b = server
        .post("/tickets", r#"{"title":"Second"}"#)
        .await
        .json();
    assert_eq!(b["priority"], "normal");
    let (a_id, b_id) = (a["id"].as_u64().expect("id"), b["id"].as_u64().expect("id"));
    assert!(b_id > a_id, "{a_id} then {b_id}");
}

#[tokio::test]
async fn tickets_reject_bad_input() {
    let server = Server::start(Config::default()).await;
    for bad in [
        "not json",
        "",
        "{}",
        r#"{"title":""}"#,
        r#"{"title":"   "}"#,
        r#"{"title":42}"#,
        r#"{"title":"x","priority":"urgent"}"#,
    ] {
        let reply = server.post("/tickets", bad).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad:?}");
        assert!(reply.json()["error"].is_string(), "{bad:?}");
    }
}

#[tokio::test]
async fn echo_returns_body_or_message() {
    let server = Server::start(Config::default()).await;
    let reply = server.post("/echo", r#"{"a":[1,2,{"b":null}]}"#).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json(), json!({"echo": {"a": [1, 2, {"b": null}]}}));

    assert_eq!(
        server.post("/echo", "\"hi\"").await.json(),
        json!({"echo": "hi"})
    );
    assert_eq!(
        server.post("/echo", "{oops").await.status,
        StatusCode::BAD_REQUEST
    );

    let v = server.get("/echo?msg=hello+world%21").await.json();
    assert_eq!(v, json!({"echo": "hello world!"}));
}

#[tokio::test]
async fn unknown_paths_are_json_404s() {
    let server = Server::start(Config::default()).await;
    for path in ["/", "/nope", "/contacts/1", "/invoices"] {
        let reply = server.get(path).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(reply.content_type(), Some("application/json"), "{path}");
        assert!(reply.json()["error"].is_string(), "{path}");
    }
}

#[tokio::test]
async fn wrong_methods_are_405_with_allow() {
    let server = Server::start(Config::default()).await;
    for (method, path, allow) in [
        (Method::POST, "/contacts", "GET"),
        (Method::DELETE, "/invoices/1", "GET"),
        (Method::GET, "/tickets", "POST"),
        (Method::PUT, "/echo", "GET, POST"),
        (Method::PUT, "/stats", "GET, DELETE"),
        (Method::GET, "/stats/reset", "POST"),
        (Method::POST, "/health", "GET"),
    ] {
        let reply = request(server.addr, method.clone(), path, Some("{}")).await;
        assert_eq!(
            reply.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(
            reply.headers.get(ALLOW).and_then(|v| v.to_str().ok()),
            Some(allow),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let server = Server::start(Config {
        max_body: 64,
        ..Config::default()
    })
    .await;
    let big = format!(r#"{{"title":"{}"}}"#, "x".repeat(100));
    let reply = server.post("/tickets", &big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply.json()["error"].is_string());
    let reply = server
        .post("/echo", &format!("\"{}\"", "y".repeat(64)))
        .await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    // Exactly at the limit is fine.
    let reply = server
        .post("/echo", &format!("\"{}\"", "y".repeat(62)))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
}
