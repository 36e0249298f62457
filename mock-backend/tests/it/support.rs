//! A running backend on 127.0.0.1:0 and a minimal hyper client.

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{HeaderMap, Method, Request, StatusCode, header::CONTENT_TYPE};
use hyper_util::rt::TokioIo;
use mock_backend::{Config, Error, StatsSnapshot};
use serde_json::Value;
use tokio::{net::TcpListener, net::TcpStream, sync::oneshot, task::JoinHandle};

/// Generous bound so a broken shutdown fails the test instead of hanging it.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

pub struct Server {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), Error>>,
}

impl Server {
    pub async fn start(config: Config) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(mock_backend::serve(listener, config, async {
            let _ = rx.await;
        }));
        Server {
            addr,
            shutdown: Some(tx),
            task,
        }
    }

    /// Triggers shutdown without waiting for `serve` to return.
    pub fn trigger_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Shuts down and waits for `serve` to return.
    pub async fn stop(mut self) -> Result<(), Error> {
        self.trigger_shutdown();
        tokio::time::timeout(HANG_GUARD, self.task)
            .await
            .expect("serve returned after shutdown")
            .expect("serve task did not panic")
    }

    pub async fn get(&self, path: &str) -> Reply {
        request(self.addr, Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &str) -> Reply {
        request(self.addr, Method::POST, path, Some(body)).await
    }

    pub async fn stats(&self) -> StatsSnapshot {
        let reply = self.get("/stats").await;
        assert_eq!(reply.status, StatusCode::OK);
        serde_json::from_slice(&reply.body).expect("stats JSON")
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.body))
    }

    pub fn content_type(&self) -> Option<&str> {
        self.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok())
    }
}

/// One request on a fresh HTTP/1.1 connection.
pub async fn request(addr: SocketAddr, method: Method, path: &str, body: Option<&str>) -> Reply {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    if body.is_some() {
        builder = builder.header(CONTENT_TYPE, "application/json");
    }
    let req = builder
        .body(Full::new(Bytes::from(body.unwrap_or("").to_owned())))
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let (parts, body) = resp.into_parts();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.expect("body").to_bytes(),
    }
}
