//! Assembling the [`Plan`]: the scenario's tables built by concern (target, load, workload,
//! replay, thresholds, budgets) and the checks that span tables (credentials and shared
//! sessions, replay and workload, find-max and A/B).

use std::time::Duration;

use toml::Spanned;

use super::check::{line_of, toml_error};
use super::plan::{
    Ab, FindMax, Load, Model, OP_COLD_START, OP_CONNECT, OP_OAUTH, Pattern, Plan, Profile, Replay,
    Sessions, Target, WorkItem,
};
use super::raw::{RawAb, RawLoad, RawScenario};
use super::{ScenarioError, Source, load, target, workload};
use crate::transport::TransportKind;

/// Builds the plan: every table checked, every default filled.
pub(crate) fn build(
    src: &Source<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, ScenarioError> {
    let raw: RawScenario = toml::from_str(src.text).map_err(|e| toml_error(src, &e))?;
    let name = name(src, &raw)?;
    let (target, named) = targets(src, &raw, env)?;
    let load_raw = raw.load.as_ref().ok_or_else(|| {
        src.error_at_key(
            0..0,
            "load",
            "the [load] table is missing",
            Some("add:\n    [load]\n    concurrency = 16\n    duration = \"30s\"".into()),
        )
    })?;
    let mut load = load::load(src, load_raw)?;
    users_keep_their_sessions(src, &target, load_raw, &load)?;
    let Work {
        ops,
        workload,
        replay,
    } = work(src, &raw, &target, load_raw, &mut load, env)?;
    let find_max = find_max(src, &raw, &load, replay.as_ref())?;
    let ab = comparison(src, &raw, named, &load, find_max.is_some())?;
    let thresholds = raw
        .thresholds
        .as_ref()
        .map(|t| super::thresholds::thresholds(src, t, &ops))
        .transpose()?
        .unwrap_or_default();
    let budgets = match &raw.compare {
        Some(t) => super::budget::from_table(src, t)?,
        None => Vec::new(),
    };
    let mut plan = Plan {
        name,
        description: raw.description.clone(),
        target,
        load,
        workload,
        ops,
        find_max,
        thresholds,
        budgets,
        ab,
        replay,
    };
    share_stdio_first_calls(&mut plan, load_raw);
    super::derived::apply_tool_prefix(&mut plan);
    Ok(plan)
}

/// The scenario's name, which names its results directory: as written, else the file's stem.
fn name(src: &Source<'_>, raw: &RawScenario) -> Result<String, ScenarioError> {
    if let Some(n) = &raw.name
        && (n.get_ref().trim().is_empty() || n.get_ref().contains(['/', '\\']))
    {
        return Err(src.error(
            n.span(),
            "name must be non-empty and contain no slashes",
            Some("it names the results directory, e.g. name = \"gateway-smoke\"".into()),
        ));
    }
    Ok(raw
        .name
        .as_ref()
        .map(|n| n.get_ref().clone())
        .unwrap_or_else(|| stem(src.name)))
}

/// Where load goes: `[target]`, else the built-in server (`[embedded]`), or the first of an
/// A/B comparison's `[[targets]]`, which come beside it (empty without a comparison).
fn targets(
    src: &Source<'_>,
    raw: &RawScenario,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Target, Vec<(String, Target)>), ScenarioError> {
    if let Some(t) = raw.target.as_ref().filter(|t| t.get_ref().name.is_some()) {
        return Err(src.error_at_key(
            t.span(),
            "target.name",
            "name belongs to [[targets]] entries (an A/B comparison), not to [target]",
            Some("remove it, or write [[targets]] entries with a name each".into()),
        ));
    }
    let named = ab_targets(src, raw, env)?;
    let target = match (&raw.target, &raw.embedded) {
        _ if !named.is_empty() => named[0].1.clone(),
        (Some(t), Some(e)) => {
            return Err(src.error_at_key(
                e.span(),
                "embedded",
                "[embedded] configures the built-in server, which only runs when [target] is omitted",
                Some(format!("remove [embedded], or remove the [target] at line {}", line_of(src, t.span().start))),
            ));
        }
        (Some(t), None) => Target::Remote(target::target(src, t, env)?),
        (None, e) => Target::Embedded(target::embedded(src, e.as_ref())?),
    };
    Ok((target, named))
}

/// Per-user credentials (or OAuth tokens) need a session per user.
fn users_keep_their_sessions(
    src: &Source<'_>,
    target: &Target,
    load_raw: &Spanned<RawLoad>,
    load: &Load,
) -> Result<(), ScenarioError> {
    if let Target::Remote(r) = target
        && (!r.credentials.is_empty() || r.oauth.is_some())
        && load.sessions == Sessions::Shared
    {
        return Err(src.error_at_key(
            load_raw.span(),
            "load.sessions",
            "per-user credentials need a session per user: a shared session carries one user's headers",
            Some("sessions = \"per-vu\" (the default) or \"per-request\"".into()),
        ));
    }
    Ok(())
}

/// What is sent: the operation registry, the workload entries, and a timed replay's scripts.
struct Work {
    ops: Vec<String>,
    workload: Vec<WorkItem>,
    replay: Option<Replay>,
}

/// The workload, as written (`[[workload]]`) or from a trace (`[replay]`, whose timed mode
/// also sets the load), with the operations it names.
fn work(
    src: &Source<'_>,
    raw: &RawScenario,
    target: &Target,
    load_raw: &Spanned<RawLoad>,
    load: &mut Load,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Work, ScenarioError> {
    workload_or_replay(src, raw)?;
    let mut ops = vec!["initialize".to_string()];
    if matches!(target, Target::Remote(r) if r.oauth.is_some()) {
        ops.push(OP_OAUTH.to_string());
    }
    let mut workload = Vec::with_capacity(raw.workload.len());
    for w in &raw.workload {
        workload.push(workload::work_item(src, w, &mut ops, env)?);
    }
    let mut replay = None;
    if let Some(r) = &raw.replay {
        if let Some(p) = &load_raw.get_ref().pattern
            && load.pattern != Pattern::Steady
        {
            return Err(src.error(
                p.span(),
                "a replay sends the trace's requests; first_call and cold_start rounds send the workload's",
                Some("remove `pattern`".into()),
            ));
        }
        let got = super::replay::replay(src, r, &mut ops)?;
        workload = got.workload;
        if let Some(timing) = got.timing {
            replay_load(src, load_raw, load, &timing)?;
            replay = Some(timing);
        }
    }
    if load.times_connect() {
        ops.push(OP_CONNECT.to_string());
    }
    if load.pattern == Pattern::ColdStart {
        ops.push(OP_COLD_START.to_string());
    }
    Ok(Work {
        ops,
        workload,
        replay,
    })
}

/// Exactly one source of requests: `[[workload]]` entries or a `[replay]`.
fn workload_or_replay(src: &Source<'_>, raw: &RawScenario) -> Result<(), ScenarioError> {
    if let (Some(r), Some(w)) = (&raw.replay, raw.workload.first()) {
        return Err(src.error_at_key(
            w.span(),
            "workload",
            "[replay] makes the workload from its trace; [[workload]] entries beside it would be ignored",
            Some(format!("remove the [[workload]] entries, or the [replay] at line {}", line_of(src, r.span().start))),
        ));
    }
    if raw.workload.is_empty() && raw.replay.is_none() {
        return Err(src.error_at_key(
            src.text.len()..src.text.len(),
            "workload",
            "no [[workload]] entries: there is nothing to send",
            Some("add one:\n    [[workload]]\n    method = \"tools/call\"\n    tool = \"echo\"\n    arguments = { message = \"hi\" }".into()),
        ));
    }
    Ok(())
}

/// `[find_max]`, which a timed replay does not take (its load is its trace's).
fn find_max(
    src: &Source<'_>,
    raw: &RawScenario,
    load: &Load,
    replay: Option<&Replay>,
) -> Result<Option<FindMax>, ScenarioError> {
    let find_max = raw
        .find_max
        .as_ref()
        .map(|f| load::find_max(src, f, load))
        .transpose()?;
    if let (Some(f), Some(r)) = (&raw.find_max, replay) {
        return Err(src.error_at_key(
            f.span(),
            "find_max",
            format!(
                "a timed replay's load is its trace's ({}); find_max would change it",
                r.trace
            ),
            Some("replay with mode = \"weighted\" to search under [find_max], or remove it".into()),
        ));
    }
    Ok(find_max)
}

/// The A/B comparison of the `[[targets]]`, if there are any (`[ab]` alone has nothing to
/// compare).
fn comparison(
    src: &Source<'_>,
    raw: &RawScenario,
    named: Vec<(String, Target)>,
    load: &Load,
    find_max: bool,
) -> Result<Option<Ab>, ScenarioError> {
    match (&raw.ab, named.is_empty()) {
        (Some(a), true) => Err(src.error_at_key(
            a.span(),
            "ab",
            "[ab] compares [[targets]], and there are none",
            Some("add two or more:\n    [[targets]]\n    name = \"direct\"\n    url = \"http://127.0.0.1:8080/mcp\"\n    [[targets]]\n    name = \"gateway\"\n    url = \"http://127.0.0.1:9090/mcp\"".into()),
        )),
        (_, true) => Ok(None),
        (a, false) => Ok(Some(ab(src, a.as_ref(), named, load, find_max)?)),
    }
}

/// First calls race inside one server process: on stdio (a process per session) the users
/// share one unless the scenario says otherwise.
fn share_stdio_first_calls(p: &mut Plan, load_raw: &Spanned<RawLoad>) {
    if p.load.pattern == Pattern::FirstCall
        && load_raw.get_ref().sessions.is_none()
        && p.connection().transport == TransportKind::Stdio
    {
        p.load.sessions = Sessions::Shared;
    }
}

/// A timed replay's load: a virtual user per recorded session, for the `[load]`'s duration
/// (an upper bound unless the replay loops).
fn replay_load(
    src: &Source<'_>,
    l: &Spanned<RawLoad>,
    load: &mut Load,
    r: &Replay,
) -> Result<(), ScenarioError> {
    let raw = l.get_ref();
    let refused = [
        (raw.concurrency.as_ref().map(|s| s.span()), "concurrency"),
        (raw.model.as_ref().map(|s| s.span()), "model"),
        (raw.rate.as_ref().map(|s| s.span()), "rate"),
        (raw.think.as_ref().map(|s| s.span()), "think"),
        (raw.stages.first().map(|s| s.span()), "stages"),
    ];
    if let Some((span, key)) = refused.into_iter().find_map(|(s, k)| Some((s?, k))) {
        return Err(src.error(
            span,
            format!(
                "a timed replay sets the load from its trace ({} sessions at their recorded times); `{key}` would change it",
                r.scripts.len()
            ),
            Some(format!("remove `{key}`, or replay with mode = \"weighted\" under this [load]")),
        ));
    }
    load.concurrency = r.scripts.len();
    load.model = Model::Closed {
        vus: Profile::constant(r.scripts.len() as f64, load.duration),
    };
    Ok(())
}

/// `[[targets]]`: at least two, each named (names unique, fit for a directory), none beside
/// `[target]` or `[embedded]`.
fn ab_targets(
    src: &Source<'_>,
    raw: &RawScenario,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, Target)>, ScenarioError> {
    let Some(first) = raw.targets.first() else {
        return Ok(Vec::new());
    };
    if let Some(other) = raw
        .target
        .as_ref()
        .map(|t| t.span())
        .or(raw.embedded.as_ref().map(|e| e.span()))
    {
        return Err(src.error_at_key(
            other,
            "target",
            "[[targets]] (an A/B comparison) replaces [target] and [embedded]",
            Some(format!("move this target into a [[targets]] entry with a name, or remove the [[targets]] at line {}", line_of(src, first.span().start))),
        ));
    }
    if raw.targets.len() < 2 {
        return Err(src.error_at_key(
            first.span(),
            "targets",
            "an A/B comparison needs at least two [[targets]]",
            Some("add the second target (e.g. the gateway in front of the first), or use [target] for one".into()),
        ));
    }
    let mut out: Vec<(String, Target)> = Vec::new();
    for (i, t) in raw.targets.iter().enumerate() {
        let key = format!("targets[{}].name", i + 1);
        let name = t.get_ref().name.as_ref().ok_or_else(|| {
            src.error_at_key(
                t.span(),
                &key,
                "every [[targets]] entry needs a name",
                Some("name = \"direct\" (it names the target's results)".into()),
            )
        })?;
        let n = name.get_ref().trim();
        if n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(src.error(
                name.span(),
                format!(
                    "`{n}` is not a target name: letters, digits, - and _ (it names a directory)"
                ),
                Some("e.g. name = \"via-gateway\"".into()),
            ));
        }
        if out.iter().any(|(o, _)| o == n) {
            return Err(src.error(
                name.span(),
                format!("two targets are named `{n}`"),
                Some("give each target its own name".into()),
            ));
        }
        out.push((n.to_string(), Target::Remote(target::target(src, t, env)?)));
    }
    Ok(out)
}

/// `[ab]`: slice length, rounds, levels; slices hold one level each.
fn ab(
    src: &Source<'_>,
    raw: Option<&Spanned<RawAb>>,
    targets: Vec<(String, Target)>,
    load: &Load,
    find_max: bool,
) -> Result<Ab, ScenarioError> {
    let at = raw.map_or(0..0, |r| r.span());
    if find_max {
        return Err(src.error_at_key(at, "find_max", "[find_max] and an A/B comparison ([[targets]]) are separate runs", Some("search each target on its own, or compare them at given levels with [ab] levels = [...]".into())));
    }
    let profile = match &load.model {
        Model::Closed { vus } => vus,
        Model::Open { rate, .. } => rate,
    };
    if profile.min() != profile.max() {
        return Err(src.error_at_key(
            at,
            "load.stages",
            "A/B slices each hold one level: stages and ramps do not fit in them",
            Some("use a constant level, or several with [ab] levels = [1, 8, 32]".into()),
        ));
    }
    let slice = match raw.and_then(|r| r.get_ref().slice.as_ref()) {
        Some(d) => {
            let v = super::check::duration(src, d, "ab.slice")?;
            if v < Duration::from_millis(500) {
                return Err(src.error(
                    d.span(),
                    "a slice shorter than 500ms measures mostly its own start",
                    Some("slice = \"2s\"".into()),
                ));
            }
            v
        }
        None => Duration::from_secs(2),
    };
    let levels = match raw.and_then(|r| r.get_ref().levels.as_ref()) {
        Some(l)
            if l.get_ref().is_empty()
                || l.get_ref().iter().any(|v| !(v.is_finite() && *v > 0.0)) =>
        {
            return Err(src.error(l.span(), "levels are positive numbers (virtual users, or requests per second for the open model)", Some("levels = [1, 8, 32]".into())));
        }
        Some(l) => l.get_ref().clone(),
        None => vec![profile.max()],
    };
    // Rounds: as given, or as many as fit in the run's duration (at least 5: Student's t
    // needs pairs).
    let pairs = match raw.and_then(|r| r.get_ref().pairs.as_ref()) {
        Some(p) => super::check::within(src, p, 5, Some(1000), "ab.pairs")? as usize,
        None => {
            let round = slice.as_secs_f64() * targets.len() as f64 * levels.len() as f64;
            ((load.duration.as_secs_f64() / round).floor() as usize).max(5)
        }
    };
    Ok(Ab {
        targets,
        slice,
        pairs,
        levels,
    })
}

fn stem(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::version::Revision;
    use crate::scenario::plan::{Connection, ProtocolChoice};
    use crate::scenario::{parse, refusal as err};

    const OK: &str = "name = \"q\"\n[load]\nconcurrency = 4\nduration = \"2s\"\n\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"hi\" }\n\n[[workload]]\nmethod = \"tools/list\"\nweight = 2\n";

    const TWO: &str = "[[targets]]\nname = \"direct\"\nurl = \"http://127.0.0.1:1/mcp\"\n[[targets]]\nname = \"gw\"\nurl = \"http://127.0.0.1:2/mcp\"\n";
    const LOAD: &str =
        "[load]\nconcurrency = 4\nduration = \"40s\"\n[[workload]]\nmethod = \"tools/list\"\n";

    /// `[[targets]]`: the first is the baseline and `target`; rounds fill the duration.
    #[test]
    fn ab_targets_and_defaults() {
        let plan = parse("ab.toml", &format!("{TWO}{LOAD}"), &|_| None).unwrap();
        let ab = plan.ab.unwrap();
        let names: Vec<&str> = ab.targets.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["direct", "gw"]);
        // 40 s / (2 targets × 2 s slices) = 10 rounds, at the scenario's level.
        assert_eq!(
            (ab.slice, ab.pairs, ab.levels.clone()),
            (Duration::from_secs(2), 10, vec![4.0])
        );
        assert!(
            matches!(&plan.target, Target::Remote(r) if r.describe() == "http://127.0.0.1:1/mcp")
        );
        let text = format!("{TWO}[ab]\nslice = \"1s\"\npairs = 6\nlevels = [1, 8]\n{LOAD}");
        let ab = parse("ab.toml", &text, &|_| None).unwrap().ab.unwrap();
        assert_eq!((ab.pairs, ab.levels), (6, vec![1.0, 8.0]));
    }

    #[test]
    fn ab_mistakes_name_the_key_and_a_fix() {
        let one = "[[targets]]\nname = \"direct\"\nurl = \"http://127.0.0.1:1/mcp\"\n";
        let cases = [
            (
                format!("{one}{LOAD}"),
                "an A/B comparison needs at least two [[targets]]",
            ),
            (
                format!("{TWO}[target]\nurl = \"http://127.0.0.1:3/mcp\"\n{LOAD}"),
                "[[targets]] (an A/B comparison) replaces [target] and [embedded]",
            ),
            (
                format!("{}{LOAD}", TWO.replace("name = \"gw\"\n", "")),
                "every [[targets]] entry needs a name",
            ),
            (
                format!("{}{LOAD}", TWO.replace("\"gw\"", "\"direct\"")),
                "two targets are named `direct`",
            ),
            (
                format!("{}{LOAD}", TWO.replace("\"gw\"", "\"a/b\"")),
                "`a/b` is not a target name",
            ),
            (
                format!("[ab]\nslice = \"1s\"\n{LOAD}"),
                "[ab] compares [[targets]], and there are none",
            ),
            (
                format!("[target]\nname = \"x\"\nurl = \"http://127.0.0.1:3/mcp\"\n{LOAD}"),
                "name belongs to [[targets]] entries",
            ),
            (
                format!("{TWO}[ab]\nslice = \"100ms\"\n{LOAD}"),
                "a slice shorter than 500ms",
            ),
            (
                format!("{TWO}[ab]\npairs = 3\n{LOAD}"),
                "pairs must be from 5 to 1000",
            ),
            (
                format!("{TWO}[ab]\nlevels = [0]\n{LOAD}"),
                "levels are positive numbers",
            ),
            (
                format!(
                    "{TWO}[load]\n[[load.stages]]\nduration = \"5s\"\nconcurrency = 2\n[[load.stages]]\nduration = \"5s\"\nconcurrency = 9\n[[workload]]\nmethod = \"tools/list\"\n"
                ),
                "A/B slices each hold one level",
            ),
        ];
        for (text, message) in cases {
            let d = err(&text);
            assert!(d.message.contains(message), "{message}: {d:?}");
            assert!(d.hint.is_some(), "{message}: a fix");
        }
    }

    #[test]
    fn builds_a_plan_with_defaults() {
        let p = parse("t.toml", OK, &|_| None).unwrap();
        assert_eq!(p.name, "q");
        assert_eq!(p.load.concurrency, 4);
        assert_eq!(p.load.timeout, Duration::from_secs(10));
        assert_eq!(p.ops, vec!["initialize", "tools/call:echo", "tools/list"]);
        assert!(matches!(p.target, Target::Embedded(_)));
        assert_eq!(p.workload[1].weight, 2);
    }

    #[test]
    fn closed_sets_of_values_name_the_bad_one_and_the_choices() {
        // An open-model load section, for the arrival process.
        let open = OK.replace("concurrency = 4", "model = \"open\"\nrate = 10");
        let cases = [
            (
                OK,
                "model",
                "closed",
                "batch",
                "load.model",
                "unknown load model `batch`",
                "\"open\"",
            ),
            (
                OK,
                "sessions",
                "per-request",
                "pooled",
                "load.sessions",
                "unknown session mode `pooled`",
                "\"per-request\"",
            ),
            (
                open.as_str(),
                "arrival",
                "uniform",
                "bursty",
                "load.arrival",
                "unknown arrival process `bursty`",
                "\"uniform\"",
            ),
        ];
        for (base, key, good, bad, path, message, choice) in cases {
            let with = |v: &str| {
                base.replace(
                    "duration = \"2s\"",
                    &format!("duration = \"2s\"\n{key} = \"{v}\""),
                )
            };
            let d = err(&with(bad));
            assert_eq!((d.key.as_str(), d.message.as_str()), (path, message));
            assert!(d.hint.unwrap().contains(choice), "{key}");
            parse("t.toml", &with(good), &|_| None).unwrap();
        }
        let d = err(&OK.replace(
            "name = \"q\"\n",
            "name = \"q\"\n[target]\nurl = \"http://127.0.0.1:1/mcp\"\nhttp = \"3\"\n",
        ));
        assert_eq!(
            (d.key.as_str(), d.message.as_str()),
            ("target.http", "unknown HTTP version `3`")
        );
        let d = err(&OK.replace("name = \"q\"\n", "name = \"q\"\n[target]\nurl = \"http://127.0.0.1:1/mcp\"\ntransport = \"carrier-pigeon\"\n"));
        assert_eq!(d.message, "unknown transport `carrier-pigeon`");
        assert!(d.hint.unwrap().contains("websocket"));
    }

    #[test]
    fn errors_name_line_column_key_and_hint() {
        let d = err(&OK.replace("concurrency = 4", "concurrency = \"many\""));
        assert_eq!(
            (d.line, d.column, d.key.as_str()),
            (3, 15, "load.concurrency")
        );
        assert!(
            d.message.contains("expected a non-negative integer"),
            "{}",
            d.message
        );
        assert!(d.hint.unwrap().contains("virtual users"));

        let d = err(&OK.replace("concurrency = 4", "concurency = 4"));
        assert_eq!((d.line, d.key.as_str()), (3, "load.concurency"));
        assert_eq!(d.message, "unknown key `concurency`");
        assert!(d.hint.unwrap().starts_with("did you mean `concurrency`?"));

        // A misspelt tool parses: the target is asked (tests/e2e.rs, on the embedded target).
        let p = parse(
            "t.toml",
            &OK.replace("tool = \"echo\"", "tool = \"ecko\""),
            &|_| None,
        )
        .unwrap();
        let place = &p.workload[0].place;
        assert_eq!(
            (place.line, place.column, place.key.as_str()),
            (8, 8, "workload[1].tool")
        );

        let d = err(&OK.replace("duration = \"2s\"", "duration = \"2 parsecs\""));
        assert_eq!(d.key, "load.duration");

        let d = err("[load\nconcurrency = 1");
        assert_eq!(d.line, 1);

        let d = err(&OK.replace("message = \"hi\"", "message = \"${range:5..1}\""));
        assert_eq!(d.key, "workload[1].arguments.message");

        let d = err("[load]\nduration = \"1s\"\n");
        assert_eq!(d.key, "workload");
        let d = err(&OK.replace(
            "name = \"q\"\n",
            "name = \"q\"\n[target]\nurl = \"ftp://x\"\n",
        ));
        assert_eq!(d.key, "target.url");
    }

    #[test]
    fn transports_protocols_and_sessions() {
        let base = "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n";
        let shared = base.replace("duration", "sessions = \"shared\"\nduration");
        let p = parse("t.toml", &format!("[target]\ncommand = [\"srv\", \"--stdio\"]\nenv = {{ K = \"v\" }}\nprotocol = \"auto\"\n{base}"), &|_| None).unwrap();
        let Target::Remote(r) = &p.target else {
            panic!()
        };
        assert_eq!(r.conn.transport, TransportKind::Stdio);
        assert_eq!(r.conn.protocol, ProtocolChoice::Auto);
        assert_eq!(r.command.as_ref().unwrap().args, vec!["--stdio"]);
        let p = parse(
            "t.toml",
            &format!("[target]\nurl = \"ws://127.0.0.1:1/ws\"\n{shared}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(p.connection().transport, TransportKind::WebSocket);
        assert_eq!(p.load.sessions, Sessions::Shared);
        let p = parse(
            "t.toml",
            &format!("[target]\ntransport = \"sse\"\nurl = \"http://127.0.0.1:1/sse\"\n{base}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(
            p.connection().protocol,
            ProtocolChoice::Fixed(Revision::V2024_11_05)
        );
        let p = parse(
            "t.toml",
            &format!("[embedded]\nprotocol = \"2026-07-28\"\nhttp = \"2\"\n{base}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(
            p.connection(),
            Connection {
                transport: TransportKind::StreamableHttp,
                protocol: ProtocolChoice::Fixed(Revision::V2026_07_28),
                http2: true
            }
        );
        let p = parse(
            "t.toml",
            &format!("[target]\nurl = \"http://h/\"\n{shared}"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(p.load.sessions, Sessions::Shared);
        assert!(
            err(&format!(
                "[target]\ntransport = \"websocket\"\nurl = \"http://h/\"\n{base}"
            ))
            .message
            .contains("ws(s)")
        );
        // HTTP+SSE is deprecated, not gone, in 2026-07-28: servers that keep it may serve
        // either era on it.
        assert!(
            parse(
                "t.toml",
                &format!(
                    "[target]\ntransport = \"sse\"\nurl = \"http://h/\"\nprotocol = \"auto\"\n{base}"
                ),
                &|_| None
            )
            .is_ok()
        );
        assert!(
            err(&format!(
                "[target]\nurl = \"http://h/\"\ntls = {{ insecure = true }}\n{base}"
            ))
            .message
            .contains("https://")
        );
        assert!(
            err(&format!(
                "[target]\nurl = \"ws://h/\"\nhttp = \"2\"\n{base}"
            ))
            .message
            .contains("HTTP/2")
        );
        // Sessions sharing connections: HTTP/2 only, one URL, at least 1.
        let lanes = |extra: &str| {
            err(&format!(
                "[target]\nurl = \"http://h/\"\n{extra}sessions_per_connection = 10\n{base}"
            ))
        };
        let e = lanes("");
        assert!(e.message.contains("http = \"2\""), "{}", e.message);
        assert_eq!(e.key, "target.sessions_per_connection");
        assert!(
            e.hint
                .as_deref()
                .unwrap_or("")
                .contains("sessions_per_connection")
        );
        let text = format!(
            "[target]\nurl = \"http://h/\"\nhttp = \"2\"\nsessions_per_connection = 10\n{base}"
        );
        let Target::Remote(r) = parse("t.toml", &text, &|_| None).unwrap().target else {
            panic!("a remote target");
        };
        assert_eq!(r.sessions_per_connection, 10);
    }
}
