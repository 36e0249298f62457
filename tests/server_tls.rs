//! TLS: HTTPS with HTTP/1.1 and HTTP/2 chosen by ALPN, and WSS, on one listener, with a
//! certificate minted at test time.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcpbench::server::{Config, EmbeddedServers, tls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

use crate::support::{launch, scratch, self_signed};

fn client_config(cert: &std::path::Path, alpn: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(cert).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![alpn.as_bytes().to_vec()];
    Arc::new(c)
}

fn tls_server() -> (tempfile::TempDir, std::path::PathBuf, EmbeddedServers) {
    let dir = scratch();
    let (cert, key) = self_signed(dir.path());
    let srv = launch(Config {
        tls: Some(tls::load_pem(&cert, &key).expect("PEM loads")),
        ..Config::default()
    });
    (dir, cert, srv)
}

fn mcp_request(
    addr: SocketAddr,
    h2: bool,
    session: Option<&str>,
    body: &str,
) -> Request<Full<Bytes>> {
    let uri = if h2 {
        format!("https://localhost:{}/mcp", addr.port())
    } else {
        "/mcp".into()
    };
    let mut b = Request::post(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if !h2 {
        b = b.header("host", format!("localhost:{}", addr.port()));
    }
    if let Some(s) = session {
        b = b
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    b.body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_http1_and_http2_by_alpn() {
    let (_dir, cert, srv) = tls_server();
    assert!(srv.mcp_url().starts_with("https://"), "{}", srv.mcp_url());
    assert!(srv.ws_url().starts_with("wss://"));
    let addr = srv.mcp_addr;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let echo = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"secure"}}}"#;
    for alpn in ["http/1.1", "h2"] {
        let h2 = alpn == "h2";
        let connector = tokio_rustls::TlsConnector::from(client_config(&cert, alpn));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let stream = connector
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .expect("TLS handshake");
        assert_eq!(
            stream.get_ref().1.alpn_protocol(),
            Some(alpn.as_bytes()),
            "ALPN {alpn}"
        );
        let io = TokioIo::new(stream);
        let mut responses: Vec<(hyper::StatusCode, Option<String>, Value)> = Vec::new();
        if h2 {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
            tokio::spawn(conn);
            let mut sid = None;
            for body in [init, echo] {
                send.ready().await.unwrap();
                let r = send
                    .send_request(mcp_request(addr, true, sid.as_deref(), body))
                    .await
                    .unwrap();
                assert_eq!(r.version(), hyper::Version::HTTP_2);
                let s = r
                    .headers()
                    .get("mcp-session-id")
                    .map(|v| v.to_str().unwrap().to_string());
                sid = sid.or(s.clone());
                let status = r.status();
                let b = r.into_body().collect().await.unwrap().to_bytes();
                responses.push((status, s, serde_json::from_slice(&b).unwrap()));
            }
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            let mut sid = None;
            for body in [init, echo] {
                send.ready().await.unwrap();
                let r = send
                    .send_request(mcp_request(addr, false, sid.as_deref(), body))
                    .await
                    .unwrap();
                assert_eq!(r.version(), hyper::Version::HTTP_11);
                let s = r
                    .headers()
                    .get("mcp-session-id")
                    .map(|v| v.to_str().unwrap().to_string());
                sid = sid.or(s.clone());
                let status = r.status();
                let b = r.into_body().collect().await.unwrap().to_bytes();
                responses.push((status, s, serde_json::from_slice(&b).unwrap()));
            }
        }
        assert_eq!(responses[0].0, 200, "{alpn}");
        assert!(responses[0].1.is_some(), "{alpn}: a session was made");
        assert_eq!(responses[0].2["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(
            responses[1].2["result"]["content"][0]["text"],
            json!("secure"),
            "{alpn}"
        );
    }

    // Plain HTTP on the TLS listener is not served.
    let plain = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(crate::support::HANG)).unwrap();
        let _ = s.write_all(b"GET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        buf
    })
    .await
    .unwrap();
    assert!(!plain.starts_with(b"HTTP/1.1"), "no plaintext HTTP answer");
}

#[test]
fn wss_carries_a_websocket_session() {
    let (_dir, cert, srv) = tls_server();
    let conn = rustls::ClientConnection::new(
        client_config(&cert, "http/1.1"),
        ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    let tcp = std::net::TcpStream::connect(srv.mcp_addr).unwrap();
    tcp.set_read_timeout(Some(crate::support::HANG)).unwrap();
    let stream = rustls::StreamOwned::new(conn, tcp);
    let uri = format!("wss://localhost:{}/ws", srv.mcp_addr.port())
        .parse()
        .unwrap();
    let req =
        tokio_tungstenite::tungstenite::ClientRequestBuilder::new(uri).with_sub_protocol("mcp");
    let (mut ws, resp) =
        tokio_tungstenite::tungstenite::client(req, stream).expect("WSS handshake");
    assert_eq!(resp.status(), 101);
    use tokio_tungstenite::tungstenite::Message;
    ws.send(Message::text(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#)).unwrap();
    let Message::Text(t) = ws.read().unwrap() else {
        panic!("a text frame")
    };
    let v: Value = serde_json::from_str(t.as_str()).unwrap();
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
}
