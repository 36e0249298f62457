//! Per-route request counters behind `/stats`.
//!
//! Plain relaxed atomics: each request touches two counters of its own route and never takes a
//! lock. The snapshot types are public and deserializable so load tests can parse `/stats` with
//! the same definitions the backend renders it from.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hyper::StatusCode;
use serde::{Deserialize, Serialize};

use crate::knobs::Route;

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    ok: AtomicU64,
    client_errors: AtomicU64,
    injected_errors: AtomicU64,
}

/// Live counters for every [`Route`].
#[derive(Debug, Default)]
pub struct Stats {
    routes: [Counters; Route::ALL.len()],
}

impl Stats {
    /// Counts a request routed to `route`, before anything can fail.
    pub fn request(&self, route: Route) {
        self.routes[route.index()].requests.fetch_add(1, Relaxed);
    }

    /// Counts how `route` answered: 2xx is ok, 4xx a client error, 500 an injected error (the
    /// backend produces 500 only through `error_rate`).
    pub fn response(&self, route: Route, status: StatusCode) {
        let c = &self.routes[route.index()];
        let counter = if status.is_success() {
            &c.ok
        } else if status.is_client_error() {
            &c.client_errors
        } else if status == StatusCode::INTERNAL_SERVER_ERROR {
            &c.injected_errors
        } else {
            return;
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Zeroes every counter. Requests in flight during a reset may be counted as answered
    /// without having been counted as received; reset between load phases, not during one.
    pub fn reset(&self) {
        for c in &self.routes {
            c.requests.store(0, Relaxed);
            c.ok.store(0, Relaxed);
            c.client_errors.store(0, Relaxed);
            c.injected_errors.store(0, Relaxed);
        }
    }

    /// Reads every counter and sums the totals.
    pub fn snapshot(&self) -> StatsSnapshot {
        let read = |route: Route| {
            let c = &self.routes[route.index()];
            RouteStats {
                requests: c.requests.load(Relaxed),
                ok: c.ok.load(Relaxed),
                client_errors: c.client_errors.load(Relaxed),
                injected_errors: c.injected_errors.load(Relaxed),
            }
        };
        let routes = RoutesSnapshot {
            contacts: read(Route::Contacts),
            invoices: read(Route::Invoices),
            tickets: read(Route::Tickets),
            echo: read(Route::Echo),
        };
        let total = [
            routes.contacts,
            routes.invoices,
            routes.tickets,
            routes.echo,
        ]
        .into_iter()
        .fold(RouteStats::default(), |a, b| RouteStats {
            requests: a.requests + b.requests,
            ok: a.ok + b.ok,
            client_errors: a.client_errors + b.client_errors,
            injected_errors: a.injected_errors + b.injected_errors,
        });
        StatsSnapshot { routes, total }
    }
}

/// Counters of one route (or the total).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteStats {
    /// Every request routed here, whatever its outcome.
    pub requests: u64,
    /// Answered 2xx.
    pub ok: u64,
    /// Answered 4xx (bad input, unknown invoice, wrong method, body too large).
    pub client_errors: u64,
    /// Answered 500 because of `error_rate`.
    pub injected_errors: u64,
}

/// Per-route counters, one field per [`Route`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutesSnapshot {
    pub contacts: RouteStats,
    pub invoices: RouteStats,
    pub tickets: RouteStats,
    pub echo: RouteStats,
}

impl RoutesSnapshot {
    /// The counters of `route`.
    pub fn get(&self, route: Route) -> RouteStats {
        match route {
            Route::Contacts => self.contacts,
            Route::Invoices => self.invoices,
            Route::Tickets => self.tickets,
            Route::Echo => self.echo,
        }
    }
}

/// The body of `GET /stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    pub routes: RoutesSnapshot,
    pub total: RouteStats,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_status_class_and_resets() {
        let stats = Stats::default();
        for _ in 0..3 {
            stats.request(Route::Echo);
        }
        stats.response(Route::Echo, StatusCode::OK);
        stats.response(Route::Echo, StatusCode::NOT_FOUND);
        stats.response(Route::Echo, StatusCode::INTERNAL_SERVER_ERROR);
        stats.request(Route::Tickets);
        stats.response(Route::Tickets, StatusCode::CREATED);

        let s = stats.snapshot();
        assert_eq!(
            s.routes.echo,
            RouteStats {
                requests: 3,
                ok: 1,
                client_errors: 1,
                injected_errors: 1
            }
        );
        assert_eq!(s.routes.get(Route::Tickets).ok, 1);
        assert_eq!(s.routes.contacts, RouteStats::default());
        assert_eq!(s.total.requests, 4);
        assert_eq!(s.total.ok, 2);

        stats.reset();
        assert_eq!(stats.snapshot(), StatsSnapshot::default());
    }
}
