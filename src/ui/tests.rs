//! Snapshot tests of every view, drawn on ratatui's `TestBackend` from a synthetic run (built
//! through the same `Live::update` the driver uses): at 80×24 and 200×60, before the first
//! interval, and with no target yet.

use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::view::{self, SortKey, View, ViewState};
use crate::metrics::collector::{IntervalSnapshot, OpInterval};
use crate::metrics::grid::Phase;
use crate::metrics::outcome::{Outcome, ProtocolKind};
use crate::metrics::recorder::{self, Recorder};
use crate::report::live::{Live, RunHeader};
use crate::report::summary::{LoadInfo, ProfileInfo, StageInfo, TargetInfo};

const OPS: [&str; 4] = [
    "initialize",
    "tools/list",
    "tools/call:echo",
    "tools/call:search-contacts",
];

fn header(model: &str) -> RunHeader {
    RunHeader {
        scenario: "gateway-smoke".into(),
        target: TargetInfo {
            kind: "remote".into(),
            transport: "streamable-http".into(),
            http: "1.1".into(),
            url: "http://127.0.0.1:8080/mcp".into(),
            headers: vec!["Authorization".into()],
            protocol_offered: "2025-11-25".into(),
            protocol_negotiated: "2025-11-25".into(),
        },
        load: LoadInfo {
            model: model.into(),
            concurrency: 64,
            arrival: (model == "open").then(|| "poisson".into()),
            release_interval_seconds: (model == "open").then_some(0.0001),
            open_rate: None,
            pattern: None,
            replay: None,
            profile: ProfileInfo {
                start: 0.0,
                stages: vec![
                    StageInfo {
                        duration_seconds: 10.0,
                        target: 32.0,
                    },
                    StageInfo {
                        duration_seconds: 50.0,
                        target: 64.0,
                    },
                ],
            },
            duration_seconds: 60.0,
            requests: None,
            warmup_seconds: 2.0,
            timeout_seconds: 5.0,
            think_seconds: None,
            sessions: "per-vu".into(),
            workers: 2,
        },
        ops: OPS.iter().map(|s| s.to_string()).collect(),
        interval: Duration::from_secs(1),
    }
}

/// A deterministic latency in µs around `base`, with a tail.
fn latency(base: u64, i: u64) -> Duration {
    let x = i.wrapping_mul(2_654_435_761) % 1000;
    let tail = if x > 990 { base * 8 } else { base * x / 500 };
    Duration::from_micros(base / 2 + tail)
}

/// `seconds` intervals of a run with errors starting at 20 s.
fn live(model: &str, seconds: u64) -> Live {
    let mut live = Live::new(header(model), 2);
    let mut totals = Recorder::new(OPS.len());
    let mut n = 0u64;
    for k in 0..seconds {
        let phase = if k < 2 {
            Phase::Warmup
        } else {
            Phase::Measured
        };
        let mut interval = Recorder::new(OPS.len());
        let mut snap = IntervalSnapshot {
            index: k,
            start: Duration::from_secs(k),
            end: Duration::from_secs(k + 1),
            phase,
            cpu: Duration::from_millis(300 + k * 5),
            ops: vec![OpInterval::default(); OPS.len()],
            in_flight: 31,
            ..Default::default()
        };
        let mut all = recorder::new_histogram();
        for (op, (per_s, base)) in [(2, 900), (40, 250), (120, 400), (80, 2500)]
            .iter()
            .enumerate()
        {
            let per_s = per_s + k * 2;
            for _ in 0..per_s {
                n += 1;
                snap.started += 1;
                if phase == Phase::Warmup {
                    snap.warmup_ended += 1;
                    continue;
                }
                interval.started(op, crate::metrics::recorder::Phase::Measured);
                let outcome = match (op, k >= 20, n % 97) {
                    (3, true, 0..=2) => Outcome::Http(503),
                    (3, true, 3) => Outcome::RpcError(-32602),
                    (2, true, 4) => Outcome::Timeout,
                    (2, _, 5) if k > 25 => Outcome::Protocol(ProtocolKind::WrongId),
                    _ => Outcome::Ok,
                };
                if let Outcome::RpcError(_) = outcome {
                    interval.note_failure(op, outcome, || {
                        Some("Invalid params: query must be a string".into())
                    });
                }
                let d = latency(base + k * 10, n);
                interval.record(op, crate::metrics::recorder::Phase::Measured, outcome, d);
                snap.ended += 1;
                if outcome == Outcome::Ok {
                    snap.ok += 1;
                    snap.ops[op].ok += 1;
                    all.saturating_record(d.as_micros() as u64);
                } else {
                    snap.errors += 1;
                    snap.ops[op].errors += 1;
                }
            }
            if let Some(h) = interval.ops[op].hist(crate::metrics::outcome::Class::Ok) {
                snap.ops[op].p50_us = h.value_at_quantile(0.5);
                snap.ops[op].p90_us = h.value_at_quantile(0.9);
                snap.ops[op].p99_us = h.value_at_quantile(0.99);
                snap.ops[op].p999_us = h.value_at_quantile(0.999);
            }
        }
        if !all.is_empty() {
            snap.p50_us = all.value_at_quantile(0.5);
            snap.p90_us = all.value_at_quantile(0.9);
            snap.p99_us = all.value_at_quantile(0.99);
            snap.p999_us = all.value_at_quantile(0.999);
            snap.max_us = all.max();
        }
        snap.failures.clone_from(&interval.failures);
        interval.sessions.opened = if k == 0 { 64 } else { 0 };
        interval.sessions.connections = if k == 0 { 64 } else { 0 };
        totals.merge(&interval);
        live.update(&snap, &totals);
    }
    live
}

fn render(live: Option<&Live>, state: &ViewState, (w, h): (u16, u16)) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, live, state)).unwrap();
    t.backend().to_string()
}

const SMALL: (u16, u16) = (80, 24);
const LARGE: (u16, u16) = (200, 60);

fn state(view: View) -> ViewState {
    ViewState {
        view,
        selected: Some(3),
        ..ViewState::default()
    }
}

#[test]
fn overview() {
    let l = live("closed", 40);
    insta::assert_snapshot!(
        "overview_80x24",
        render(Some(&l), &state(View::Overview), SMALL)
    );
    insta::assert_snapshot!(
        "overview_200x60",
        render(Some(&l), &state(View::Overview), LARGE)
    );
}

#[test]
fn overview_open_loop_sorted_by_p99() {
    let l = live("open", 40);
    let s = ViewState {
        sort: SortKey::P99,
        ..state(View::Overview)
    };
    insta::assert_snapshot!("overview_open_p99_80x24", render(Some(&l), &s, SMALL));
}

#[test]
fn distribution() {
    let l = live("closed", 40);
    insta::assert_snapshot!(
        "distribution_80x24",
        render(Some(&l), &state(View::Distribution), SMALL)
    );
    insta::assert_snapshot!(
        "distribution_200x60",
        render(Some(&l), &state(View::Distribution), LARGE)
    );
}

#[test]
fn operation() {
    let l = live("closed", 40);
    insta::assert_snapshot!(
        "operation_80x24",
        render(Some(&l), &state(View::Operation), SMALL)
    );
    insta::assert_snapshot!(
        "operation_200x60",
        render(Some(&l), &state(View::Operation), LARGE)
    );
}

#[test]
fn help_over_the_overview() {
    let l = live("closed", 10);
    let s = ViewState {
        help: true,
        ..state(View::Overview)
    };
    insta::assert_snapshot!("help_80x24", render(Some(&l), &s, SMALL));
}

#[test]
fn finished_waits_for_a_key() {
    let mut l = live("closed", 40);
    l.finished = true;
    let s = ViewState {
        waiting_for_key: true,
        ..state(View::Overview)
    };
    insta::assert_snapshot!("finished_80x24", render(Some(&l), &s, SMALL));
}

#[test]
fn zero_data() {
    let l = Live::new(header("closed"), 2);
    for v in View::ALL {
        for size in [SMALL, LARGE] {
            insta::assert_snapshot!(
                format!("empty_{v:?}_{}x{}", size.0, size.1).to_lowercase(),
                render(Some(&l), &state(v), size)
            );
        }
    }
    insta::assert_snapshot!(
        "connecting_80x24",
        render(None, &ViewState::default(), SMALL)
    );
}

#[test]
fn warm_up_only() {
    let l = live("closed", 2);
    insta::assert_snapshot!(
        "warmup_80x24",
        render(Some(&l), &state(View::Overview), SMALL)
    );
}

/// Every size from tiny to huge draws without a panic (a resize can land anywhere).
#[test]
fn any_size_draws() {
    let l = live("open", 30);
    for v in View::ALL {
        for (w, h) in [(1, 1), (10, 5), (40, 12), (79, 23), (120, 40), (300, 90)] {
            let s = ViewState {
                help: w > 50,
                ..state(v)
            };
            render(Some(&l), &s, (w, h));
        }
    }
}
