//! Microbenchmarks of the generator's per-request work, tracked in CI for regressions.
//!
//! `cargo bench --bench hotpath` runs them; each measures one piece of what a virtual user does
//! per request, so a regression points at its cause.

use std::hint::black_box;
use std::ops::ControlFlow;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mcpbench::metrics::outcome::Outcome;
use mcpbench::metrics::recorder::{Phase, Recorder};
use mcpbench::protocol::jsonrpc::{Codec, decode};
use mcpbench::transport::sse_decoder::SseDecoder;
use rand::SeedableRng;
use rand::rngs::SmallRng;

#[path = "common/messages.rs"]
mod messages;
use messages::{SMALL, large};

fn envelope(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope_decode");
    for (name, msg) in messages::sized() {
        g.throughput(Throughput::Bytes(msg.len() as u64));
        for codec in [Codec::Scan, Codec::SerdeJson, Codec::SimdJson] {
            let mut buf = msg.clone().into_bytes();
            g.bench_with_input(
                BenchmarkId::new(format!("{codec:?}"), name),
                &msg,
                |b, msg| {
                    b.iter(|| {
                        buf.clear();
                        buf.extend_from_slice(msg.as_bytes());
                        black_box(decode(codec, &mut buf).is_ok())
                    })
                },
            );
        }
    }
    g.finish();
}

fn sse(c: &mut Criterion) {
    let stream = messages::sse_stream();
    let mut g = c.benchmark_group("sse_decode");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    let mut d = SseDecoder::default();
    g.bench_function("priming_plus_response", |b| {
        b.iter(|| {
            d.reset();
            let mut n = 0;
            let _ = d.feed(stream.as_bytes(), |e| {
                n += e.data.len();
                ControlFlow::Continue(())
            });
            black_box(n)
        })
    });
    g.finish();
}

fn request_body(c: &mut Criterion) {
    let plan =
        mcpbench::scenario::parse("bench.toml", messages::GENERATED_CALL, &|_| None).unwrap();
    let item = &plan.workload[0];
    let template = mcpbench::client::request::RequestTemplate::new(
        item,
        mcpbench::protocol::version::Revision::V2025_11_25,
    );
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Vec::with_capacity(256);
    let mut id = 0u64;
    c.bench_function("request_body/tools_call_with_generators", |b| {
        b.iter(|| {
            out.clear();
            id += 1;
            template.write(item, &mut out, id, &mut rng);
            black_box(out.len())
        })
    });
}

fn record(c: &mut Criterion) {
    let mut r = Recorder::new(4);
    let mut i = 0u64;
    c.bench_function("recorder/record_ok", |b| {
        b.iter(|| {
            i = i.wrapping_add(7919);
            r.started(1, Phase::Measured);
            r.record(
                1,
                Phase::Measured,
                Outcome::Ok,
                Duration::from_micros(100 + i % 5000),
            );
        })
    });
}

/// Checking a call's arguments against a compiled input schema: what the reference server does
/// on every `tools/call`, and preflight on samples of generated arguments. Side by side with the
/// server's former hand-written validator (2026-12-01, 2-core VM, two sittings, medians): echo
/// 295 ns → 52–66 ns, search-contacts 515–528 ns → 93–110 ns, about 5× faster, and complete —
/// so the `jsonschema` crate replaced it everywhere.
fn schema_validation(c: &mut Criterion) {
    let cases = [
        (
            "echo",
            serde_json::json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"], "additionalProperties": false}),
            serde_json::json!({"message": "hello from mcpbench"}),
        ),
        (
            "search_contacts",
            serde_json::json!({"type": "object", "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 200}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}}, "required": ["query"], "additionalProperties": false}),
            serde_json::json!({"query": "Leanne", "limit": 10}),
        ),
    ];
    let mut g = c.benchmark_group("schema_validation");
    for (name, schema, args) in &cases {
        let compiled = mcpbench::protocol::schema::compile(schema).unwrap();
        g.bench_with_input(BenchmarkId::new("jsonschema", name), args, |b, args| {
            b.iter(|| black_box(mcpbench::protocol::schema::check(&compiled, args).is_ok()))
        });
    }
    g.finish();
}

/// A byte stream that repeats `data` (whole frames) forever: a long-lived connection in
/// steady state, readable both as `std::io::Read` (tungstenite) and `tokio::io::AsyncRead`
/// (mcpbench's reader). Writes are dropped.
struct Cycle {
    data: Vec<u8>,
    pos: usize,
}

impl Cycle {
    fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos = (self.pos + n) % self.data.len();
        n
    }
}

impl std::io::Read for Cycle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(self.fill(buf))
    }
}

impl std::io::Write for Cycle {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl tokio::io::AsyncRead for Cycle {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = self.fill(buf.initialize_unfilled());
        buf.advance(n);
        std::task::Poll::Ready(Ok(()))
    }
}

/// An unmasked server text frame (RFC 6455 §5.2).
fn server_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x81];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n < 65536 => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
}

/// mcpbench's WebSocket client framing against tungstenite (the maintained Rust library behind
/// tokio-tungstenite) on the same messages: sending a request (masking and framing; tungstenite
/// also needs its message, made from the rendered body as a client must) and reading responses
/// from a connection in steady state. mcpbench keeps its own framing only while it is the
/// cheaper one; the figures are in results/baselines/websocket-framing-*.md.
fn websocket_framing(c: &mut Criterion) {
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};
    use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
    let request = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"message":"hello from mcpbench"}},"id":12345}"#.to_vec();
    let mut g = c.benchmark_group("websocket_framing");
    g.throughput(Throughput::Bytes(request.len() as u64));
    let mut framer = mcpbench::transport::ws_frames::TextFramer::new();
    let mut out = Vec::with_capacity(4096);
    g.bench_function("send/mcpbench", |b| {
        b.iter(|| {
            out.clear();
            framer.text(black_box(&request), &mut out);
            black_box(out.len())
        })
    });
    let sink = Cycle {
        data: vec![0],
        pos: 0,
    };
    let mut ws = WebSocket::from_raw_socket(sink, Role::Client, None);
    g.bench_function("send/tungstenite", |b| {
        b.iter(|| {
            let text = String::from_utf8(black_box(&request).clone()).unwrap();
            ws.send(Message::Text(Utf8Bytes::from(text))).unwrap();
        })
    });
    for (name, msg) in [
        ("small", SMALL.as_bytes().to_vec()),
        ("large", large().into_bytes()),
    ] {
        let frames: Vec<u8> = (0..64).flat_map(|_| server_frame(&msg)).collect();
        g.throughput(Throughput::Bytes(msg.len() as u64));
        let mut reader = mcpbench::transport::ws_frames::WsReader::new(Cycle {
            data: frames.clone(),
            pos: 0,
        });
        // The stream is always ready, so one poll completes a read: no runtime in the way.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        g.bench_function(BenchmarkId::new("receive/mcpbench", name), |b| {
            b.iter(|| {
                let next = std::pin::pin!(reader.next());
                match next.poll(&mut cx) {
                    std::task::Poll::Ready(Ok(mcpbench::transport::ws_frames::WsEvent::Text(
                        t,
                    ))) => black_box(t.len()),
                    _ => unreachable!(),
                }
            })
        });
        let source = Cycle {
            data: frames,
            pos: 0,
        };
        let mut ws = WebSocket::from_raw_socket(source, Role::Client, None);
        g.bench_function(BenchmarkId::new("receive/tungstenite", name), |b| {
            b.iter(|| match ws.read().unwrap() {
                Message::Text(t) => black_box(t.len()),
                _ => unreachable!(),
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    envelope,
    sse,
    request_body,
    record,
    schema_validation,
    websocket_framing
);
criterion_main!(benches);
