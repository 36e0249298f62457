//! `[load]` (the load model, its level over time, stop conditions, sessions) and `[find_max]`.

use std::time::Duration;

use toml::Spanned;

use super::check::{duration, key_hint, one_of, opt_within, within};
use super::plan::{
    Arrival, Engine, FindMax, Load, Model, Pattern, Profile, REQUESTS_ONLY_LIMIT, Search, Sessions,
    Step,
};
use super::raw::{RawFindMax, RawLoad, RawStage};
use super::{ScenarioError, Source};

/// The most virtual users (closed loop) or requests in flight (open loop).
const MAX_CONCURRENCY: u32 = 100_000;
/// The highest arrival rate, per second.
const MAX_RATE: f64 = 10_000_000.0;
/// Open loop: by default a worker releases due arrivals at most every 100 µs — at most 10 000
/// wake-ups a second, lateness a fraction of a loopback round trip
/// (results/baselines/vs-http-tools-2026-12-02-issue15.md measures the trade).
const DEFAULT_RELEASE_INTERVAL: Duration = Duration::from_micros(100);
const MAX_RELEASE_INTERVAL: Duration = Duration::from_millis(10);

/// `[load]`: the model and its level over time, stop conditions, timeouts, sessions and the
/// pattern of rounds.
pub(super) fn load(src: &Source<'_>, l: &Spanned<RawLoad>) -> Result<Load, ScenarioError> {
    let raw = l.get_ref();
    let open = is_open(src, raw)?;
    let timeout = timeout(src, l)?;
    let requests = opt_within(src, &raw.requests, 1, None, "load.requests")?;
    let profile = profile(src, l, open, requests.is_some())?;
    let warmup = warmup(src, l, &profile)?;
    let (sessions, pattern) = sessions_and_pattern(src, raw, open)?;
    let workers = opt_within(src, &raw.workers, 1, Some(1024), "load.workers")?;
    let duration = profile.duration();
    let (model, concurrency) = if open {
        open_model(src, raw, profile)?
    } else {
        let vus = profile.max().ceil() as usize;
        (Model::Closed { vus: profile }, vus)
    };
    let open_rate = open_rate(src, raw, (open, pattern), concurrency, duration)?;
    let max_queued = match &raw.max_queued {
        Some(q) if !open => {
            return Err(src.error(q.span(), "`max_queued` belongs to the open model", None));
        }
        q => opt_within(src, q, 0, Some(10_000_000), "load.max_queued")?
            .map_or(concurrency, |q| q as usize),
    };
    Ok(Load {
        hang_after: hang_after(src, raw, pattern, timeout)?,
        model,
        concurrency,
        duration,
        requests,
        max_queued,
        warmup,
        timeout,
        think: think(src, raw)?,
        workers: workers.map(|w| w as usize),
        sessions,
        pattern,
        engine: engine(src, raw)?,
        open_rate,
        shard: super::shard::Shard::WHOLE,
    })
}

/// `open_rate`: a session-opening storm of the closed model's steady users (user `k` starts
/// `k / open_rate` s in), every user started within the duration.
fn open_rate(
    src: &Source<'_>,
    raw: &RawLoad,
    (open, pattern): (bool, Pattern),
    users: usize,
    duration: Duration,
) -> Result<Option<f64>, ScenarioError> {
    let Some(r) = &raw.open_rate else {
        return Ok(None);
    };
    let refuse = |why: &str, fix: &str| Err(src.error(r.span(), why.to_string(), Some(fix.into())));
    if open {
        return refuse(
            "`open_rate` starts the closed model's virtual users at a set pace; an open model's `rate` is its arrivals",
            "remove model = \"open\" and set concurrency (the sessions to open)",
        );
    }
    if !raw.stages.is_empty() {
        return refuse(
            "`open_rate` starts the users at a set pace; stages ramp their number: one or the other",
            "remove the [[load.stages]], or open_rate",
        );
    }
    if pattern != Pattern::Steady {
        return refuse(
            "first_call and cold_start rounds open their own sessions",
            "remove `pattern`, or open_rate",
        );
    }
    let rate = within(src, r, 0.001, Some(MAX_RATE), "load.open_rate")?;
    let takes = users as f64 / rate;
    if takes > duration.as_secs_f64() {
        return refuse(
            &format!(
                "opening {users} sessions at {rate}/s takes {takes:.1} s, longer than the run ({})",
                mcpbench_knobs::format_duration(duration)
            ),
            &format!(
                "open_rate = {} or more, or a duration of at least {}s",
                (users as f64 / duration.as_secs_f64().max(1e-9)).ceil(),
                takes.ceil()
            ),
        );
    }
    Ok(Some(rate))
}

/// `timeout`: 10 s unless written, at least 1 ms.
fn timeout(src: &Source<'_>, l: &Spanned<RawLoad>) -> Result<Duration, ScenarioError> {
    let raw = l.get_ref();
    let timeout = raw
        .timeout
        .as_ref()
        .map(|t| duration(src, t, "load.timeout"))
        .transpose()?
        .unwrap_or(Duration::from_secs(10));
    if timeout < Duration::from_millis(1) {
        let t = raw.timeout.as_ref().map_or(l.span(), |t| t.span());
        return Err(src.error(t, "timeout must be at least 1ms", key_hint("load.timeout")));
    }
    Ok(timeout)
}

/// `warmup`: none unless written, shorter than the run.
fn warmup(
    src: &Source<'_>,
    l: &Spanned<RawLoad>,
    profile: &Profile,
) -> Result<Duration, ScenarioError> {
    let raw = l.get_ref();
    let warmup = raw
        .warmup
        .as_ref()
        .map(|w| duration(src, w, "load.warmup"))
        .transpose()?
        .unwrap_or(Duration::ZERO);
    if warmup >= profile.duration() {
        let w = raw.warmup.as_ref().map_or(l.span(), |w| w.span());
        return Err(src.error(
            w,
            "warmup must be shorter than duration (warm-up is part of the duration)",
            None,
        ));
    }
    Ok(warmup)
}

/// `sessions` and `pattern`, which constrain each other: a cold start opens a session per
/// request, first-call rounds one per round; rounds run the closed model.
fn sessions_and_pattern(
    src: &Source<'_>,
    raw: &RawLoad,
    open: bool,
) -> Result<(Sessions, Pattern), ScenarioError> {
    let sessions = match &raw.sessions {
        None => Sessions::PerVu,
        Some(s) => {
            let options = [
                ("per-vu", Sessions::PerVu),
                ("shared", Sessions::Shared),
                ("per-request", Sessions::PerRequest),
            ];
            one_of(src, s, "session mode", "load.sessions", &options)?
        }
    };
    let pattern = match &raw.pattern {
        None => Pattern::Steady,
        Some(p) => {
            let options = [
                ("steady", Pattern::Steady),
                ("first_call", Pattern::FirstCall),
                ("cold_start", Pattern::ColdStart),
            ];
            let pattern = one_of(src, p, "pattern", "load.pattern", &options)?;
            if open && pattern != Pattern::Steady {
                return Err(src.error(
                    p.span(),
                    "first_call and cold_start rounds run virtual users (the closed model)",
                    Some("remove model = \"open\" and set concurrency".into()),
                ));
            }
            pattern
        }
    };
    let sessions = match (pattern, &raw.sessions) {
        (Pattern::ColdStart, Some(s)) if sessions != Sessions::PerRequest => {
            return Err(src.error(
                s.span(),
                "a cold start opens a session per request",
                Some("remove `sessions` (cold_start implies \"per-request\")".into()),
            ));
        }
        (Pattern::ColdStart, _) => Sessions::PerRequest,
        (Pattern::FirstCall, Some(s)) if sessions == Sessions::PerRequest => {
            return Err(src.error(
                s.span(),
                "first_call rounds open their sessions once per round",
                Some("sessions = \"per-vu\" (a session each) or \"shared\" (stdio: one process for all)".into()),
            ));
        }
        _ => sessions,
    };
    Ok((sessions, pattern))
}

/// `engine`: the worker's event loop where it fits (`auto`), or a task per virtual user.
fn engine(src: &Source<'_>, raw: &RawLoad) -> Result<Engine, ScenarioError> {
    match &raw.engine {
        None => Ok(Engine::Auto),
        Some(e) => {
            let options = [("auto", Engine::Auto), ("tasks", Engine::Tasks)];
            one_of(src, e, "engine", "load.engine", &options)
        }
    }
}

/// `hang_after`: above zero and shorter than the timeout; first-call rounds default to half
/// the timeout.
fn hang_after(
    src: &Source<'_>,
    raw: &RawLoad,
    pattern: Pattern,
    timeout: Duration,
) -> Result<Option<Duration>, ScenarioError> {
    let Some(h) = &raw.hang_after else {
        // A first call that deadlocks is what first_call rounds look for: without a
        // hang_after, half the timeout.
        return Ok((pattern == Pattern::FirstCall).then(|| timeout / 2));
    };
    let d = duration(src, h, "load.hang_after")?;
    if d.is_zero() || d >= timeout {
        return Err(src.error(
            h.span(),
            format!(
                "hang_after must be above zero and shorter than the timeout ({})",
                mcpbench_knobs::format_duration(timeout)
            ),
            key_hint("load.hang_after"),
        ));
    }
    Ok(Some(d))
}

/// The model, and no key that belongs to the other one (a mistake, not something to ignore).
fn is_open(src: &Source<'_>, raw: &RawLoad) -> Result<bool, ScenarioError> {
    let open = match &raw.model {
        None => false,
        Some(m) => one_of(
            src,
            m,
            "load model",
            "load.model",
            &[("closed", false), ("open", true)],
        )?,
    };
    if open {
        if let Some(t) = &raw.think {
            return Err(src.error(
                t.span(),
                "think time applies to the closed model; an open model's rate sets the pace",
                None,
            ));
        }
        return Ok(true);
    }
    let open_keys = [
        (raw.rate.as_ref().map(|r| r.span()), "rate"),
        (raw.arrival.as_ref().map(|r| r.span()), "arrival"),
        (
            raw.max_in_flight.as_ref().map(|r| r.span()),
            "max_in_flight",
        ),
        (
            raw.release_interval.as_ref().map(|r| r.span()),
            "release_interval",
        ),
    ];
    for (span, key) in open_keys {
        if let Some(span) = span {
            return Err(src.error(
                span,
                format!("`{key}` belongs to the open model"),
                Some("add model = \"open\", or use concurrency for virtual users".into()),
            ));
        }
    }
    Ok(false)
}

/// The level over time: constant for `duration` (or the request-count bound), or ramped
/// through the stages from the base level.
fn profile(
    src: &Source<'_>,
    l: &Spanned<RawLoad>,
    open: bool,
    counted: bool,
) -> Result<Profile, ScenarioError> {
    let raw = l.get_ref();
    let base = if open {
        opt_within(src, &raw.rate, 0.0, Some(MAX_RATE), "load.rate")?
    } else {
        // Stages may start from zero users; a constant load needs at least one.
        let least = u32::from(raw.stages.is_empty());
        let key = "load.concurrency";
        opt_within(src, &raw.concurrency, least, Some(MAX_CONCURRENCY), key)?.map(f64::from)
    };
    let profile = if raw.stages.is_empty() {
        let level = match (base, open) {
            (Some(b), _) => b,
            (None, false) => 1.0,
            (None, true) => {
                return Err(src.error_at_key(
                    l.span(),
                    "load.rate",
                    "an open model needs a rate (or stages)",
                    key_hint("load.rate"),
                ));
            }
        };
        let duration = match (&raw.duration, counted) {
            (Some(d), _) => duration(src, d, "load.duration")?,
            (None, true) => REQUESTS_ONLY_LIMIT,
            (None, false) => {
                return Err(src.error_at_key(
                    l.span(),
                    "load.duration",
                    "[load] needs a duration (or a request count)",
                    key_hint("load.duration"),
                ));
            }
        };
        Profile::constant(level, duration)
    } else {
        if let Some(d) = &raw.duration {
            return Err(src.error(
                d.span(),
                "with stages, the duration is the sum of the stages'",
                Some("remove `duration`".into()),
            ));
        }
        let stages = raw
            .stages
            .iter()
            .map(|st| stage(src, st, open))
            .collect::<Result<_, _>>()?;
        Profile {
            start: base.unwrap_or(0.0),
            stages,
        }
    };
    if profile.duration().is_zero() {
        let d = raw.duration.as_ref().map_or(l.span(), |d| d.span());
        return Err(src.error(
            d,
            "duration must be greater than zero",
            key_hint("load.duration"),
        ));
    }
    if profile.max() <= 0.0 {
        let key = if open {
            "load.rate"
        } else {
            "load.concurrency"
        };
        return Err(src.error_at_key(l.span(), key, "the load is zero throughout", None));
    }
    Ok(profile)
}

/// One `[[load.stages]]` entry: its duration and the level it ramps to (a rate for the open
/// model, virtual users for the closed one).
fn stage(
    src: &Source<'_>,
    st: &Spanned<RawStage>,
    open: bool,
) -> Result<(Duration, f64), ScenarioError> {
    let sr = st.get_ref();
    let d = duration(src, &sr.duration, "load.stages.duration")?;
    let (level, other, wants, other_key) = if open {
        let rate = opt_within(src, &sr.rate, 0.0, Some(MAX_RATE), "load.stages.rate")?;
        (
            rate,
            sr.concurrency.as_ref().map(|c| c.span()),
            "rate",
            "concurrency",
        )
    } else {
        let key = "load.stages.concurrency";
        let vus = opt_within(src, &sr.concurrency, 0, Some(MAX_CONCURRENCY), key)?;
        (
            vus.map(f64::from),
            sr.rate.as_ref().map(|r| r.span()),
            "concurrency",
            "rate",
        )
    };
    let model = if open {
        "an open-model"
    } else {
        "a closed-model"
    };
    let key = format!("load.stages.{wants}");
    if let Some(span) = other {
        return Err(src.error(
            span,
            format!("{model} stage sets a {wants}, not a {other_key}"),
            key_hint(&key),
        ));
    }
    let level = level.ok_or_else(|| {
        src.error_at_key(
            st.span(),
            &key,
            format!("{model} stage needs a {wants}"),
            key_hint(&key),
        )
    })?;
    Ok((d, level))
}

/// The open model: arrival process and the bound on requests in flight.
fn open_model(
    src: &Source<'_>,
    raw: &RawLoad,
    rate: Profile,
) -> Result<(Model, usize), ScenarioError> {
    let arrival = match &raw.arrival {
        None => Arrival::Poisson,
        Some(a) => {
            let options = [("poisson", Arrival::Poisson), ("uniform", Arrival::Uniform)];
            one_of(src, a, "arrival process", "load.arrival", &options)?
        }
    };
    let key = "load.max_in_flight";
    let max_in_flight = match opt_within(src, &raw.max_in_flight, 1, Some(MAX_CONCURRENCY), key)? {
        Some(m) => m as usize,
        // Enough for the peak rate at a 100 ms latency, within reason.
        None => ((rate.max() * 0.1).ceil() as usize).clamp(16, 10_000),
    };
    let release = match &raw.release_interval {
        None => DEFAULT_RELEASE_INTERVAL,
        Some(r) => {
            let d = duration(src, r, "load.release_interval")?;
            if d > MAX_RELEASE_INTERVAL {
                return Err(src.error(
                    r.span(),
                    "release_interval must be at most 10ms (it adds up to that much to every latency)",
                    key_hint("load.release_interval"),
                ));
            }
            d
        }
    };
    Ok((
        Model::Open {
            rate,
            arrival,
            release,
        },
        max_in_flight,
    ))
}

/// Closed loop: a pause after each request, fixed (`"100ms"`) or uniform in a range
/// (`"50ms..150ms"`).
fn think(src: &Source<'_>, raw: &RawLoad) -> Result<Option<(Duration, Duration)>, ScenarioError> {
    let Some(t) = &raw.think else {
        return Ok(None);
    };
    let parse = mcpbench_knobs::parse_duration;
    let parsed = match t.get_ref().split_once("..") {
        Some((a, b)) => parse(a).and_then(|a| parse(b).map(|b| (a, b))),
        None => parse(t.get_ref()).map(|d| (d, d)),
    };
    let (a, b) = parsed.map_err(|e| src.error(t.span(), e.to_string(), key_hint("load.think")))?;
    if a > b {
        return Err(src.error(
            t.span(),
            "the think-time range is empty",
            key_hint("load.think"),
        ));
    }
    Ok(Some((a, b)))
}

/// `[find_max]`: where to start, how to step, where to stop, and the SLO.
pub(super) fn find_max(
    src: &Source<'_>,
    f: &Spanned<RawFindMax>,
    load: &Load,
) -> Result<FindMax, ScenarioError> {
    let raw = f.get_ref();
    let default_start = match &load.model {
        Model::Open { rate, .. } => rate.max(),
        Model::Closed { vus } => vus.max(),
    };
    let start = positive(src, &raw.start, "find_max.start")?.unwrap_or(default_start);
    let (search, step) = search_and_step(src, f)?;
    let max = positive(src, &raw.max, "find_max.max")?.unwrap_or(start * 1000.0);
    if max < start {
        return Err(src.error_at_key(f.span(), "find_max.max", "max is below start", None));
    }
    let step_duration = match &raw.step_duration {
        Some(d) => duration(src, d, "find_max.step_duration")?,
        None => load.duration.min(Duration::from_secs(10)),
    };
    let precision =
        opt_within(src, &raw.precision, 0.001, Some(0.5), "find_max.precision")?.unwrap_or(0.05);
    let confirm_duration = match &raw.confirm_duration {
        Some(d) => duration(src, d, "find_max.confirm_duration")?,
        None => step_duration * 3,
    };
    if search == Search::Step {
        no_adaptive_keys(src, raw)?;
    }
    let p99 = raw
        .p99
        .as_ref()
        .map(|d| duration(src, d, "find_max.p99"))
        .transpose()?;
    let error_rate = opt_within(src, &raw.error_rate, 0.0, Some(1.0), "find_max.error_rate")?;
    if p99.is_none() && error_rate.is_none() {
        return Err(src.error_at_key(
            f.span(),
            "find_max",
            "[find_max] needs an SLO: p99, error_rate or both",
            Some("e.g. p99 = \"50ms\"\n    error_rate = 0.01".into()),
        ));
    }
    Ok(FindMax {
        search,
        start,
        step,
        max,
        step_duration,
        precision,
        confirm_duration,
        p99,
        error_rate,
    })
}

/// A `[find_max]` number that must be positive, if written.
fn positive(
    src: &Source<'_>,
    v: &Option<Spanned<f64>>,
    key: &str,
) -> Result<Option<f64>, ScenarioError> {
    match v {
        Some(x) if !(x.get_ref().is_finite() && *x.get_ref() > 0.0) => {
            let name = key.rsplit('.').next().unwrap_or(key);
            Err(src.error(x.span(), format!("{name} must be a positive number"), None))
        }
        v => Ok(v.as_ref().map(|x| *x.get_ref())),
    }
}

/// How `[find_max]` searches and steps: fixed increments (`step`) imply stepping, a factor
/// the adaptive search (the default, ×2; ×1.5 when stepping).
fn search_and_step(
    src: &Source<'_>,
    f: &Spanned<RawFindMax>,
) -> Result<(Search, Step), ScenarioError> {
    let raw = f.get_ref();
    let added = positive(src, &raw.step, "find_max.step")?;
    // Fixed increments imply stepping; otherwise the adaptive search.
    let search = match &raw.search {
        Some(v) => {
            let options = [("adaptive", Search::Adaptive), ("step", Search::Step)];
            one_of(src, v, "search", "find_max.search", &options)?
        }
        None if added.is_some() => Search::Step,
        None => Search::Adaptive,
    };
    if let (Search::Adaptive, Some(v)) = (search, &raw.step) {
        return Err(src.error(
            v.span(),
            "the adaptive search grows by a factor and then bisects: step (added) is for search = \"step\"",
            Some("use factor = 2 (the default), or search = \"step\"".into()),
        ));
    }
    let step = match (added, positive(src, &raw.factor, "find_max.factor")?) {
        (Some(_), Some(_)) => {
            return Err(src.error_at_key(
                f.span(),
                "find_max",
                "give either step (added) or factor (multiplied), not both",
                None,
            ));
        }
        (Some(s), None) => Step::Add(s),
        (None, Some(x)) if x > 1.0 => Step::Multiply(x),
        (None, Some(_)) => {
            return Err(src.error_at_key(
                f.span(),
                "find_max.factor",
                "factor must be greater than 1",
                None,
            ));
        }
        (None, None) if search == Search::Adaptive => Step::Multiply(2.0),
        (None, None) => Step::Multiply(1.5),
    };
    Ok((search, step))
}

/// `search = "step"` takes none of the adaptive search's keys.
fn no_adaptive_keys(src: &Source<'_>, raw: &RawFindMax) -> Result<(), ScenarioError> {
    for (key, v) in [
        ("precision", raw.precision.as_ref().map(|v| v.span())),
        (
            "confirm_duration",
            raw.confirm_duration.as_ref().map(|v| v.span()),
        ),
    ] {
        if let Some(span) = v {
            return Err(src.error(
                span,
                format!("{key} belongs to the adaptive search, not to search = \"step\""),
                Some("remove it, or set search = \"adaptive\" (and factor instead of step)".into()),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::scenario::plan::{Arrival, Model};
    use crate::scenario::{parse, refusal as err};

    const WORK: &str = "\n[[workload]]\nmethod = \"tools/list\"\n";

    /// `[find_max]`: adaptive unless fixed increments are given; each search's own keys are
    /// refused on the other, with the key and a fix.
    #[test]
    fn find_max_search_and_its_keys() {
        use crate::scenario::plan::{Search, Step};
        let fm = |keys: &str| {
            format!("[load]\nduration = \"1s\"\n[find_max]\np99 = \"10ms\"\n{keys}{WORK}")
        };
        let f = parse("s.toml", &fm(""), &|_| None)
            .unwrap()
            .find_max
            .unwrap();
        assert_eq!(
            (f.search, f.step, f.precision),
            (Search::Adaptive, Step::Multiply(2.0), 0.05)
        );
        assert_eq!(f.confirm_duration, f.step_duration * 3);
        let f = parse("s.toml", &fm("step = 5\n"), &|_| None)
            .unwrap()
            .find_max
            .unwrap();
        assert_eq!((f.search, f.step), (Search::Step, Step::Add(5.0)));
        let cases = [
            (
                "search = \"adaptive\"\nstep = 5\n",
                "find_max.step",
                "step (added) is for search = \"step\"",
            ),
            (
                "search = \"step\"\nprecision = 0.1\n",
                "find_max.precision",
                "belongs to the adaptive search",
            ),
            (
                "step = 5\nconfirm_duration = \"5s\"\n",
                "find_max.confirm_duration",
                "belongs to the adaptive search",
            ),
            (
                "precision = 0.9\n",
                "find_max.precision",
                "precision must be from 0.001 to 0.5",
            ),
            (
                "search = \"binary\"\n",
                "find_max.search",
                "unknown search `binary`",
            ),
        ];
        for (keys, key, message) in cases {
            let d = err(&fm(keys));
            assert_eq!(d.key, key, "{keys}: {d:?}");
            assert!(d.message.contains(message), "{keys}: {}", d.message);
        }
    }

    #[test]
    fn numbers_out_of_range_name_their_bounds() {
        let cases = [
            (
                "concurrency = 0\nduration = \"1s\"",
                "load.concurrency",
                "concurrency must be from 1 to 100000",
            ),
            (
                "concurrency = 200000\nduration = \"1s\"",
                "load.concurrency",
                "concurrency must be from 1 to 100000",
            ),
            (
                "model = \"open\"\nrate = -1.0\nduration = \"1s\"",
                "load.rate",
                "rate must be from 0 to 10000000",
            ),
            (
                "model = \"open\"\nrate = 5\nmax_in_flight = 0\nduration = \"1s\"",
                "load.max_in_flight",
                "max_in_flight must be from 1 to 100000",
            ),
            (
                "workers = 0\nduration = \"1s\"",
                "load.workers",
                "workers must be from 1 to 1024",
            ),
            (
                "requests = 0",
                "load.requests",
                "requests must be at least 1",
            ),
            (
                "model = \"open\"\nrate = 5\nrelease_interval = \"20ms\"\nduration = \"1s\"",
                "load.release_interval",
                "release_interval must be at most 10ms (it adds up to that much to every latency)",
            ),
            (
                "concurrency = 2\nrelease_interval = \"1ms\"\nduration = \"1s\"",
                "load.release_interval",
                "`release_interval` belongs to the open model",
            ),
        ];
        for (load, key, message) in cases {
            let d = err(&format!("[load]\n{load}{WORK}"));
            assert_eq!(
                (d.key.as_str(), d.message.as_str()),
                (key, message),
                "{load}"
            );
        }
    }

    #[test]
    fn stages_set_the_level_of_their_model() {
        let d = err(&format!(
            "[load]\nmodel = \"open\"\n[[load.stages]]\nduration = \"1s\"\nconcurrency = 3\n{WORK}"
        ));
        assert_eq!(d.key, "load.stages[1].concurrency");
        assert_eq!(
            d.message,
            "an open-model stage sets a rate, not a concurrency"
        );
        let d = err(&format!(
            "[load]\n[[load.stages]]\nduration = \"1s\"\n{WORK}"
        ));
        assert_eq!(d.message, "a closed-model stage needs a concurrency");
        let p = parse(
            "t.toml",
            &format!("[load]\nmodel = \"open\"\narrival = \"uniform\"\n[[load.stages]]\nduration = \"2s\"\nrate = 50\n[[load.stages]]\nduration = \"1s\"\nrate = 0{WORK}"),
            &|_| None,
        )
        .unwrap();
        let Model::Open {
            rate,
            arrival,
            release,
        } = &p.load.model
        else {
            panic!("open")
        };
        assert_eq!(*arrival, Arrival::Uniform);
        assert_eq!(*release, super::DEFAULT_RELEASE_INTERVAL);
        let p = parse(
            "t.toml",
            &format!("[load]\nmodel = \"open\"\nrate = 5\nrelease_interval = \"0us\"\nduration = \"1s\"{WORK}"),
            &|_| None,
        )
        .unwrap();
        assert!(matches!(p.load.model, Model::Open { release, .. } if release.is_zero()));
        assert_eq!(
            (rate.start, rate.max(), rate.duration().as_secs()),
            (0.0, 50.0, 3)
        );
    }
}
