//! `--otlp-endpoint`: a running test's figures pushed to an OpenTelemetry collector as OTLP/HTTP
//! (protobuf, `POST …/v1/metrics`), once per interval and once at the end.
//!
//! The exporter is a watcher like the dashboard: the driver hands it the live view it publishes
//! once per interval ([`Exporter::push`], a watch channel: the latest view wins, nothing
//! queues), and a thread of its own encodes and sends it with a bounded timeout. The workers
//! never see it. A failed push (endpoint down, 4xx/5xx, timeout) is counted; at the end of the
//! run [`Exporter::finish_run`] waits a bounded time for the final push and turns the failures
//! into one note of the run's summary. Headers (`OTEL_EXPORTER_OTLP_HEADERS`) are secrets:
//! never printed, logged or written.
//!
//! Dependencies: the generated OTLP types of `opentelemetry-proto` (features
//! `gen-tonic-messages` + `metrics`, no tonic) encoded with `prost`, sent over the hyper 1
//! client and the TCP/TLS connector (`transport::net`, rustls) the project already has. The
//! alternative, `opentelemetry_sdk` + `opentelemetry-otlp` (`http-proto` with a reqwest or
//! hyper client), was set aside: the SDK aggregates measurements itself, so the collector's
//! per-interval HdrHistograms could only reach it by replaying every request into an
//! instrument — a second aggregation of what is already aggregated, with no way to hand it a
//! histogram; and it brings its periodic reader, opentelemetry-http with reqwest as its
//! ready-made client (a second TLS set-up for https), and the trace features `http-proto`
//! switches on. What the proto route adds: opentelemetry-proto, opentelemetry and
//! opentelemetry_sdk (which the proto crate's conversions name, compiled with metrics only),
//! prost and prost-derive, anyhow, futures-executor and futures-macro — 8 crates, about 15 s
//! of compile CPU in a clean build on a 2-core machine (debug or release), most of it
//! opentelemetry_sdk's. The same types decode the requests in the tests' receiver.
//!
//! Latency goes out as explicit-bucket histograms (fixed bounds,
//! [`crate::report::live::LATENCY_BOUNDS_US`]), the OpenTelemetry default aggregation that
//! every backend and every collector exporter reads; an exponential histogram would follow
//! HdrHistogram's shape more closely, but the collector's Prometheus exporter dropped those
//! until late 2025 and Prometheus needs native histograms switched on to keep them. Exact
//! percentiles stay in `latency.hlog` and `summary.json`.

pub mod encode;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use prost::Message;

use crate::report::live::Live;
use crate::transport::net::{self, NetTarget, TlsClient, Trust};
pub use encode::RunInfo;

/// How long a push may take by default (connect, send, answer); `OTEL_EXPORTER_OTLP_TIMEOUT`
/// changes it. Shorter than the specification's 10 s: the end of a run waits for its final
/// push at most this long (plus a second).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest collector answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// The OTLP/HTTP path of metrics.
const METRICS_PATH: &str = "/v1/metrics";

/// The exporter could not be set up (exit code 2, before any load).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{from}: not an http:// or https:// URL with a host (e.g. http://127.0.0.1:4318){why}")]
    Url { from: &'static str, why: String },
    #[error("{from}: entry {entry} is not `name=value` (values are not shown: they are secrets)")]
    HeaderEntry { from: &'static str, entry: usize },
    #[error("{from}: `{name}` is not a valid header name")]
    HeaderName { from: &'static str, name: String },
    #[error("{from}: the value of `{name}` is not a valid header value (not shown)")]
    HeaderValue { from: &'static str, name: String },
    #[error("{from}: `{value}` is not a timeout in milliseconds")]
    Timeout { from: &'static str, value: String },
    #[error("{from}: {source}")]
    Tls {
        from: &'static str,
        source: net::TlsSetupError,
    },
}

/// Where and how to push: from `--otlp-endpoint` and the standard `OTEL_EXPORTER_OTLP_*`
/// variables.
#[derive(Clone)]
pub struct Config {
    https: bool,
    host: String,
    port: u16,
    /// Path and query, e.g. `/v1/metrics`.
    path: String,
    /// Sent with every push; the values are secrets.
    headers: Vec<(HeaderName, HeaderValue)>,
    pub timeout: Duration,
    tls: Option<TlsClient>,
}

impl std::fmt::Debug for Config {
    /// Header values are secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &self.url())
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Config {
    /// The exporter's settings: `--otlp-endpoint` (a collector's base URL, `/v1/metrics`
    /// added unless the path ends with it), else `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (the
    /// full URL, as the specification says), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL).
    /// Headers from `OTEL_EXPORTER_OTLP_HEADERS` and `…_METRICS_HEADERS` (`name=value,…`,
    /// percent-encoded values), timeout from `…_TIMEOUT` (ms), a CA file from
    /// `…_CERTIFICATE`. `None`: no endpoint, or the variables' endpoint with
    /// `OTEL_SDK_DISABLED=true` or `OTEL_METRICS_EXPORTER=none`.
    pub fn resolve(
        flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Config>, ConfigError> {
        let var = |k: &str| {
            env(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let (from, url) = match (
            flag,
            var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
            var("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(f), _, _) => ("--otlp-endpoint", signal_url(f, true)),
            (None, Some(m), _) => ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", m),
            (None, None, Some(b)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", signal_url(&b, false)),
            (None, None, None) => return Ok(None),
        };
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_METRICS_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        if flag.is_none() && disabled {
            return Ok(None);
        }
        let (https, host, port, path) = parse_url(&url).map_err(|why| ConfigError::Url {
            from,
            why: why.map(|w| format!(": {w}")).unwrap_or_default(),
        })?;
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
        for from in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        ] {
            for (name, value) in parse_headers(from, &var(from).unwrap_or_default())? {
                // The signal's own variable wins over the general one.
                headers.retain(|(n, _)| *n != name);
                headers.push((name, value));
            }
        }
        let timeout = match [
            "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .into_iter()
        .find_map(|k| var(k).map(|v| (k, v)))
        {
            None => DEFAULT_TIMEOUT,
            Some((from, v)) => match v.parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => return Err(ConfigError::Timeout { from, value: v }),
            },
        };
        let tls = match https {
            false => None,
            true => {
                let ca = [
                    "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
                    "OTEL_EXPORTER_OTLP_CERTIFICATE",
                ]
                .into_iter()
                .find_map(|k| var(k).map(|v| (k, v)));
                let (from, trust) = match ca {
                    Some((k, file)) => (k, Trust::CaFile(file.into())),
                    None => (from, Trust::System),
                };
                Some(
                    TlsClient::new(&host, &trust, None, &[b"http/1.1"])
                        .map_err(|source| ConfigError::Tls { from, source })?,
                )
            }
        };
        Ok(Some(Config {
            https,
            host,
            port,
            path,
            headers,
            timeout,
            tls,
        }))
    }

    /// Where pushes go (no secrets: URLs with credentials are refused).
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}:{}{}", self.host, self.port, self.path)
    }

    /// How many headers go with each push (their values are never shown).
    pub fn header_count(&self) -> usize {
        self.headers.len()
    }
}

/// `--otlp-endpoint` and the `OTEL_EXPORTER_OTLP_*` variables: a running exporter and the
/// line that announces it (header values never in it), or `None` when no export is asked for.
pub fn start(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(Exporter, String)>, String> {
    let Some(config) = Config::resolve(flag, env).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let mut line = format!("otlp: {} (every interval and at the end", config.url());
    match config.header_count() {
        0 => {}
        1 => line.push_str(", 1 header, not shown"),
        n => line.push_str(&format!(", {n} headers, not shown")),
    }
    line.push(')');
    let x = Exporter::start(config).map_err(|e| format!("--otlp-endpoint: {e}"))?;
    Ok(Some((x, line)))
}

/// A collector's base URL with the metrics path added (`http://h:4318` →
/// `http://h:4318/v1/metrics`, `http://h/otlp/` → `http://h/otlp/v1/metrics`); a URL that
/// already ends with it is kept when `keep_full` (the command line takes either).
fn signal_url(base: &str, keep_full: bool) -> String {
    let base = base.trim();
    if keep_full && base.trim_end_matches('/').ends_with(METRICS_PATH) {
        return base.to_string();
    }
    format!("{}{METRICS_PATH}", base.trim_end_matches('/'))
}

/// `http(s)://host[:port]/path` → (https, host, port, path and query).
fn parse_url(url: &str) -> Result<(bool, String, u16, String), Option<String>> {
    let uri: hyper::Uri = url.parse().map_err(|_| None)?;
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(None),
    };
    let authority = uri.authority().ok_or(None)?;
    if authority.as_str().contains('@') {
        return Err(Some(
            "credentials in the URL are not allowed; use OTEL_EXPORTER_OTLP_HEADERS".into(),
        ));
    }
    let host = authority.host();
    if host.is_empty() {
        return Err(None);
    }
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri
        .path_and_query()
        .map_or(METRICS_PATH, |p| p.as_str())
        .to_string();
    Ok((https, host.to_string(), port, path))
}

/// `name=value,name2=value2` (the W3C baggage form the specification uses): values
/// percent-decoded, each marked sensitive.
fn parse_headers(
    from: &'static str,
    text: &str,
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let mut out = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let Some((name, value)) = entry.split_once('=') else {
            return Err(ConfigError::HeaderEntry { from, entry: i + 1 });
        };
        let name = name.trim();
        let header =
            HeaderName::from_bytes(&percent_decode(name)).map_err(|_| ConfigError::HeaderName {
                from,
                name: name.into(),
            })?;
        let mut value = HeaderValue::try_from(percent_decode(value.trim())).map_err(|_| {
            ConfigError::HeaderValue {
                from,
                name: name.into(),
            }
        })?;
        value.set_sensitive(true);
        out.push((header, value));
    }
    Ok(out)
}

/// `%XX` escapes decoded (an invalid one is kept as written).
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|&c| hex(c)),
                b.get(i + 2).and_then(|&c| hex(c)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// One view to push.
#[derive(Debug, Clone)]
struct Push {
    seq: u64,
    run: Arc<RunInfo>,
    live: Arc<Live>,
}

/// What the exporting thread reports back.
#[derive(Debug, Default)]
struct Progress {
    /// The last view handled (pushed, failed or skipped as empty).
    done: u64,
    /// Pushes attempted, failed, and views replaced by a newer one before they went out
    /// (a push slower than an interval), since the last [`Exporter::finish_run`].
    sent: u64,
    failed: u64,
    skipped: u64,
    last_error: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
}

/// A running exporter: a thread holding one connection to the collector.
#[derive(Debug)]
pub struct Exporter {
    tx: tokio::sync::watch::Sender<Option<Push>>,
    seq: AtomicU64,
    shared: Arc<Shared>,
    url: String,
    timeout: Duration,
}

impl Exporter {
    /// Starts the exporting thread.
    pub fn start(config: Config) -> std::io::Result<Exporter> {
        let (tx, rx) = tokio::sync::watch::channel(None);
        let shared = Arc::new(Shared::default());
        let (url, timeout) = (config.url(), config.timeout);
        let s = shared.clone();
        std::thread::Builder::new()
            .name("mcpbench-otlp".into())
            .spawn(move || export(rx, config, s))?;
        Ok(Exporter {
            tx,
            seq: AtomicU64::new(0),
            shared,
            url,
            timeout,
        })
    }

    /// Hands over the latest view of `run` (replacing one not yet sent). Never waits.
    pub fn push(&self, run: &Arc<RunInfo>, live: Arc<Live>) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        self.tx.send_replace(Some(Push {
            seq,
            run: run.clone(),
            live,
        }));
    }

    /// After the run's final view: waits for its push (at most the timeout and a second), and
    /// says in one note what failed since the last call, if anything did.
    pub fn finish_run(&self) -> Option<String> {
        let last = self.seq.load(Ordering::Relaxed);
        let deadline = Instant::now() + self.timeout + Duration::from_secs(1);
        let Ok(mut p) = self.shared.progress.lock() else {
            return None;
        };
        while p.done < last {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            p = match self.shared.changed.wait_timeout(p, left) {
                Ok((p, _)) => p,
                Err(_) => return None,
            };
        }
        let pending = p.done < last;
        let done = std::mem::take(&mut *p);
        p.done = done.done;
        drop(p);
        note(&self.url, &done, pending.then_some(self.timeout))
    }
}

/// The run's note about its export: `None` when every push went through.
fn note(url: &str, p: &Progress, pending: Option<Duration>) -> Option<String> {
    if p.failed == 0 && pending.is_none() {
        return None;
    }
    let mut s = format!(
        "OTLP export to {url}: {} of {} pushes failed",
        p.failed, p.sent
    );
    if let Some(e) = &p.last_error {
        s.push_str(&format!(" (last: {e})"));
    }
    if p.skipped > 0 {
        s.push_str(&format!(
            "; {} intervals were not sent separately (a push took longer than an interval; \
             the counters are cumulative, the next push carried them)",
            p.skipped
        ));
    }
    if let Some(t) = pending {
        s.push_str(&format!(
            "; the final push had no answer within {}",
            mcpbench_knobs::format_duration(t)
        ));
    }
    s.push_str("; the run's own results are complete");
    Some(s)
}

/// The exporting thread: one push per view received, until the exporter is dropped.
fn export(mut rx: tokio::sync::watch::Receiver<Option<Push>>, config: Config, shared: Arc<Shared>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async move {
        let mut client = Client {
            config,
            sender: None,
        };
        let mut seen = 0;
        while rx.changed().await.is_ok() {
            let Some(push) = rx.borrow_and_update().clone() else {
                continue;
            };
            // Before the first interval there is nothing to say.
            let result = if push.live.history.is_empty() {
                None
            } else {
                let body = Bytes::from(encode::request(&push.run, &push.live).encode_to_vec());
                let timeout = client.config.timeout;
                Some(
                    match tokio::time::timeout(timeout, client.post(body)).await {
                        Ok(r) => r,
                        Err(_) => {
                            client.sender = None;
                            Err(format!(
                                "no answer within {}",
                                mcpbench_knobs::format_duration(timeout)
                            ))
                        }
                    },
                )
            };
            if let Ok(mut p) = shared.progress.lock() {
                p.skipped += push.seq.saturating_sub(seen + 1);
                seen = push.seq;
                p.done = push.seq;
                if let Some(r) = result {
                    p.sent += 1;
                    if let Err(e) = r {
                        p.failed += 1;
                        p.last_error = Some(e);
                    }
                }
            }
            shared.changed.notify_all();
        }
    });
}

/// One HTTP/1.1 connection to the collector, opened on the first push and again after a
/// failure.
struct Client {
    config: Config,
    sender: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
}

impl Client {
    /// Posts one request; a kept-alive connection the collector closed meanwhile is replaced
    /// once.
    async fn post(&mut self, body: Bytes) -> Result<(), String> {
        if let Some(sender) = self.sender.take().filter(|s| !s.is_closed())
            && let Ok(r) = self.send(sender, body.clone()).await
        {
            return r;
        }
        let sender = self.connect().await?;
        self.send(sender, body).await?
    }

    /// `Err`: the request did not get through (the connection broke); `Ok(Err)`: the
    /// collector answered with a failure.
    async fn send(
        &mut self,
        mut sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        body: Bytes,
    ) -> Result<Result<(), String>, String> {
        sender.ready().await.map_err(|e| e.to_string())?;
        let c = &self.config;
        let mut req = hyper::Request::post(c.path.as_str())
            .header("host", host_header(c))
            .header("content-type", "application/x-protobuf")
            .header(
                "user-agent",
                concat!("mcpbench/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        for (name, value) in &c.headers {
            req.headers_mut().append(name.clone(), value.clone());
        }
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let answer = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if !status.is_success() {
            return Ok(Err(format!("HTTP {status}")));
        }
        self.sender = Some(sender);
        use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
        let rejected = ExportMetricsServiceResponse::decode(answer)
            .ok()
            .and_then(|r| r.partial_success)
            .filter(|p| p.rejected_data_points > 0);
        Ok(match rejected {
            Some(p) => Err(format!(
                "the collector rejected {} data points: {}",
                p.rejected_data_points,
                p.error_message.chars().take(200).collect::<String>()
            )),
            None => Ok(()),
        })
    }

    async fn connect(
        &mut self,
    ) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String> {
        let c = &self.config;
        let host = c.host.trim_start_matches('[').trim_end_matches(']');
        let addr = tokio::net::lookup_host((host, c.port))
            .await
            .map_err(|e| format!("cannot resolve {}: {e}", c.host))?
            .next()
            .ok_or_else(|| format!("cannot resolve {}", c.host))?;
        let target = NetTarget {
            addr,
            tls: c.tls.clone(),
            connect_timeout: c.timeout,
            source: None,
        };
        let stream = net::connect(&target).await.map_err(|e| e.to_string())?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }
}

/// `host[:port]` as the Host header says it (the port left out when it is the scheme's).
fn host_header(c: &Config) -> String {
    match (c.https, c.port) {
        (false, 80) | (true, 443) => c.host.clone(),
        (_, p) => format!("{}:{p}", c.host),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn url(flag: Option<&str>, vars: &[(&str, &str)]) -> Option<String> {
        Config::resolve(flag, &env(vars)).unwrap().map(|c| c.url())
    }

    #[test]
    fn the_endpoint_comes_from_the_flag_then_the_variables() {
        assert_eq!(url(None, &[]), None);
        assert_eq!(
            url(Some("http://127.0.0.1:4318"), &[]).as_deref(),
            Some("http://127.0.0.1:4318/v1/metrics")
        );
        assert_eq!(
            url(Some("http://c:4318/v1/metrics"), &[]).as_deref(),
            Some("http://c:4318/v1/metrics")
        );
        let base = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/otlp/")];
        assert_eq!(
            url(None, &base).as_deref(),
            Some("http://collector:4318/otlp/v1/metrics")
        );
        // The signal's variable is the full URL, as written; the flag wins over both.
        let both = [
            base[0],
            (
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://m:9000/custom",
            ),
        ];
        assert_eq!(url(None, &both).as_deref(), Some("http://m:9000/custom"));
        assert_eq!(
            url(Some("http://flag"), &both).as_deref(),
            Some("http://flag:80/v1/metrics")
        );
        // Switched off for the variables, not for the flag.
        let off = [base[0], ("OTEL_SDK_DISABLED", "true")];
        assert_eq!(url(None, &off), None);
        assert!(url(Some("http://flag"), &off).is_some());
        let none = [base[0], ("OTEL_METRICS_EXPORTER", "none")];
        assert_eq!(url(None, &none), None);
    }

    #[test]
    fn bad_endpoints_are_refused_with_what_to_write() {
        for bad in ["collector:4318", "ftp://x/", "http://user:pw@x:4318"] {
            let e = Config::resolve(Some(bad), &env(&[]))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--otlp-endpoint: not an http"), "{e}");
            assert!(!e.contains("pw"), "{e}");
        }
    }

    #[test]
    fn headers_are_decoded_merged_and_never_shown() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Bearer%20s3cret-token, x-tenant = a ,",
            ),
            ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-tenant=b"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
        ];
        let c = Config::resolve(None, &env(&vars)).unwrap().unwrap();
        assert_eq!(c.header_count(), 2);
        assert_eq!(c.headers[0].0, "authorization");
        assert_eq!(c.headers[0].1, "Bearer s3cret-token");
        assert!(c.headers[0].1.is_sensitive());
        assert_eq!(c.headers[1].1, "b", "the metrics variable wins");
        assert_eq!(c.timeout, Duration::from_millis(1500));
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("authorization"), "{shown}");
        // A malformed entry is named by position, never quoted.
        let bad = [
            vars[0],
            ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization:Bearer s3cret"),
        ];
        let e = Config::resolve(None, &env(&bad)).unwrap_err().to_string();
        assert!(e.contains("entry 1 is not `name=value`"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        let bad = [vars[0], ("OTEL_EXPORTER_OTLP_HEADERS", "x=s3c\u{1}ret")];
        let e = Config::resolve(None, &env(&bad)).unwrap_err().to_string();
        assert!(
            e.contains("the value of `x` is not a valid header value"),
            "{e}"
        );
        assert!(!e.contains("s3c"), "{e}");
    }

    #[test]
    fn the_note_counts_failures_once() {
        let ok = Progress {
            sent: 4,
            ..Default::default()
        };
        assert_eq!(note("http://c/v1/metrics", &ok, None), None);
        let failed = Progress {
            sent: 4,
            failed: 3,
            skipped: 1,
            last_error: Some("HTTP 500 Internal Server Error".into()),
            ..Default::default()
        };
        let n = note("http://c/v1/metrics", &failed, Some(Duration::from_secs(5))).unwrap();
        assert!(
            n.starts_with(
                "OTLP export to http://c/v1/metrics: 3 of 4 pushes failed (last: HTTP 500"
            ),
            "{n}"
        );
        assert!(n.contains("1 intervals were not sent separately"), "{n}");
        assert!(n.contains("the final push had no answer within 5s"), "{n}");
    }
}
