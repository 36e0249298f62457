//! MCP over WebSocket (non-standard; the TS and Python SDKs' convention, SEP-1288 pending):
//! subprotocol `mcp`, one JSON-RPC message per text frame, many requests in flight per
//! connection, handshake-era lifecycle (and 2026-07-28 messages with `_meta`).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::Endpoint;
use super::mux::{Connector, MuxConn, MuxSession, Outbound, Writer};
use super::net::{self, WriteHalf};
use super::ws_frames::{self, TextFramer, WsEvent};
use crate::metrics::outcome::Outcome;

/// The way out: masked text frames through the combining writer.
pub struct WsOut {
    writer: Writer<WriteHalf, TextFramer>,
}

impl Outbound for WsOut {
    async fn send_message(&self, msg: &[u8]) -> Result<(), ()> {
        self.writer.send(msg).await
    }
}

/// Opens WebSocket connections.
#[derive(Debug)]
pub struct WsConnector;

/// An MCP session over WebSocket.
pub type WebSocketSession = MuxSession<WsConnector>;

impl Connector for WsConnector {
    type Out = WsOut;

    async fn connect(ep: &Arc<Endpoint>, capacity: usize) -> Result<Rc<MuxConn<WsOut>>, Outcome> {
        let target = ep.net.as_ref().ok_or(Outcome::Connect)?;
        let stream = net::connect(target).await.map_err(|e| e.outcome())?;
        let (r, w) = stream.split();
        let handshake = ws_frames::handshake(r, w, &ep.host, &ep.path, &ep.extra_headers, "mcp");
        let (mut reader, writer) = match tokio::time::timeout(ep.timeout, handshake).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(ws_frames::WsError::Status(s))) => return Err(Outcome::Http(s)),
            Ok(Err(_)) | Err(_) => return Err(Outcome::Connect),
        };
        reader.set_max_message(ep.max_body);
        let (io, framer) = writer.into_parts();
        let out = WsOut {
            writer: Writer::new(io, framer),
        };
        let conn = Rc::new(MuxConn::new(capacity, ep, out));
        let weak = Rc::downgrade(&conn);
        conn.hold(tokio::task::spawn_local(async move {
            let mut answer = Vec::new();
            let mut control = Vec::new();
            loop {
                let event = reader.next().await;
                let Some(conn) = weak.upgrade() else { return };
                match event {
                    Ok(WsEvent::Text(msg)) => conn.incoming(msg, &mut answer).await,
                    Ok(WsEvent::Ping(payload)) => {
                        control.clear();
                        conn.out
                            .writer
                            .with_framer(|f| f.pong(payload, &mut control));
                        let _ = conn.out.writer.send_raw(&control).await;
                    }
                    Ok(WsEvent::Pong) => {}
                    Ok(WsEvent::Close { .. }) | Err(_) => {
                        conn.mux.close(Outcome::Io);
                        return;
                    }
                }
            }
        }));
        Ok(conn)
    }

    async fn shutdown(conn: Rc<MuxConn<WsOut>>, within: Duration) {
        let mut frame = Vec::new();
        conn.out.writer.with_framer(|f| f.close(1000, &mut frame));
        let _ = tokio::time::timeout(within, conn.out.writer.send_raw(&frame)).await;
    }
}
