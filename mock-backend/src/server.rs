//! Routing, handlers and [`serve`].
//!
//! [`Backend`] holds everything computed once at start (contacts index, effective knobs, padding)
//! so that [`Backend::handle`] does only per-request work: no locks, two atomic increments, one
//! response buffer.

use std::{
    convert::Infallible,
    error::Error as StdError,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::{
    Method, Request, Response, StatusCode,
    body::Body,
    header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue},
    service::service_fn,
};
use rand::RngExt;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::net::TcpListener;

use crate::{
    accept,
    data::{self, ContactIndex},
    knobs::{KnobError, Knobs, Route, RouteKnobs},
    query,
    stats::{Stats, StatsSnapshot},
};

/// Default number of contacts.
pub const DEFAULT_CONTACTS: usize = 1000;
/// Default number of invoices (ids `1..=N`).
pub const DEFAULT_INVOICES: u64 = 10_000;
/// Default data-set seed.
pub const DEFAULT_SEED: u64 = 42;
/// Default request-body limit: 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;
/// `limit` for `/contacts` when the query has none.
const DEFAULT_LIMIT: usize = 10;
/// Largest `limit` honoured by `/contacts`, so one request cannot ask for the whole data set.
const MAX_LIMIT: usize = 100;

/// Everything the backend can be told at start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Knobs for every route.
    pub defaults: Knobs,
    /// Per-route overrides of `defaults`, field by field.
    pub routes: RouteKnobs,
    /// Size of the contacts data set.
    pub contacts: usize,
    /// Number of invoices (ids `1..=invoices`).
    pub invoices: u64,
    /// Seed of the generated data.
    pub seed: u64,
    /// Largest accepted request body in bytes; larger ones get 413.
    pub max_body: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            defaults: Knobs::default(),
            routes: RouteKnobs::default(),
            contacts: DEFAULT_CONTACTS,
            invoices: DEFAULT_INVOICES,
            seed: DEFAULT_SEED,
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// Why the backend could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid default knobs: {0}")]
    Defaults(#[source] KnobError),
    #[error("invalid knobs for route {route}: {source}")]
    RouteKnobs { route: Route, source: KnobError },
}

/// Knobs of one route after merging, with the padding pre-rendered.
#[derive(Debug)]
struct Effective {
    knobs: Knobs,
    /// `,"padding":"xxx…"}`, spliced over the closing brace of successful responses.
    padding: Option<Bytes>,
}

impl Effective {
    fn new(knobs: Knobs) -> Self {
        let padding = knobs.payload.filter(|&n| n > 0).map(|n| {
            let mut tail = Vec::with_capacity(n + 14);
            tail.extend_from_slice(b",\"padding\":\"");
            tail.resize(tail.len() + n, b'x');
            tail.extend_from_slice(b"\"}");
            Bytes::from(tail)
        });
        Effective { knobs, padding }
    }

    async fn delay(&self) {
        if let Some(latency) = &self.knobs.latency {
            // The thread-local RNG is not `Send`: draw before the await point.
            let delay = latency.sample(&mut rand::rng());
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
    }

    fn inject_failure(&self) -> bool {
        match self.knobs.error_rate {
            Some(p) if p > 0.0 => rand::rng().random_bool(p.min(1.0)),
            _ => false,
        }
    }

    /// Adds the padding field to a JSON object body.
    fn pad(&self, mut body: Vec<u8>) -> Vec<u8> {
        if let Some(tail) = &self.padding
            && body.last() == Some(&b'}')
        {
            body.pop();
            let tail: &[u8] = if body.last() == Some(&b'{') {
                &tail[1..] // no comma after an empty object
            } else {
                tail
            };
            body.extend_from_slice(tail);
        }
        body
    }
}

/// The backend's state and request handler, independent of any socket.
#[derive(Debug)]
pub struct Backend {
    contacts: ContactIndex,
    invoices: u64,
    seed: u64,
    max_body: usize,
    knobs: [Effective; Route::ALL.len()],
    stats: Stats,
    next_ticket: AtomicU64,
}

type Reply = Response<Full<Bytes>>;

impl Backend {
    /// Validates the knobs and builds the data sets.
    pub fn new(config: Config) -> Result<Self, Error> {
        config.defaults.validate().map_err(Error::Defaults)?;
        for route in Route::ALL {
            config
                .routes
                .get(route)
                .validate()
                .map_err(|source| Error::RouteKnobs { route, source })?;
        }
        let knobs =
            Route::ALL.map(|route| Effective::new(config.routes.get(route).over(&config.defaults)));
        Ok(Backend {
            contacts: ContactIndex::new(&data::contacts(config.contacts, config.seed)),
            invoices: config.invoices,
            seed: config.seed,
            max_body: config.max_body,
            knobs,
            stats: Stats::default(),
            next_ticket: AtomicU64::new(1),
        })
    }

    /// The current counters, as `GET /stats` renders them.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Answers one request. Never fails: every problem is an HTTP status with a JSON error.
    pub async fn handle<B>(&self, req: Request<B>) -> Reply
    where
        B: Body,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let route = match req.uri().path() {
            "/health" => return health(req.method()),
            "/stats" => return self.stats_endpoint(req.method()),
            "/stats/reset" => return self.stats_reset(req.method()),
            "/contacts" => Route::Contacts,
            "/tickets" => Route::Tickets,
            "/echo" => Route::Echo,
            path if path.starts_with("/invoices/") => Route::Invoices,
            _ => return error(StatusCode::NOT_FOUND, "not found"),
        };
        self.stats.request(route);
        let reply = self.routed(route, req).await;
        self.stats.response(route, reply.status());
        reply
    }

    /// Method check, body, latency, injected failure, handler, padding, in that order: the
    /// latency applies to every well-formed call, including ones that end in a 4xx.
    async fn routed<B>(&self, route: Route, req: Request<B>) -> Reply
    where
        B: Body,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let allow = match route {
            Route::Contacts | Route::Invoices => "GET",
            Route::Tickets => "POST",
            Route::Echo => "GET, POST",
        };
        let method = req.method();
        let post = method == Method::POST;
        if !(method == Method::GET && allow.contains("GET") || post && allow.contains("POST")) {
            return method_not_allowed(allow);
        }

        let (parts, body) = req.into_parts();
        let body = if post {
            match self.read_body(&parts, body).await {
                Ok(body) => body,
                Err(reply) => return reply,
            }
        } else {
            Bytes::new()
        };

        let effective = &self.knobs[route.index()];
        effective.delay().await;
        if effective.inject_failure() {
            return json(
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from_static(br#"{"error":"injected failure"}"#),
            );
        }

        let query = parts.uri.query();
        let (status, body) = match route {
            Route::Contacts => self.contacts(query),
            Route::Invoices => self.invoice(parts.uri.path()),
            Route::Tickets => self.create_ticket(&body),
            Route::Echo if post => echo_body(&body),
            Route::Echo => echo_query(query),
        };
        let body = if status.is_success() {
            effective.pad(body)
        } else {
            body
        };
        json(status, Bytes::from(body))
    }

    /// Collects a request body of at most `max_body` bytes; rejects larger ones from the
    /// declared length when there is one, without reading them.
    async fn read_body<B>(
        &self,
        parts: &hyper::http::request::Parts,
        body: B,
    ) -> Result<Bytes, Reply>
    where
        B: Body,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let too_large = || error(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        let declared = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(too_large());
        }
        match Limited::new(body, self.max_body).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
            Err(_) => Err(error(
                StatusCode::BAD_REQUEST,
                "could not read request body",
            )),
        }
    }

    fn contacts(&self, query: Option<&str>) -> (StatusCode, Vec<u8>) {
        let limit = match query::param(query, "limit") {
            None => DEFAULT_LIMIT,
            Some(limit) => match limit.parse::<usize>() {
                Ok(n) => n.min(MAX_LIMIT),
                Err(_) => {
                    return error_body(
                        StatusCode::BAD_REQUEST,
                        "invalid limit: expected a non-negative integer",
                    );
                }
            },
        };
        let q = query::param(query, "q");
        (
            StatusCode::OK,
            self.contacts.search_json(q.as_deref(), limit),
        )
    }

    fn invoice(&self, path: &str) -> (StatusCode, Vec<u8>) {
        let id = path
            .strip_prefix("/invoices/")
            .and_then(|id| id.parse::<u64>().ok())
            .filter(|id| (1..=self.invoices).contains(id));
        match id {
            Some(id) => to_json(StatusCode::OK, &data::invoice(id, self.seed)),
            None => error_body(StatusCode::NOT_FOUND, "invoice not found"),
        }
    }

    fn create_ticket(&self, body: &[u8]) -> (StatusCode, Vec<u8>) {
        let ticket: NewTicket = match serde_json::from_slice(body) {
            Ok(ticket) => ticket,
            Err(e) => return error_body(StatusCode::BAD_REQUEST, &format!("invalid ticket: {e}")),
        };
        if ticket.title.trim().is_empty() {
            return error_body(
                StatusCode::BAD_REQUEST,
                "invalid ticket: title must not be empty",
            );
        }
        let created = Ticket {
            id: self.next_ticket.fetch_add(1, Relaxed),
            title: &ticket.title,
            priority: ticket.priority.unwrap_or(Priority::Normal),
            status: "open",
        };
        to_json(StatusCode::CREATED, &created)
    }

    fn stats_endpoint(&self, method: &Method) -> Reply {
        match *method {
            Method::GET => match serde_json::to_vec(&self.stats.snapshot()) {
                Ok(body) => json(StatusCode::OK, Bytes::from(body)),
                Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "could not render stats"),
            },
            Method::DELETE => {
                self.stats.reset();
                let mut reply = Response::new(Full::new(Bytes::new()));
                *reply.status_mut() = StatusCode::NO_CONTENT;
                reply
            }
            _ => method_not_allowed("GET, DELETE"),
        }
    }

    fn stats_reset(&self, method: &Method) -> Reply {
        if method != Method::POST {
            return method_not_allowed("POST");
        }
        self.stats.reset();
        json(StatusCode::OK, Bytes::from_static(br#"{"status":"reset"}"#))
    }
}

/// `POST /tickets` input. Unknown fields are ignored, as a lenient real API would.
#[derive(Deserialize)]
struct NewTicket {
    title: String,
    #[serde(default)]
    #[allow(dead_code)] // accepted and validated as a string, not stored
    body: Option<String>,
    #[serde(default)]
    priority: Option<Priority>,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Priority {
    Low,
    Normal,
    High,
}

#[derive(Serialize)]
struct Ticket<'a> {
    id: u64,
    title: &'a str,
    priority: Priority,
    status: &'static str,
}

fn echo_body(body: &[u8]) -> (StatusCode, Vec<u8>) {
    // Validate without building a tree, then echo the client's own bytes.
    match serde_json::from_slice::<&RawValue>(body) {
        Ok(raw) => {
            let raw = raw.get().as_bytes();
            let mut out = Vec::with_capacity(raw.len() + 9);
            out.extend_from_slice(b"{\"echo\":");
            out.extend_from_slice(raw);
            out.push(b'}');
            (StatusCode::OK, out)
        }
        Err(e) => error_body(StatusCode::BAD_REQUEST, &format!("invalid JSON: {e}")),
    }
}

fn echo_query(query: Option<&str>) -> (StatusCode, Vec<u8>) {
    let msg = query::param(query, "msg");
    to_json(
        StatusCode::OK,
        &serde_json::json!({ "echo": msg.as_deref().unwrap_or("") }),
    )
}

fn health(method: &Method) -> Reply {
    if method != Method::GET {
        return method_not_allowed("GET");
    }
    json(StatusCode::OK, Bytes::from_static(br#"{"status":"ok"}"#))
}

fn to_json<T: Serialize>(status: StatusCode, value: &T) -> (StatusCode, Vec<u8>) {
    match serde_json::to_vec(value) {
        Ok(body) => (status, body),
        Err(_) => error_body(
            StatusCode::INTERNAL_SERVER_ERROR,
            "could not render response",
        ),
    }
}

fn error_body(status: StatusCode, message: &str) -> (StatusCode, Vec<u8>) {
    let body = serde_json::to_vec(&serde_json::json!({ "error": message }))
        .unwrap_or_else(|_| br#"{"error":"error"}"#.to_vec());
    (status, body)
}

fn error(status: StatusCode, message: &str) -> Reply {
    let (status, body) = error_body(status, message);
    json(status, Bytes::from(body))
}

fn method_not_allowed(allow: &'static str) -> Reply {
    let mut reply = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    reply
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    reply
}

fn json(status: StatusCode, body: Bytes) -> Reply {
    let mut reply = Response::new(Full::new(body));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// Serves the backend on `listener` until `shutdown` completes, then lets in-flight requests
/// finish (bounded by [`accept::DEFAULT_GRACE`]).
///
/// Fails only on invalid configuration, before accepting anything.
pub async fn serve(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let backend = Arc::new(Backend::new(config)?);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "mock backend serving");
    }
    accept::serve_connections(listener, shutdown, move |stream, _peer, shutdown| {
        let backend = Arc::clone(&backend);
        async move {
            let service = service_fn(move |req| {
                let backend = Arc::clone(&backend);
                async move { Ok::<_, Infallible>(backend.handle(req).await) }
            });
            accept::serve_http(stream, service, shutdown).await;
        }
    })
    .await;
    Ok(())
}
