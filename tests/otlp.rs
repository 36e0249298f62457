//! `--otlp-endpoint`: a real OTLP/HTTP receiver (hyper on 127.0.0.1:0, decoding
//! `ExportMetricsServiceRequest` with the generated OpenTelemetry types) gets one push per
//! interval of a run against the built-in reference server, whose counters end where
//! summary.json does; a collector that fails or is not there costs the run nothing but one
//! note. (The official OpenTelemetry Collector would be the better receiver; its binary is in
//! none of the registries this project installs from.)

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use mcpbench::otlp::encode::{keys, names};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric, number_data_point};
use prost::Message;

use crate::support::{repo, scratch};

/// A header value that must arrive and never be shown.
const SECRET: &str = "s3cret-otlp-value-7d1f";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    content_type: Option<String>,
    token: Option<String>,
    body: ExportMetricsServiceRequest,
}

/// An OTLP/HTTP metrics receiver answering every request with `status`.
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

fn receiver(status: u16) -> Receiver {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let (stop, mut stopped) = tokio::sync::oneshot::channel();
    let log = got.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let stream = tokio::select! {
                    s = listener.accept() => s.unwrap().0,
                    _ = &mut stopped => return,
                };
                let log = log.clone();
                let service = hyper::service::service_fn(move |req| {
                    let log = log.clone();
                    async move { answer(req, status, &log).await }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    Receiver {
        addr,
        got,
        stop: Some(stop),
    }
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    status: u16,
    log: &Mutex<Vec<Received>>,
) -> Result<hyper::Response<Full<Bytes>>, hyper::Error> {
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let (path, content_type, token) = (
        req.uri().path().to_string(),
        header("content-type"),
        header("x-otlp-token"),
    );
    let bytes = req.into_body().collect().await?.to_bytes();
    let body = ExportMetricsServiceRequest::decode(bytes).expect("a valid OTLP protobuf request");
    log.lock().unwrap().push(Received {
        path,
        content_type,
        token,
        body,
    });
    let reply = ExportMetricsServiceResponse::default().encode_to_vec();
    Ok(hyper::Response::builder()
        .status(status)
        .header("content-type", "application/x-protobuf")
        .body(Full::new(Bytes::from(reply)))
        .unwrap())
}

/// `mcpbench run scenarios/quickstart.toml` for 3 s without warm-up, exporting to `endpoint`
/// with the secret header (and `env`); no other OpenTelemetry variable leaks in from the
/// environment. (exit code, stdout, stderr, run directory)
fn run(
    dir: &Path,
    endpoint: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String, std::path::PathBuf) {
    let out = dir.join("run");
    let out_arg = out.display().to_string();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbench"));
    cmd.args([
        "run",
        "scenarios/quickstart.toml",
        "--duration",
        "3s",
        "--set",
        "load.warmup=0s",
        "--set",
        "load.concurrency=4",
        "--no-tui",
        "--output",
        &out_arg,
        "--otlp-endpoint",
        endpoint,
    ])
    .args(extra)
    .current_dir(repo())
    .env("RUST_LOG", "warn,mcpbench=debug");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("OTEL_")) {
        cmd.env_remove(k);
    }
    cmd.env(
        "OTEL_EXPORTER_OTLP_HEADERS",
        format!("x-otlp-token={SECRET}"),
    );
    cmd.envs(env.iter().copied());
    let o = cmd.output().expect("run mcpbench");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        out,
    )
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

fn metrics(r: &ExportMetricsServiceRequest) -> &[Metric] {
    &r.resource_metrics[0].scope_metrics[0].metrics
}

fn text(a: &[KeyValue], key: &str) -> Option<String> {
    a.iter()
        .find(|k| k.key == key)
        .and_then(|k| match k.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            v => Some(format!("{v:?}")),
        })
}

/// A series: the metric and its data point's attributes (sorted), for comparing pushes.
fn series(name: &str, a: &[KeyValue]) -> String {
    let mut attrs: Vec<String> = a
        .iter()
        .map(|k| format!("{}={:?}", k.key, k.value))
        .collect();
    attrs.sort();
    format!("{name}{{{}}}", attrs.join(","))
}

/// Every sum's integer points in one push: series → value.
fn sums(r: &ExportMetricsServiceRequest) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for m in metrics(r) {
        if let Some(metric::Data::Sum(s)) = &m.data {
            assert!(s.is_monotonic, "{}", m.name);
            for p in &s.data_points {
                if let Some(number_data_point::Value::AsInt(n)) = p.value {
                    out.insert(series(&m.name, &p.attributes), n);
                }
            }
        }
    }
    out
}

/// A sum's value for one operation (and outcome).
fn value(r: &ExportMetricsServiceRequest, name: &str, op: &str, outcome: Option<&str>) -> i64 {
    let m = metrics(r).iter().find(|m| m.name == name).unwrap();
    let Some(metric::Data::Sum(s)) = &m.data else {
        panic!("{name} is a sum")
    };
    s.data_points
        .iter()
        .filter(|p| text(&p.attributes, keys::OPERATION).as_deref() == Some(op))
        .filter(|p| outcome.is_none() || text(&p.attributes, keys::OUTCOME).as_deref() == outcome)
        .map(|p| match p.value {
            Some(number_data_point::Value::AsInt(n)) => n,
            v => panic!("{name}: {v:?}"),
        })
        .sum()
}

/// The end of the push's figures: every data point of a push has the same time.
fn time_of(r: &ExportMetricsServiceRequest) -> u64 {
    let m = metrics(r)
        .iter()
        .find(|m| m.name == names::STARTED)
        .unwrap();
    let Some(metric::Data::Sum(s)) = &m.data else {
        panic!()
    };
    s.data_points[0].time_unix_nano
}

#[test]
fn every_interval_is_pushed_and_the_last_push_is_the_summary() {
    let collector = receiver(200);
    let dir = scratch();
    let pid = std::process::id().to_string();
    let (code, out, err, run_dir) = run(
        dir.path(),
        &format!("http://{}", collector.addr),
        &["--target-pid", &pid],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(&format!("otlp: http://{}/v1/metrics", collector.addr)),
        "{err}"
    );
    // The secret header went out, and was never printed nor written.
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "{out}{err}");
    for f in std::fs::read_dir(&run_dir).unwrap() {
        let f = f.unwrap().path();
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "{}",
            f.display()
        );
    }
    let got = collector.got.lock().unwrap().clone();
    assert!(!got.is_empty(), "no push arrived: {err}");
    for g in &got {
        assert_eq!(g.path, "/v1/metrics");
        assert_eq!(g.content_type.as_deref(), Some("application/x-protobuf"));
        assert_eq!(g.token.as_deref(), Some(SECRET));
    }

    // One push per interval: the pushes' times are the intervals' ends, in order (the final
    // push at the end of the run may repeat the last one).
    let s = summary(&run_dir);
    let csv = std::fs::read_to_string(run_dir.join("timeseries.csv")).unwrap();
    let ends: Vec<u64> = crate::support::csv_column(&csv, "t_end_s")
        .iter()
        .map(|t| (t.parse::<f64>().unwrap() * 1000.0).round() as u64)
        .collect();
    let started = time::OffsetDateTime::parse(
        s["started_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
    .unix_timestamp_nanos() as u64;
    let mut times: Vec<u64> = got
        .iter()
        .map(|g| (time_of(&g.body) - started) / 1_000_000)
        .collect();
    times.dedup();
    assert_eq!(
        times, ends,
        "pushed at (ms): {times:?}, intervals end at {ends:?}"
    );
    assert!(ends.len() >= 3, "{ends:?}");

    // The resource says which run this is.
    let resource = &got[0].body.resource_metrics[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    assert_eq!(text(resource, keys::SERVICE).as_deref(), Some("mcpbench"));
    assert_eq!(
        text(resource, keys::SCENARIO).as_deref(),
        Some("quickstart")
    );
    assert_eq!(text(resource, keys::RUN_ID).as_deref(), Some("run"));
    assert_eq!(
        text(resource, keys::STARTED_AT).as_deref(),
        s["started_at"].as_str()
    );
    assert_eq!(text(resource, keys::SHARD_INDEX), None, "not a split run");

    // Every push has the figures; the target's process (this test) is watched.
    for g in &got {
        let have: Vec<&str> = metrics(&g.body).iter().map(|m| m.name.as_str()).collect();
        for name in [
            names::STARTED,
            names::ENDED,
            names::DURATION,
            names::IN_FLIGHT,
            names::CPU,
            names::TARGET_CPU,
            names::TARGET_RSS,
            names::TARGET_FDS,
            names::TARGET_THREADS,
        ] {
            assert!(have.contains(&name), "{name} missing from {have:?}");
        }
    }

    // Counters never go down, from one push to the next.
    for w in got.windows(2) {
        let (before, after) = (sums(&w[0].body), sums(&w[1].body));
        for (k, v) in &before {
            let now = after.get(k).unwrap_or_else(|| panic!("{k} vanished"));
            assert!(now >= v, "{k}: {v} then {now}");
        }
    }

    // The last push is the summary: per operation, started and ended by outcome, and the
    // latency histogram's count is the ok count.
    let last = &got.last().unwrap().body;
    let histogram = |op: &str| {
        let m = metrics(last)
            .iter()
            .find(|m| m.name == names::DURATION)
            .unwrap();
        let Some(metric::Data::Histogram(h)) = &m.data else {
            panic!("duration is a histogram")
        };
        h.data_points
            .iter()
            .find(|p| text(&p.attributes, keys::OPERATION).as_deref() == Some(op))
            .map(|p| (p.count, p.bucket_counts.iter().sum::<u64>()))
    };
    let mut calls = 0;
    for o in s["operations"].as_array().unwrap() {
        let name = o["name"].as_str().unwrap();
        let n = |k: &str| o[k].as_i64().unwrap();
        let ok = o["outcomes"]["ok"].as_i64().unwrap();
        assert_eq!(
            value(last, names::STARTED, name, None),
            n("started"),
            "{name}"
        );
        assert_eq!(value(last, names::ENDED, name, Some("ok")), ok, "{name}");
        assert_eq!(
            value(last, names::ENDED, name, None),
            n("completed") + n("failed") + n("cancelled"),
            "{name}"
        );
        if ok > 0 {
            assert_eq!(histogram(name), Some((ok as u64, ok as u64)), "{name}");
        }
        if name.starts_with("tools/call:") {
            calls += ok;
        }
    }
    assert!(calls > 100, "{s}");
}

/// The note about a failed export: exactly one, saying how many pushes failed.
fn export_note(s: &serde_json::Value) -> String {
    let notes: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .filter(|n| n.contains("OTLP"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    notes[0].to_string()
}

/// The run's own results are all there.
fn results_intact(run_dir: &Path) -> serde_json::Value {
    let s = crate::support::valid_summary(run_dir);
    let ok: u64 = s["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["outcomes"]["ok"].as_u64().unwrap())
        .sum();
    assert!(ok > 100, "{s}");
    assert_eq!(s["interrupted"], false, "{s}");
    for f in ["timeseries.csv", "latency.hlog", "report.md", "report.html"] {
        assert!(run_dir.join(f).is_file(), "{f}");
    }
    s
}

#[test]
fn a_collector_answering_500_costs_the_run_one_note() {
    let collector = receiver(500);
    let dir = scratch();
    let (code, out, err, run_dir) =
        run(dir.path(), &format!("http://{}", collector.addr), &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let s = results_intact(&run_dir);
    let note = export_note(&s);
    let pushes = collector.got.lock().unwrap().len();
    assert!(pushes >= 3, "{pushes}");
    assert!(
        note.starts_with(&format!(
            "OTLP export to http://{}/v1/metrics: {pushes} of {pushes} pushes failed (last: HTTP 500",
            collector.addr
        )),
        "{note}"
    );
    assert!(
        !note.contains(SECRET) && !err.contains(SECRET),
        "{note}{err}"
    );
    // Not a line per interval on the terminal either.
    assert!(!err.contains("HTTP 500"), "{err}");
}

#[test]
fn a_refused_otlp_connection_costs_the_run_one_note() {
    let dir = scratch();
    let dead = format!("http://127.0.0.1:{}", crate::support::DEAD_PORT);
    let (code, out, err, run_dir) = run(dir.path(), &dead, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let s = results_intact(&run_dir);
    let note = export_note(&s);
    let intervals = std::fs::read_to_string(run_dir.join("timeseries.csv"))
        .unwrap()
        .lines()
        .count()
        - 1;
    let rest = note
        .strip_prefix(&format!("OTLP export to {dead}/v1/metrics: "))
        .unwrap_or_else(|| panic!("{note}"));
    let (failed, rest) = rest.split_once(" of ").unwrap();
    let (sent, rest) = rest.split_once(" pushes failed (last: ").unwrap();
    assert_eq!(failed, sent, "{note}");
    // Each interval's push, and the final one.
    let sent: usize = sent.parse().unwrap();
    assert!(
        (intervals..=intervals + 1).contains(&sent),
        "{intervals}: {note}"
    );
    assert!(
        rest.starts_with("connection to 127.0.0.1:0 failed"),
        "{note}"
    );
    assert!(
        note.ends_with("the run's own results are complete"),
        "{note}"
    );
}

/// A collector that takes the connection and never answers: each push gives up after the
/// timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`), off the run's threads; the run ends as usual.
#[test]
fn a_silent_otlp_collector_is_given_up_on_after_the_timeout() {
    // Bound and never accepted: the kernel completes the handshake, nobody reads.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let dir = scratch();
    let (code, out, err, run_dir) = run(
        dir.path(),
        &endpoint,
        &[],
        &[("OTEL_EXPORTER_OTLP_TIMEOUT", "300")],
    );
    assert_eq!(code, 0, "{out}{err}");
    let s = results_intact(&run_dir);
    let note = export_note(&s);
    assert!(
        note.contains("pushes failed (last: no answer within 300ms)"),
        "{note}"
    );
    let measured = s["measured_seconds"].as_f64().unwrap();
    assert!((2.9..4.5).contains(&measured), "{measured}");
    drop(silent);
}
