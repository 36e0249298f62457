//! What every worker of a run shares, read-only ([`Ctx`]): the plan, the endpoints users take
//! (credentials, tenants, revisions, source addresses), the request templates per revision,
//! `expect` rules, the clock of the run and its stop and abort signals; built once by
//! [`context`]. And the one redaction of secrets from what a server says.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use super::mix::Mix;
use super::{Checked, RunOptions};
use crate::client::Preflight;
use crate::client::request::{RequestTemplate, call_spec};
use crate::metrics::grid::Grid;
use crate::metrics::recorder::Phase;
use crate::scenario::Plan;
use crate::transport::{CallSpec, Endpoint};

/// The endpoints virtual users take in turn, each with the row (tenant) it counts in.
pub type UserEndpoints = Vec<(Arc<Endpoint>, usize)>;

/// Per revision the users speak: each workload entry's request template and call spec.
pub type Requests = Vec<(
    crate::protocol::version::Revision,
    Vec<RequestTemplate>,
    Vec<CallSpec>,
)>;

/// Read-only context shared by every worker.
#[derive(Debug)]
pub struct Ctx {
    pub plan: Arc<Plan>,
    pub endpoint: Arc<Endpoint>,
    /// Per-virtual-user credentials: virtual user `i` uses `endpoints[i % n]` (its headers
    /// added) and counts for its tenant; empty: everyone uses `endpoint`.
    pub endpoints: UserEndpoints,
    /// The credentials' tenants, by index.
    pub tenants: Vec<String>,
    /// Source addresses 2 … k (`--source-address` lists): `endpoint` and `endpoints` again,
    /// connecting from that address. Virtual user `g` takes address `g mod k` (the first is
    /// `endpoint`'s own), so its reconnects keep it.
    pub other_sources: Vec<(Arc<Endpoint>, UserEndpoints)>,
    /// Every header value that may be a secret, redacted from failure messages.
    pub secrets: Vec<(String, String)>,
    /// Per revision the users speak (the preflight's first): each workload entry's request
    /// template and call spec.
    pub requests: Requests,
    /// Per workload entry: its `expect` rules, if it has any.
    pub checks: Vec<Option<super::expect::Check>>,
    /// `[target.oauth]`: the token endpoint, and the operation that times it.
    pub oauth: Option<(super::oauth::TokenEndpoint, usize)>,
    pub mix: Mix,
    pub start: Instant,
    pub warmup_end: Instant,
    pub end: Instant,
    pub timeout: Duration,
    /// The interval grid (anchored at the start, the end of warm-up and the end).
    pub grid: Grid,
    /// Cancels in-flight requests (Ctrl-C, or the drain deadline passed). Workers wait on it
    /// once; requests don't (a per-request wait would take the token's lock every time).
    pub abort: CancellationToken,
    /// Mirrors `abort` as a plain flag.
    pub aborted: AtomicBool,
    /// Ends the waits between requests (think time, back-off, arrivals) when the run is
    /// interrupted: requests in flight drain, no new one starts.
    pub drain: CancellationToken,
    /// No new requests (an interrupt, or an abort): the per-request stop check.
    pub stop: AtomicBool,
    pub seed: u64,
    pub workers: usize,
    /// The first answer to each deterministic call (shared by an A/B run's slices).
    pub seen: Arc<super::divergence::Seen>,
    /// The A/B target this run is a slice of.
    pub ab_target: Option<String>,
}

impl Ctx {
    /// The endpoint and tenant of the virtual user with this global index.
    pub(super) fn endpoint_of(&self, global: usize) -> (Arc<Endpoint>, Option<usize>) {
        let (endpoint, endpoints) = match global % (self.other_sources.len() + 1) {
            0 => (&self.endpoint, &self.endpoints),
            k => {
                let (ep, eps) = &self.other_sources[k - 1];
                (ep, eps)
            }
        };
        match endpoints.len() {
            0 => (endpoint.clone(), None),
            n => {
                let (ep, tenant) = &endpoints[global % n];
                (ep.clone(), Some(*tenant))
            }
        }
    }

    /// The index of an operation by name (0 if the plan has none of that name).
    pub(super) fn op_index(&self, name: &str) -> usize {
        self.plan.ops.iter().position(|o| o == name).unwrap_or(0)
    }

    pub(super) fn phase(&self, t: Instant) -> Phase {
        if t < self.warmup_end {
            Phase::Warmup
        } else {
            Phase::Measured
        }
    }

    pub(super) fn stopping(&self, now: Instant) -> bool {
        now >= self.end || self.stop.load(Ordering::Relaxed)
    }
}

/// The endpoints virtual users take in turn, each with the row it counts in, and every header
/// value that may be a secret. Per-user credentials: an endpoint each, its headers added;
/// OAuth users share the endpoint (each sends its own token) and count for its tenant; mixed
/// revisions: an endpoint per revision, each its own row.
pub(super) fn users_endpoints(
    plan: &Plan,
    endpoint: &Arc<Endpoint>,
    tenants: &[String],
) -> (UserEndpoints, Vec<(String, String)>) {
    let mut secrets = endpoint.headers.clone();
    let crate::scenario::Target::Remote(r) = &plan.target else {
        return (Vec::new(), secrets);
    };
    if let Some(o) = &r.oauth {
        secrets.push(("client_secret".into(), o.client_secret.clone()));
    }
    let endpoints = r
        .credentials
        .iter()
        .map(|c| {
            let mut ep = (**endpoint).clone();
            for (name, value) in &c.headers {
                ep.add_header(name, value);
                secrets.push((name.clone(), value.clone()));
            }
            let tenant = tenants.iter().position(|t| t == &c.tenant).unwrap_or(0);
            (Arc::new(ep), tenant)
        })
        .collect();
    if r.oauth.as_ref().is_some_and(|o| o.tenant.is_some()) {
        return (vec![(endpoint.clone(), 0)], secrets);
    }
    if r.revisions.is_empty() {
        return (endpoints, secrets);
    }
    let by_revision = r
        .revisions
        .iter()
        .map(|rev| {
            let mut ep = (**endpoint).clone();
            ep.protocol = *rev;
            let row = tenants
                .iter()
                .position(|t| *t == rev.to_string())
                .unwrap_or(0);
            (Arc::new(ep), row)
        })
        .collect();
    (by_revision, secrets)
}

/// Per source address after the first: the endpoint and the users' endpoints connecting
/// from it.
fn other_sources(
    plan: &Plan,
    opts: &RunOptions,
    endpoint: &Endpoint,
    endpoints: &UserEndpoints,
) -> Vec<(Arc<Endpoint>, UserEndpoints)> {
    let Some(sources) = super::resolve::sources(plan, opts) else {
        return Vec::new();
    };
    let from = |ep: &Endpoint, ip| {
        let mut ep = ep.clone();
        for net in ep.net.iter_mut().chain(ep.replicas.iter_mut()) {
            net.source = Some(ip);
        }
        Arc::new(ep)
    };
    sources.addrs()[1..]
        .iter()
        .map(|&ip| {
            let eps = endpoints
                .iter()
                .map(|(ep, tenant)| (from(ep, ip), *tenant))
                .collect();
            (from(endpoint, ip), eps)
        })
        .collect()
}

/// Each workload entry's request template and call spec, per revision the users speak (the
/// preflight's, then a mixed-revision target's others).
fn requests_per_revision(plan: &Plan, pre: &Preflight) -> Requests {
    let mut speak = vec![pre.revision];
    if let crate::scenario::Target::Remote(r) = &plan.target {
        for rev in &r.revisions {
            if !speak.contains(rev) {
                speak.push(*rev);
            }
        }
    }
    let items = &plan.workload;
    speak
        .iter()
        .map(|&rev| {
            (
                rev,
                items.iter().map(|w| RequestTemplate::new(w, rev)).collect(),
                items.iter().map(|w| call_spec(w, rev)).collect(),
            )
        })
        .collect()
}

/// The read-only context every worker shares (it takes the compiled `expect` rules).
pub(super) fn context(
    plan: &Arc<Plan>,
    endpoint: Arc<Endpoint>,
    checked: &mut Checked,
    opts: &RunOptions,
    (started_wall, start): (SystemTime, Instant),
) -> Ctx {
    let (pre, workers) = (&checked.preflight, checked.workers);
    let tenants = checked.tenants.clone();
    let (endpoints, secrets) = users_endpoints(plan, &endpoint, &tenants);
    Ctx {
        other_sources: other_sources(plan, opts, &endpoint, &endpoints),
        oauth: checked.resolved.oauth.clone().map(|t| {
            let op = plan
                .ops
                .iter()
                .position(|o| o == crate::scenario::plan::OP_OAUTH)
                .unwrap_or(1);
            (t, op)
        }),
        checks: std::mem::take(&mut checked.checks),
        endpoints,
        tenants,
        secrets,
        requests: requests_per_revision(plan, pre),
        mix: Mix::new(&plan.workload),
        plan: plan.clone(),
        endpoint,
        start,
        warmup_end: start + plan.load.warmup,
        end: start + plan.load.duration,
        timeout: plan.load.timeout,
        grid: Grid::new(opts.interval, plan.load.warmup, plan.load.duration),
        abort: CancellationToken::new(),
        aborted: std::sync::atomic::AtomicBool::new(false),
        drain: CancellationToken::new(),
        stop: std::sync::atomic::AtomicBool::new(false),
        workers,
        seen: opts
            .ab_divergence
            .as_ref()
            .map_or_else(Default::default, |(s, _)| s.clone()),
        ab_target: opts.ab_divergence.as_ref().map(|(_, t)| t.clone()),
        seed: started_wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64)
            ^ plan.load.shard.seed(),
    }
}

/// A server's message with the target's header values (credentials) and anything after
/// `Bearer ` blanked out: what it says may be shown and written, secrets may not.
pub fn redact(message: &str, headers: &[(String, String)]) -> String {
    let mut m = message.to_string();
    for (_, value) in headers {
        for secret in std::iter::once(value.as_str()).chain(value.split_whitespace()) {
            if secret.len() >= 6 {
                m = m.replace(secret, "[redacted]");
            }
        }
    }
    let mut out = String::with_capacity(m.len());
    let mut rest = m.as_str();
    while let Some(i) = rest.to_ascii_lowercase().find("bearer ") {
        out.push_str(&rest[..i + 7]);
        out.push_str("[redacted]");
        rest = &rest[i + 7..];
        rest = rest.trim_start_matches(|c: char| !c.is_whitespace() && c != '"' && c != '\'');
    }
    out.push_str(rest);
    out
}
