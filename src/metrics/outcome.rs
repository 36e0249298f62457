//! How one request ended. Per-request failures are data, never strings: an `Outcome` is a
//! small `Copy` value counted into fixed arrays.

use std::fmt;

/// The end of one started request (DESIGN.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A JSON-RPC result.
    Ok,
    /// A `tools/call` result with `isError: true`: the RPC worked, the tool failed.
    ToolError,
    /// A JSON-RPC error response, by code.
    RpcError(i64),
    /// A 2026-07-28 result with `resultType: "input_required"` (MRTR): the server asks the client
    /// for input (elicitation, sampling, roots) before it completes the call. A load generator
    /// does not fulfil it; it is counted, not passed off as `Ok`.
    InputRequired,
    /// An answer that broke one of the scenario's `expect` rules (a tenant's tool set, a
    /// result field, the tool's output schema): the server answered, wrongly.
    Assertion,
    /// An answer of a deterministic call (the same tool and arguments) that differs from the
    /// first answer seen — in another session, under concurrency, through another target of an
    /// A/B run, or from the recorded answer of a replayed trace.
    Divergence,
    /// An HTTP status other than the expected one, by status.
    Http(u16),
    /// No complete answer within the request timeout.
    Timeout,
    /// No answer after `hang_after` while a request of the same worker sent after it was
    /// answered: the target is alive and this request is stuck (a deadlock, a lost request).
    Hang,
    /// The connection could not be established.
    Connect,
    /// The connection broke (reset, closed early, truncated body).
    Io,
    /// The peer answered something that breaks the protocol.
    Protocol(ProtocolKind),
    /// Stopped by the generator (Ctrl-C, end of drain) before an answer arrived.
    Cancelled,
    /// The generator's machine ran out of something (file descriptors, ephemeral ports,
    /// processes) before the request could reach the target: a limit of the test, not a
    /// failure of the target.
    Local(LocalKind),
}

/// The outcome classes, as array indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Ok,
    ToolError,
    RpcError,
    InputRequired,
    Assertion,
    Divergence,
    Http,
    Timeout,
    Hang,
    Connect,
    Io,
    Protocol,
    Cancelled,
    Local,
}

impl Class {
    pub const COUNT: usize = 14;
    pub const ALL: [Class; Class::COUNT] = [
        Class::Ok,
        Class::ToolError,
        Class::RpcError,
        Class::InputRequired,
        Class::Assertion,
        Class::Divergence,
        Class::Http,
        Class::Timeout,
        Class::Hang,
        Class::Connect,
        Class::Io,
        Class::Protocol,
        Class::Cancelled,
        Class::Local,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Ok => "ok",
            Class::ToolError => "tool_error",
            Class::RpcError => "rpc_error",
            Class::InputRequired => "input_required",
            Class::Assertion => "assertion",
            Class::Divergence => "divergence",
            Class::Http => "http",
            Class::Timeout => "timeout",
            Class::Hang => "hang",
            Class::Connect => "connect",
            Class::Io => "io",
            Class::Protocol => "protocol",
            Class::Cancelled => "cancelled",
            Class::Local => "local",
        }
    }

    /// What kind of failure the class is in every error rate; `None` for a call that did its
    /// job (`ok`), one not judged (`cancelled`, cut short by the generator) and a 2026-07-28
    /// answer asking the client for input (`input_required`, which mcpbench does not give).
    pub fn error_kind(self) -> Option<ErrorKind> {
        match self {
            Class::Ok | Class::InputRequired | Class::Cancelled => None,
            Class::ToolError => Some(ErrorKind::Tool),
            Class::RpcError => Some(ErrorKind::Rpc),
            Class::Assertion | Class::Divergence => Some(ErrorKind::WrongAnswer),
            Class::Http
            | Class::Timeout
            | Class::Hang
            | Class::Connect
            | Class::Io
            | Class::Protocol
            | Class::Local => Some(ErrorKind::Protocol),
        }
    }

    /// The request got an answer from the peer, good or bad at the MCP level.
    pub fn is_completed(self) -> bool {
        matches!(
            self,
            Class::Ok
                | Class::ToolError
                | Class::RpcError
                | Class::InputRequired
                | Class::Assertion
                | Class::Divergence
        )
    }
}

/// Why a call did not do its job: the parts of the error rate (see [`Class::error_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The tool ran and failed (`isError: true`).
    Tool,
    /// A JSON-RPC error answered the request.
    Rpc,
    /// No valid answer: an HTTP status, a timeout or hang, a connection or I/O failure, a
    /// protocol violation, or a resource of the generator's machine running out.
    Protocol,
    /// An answer that broke an `expect` rule, or differed from the first (deterministic calls).
    WrongAnswer,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 4] = [
        ErrorKind::Tool,
        ErrorKind::Rpc,
        ErrorKind::Protocol,
        ErrorKind::WrongAnswer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Tool => "tool",
            ErrorKind::Rpc => "rpc",
            ErrorKind::Protocol => "protocol",
            ErrorKind::WrongAnswer => "wrong_answer",
        }
    }
}

impl Outcome {
    pub fn class(self) -> Class {
        match self {
            Outcome::Ok => Class::Ok,
            Outcome::ToolError => Class::ToolError,
            Outcome::RpcError(_) => Class::RpcError,
            Outcome::InputRequired => Class::InputRequired,
            Outcome::Assertion => Class::Assertion,
            Outcome::Divergence => Class::Divergence,
            Outcome::Http(_) => Class::Http,
            Outcome::Timeout => Class::Timeout,
            Outcome::Hang => Class::Hang,
            Outcome::Connect => Class::Connect,
            Outcome::Io => Class::Io,
            Outcome::Protocol(_) => Class::Protocol,
            Outcome::Cancelled => Class::Cancelled,
            Outcome::Local(_) => Class::Local,
        }
    }
}

/// What the generator's machine ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LocalKind {
    /// `EMFILE`/`ENFILE`: the open-file limit (of the process or the system).
    FdLimit,
    /// `EADDRNOTAVAIL`: no ephemeral port left for a new connection (often ports held in
    /// TIME_WAIT by connections closed at a high rate).
    NoPorts,
    /// `EAGAIN` from spawning a stdio target: the process limit.
    ProcessLimit,
}

impl LocalKind {
    pub const COUNT: usize = 3;
    pub const ALL: [LocalKind; LocalKind::COUNT] = [
        LocalKind::FdLimit,
        LocalKind::NoPorts,
        LocalKind::ProcessLimit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LocalKind::FdLimit => "fd_limit",
            LocalKind::NoPorts => "no_ports",
            LocalKind::ProcessLimit => "process_limit",
        }
    }

    /// The kind of an OS error, if it is one of these.
    pub fn of(e: &std::io::Error) -> Option<LocalKind> {
        #[cfg(target_os = "linux")]
        {
            use rustix::io::Errno;
            let code = e.raw_os_error()?;
            if code == Errno::MFILE.raw_os_error() || code == Errno::NFILE.raw_os_error() {
                return Some(LocalKind::FdLimit);
            }
            if code == Errno::ADDRNOTAVAIL.raw_os_error() {
                return Some(LocalKind::NoPorts);
            }
            if code == Errno::AGAIN.raw_os_error() {
                return Some(LocalKind::ProcessLimit);
            }
        }
        let _ = e;
        None
    }

    /// A failed connect or spawn: this kind, else a plain connection failure.
    pub fn or_connect(e: &std::io::Error) -> Outcome {
        LocalKind::of(e).map_or(Outcome::Connect, Outcome::Local)
    }
}

/// Ways a peer breaks the protocol, counted separately so a report can say which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolKind {
    /// The body or event was not valid JSON.
    BadJson,
    /// Valid JSON but not a JSON-RPC message (or a batch where none is allowed).
    NotJsonRpc,
    /// A response whose id is not the request's id.
    WrongId,
    /// The HTTP response was malformed.
    BadHttp,
    /// A 200 response with a content type that is neither JSON nor SSE.
    BadContentType,
    /// The SSE stream ended without the response.
    NoResponse,
    /// The response exceeded the configured size bound.
    TooLarge,
    /// The server did not behave as the negotiated revision requires (e.g. no session id,
    /// an unsupported revision in the initialize result).
    Handshake,
    /// A result whose `resultType` is neither `complete` nor `input_required`.
    BadResultType,
}

impl ProtocolKind {
    pub const COUNT: usize = 9;
    pub const ALL: [ProtocolKind; ProtocolKind::COUNT] = [
        ProtocolKind::BadJson,
        ProtocolKind::NotJsonRpc,
        ProtocolKind::WrongId,
        ProtocolKind::BadHttp,
        ProtocolKind::BadContentType,
        ProtocolKind::NoResponse,
        ProtocolKind::TooLarge,
        ProtocolKind::Handshake,
        ProtocolKind::BadResultType,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::BadJson => "bad_json",
            ProtocolKind::NotJsonRpc => "not_jsonrpc",
            ProtocolKind::WrongId => "wrong_id",
            ProtocolKind::BadHttp => "bad_http",
            ProtocolKind::BadContentType => "bad_content_type",
            ProtocolKind::NoResponse => "no_response",
            ProtocolKind::TooLarge => "too_large",
            ProtocolKind::Handshake => "handshake",
            ProtocolKind::BadResultType => "bad_result_type",
        }
    }
}

/// What a gateway means by an HTTP status it answers with instead of a result: `401` auth
/// (missing or bad credentials), `403` forbidden (a policy denied it), `429` rate-limited.
pub fn http_meaning(status: u16) -> Option<&'static str> {
    match status {
        401 => Some("auth"),
        403 => Some("forbidden"),
        429 => Some("rate_limited"),
        _ => None,
    }
}

/// `http(503)`, or with its meaning: `http(429 rate_limited)`.
pub fn http_label(status: u16) -> String {
    match http_meaning(status) {
        Some(m) => format!("http({status} {m})"),
        None => format!("http({status})"),
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::RpcError(c) => write!(f, "rpc_error({c})"),
            Outcome::Http(s) => f.write_str(&http_label(*s)),
            Outcome::Protocol(k) => write!(f, "protocol({})", k.name()),
            Outcome::Local(k) => write!(f, "local({})", k.name()),
            other => f.write_str(other.class().name()),
        }
    }
}

/// Exact counts of outcomes; codes and statuses are kept by value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    pub by_class: [u64; Class::COUNT],
    /// (JSON-RPC error code, count), in first-seen order. Few distinct codes occur, so a
    /// linear scan beats a map and allocates only when a new code appears.
    pub rpc_codes: Vec<(i64, u64)>,
    /// (HTTP status, count).
    pub http_statuses: Vec<(u16, u64)>,
    pub protocol: [u64; ProtocolKind::COUNT],
    pub local: [u64; LocalKind::COUNT],
}

impl OutcomeCounts {
    pub fn add(&mut self, o: Outcome) {
        self.by_class[o.class() as usize] += 1;
        match o {
            Outcome::RpcError(code) => bump(&mut self.rpc_codes, code, 1),
            Outcome::Http(status) => bump(&mut self.http_statuses, status, 1),
            Outcome::Protocol(kind) => self.protocol[kind as usize] += 1,
            Outcome::Local(kind) => self.local[kind as usize] += 1,
            _ => {}
        }
    }

    pub fn merge(&mut self, other: &OutcomeCounts) {
        for (a, b) in self.by_class.iter_mut().zip(other.by_class) {
            *a += b;
        }
        for (a, b) in self.protocol.iter_mut().zip(other.protocol) {
            *a += b;
        }
        for (a, b) in self.local.iter_mut().zip(other.local) {
            *a += b;
        }
        for &(c, n) in &other.rpc_codes {
            bump(&mut self.rpc_codes, c, n);
        }
        for &(s, n) in &other.http_statuses {
            bump(&mut self.http_statuses, s, n);
        }
    }

    pub fn total(&self) -> u64 {
        self.by_class.iter().sum()
    }

    pub fn get(&self, c: Class) -> u64 {
        self.by_class[c as usize]
    }

    /// Calls that did not do their job: every class with an [`ErrorKind`] (all but `ok`,
    /// `input_required` and `cancelled`).
    pub fn errors(&self) -> u64 {
        Class::ALL
            .iter()
            .filter(|c| c.error_kind().is_some())
            .map(|c| self.get(*c))
            .sum()
    }

    /// Requests with a verdict on the target: all but `cancelled` ones (cut short by the
    /// generator — an interrupt, the end of the drain — they say nothing about the target).
    /// The denominator of error rates.
    pub fn judged(&self) -> u64 {
        self.total() - self.get(Class::Cancelled)
    }

    /// Every outcome but `ok` and `input_required` that occurred, with its count: each
    /// JSON-RPC code, HTTP status and protocol kind on its own.
    pub fn failures(&self) -> Vec<(Outcome, u64)> {
        let mut out = Vec::new();
        let mut push = |o: Outcome, n: u64| {
            if n > 0 {
                out.push((o, n));
            }
        };
        push(Outcome::ToolError, self.get(Class::ToolError));
        for &(code, n) in &self.rpc_codes {
            push(Outcome::RpcError(code), n);
        }
        push(Outcome::Assertion, self.get(Class::Assertion));
        push(Outcome::Divergence, self.get(Class::Divergence));
        for &(status, n) in &self.http_statuses {
            push(Outcome::Http(status), n);
        }
        push(Outcome::Timeout, self.get(Class::Timeout));
        push(Outcome::Hang, self.get(Class::Hang));
        push(Outcome::Connect, self.get(Class::Connect));
        push(Outcome::Io, self.get(Class::Io));
        for kind in ProtocolKind::ALL {
            push(Outcome::Protocol(kind), self.protocol[kind as usize]);
        }
        push(Outcome::Cancelled, self.get(Class::Cancelled));
        for kind in LocalKind::ALL {
            push(Outcome::Local(kind), self.local[kind as usize]);
        }
        out
    }

    pub fn clear(&mut self) {
        self.by_class = [0; Class::COUNT];
        self.protocol = [0; ProtocolKind::COUNT];
        self.local = [0; LocalKind::COUNT];
        self.rpc_codes.clear();
        self.http_statuses.clear();
    }
}

fn bump<K: PartialEq + Copy>(v: &mut Vec<(K, u64)>, k: K, n: u64) {
    match v.iter_mut().find(|(key, _)| *key == k) {
        Some((_, c)) => *c += n,
        None => v.push((k, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_and_merge_exactly() {
        let mut a = OutcomeCounts::default();
        for o in [
            Outcome::Ok,
            Outcome::Ok,
            Outcome::RpcError(-32601),
            Outcome::Http(500),
            Outcome::Http(500),
            Outcome::Http(404),
            Outcome::Protocol(ProtocolKind::WrongId),
            Outcome::Timeout,
        ] {
            a.add(o);
        }
        let mut b = a.clone();
        b.merge(&a);
        assert_eq!(b.total(), 16);
        assert_eq!(b.get(Class::Ok), 4);
        assert_eq!(b.http_statuses, vec![(500, 4), (404, 2)]);
        assert_eq!(b.protocol[ProtocolKind::WrongId as usize], 2);
        assert_eq!(b.errors(), 12);
        assert_eq!(b.judged(), 16);
        assert_eq!(Outcome::Http(503).to_string(), "http(503)");
        #[cfg(target_os = "linux")]
        for (errno, kind) in [
            (rustix::io::Errno::MFILE, LocalKind::FdLimit),
            (rustix::io::Errno::NFILE, LocalKind::FdLimit),
            (rustix::io::Errno::ADDRNOTAVAIL, LocalKind::NoPorts),
            (rustix::io::Errno::AGAIN, LocalKind::ProcessLimit),
        ] {
            let e = std::io::Error::from_raw_os_error(errno.raw_os_error());
            assert_eq!(LocalKind::or_connect(&e), Outcome::Local(kind));
            assert_eq!(Outcome::Local(kind).class(), Class::Local);
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(LocalKind::or_connect(&refused), Outcome::Connect);
        assert_eq!(
            Outcome::Local(LocalKind::NoPorts).to_string(),
            "local(no_ports)"
        );
        assert_eq!(Outcome::Http(401).to_string(), "http(401 auth)");
        assert_eq!(Outcome::Http(403).to_string(), "http(403 forbidden)");
        assert_eq!(Outcome::Http(429).to_string(), "http(429 rate_limited)");
    }
}
