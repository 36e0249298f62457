//! Diagnoses that need the run's time line (`timeseries.csv`) and its load profile: what the
//! end-of-run totals cannot show. Each names its evidence; they join the summary's notes, so
//! the terminal, `summary.json` and the reports all carry them.
//!
//! - **Throughput plateau**: the closed loop's virtual users grew, throughput did not, and the
//!   median latency grew with the users — the target serialises requests (a lock, one worker,
//!   a queue per session; with shared sessions, every user's requests share one).
//! - **Errors from a load step**: errors absent, then present from a stage's start (or a level
//!   change) on; or, at a constant level, errors that begin mid-run (the target degraded).

use std::collections::BTreeMap;

use crate::scenario::Plan;
use crate::scenario::plan::{Model, Profile, Sessions};

/// One measured interval of the time series.
#[derive(Debug, Clone, Copy)]
struct Row {
    t0: f64,
    t1: f64,
    ok_per_s: f64,
    p50_ms: f64,
    errors: f64,
    ended: f64,
    dropped: f64,
}

/// The diagnoses of a run from its time series (columns of `timeseries.csv`, and the phase of
/// each row).
pub fn over_time(
    plan: &Plan,
    series: &BTreeMap<String, Vec<f64>>,
    phases: &[String],
) -> Vec<String> {
    let col = |name: &str| series.get(name).map_or(&[][..], Vec::as_slice);
    let (t0, t1, ok, p50, errors, ended, dropped) = (
        col("t_start_s"),
        col("t_end_s"),
        col("ok_per_s"),
        col("p50_ms"),
        col("errors"),
        col("ended"),
        col("dropped"),
    );
    let rows: Vec<Row> = (0..phases.len().min(t0.len()))
        .filter(|&i| phases[i] == "measured")
        .filter_map(|i| {
            Some(Row {
                t0: *t0.get(i)?,
                t1: *t1.get(i)?,
                ok_per_s: *ok.get(i)?,
                p50_ms: *p50.get(i)?,
                errors: *errors.get(i)?,
                ended: *ended.get(i)?,
                dropped: dropped.get(i).copied().unwrap_or(0.0),
            })
        })
        // A partial last interval says little.
        .filter(|r| r.t1 - r.t0 >= 0.5)
        .collect();
    let (profile, unit, open) = match &plan.load.model {
        Model::Closed { vus } => (vus, "virtual users", false),
        Model::Open { rate, .. } => (rate, "requests/s", true),
    };
    let mut notes = Vec::new();
    if !open && let Some(n) = plateau(&rows, profile, plan.load.sessions) {
        notes.push(n);
    }
    if let Some(n) = error_onset(&rows, profile, unit) {
        notes.push(n);
    }
    notes
}

fn level_at(profile: &Profile, r: &Row) -> f64 {
    profile.at((r.t0 + r.t1) / 2.0)
}

/// The middle value (upper middle of an even count); 0 for none.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Throughput that stopped growing with the virtual users while the median latency grew.
fn plateau(rows: &[Row], vus: &Profile, sessions: Sessions) -> Option<String> {
    let (lo, hi) = (vus.min().max(1.0), vus.max());
    if hi < 2.0 * lo {
        return None;
    }
    // The intervals at the lowest and at the highest quarter of the levels.
    let band = |want_low: bool| -> Vec<&Row> {
        rows.iter()
            .filter(|r| r.ok_per_s > 0.0)
            .filter(|r| {
                let l = level_at(vus, r);
                if want_low {
                    l <= lo + (hi - lo) * 0.25
                } else {
                    l >= hi - (hi - lo) * 0.25
                }
            })
            .collect()
    };
    let (low, high) = (band(true), band(false));
    if low.len() < 2 || high.len() < 2 {
        return None;
    }
    let stat = |rs: &[&Row]| {
        (
            median(rs.iter().map(|r| level_at(vus, r)).collect()),
            median(rs.iter().map(|r| r.ok_per_s).collect()),
            median(rs.iter().map(|r| r.p50_ms).collect()),
        )
    };
    let ((l1, x1, p1), (l2, x2, p2)) = (stat(&low), stat(&high));
    let users = l2 / l1.max(1.0);
    // Users at least doubled; throughput grew by less than a quarter of that; the median grew
    // by at least half the users' growth (Little's law: a serialising target's latency grows
    // in proportion to the users waiting on it).
    if users < 2.0
        || x2 > x1 * (1.0 + 0.25 * (users - 1.0))
        || p2 < p1 * (1.0 + 0.5 * (users - 1.0))
    {
        return None;
    }
    let shared = if sessions == Sessions::Shared {
        "; all virtual users of a worker share one session (sessions = \"shared\"): a server that handles a session's requests one at a time serialises all of them — try sessions = \"per-vu\""
    } else {
        ""
    };
    Some(format!(
        "throughput stopped growing with the virtual users: {l1:.0} users → {x1:.1} ok/s, p50 {}; {l2:.0} users → {x2:.1} ok/s ({:+.0} %), p50 {} (×{:.1}): the target serialises requests (a lock, a single worker, a queue per session or connection){shared}",
        super::text::ms(p1),
        (x2 / x1.max(1e-9) - 1.0) * 100.0,
        super::text::ms(p2),
        p2 / p1.max(1e-9)
    ))
}

/// Errors that were absent and then began, and when: at a stage's start or a level change, or
/// mid-run at a constant level.
fn error_onset(rows: &[Row], profile: &Profile, unit: &str) -> Option<String> {
    let rate = |r: &Row| {
        let n = r.ended + r.dropped;
        if n > 0.0 {
            (r.errors + r.dropped) / n
        } else {
            0.0
        }
    };
    // The first interval with errors (≥ 1 % and at least 3) after at least two clean ones
    // (under 0.1 %), and errors in most intervals from there on: an onset, not a blip.
    let onset = rows.iter().enumerate().position(|(i, r)| {
        let failing = |r: &Row| rate(r) >= 0.01 && r.errors + r.dropped >= 3.0;
        if i < 2 || !failing(r) || rows[..i].iter().any(|p| rate(p) >= 0.001) {
            return false;
        }
        let after = &rows[i..];
        after.iter().filter(|r| failing(r)).count() * 2 >= after.len()
    })?;
    let r = &rows[onset];
    let before = level_at(profile, &rows[onset - 1]);
    let now = level_at(profile, r);
    let after: Vec<&Row> = rows[onset..].iter().collect();
    let error_pct = median(after.iter().map(|r| rate(r)).collect()) * 100.0;
    // The first stage that began within an interval and a half before the onset (a jump is
    // a zero-length stage followed by the one holding the new level).
    let mut t = 0.0;
    let mut stage = None;
    for (i, (d, _)) in profile.stages.iter().enumerate() {
        if stage.is_none() && i > 0 && t <= r.t1 && r.t0 - t <= 1.5 * (r.t1 - r.t0) {
            stage = Some((i + 1, t));
        }
        t += d.as_secs_f64();
    }
    let fmt = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    Some(match stage {
        Some((n, at)) if (now - before).abs() > 0.05 * before.max(1.0) || n > 1 => format!(
            "errors began at {:.0} s, when stage {n} began ({at:.0} s; level {} → {} {unit}), after a clean run up to it: {error_pct:.1} % of requests failed from there (median per interval) — the target's limit lies between these levels",
            r.t0,
            fmt(before),
            fmt(now),
        ),
        _ if now > before * 1.05 => format!(
            "errors began at {:.0} s as the level rose past {} {unit} (clean below it): {error_pct:.1} % of requests failed from there (median per interval)",
            r.t0,
            fmt(before)
        ),
        _ => format!(
            "errors began at {:.0} s at a constant level ({} {unit}) after a clean start: {error_pct:.1} % of requests failed from there (median per interval) — something in the target degraded over time (a leak, a filling queue or pool, an expiring credential)",
            r.t0,
            fmt(now)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        crate::scenario::parse("d.toml", text, &|_| None).unwrap()
    }

    /// A time series of one-second measured intervals from (ok/s, p50 ms, errors, ended).
    fn series(rows: &[(f64, f64, f64, f64)]) -> (BTreeMap<String, Vec<f64>>, Vec<String>) {
        let mut s: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (i, &(ok, p50, errors, ended)) in rows.iter().enumerate() {
            for (k, v) in [
                ("t_start_s", i as f64),
                ("t_end_s", i as f64 + 1.0),
                ("ok_per_s", ok),
                ("p50_ms", p50),
                ("errors", errors),
                ("ended", ended),
                ("dropped", 0.0),
            ] {
                s.entry(k.to_string()).or_default().push(v);
            }
        }
        (s, vec!["measured".to_string(); rows.len()])
    }

    const RAMP: &str = "[load]\nwarmup = \"0s\"\n[[load.stages]]\nduration = \"4s\"\nconcurrency = 4\n[[load.stages]]\nduration = \"4s\"\nconcurrency = 4\n[[load.stages]]\nduration = \"0s\"\nconcurrency = 16\n[[load.stages]]\nduration = \"4s\"\nconcurrency = 16\n[[workload]]\nmethod = \"tools/list\"\n";

    /// Users ×4, throughput flat, median ×4: a serialising target; named with shared sessions.
    #[test]
    fn plateau_is_named_and_a_scaling_target_is_not() {
        let p = plan(RAMP);
        let flat: Vec<_> = (0..12)
            .map(|i| {
                if i < 8 {
                    (1000.0, 4.0, 0.0, 1000.0)
                } else {
                    (1010.0, 16.0, 0.0, 1010.0)
                }
            })
            .collect();
        let (s, ph) = series(&flat);
        let notes = over_time(&p, &s, &ph);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("throughput stopped growing with the virtual users: 4 users → 1000.0 ok/s, p50 4.00ms; 16 users → 1010.0 ok/s (+1 %), p50 16.0ms (×4.0)"), "{}", notes[0]);
        assert!(!notes[0].contains("shared"));
        let shared =
            plan(&RAMP.replace("warmup = \"0s\"", "warmup = \"0s\"\nsessions = \"shared\""));
        assert!(over_time(&shared, &s, &ph)[0].contains("sessions = \"shared\""));
        // Throughput ×4 at the same latency: scaling, nothing to say.
        let scaling: Vec<_> = (0..12)
            .map(|i| {
                if i < 8 {
                    (1000.0, 4.0, 0.0, 1000.0)
                } else {
                    (3900.0, 4.1, 0.0, 3900.0)
                }
            })
            .collect();
        let (s, ph) = series(&scaling);
        assert!(over_time(&p, &s, &ph).is_empty());
    }

    /// Errors from the stage that raised the level; errors at a constant level; a blip is not
    /// an onset.
    #[test]
    fn error_onsets() {
        let p = plan(RAMP);
        let rows: Vec<_> = (0..12)
            .map(|i| {
                if i < 8 {
                    (1000.0, 4.0, 0.0, 1000.0)
                } else {
                    (3000.0, 4.0, 300.0, 3300.0)
                }
            })
            .collect();
        let (s, ph) = series(&rows);
        let notes = over_time(&p, &s, &ph);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "errors began at 8 s, when stage 3 began (8 s; level 4.0 → 16.0 virtual users)"
            ),
            "{}",
            notes[0]
        );
        let constant = plan(
            "[load]\nwarmup = \"0s\"\nconcurrency = 8\nduration = \"12s\"\n[[workload]]\nmethod = \"tools/list\"\n",
        );
        let rows: Vec<_> = (0..12)
            .map(|i| {
                if i < 6 {
                    (1000.0, 4.0, 0.0, 1000.0)
                } else {
                    (900.0, 4.0, 100.0, 1000.0)
                }
            })
            .collect();
        let (s, ph) = series(&rows);
        let notes = over_time(&constant, &s, &ph);
        assert!(
            notes[0].starts_with("errors began at 6 s at a constant level (8.0 virtual users)"),
            "{notes:?}"
        );
        let blip: Vec<_> = (0..12)
            .map(|i| {
                if i == 6 {
                    (900.0, 4.0, 100.0, 1000.0)
                } else {
                    (1000.0, 4.0, 0.0, 1000.0)
                }
            })
            .collect();
        let (s, ph) = series(&blip);
        assert!(over_time(&constant, &s, &ph).is_empty());
    }
}
