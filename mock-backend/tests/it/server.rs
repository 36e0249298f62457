//! Knobs, counters and lifecycle of a served backend.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mock_backend::{Config, Knobs, Latency, RouteKnobs, RouteStats, StatsSnapshot};
use serde_json::json;
use tokio::net::TcpStream;

use crate::support::{HANG_GUARD, Server, request};

#[tokio::test]
async fn stats_count_exactly_and_reset() {
    let server = Server::start(Config::default()).await;
    const N: u64 = 25;
    for i in 0..N {
        let reply = server.get(&format!("/invoices/{}", i + 1)).await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    for _ in 0..3 {
        assert_eq!(
            server.get("/invoices/0").await.status,
            StatusCode::NOT_FOUND
        );
    }
    assert_eq!(server.post("/echo", "[1]").await.status, StatusCode::OK);
    assert_eq!(server.get("/health").await.status, StatusCode::OK);
    assert_eq!(server.get("/nowhere").await.status, StatusCode::NOT_FOUND);

    let stats = server.stats().await;
    assert_eq!(
        stats.routes.invoices,
        RouteStats {
            requests: N + 3,
            ok: N,
            client_errors: 3,
            injected_errors: 0
        }
    );
    assert_eq!(stats.routes.echo.requests, 1);
    assert_eq!(stats.routes.contacts, RouteStats::default());
    // /health, /stats and unknown paths are not counted.
    assert_eq!(stats.total.requests, N + 4);
    assert_eq!(stats.total.ok, N + 1);

    let reply = request(server.addr, Method::DELETE, "/stats", None).await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT);
    assert!(reply.body.is_empty());
    assert_eq!(server.stats().await, StatsSnapshot::default());

    server.get("/contacts").await;
    assert_eq!(server.stats().await.total.requests, 1);
    let reply = server.post("/stats/reset", "").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(server.stats().await, StatsSnapshot::default());
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn stats_json_has_the_documented_shape() {
    let server = Server::start(Config::default()).await;
    server.get("/echo?msg=x").await;
    let v = server.get("/stats").await.json();
    let counters = json!({"requests": 1, "ok": 1, "client_errors": 0, "injected_errors": 0});
    assert_eq!(v["routes"]["echo"], counters);
    assert_eq!(v["total"], counters);
    for route in ["contacts", "invoices", "tickets"] {
        assert_eq!(v["routes"][route]["requests"], 0, "{route}");
    }
}

#[tokio::test]
async fn error_rate_one_fails_everything_and_counts_it() {
    let server = Server::start(Config {
        defaults: Knobs {
            error_rate: Some(1.0),
            ..Knobs::default()
        },
        ..Config::default()
    })
    .await;
    for path in ["/contacts?q=a", "/invoices/1", "/echo?msg=x"] {
        let reply = server.get(path).await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR, "{path}");
        assert_eq!(reply.json(), json!({"error": "injected failure"}));
    }
    let reply = server.post("/tickets", r#"{"title":"t"}"#).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    // Never injected into the bookkeeping endpoints.
    assert_eq!(server.get("/health").await.status, StatusCode::OK);

    let stats = server.stats().await;
    assert_eq!(
        stats.total,
        RouteStats {
            requests: 4,
            ok: 0,
            client_errors: 0,
            injected_errors: 4
        }
    );
}

#[tokio::test]
async fn route_knobs_override_defaults_field_by_field() {
    let mut routes = RouteKnobs::default();
    routes.echo.error_rate = Some(0.0);
    let server = Server::start(Config {
        defaults: Knobs {
            error_rate: Some(1.0),
            payload: Some(32),
            ..Knobs::default()
        },
        routes,
        ..Config::default()
    })
    .await;
    assert_eq!(
        server.get("/contacts").await.status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    let v = server.get("/echo?msg=x").await.json();
    assert_eq!(v["echo"], "x");
    // The echo route kept the global payload.
    assert_eq!(v["padding"].as_str().map(str::len), Some(32));
}

#[tokio::test]
async fn payload_adds_padding_of_exact_size() {
    let mut routes = RouteKnobs::default();
    routes.tickets.payload = Some(0);
    let server = Server::start(Config {
        defaults: Knobs {
            payload: Some(1000),
            ..Knobs::default()
        },
        routes,
        ..Config::default()
    })
    .await;
    let v = server.get("/invoices/3").await.json();
    assert_eq!(v["id"], 3);
    assert_eq!(v["padding"].as_str().map(str::len), Some(1000));
    let v = server.get("/contacts?q=leanne").await.json();
    assert_eq!(v["total"], 1);
    assert_eq!(v["padding"].as_str().map(str::len), Some(1000));
    // Errors are not padded.
    let v = server.get("/invoices/0").await.json();
    assert_eq!(v, json!({"error": "invoice not found"}));
    // payload=0 on a route turns it off.
    let v = server.post("/tickets", r#"{"title":"t"}"#).await.json();
    assert!(v.get("padding").is_none(), "{v}");
}

#[tokio::test]
async fn fixed_latency_delays_answers() {
    let latency = Duration::from_millis(80);
    let mut routes = RouteKnobs::default();
    routes.invoices.latency = Some(Latency::Fixed(latency));
    let server = Server::start(Config {
        routes,
        ..Config::default()
    })
    .await;
    let start = Instant::now();
    let reply = server.get("/invoices/1").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        start.elapsed() >= latency,
        "answered after {:?}",
        start.elapsed()
    );

    // Latency comes before injected failures too.
    let server = Server::start(Config {
        defaults: Knobs {
            latency: Some(Latency::Fixed(latency)),
            error_rate: Some(1.0),
            ..Knobs::default()
        },
        ..Config::default()
    })
    .await;
    let start = Instant::now();
    let reply = server.get("/echo").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        start.elapsed() >= latency,
        "answered after {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn invalid_config_is_rejected_before_serving() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut routes = RouteKnobs::default();
    routes.tickets.error_rate = Some(1.5);
    let result = mock_backend::serve(
        listener,
        Config {
            routes,
            ..Config::default()
        },
        std::future::pending(),
    )
    .await;
    let err = result.expect_err("error rate 1.5 is invalid");
    assert!(err.to_string().contains("route tickets"), "{err}");
}

#[tokio::test]
async fn keep_alive_connection_serves_many_requests() {
    let server = Server::start(Config::default()).await;
    let stream = TcpStream::connect(server.addr).await.expect("connect");
    assert!(stream.set_nodelay(true).is_ok());
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    for i in 1..=20u64 {
        let req = Request::get(format!("/invoices/{i}"))
            .header("host", "backend")
            .body(Empty::<Bytes>::new())
            .expect("request");
        let resp = sender.send_request(req).await.expect("response");
        assert_eq!(resp.status(), StatusCode::OK);
        resp.into_body().collect().await.expect("body");
    }
    assert_eq!(server.stats().await.routes.invoices.ok, 20);
}

#[tokio::test]
async fn http2_prior_knowledge_works() {
    let server = Server::start(Config::default()).await;
    let stream = TcpStream::connect(server.addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let req = Request::get(format!("http://{}/contacts?q=ervin", server.addr))
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["results"][0]["name"], "Ervin Howell");
}

#[tokio::test]
async fn shutdown_returns_and_finishes_in_flight_requests() {
    let latency = Duration::from_millis(300);
    let mut server = Server::start(Config {
        defaults: Knobs {
            latency: Some(Latency::Fixed(latency)),
            ..Knobs::default()
        },
        ..Config::default()
    })
    .await;
    let addr = server.addr;
    let in_flight =
        tokio::spawn(async move { request(addr, Method::GET, "/invoices/1", None).await });
    // Let the request reach the handler's sleep before shutting down.
    let deadline = Instant::now() + HANG_GUARD;
    while server.stats().await.routes.invoices.requests == 0 {
        assert!(Instant::now() < deadline, "request never arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.trigger_shutdown();
    let reply = tokio::time::timeout(HANG_GUARD, in_flight)
        .await
        .expect("in-flight request finished")
        .expect("request task");
    assert_eq!(reply.status, StatusCode::OK);
    server.stop().await.expect("serve returned Ok");
    // The listener is closed: nothing accepts any more.
    assert!(TcpStream::connect(addr).await.is_err());
}
