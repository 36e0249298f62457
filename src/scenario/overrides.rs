//! Command-line overrides of a scenario (`--concurrency 64`, `--set load.timeout=2s`): applied
//! to the file's TOML before it is checked, so they go through exactly the same validation.
//! A problem with an overridden key names the flag; any other problem the file's line. So do
//! the places a plan keeps for later messages (a workload entry's, its target's).

use std::path::Path;

use super::{Diagnostic, Place, Plan, ScenarioError, Source, Target, parse};

/// One override: a dotted key set to a value (or removed).
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The flag as given, for diagnostics: `--set load.timeout=2s`, `--concurrency 64`.
    pub flag: String,
    /// Dotted key, e.g. `load.timeout`, `target.headers.Authorization`.
    pub key: String,
    /// `None` removes the key.
    pub value: Option<toml::Value>,
}

impl Override {
    pub fn set(flag: impl Into<String>, key: &str, value: toml::Value) -> Self {
        Override {
            flag: flag.into(),
            key: key.into(),
            value: Some(value),
        }
    }

    pub fn remove(flag: impl Into<String>, key: &str) -> Self {
        Override {
            flag: flag.into(),
            key: key.into(),
            value: None,
        }
    }

    /// `--set KEY=VALUE`: the value is read as TOML (`64`, `"2s"`, `true`, `[1, 2]`), and as a
    /// string when it is not TOML (`2s`).
    pub fn parse_set(arg: &str) -> Result<Self, String> {
        let (key, value) = arg
            .split_once('=')
            .ok_or_else(|| format!("`{arg}`: expected KEY=VALUE, e.g. load.timeout=2s"))?;
        let key = dotted(key.trim()).ok_or_else(|| {
            format!(
                "`{arg}`: the key must be dotted TOML keys, e.g. load.timeout or \
                 thresholds.\"tools/call:echo\".p99"
            )
        })?;
        let key = key.as_str();
        let value = value.trim();
        let parsed = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        Ok(Override::set(format!("--set {arg}"), key, parsed))
    }
}

/// Reads a scenario file, applies `overrides`, and validates the result.
pub fn load_with(path: &Path, overrides: &[Override]) -> Result<Plan, ScenarioError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        file: name.clone(),
        source,
    })?;
    let env = |k: &str| std::env::var(k).ok();
    if overrides.is_empty() {
        return parse(&name, &text, &env);
    }
    // A file that is not TOML is reported as it is written.
    let mut doc: toml::Table = match text.parse() {
        Ok(d) => d,
        Err(_) => return parse(&name, &text, &env),
    };
    apply_all(&mut doc, overrides)?;
    let merged = toml::to_string(&doc).map_err(|e| flag_error(&overrides[0], e.to_string()))?;
    match parse(&name, &merged, &env) {
        Ok(mut plan) => {
            let file = Source {
                name: &name,
                text: &text,
            };
            for place in places(&mut plan) {
                *place = relocated(place, &file, overrides);
            }
            Ok(plan)
        }
        Err(ScenarioError::Invalid(d)) => {
            match by_flag(overrides, &d.key) {
                Some(o) => Err(ScenarioError::Invalid(Box::new(Diagnostic {
                    file: o.flag.clone(),
                    line: 0,
                    column: 0,
                    ..*d
                }))),
                // Not an overridden key: point at the file, where the problem is written.
                None => match parse(&name, &text, &env) {
                    Err(e) => Err(e),
                    Ok(_) => Err(ScenarioError::Invalid(Box::new(Diagnostic {
                        message: format!("{} (with the command-line overrides)", d.message),
                        line: 0,
                        column: 0,
                        ..*d
                    }))),
                },
            }
        }
        Err(e) => Err(e),
    }
}

/// Applies `overrides` in order to a scenario's TOML; an error names the flag.
pub fn apply_all(doc: &mut toml::Table, overrides: &[Override]) -> Result<(), ScenarioError> {
    overrides.iter().try_for_each(|o| apply(doc, o))
}

/// The override that set `key` or a table above it, the most specific first
/// (`target.headers.X` before `target`).
fn by_flag<'a>(overrides: &'a [Override], key: &str) -> Option<&'a Override> {
    overrides
        .iter()
        .rev()
        .find(|o| key == o.key || key.starts_with(&format!("{}.", o.key)))
}

/// The places a plan keeps for later messages: its targets' and its workload's.
fn places(plan: &mut Plan) -> impl Iterator<Item = &mut Place> {
    let targets = std::iter::once(&mut plan.target).chain(
        plan.ab
            .iter_mut()
            .flat_map(|ab| ab.targets.iter_mut().map(|(_, t)| t)),
    );
    let targets = targets.filter_map(|t| match t {
        Target::Remote(r) => Some(&mut r.place),
        Target::Embedded(_) => None,
    });
    let workload = plan
        .workload
        .iter_mut()
        .flat_map(|w| std::iter::once(&mut w.place).chain(w.arguments_place.as_mut()));
    targets.chain(workload)
}

/// A place found in the merged text, as a person finds it: the flag that set its key, or its
/// line in the file as written (unchanged when the file does not write it).
fn relocated(place: &Place, file: &Source<'_>, overrides: &[Override]) -> Place {
    if let Some(o) = by_flag(overrides, &place.key) {
        return Place {
            file: o.flag.clone(),
            line: 0,
            column: 0,
            key: place.key.clone(),
        };
    }
    match super::locate::offset_of(file.text, &place.key) {
        Some(at) => file.place_at_key(at..at, &place.key),
        None => place.clone(),
    }
}

/// A TOML dotted key (`a.b`, `a."b.c"`) in the form diagnostics use: segments that are not
/// bare keys quoted. `None` when it is not one.
fn dotted(key: &str) -> Option<String> {
    let parts = segments(key)?;
    Some(
        parts
            .iter()
            .map(|p| bare_or_quoted(p))
            .collect::<Vec<_>>()
            .join("."),
    )
}

/// A TOML key: bare when it can be, else quoted.
pub(super) fn bare_or_quoted(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        format!("\"{k}\"")
    }
}

/// The segments of a TOML dotted key; `None` when it is not one.
fn segments(key: &str) -> Option<Vec<String>> {
    let mut table: toml::Table = format!("{key} = 0").parse().ok()?;
    let mut parts = Vec::new();
    loop {
        if table.len() != 1 {
            return None;
        }
        let (k, v) = table.into_iter().next()?;
        parts.push(k);
        match v {
            toml::Value::Table(t) => table = t,
            _ => return Some(parts),
        }
    }
}

fn flag_error(o: &Override, message: String) -> ScenarioError {
    ScenarioError::Invalid(Box::new(Diagnostic {
        file: o.flag.clone(),
        line: 0,
        column: 0,
        key: o.key.clone(),
        message,
        hint: None,
    }))
}

/// Sets (or removes) one dotted key, creating the tables on the way.
fn apply(doc: &mut toml::Table, o: &Override) -> Result<(), ScenarioError> {
    let parts = segments(&o.key).unwrap_or_else(|| vec![o.key.clone()]);
    let Some((last, path)) = parts.split_last() else {
        return Err(flag_error(o, "an empty key".into()));
    };
    let mut table = doc;
    for (i, part) in path.iter().enumerate() {
        let entry = table
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = match entry {
            toml::Value::Table(t) => t,
            _ => {
                return Err(flag_error(
                    o,
                    format!("`{}` is not a table", parts[..=i].join(".")),
                ));
            }
        };
    }
    match &o.value {
        Some(v) => {
            table.insert(last.to_string(), v.clone());
        }
        None => {
            table.remove(last);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    const BASE: &str = "name = \"o\"\n[load]\nconcurrency = 4\nduration = \"2s\"\n\n[[workload]]\nmethod = \"tools/list\"\n";

    #[test]
    fn overrides_go_through_the_same_checks() {
        let f = file(BASE);
        let plan = load_with(
            f.path(),
            &[
                Override::parse_set("load.timeout=250ms").unwrap(),
                Override::set("--concurrency 9", "load.concurrency", 9.into()),
            ],
        )
        .unwrap();
        assert_eq!(plan.load.concurrency, 9);
        assert_eq!(plan.load.timeout, std::time::Duration::from_millis(250));

        let Err(ScenarioError::Invalid(d)) = load_with(
            f.path(),
            &[Override::parse_set("load.timeout=soon").unwrap()],
        ) else {
            panic!("accepted")
        };
        assert_eq!(d.file, "--set load.timeout=soon");
        assert_eq!(d.key, "load.timeout");
        assert!(
            d.to_string()
                .starts_with("--set load.timeout=soon: `load.timeout`: "),
            "{d}"
        );
    }

    #[test]
    fn a_problem_in_the_file_keeps_its_line() {
        let f = file(&BASE.replace("\"tools/list\"", "\"tools/lst\""));
        let Err(ScenarioError::Invalid(d)) = load_with(
            f.path(),
            &[Override::parse_set("load.concurrency=2").unwrap()],
        ) else {
            panic!("accepted")
        };
        assert_eq!((d.line, d.key.as_str()), (7, "workload[1].method"));
    }

    #[test]
    fn places_kept_for_later_stay_on_the_file_or_name_the_flag() {
        let text = format!(
            "# a comment the merged text loses\n\n{}[target]\nurl = \"http://127.0.0.1:9/mcp\"\n",
            BASE.replace(
                "method = \"tools/list\"",
                "method = \"tools/call\"\ntool = \"t\""
            )
        );
        let f = file(&text);
        let at = |overrides: &[Override]| {
            let plan = load_with(f.path(), overrides).unwrap();
            let Target::Remote(r) = &plan.target else {
                panic!("a remote target")
            };
            let w = &plan.workload[0].place;
            (r.place.to_string(), (w.line, w.column))
        };
        let name = f.path().display().to_string();
        let file_places = (format!("{name}:12:7: `target.url`: "), (10, 8));
        assert_eq!(at(&[]), file_places);
        assert_eq!(
            at(&[Override::set(
                "--concurrency 2",
                "load.concurrency",
                2.into()
            )]),
            file_places
        );
        let url = Override::set("--url http://h/x", "target.url", "http://h/x".into());
        assert_eq!(
            at(&[url]),
            ("--url http://h/x: `target.url`: ".to_string(), (10, 8))
        );
    }

    #[test]
    fn set_values_are_toml_or_strings() {
        let o = Override::parse_set("load.rate=250.5").unwrap();
        assert_eq!(o.value, Some(toml::Value::Float(250.5)));
        let o = Override::parse_set("load.duration=30s").unwrap();
        assert_eq!(o.value, Some(toml::Value::String("30s".into())));
        assert!(Override::parse_set("load.duration").is_err());
        assert!(Override::parse_set("load..x=1").is_err());
        let o = Override::parse_set("thresholds.\"tools/call:a.b\".p99=< 5ms").unwrap();
        assert_eq!(o.key, "thresholds.\"tools/call:a.b\".p99");
        assert_eq!(
            segments(&o.key).unwrap(),
            ["thresholds", "tools/call:a.b", "p99"]
        );
    }
}
