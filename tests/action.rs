//! The GitHub Action (`action.yml`, composite), checked without GitHub:
//!
//! - it is read by the CI recipes' strict YAML reader (`ci_recipes::yaml`) and its pieces are
//!   wired: inputs reach the scripts through `env:` only (never `${{ inputs.… }}` inside a
//!   script), every action is pinned by major version, the results are uploaded and the report
//!   summarised whatever failed, the last step is the gate; the usage example
//!   (`docs/ci/github-action-usage.yml`) passes only inputs the action declares, and every
//!   required one;
//! - its steps run for real, in order, as a runner runs them: each `run:` step with GitHub's
//!   `bash --noprofile --norc -eo pipefail`, the `${{ }}` expressions of its `if:`, `env:` and
//!   script evaluated (inputs, earlier steps' outputs, `github.action_path`), with
//!   `GITHUB_OUTPUT`, `GITHUB_PATH` and `GITHUB_STEP_SUMMARY` files, and a stand-in `cargo` that
//!   records its command line and installs the test build. The `uses:` steps (the cache, the
//!   upload) are not run: the cache always misses, the upload's path must exist. Against
//!   reference servers: a run that holds its thresholds; one whose backend is slow (a breach
//!   and a regression against the first: the summary has the reports and the comparison, the
//!   last step fails with exit 1 after it); set-up errors (exit 2).
//!
//! jactionlint's checks of the same files are `interop::actionlint` (the `full` profile).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mcpbench::server::ResponseMode;
use serde_json::Value;

use crate::ci_recipes::{junit, workspace, yaml};
use crate::support::{repo, scratch, servers, valid_summary};

const ACTION: &str = "action.yml";
const USAGE: &str = "docs/ci/github-action-usage.yml";
const SCENARIO: &str = "scenarios/ci.toml";

/// A YAML file of the repository, read by the strict reader.
fn read(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(rel)).unwrap();
    yaml::parse(rel, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// GitHub's expressions (`${{ … }}`), as much of them as the action uses: context paths,
/// strings, `==`, `!=`, `!`, `&&`, `||`, parentheses and the status functions. Anything else
/// is an error, so that the action stays within what this test can run.
mod expr {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Val {
        Str(String),
        Bool(bool),
    }

    impl Val {
        pub fn truthy(&self) -> bool {
            match self {
                Val::Bool(b) => *b,
                Val::Str(s) => !s.is_empty(),
            }
        }

        pub fn text(&self) -> String {
            match self {
                Val::Bool(b) => b.to_string(),
                Val::Str(s) => s.clone(),
            }
        }
    }

    /// What an expression can see.
    pub trait Context {
        /// A context path's value (`inputs.scenario`, `steps.run.outputs.exit-code`).
        fn lookup(&self, path: &str) -> Result<String, String>;
        /// Whether an earlier step failed (`success()`, `failure()`).
        fn failed(&self) -> bool;
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Tok {
        Path(String),
        Str(String),
        Op(&'static str),
    }

    fn lex(s: &str) -> Result<Vec<Tok>, String> {
        let c: Vec<char> = s.chars().collect();
        let (mut i, mut out) = (0, Vec::new());
        while i < c.len() {
            let ch = c[i];
            let two: String = c[i..(i + 2).min(c.len())].iter().collect();
            if ch.is_whitespace() {
                i += 1;
            } else if ch == '\'' {
                let mut v = String::new();
                i += 1;
                loop {
                    match c.get(i) {
                        None => return Err(format!("`{s}`: an unterminated string")),
                        Some('\'') if c.get(i + 1) == Some(&'\'') => {
                            v.push('\'');
                            i += 2;
                        }
                        Some('\'') => break,
                        Some(&x) => {
                            v.push(x);
                            i += 1;
                        }
                    }
                }
                i += 1;
                out.push(Tok::Str(v));
            } else if let Some(op) = ["==", "!=", "&&", "||"].into_iter().find(|o| *o == two) {
                out.push(Tok::Op(op));
                i += 2;
            } else if let Some(op) = ["!", "(", ")"].into_iter().find(|o| o.starts_with(ch)) {
                out.push(Tok::Op(op));
                i += 1;
            } else if ch.is_ascii_alphabetic() || ch == '_' {
                let start = i;
                while i < c.len() && (c[i].is_ascii_alphanumeric() || "_-.".contains(c[i])) {
                    i += 1;
                }
                out.push(Tok::Path(c[start..i].iter().collect()));
            } else {
                return Err(format!("`{s}`: `{ch}` is not understood here"));
            }
        }
        Ok(out)
    }

    struct Parser<'a> {
        toks: Vec<Tok>,
        pos: usize,
        ctx: &'a dyn Context,
    }

    impl Parser<'_> {
        fn eat(&mut self, op: &str) -> bool {
            let hit = matches!(self.toks.get(self.pos), Some(Tok::Op(o)) if *o == op);
            self.pos += usize::from(hit);
            hit
        }

        fn or(&mut self) -> Result<Val, String> {
            let mut v = self.and()?;
            while self.eat("||") {
                let r = self.and()?;
                if !v.truthy() {
                    v = r;
                }
            }
            Ok(v)
        }

        fn and(&mut self) -> Result<Val, String> {
            let mut v = self.cmp()?;
            while self.eat("&&") {
                let r = self.cmp()?;
                if v.truthy() {
                    v = r;
                }
            }
            Ok(v)
        }

        fn cmp(&mut self) -> Result<Val, String> {
            let l = self.unary()?;
            for (op, equal) in [("==", true), ("!=", false)] {
                if self.eat(op) {
                    let r = self.unary()?;
                    let same = l.text().eq_ignore_ascii_case(&r.text());
                    return Ok(Val::Bool(same == equal));
                }
            }
            Ok(l)
        }

        fn unary(&mut self) -> Result<Val, String> {
            if self.eat("!") {
                return Ok(Val::Bool(!self.unary()?.truthy()));
            }
            if self.eat("(") {
                let v = self.or()?;
                return if self.eat(")") {
                    Ok(v)
                } else {
                    Err("a `(` without its `)`".into())
                };
            }
            let tok = self.toks.get(self.pos).cloned();
            self.pos += 1;
            match tok {
                Some(Tok::Str(s)) => Ok(Val::Str(s)),
                Some(Tok::Path(p)) if self.eat("(") => {
                    if !self.eat(")") {
                        return Err(format!("{p}(…): functions with arguments are not used"));
                    }
                    match p.as_str() {
                        "always" => Ok(Val::Bool(true)),
                        "success" => Ok(Val::Bool(!self.ctx.failed())),
                        "failure" => Ok(Val::Bool(self.ctx.failed())),
                        "cancelled" => Ok(Val::Bool(false)),
                        other => Err(format!("function {other}() is not known here")),
                    }
                }
                Some(Tok::Path(p)) if p == "true" || p == "false" => Ok(Val::Bool(p == "true")),
                Some(Tok::Path(p)) => self.ctx.lookup(&p).map(Val::Str),
                other => Err(format!("a value expected, found {other:?}")),
            }
        }
    }

    /// The value of one expression (what is between `${{` and `}}`).
    pub fn eval(src: &str, ctx: &dyn Context) -> Result<Val, String> {
        let mut p = Parser {
            toks: lex(src)?,
            pos: 0,
            ctx,
        };
        let v = p.or().map_err(|e| format!("`{src}`: {e}"))?;
        if p.pos != p.toks.len() {
            return Err(format!("`{src}`: unexpected {:?}", p.toks[p.pos]));
        }
        Ok(v)
    }

    /// A string with every `${{ … }}` replaced by its value.
    pub fn template(s: &str, ctx: &dyn Context) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = s;
        while let Some(start) = rest.find("${{") {
            let end = rest[start..]
                .find("}}")
                .ok_or_else(|| format!("`{s}`: a `${{{{` without `}}}}`"))?;
            out.push_str(&rest[..start]);
            out.push_str(&eval(&rest[start + 3..start + end], ctx)?.text());
            rest = &rest[start + end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A step's `if:`: without a status function it also needs every earlier step to have
    /// succeeded (GitHub adds `success() &&`).
    pub fn condition(cond: &str, ctx: &dyn Context) -> Result<bool, String> {
        let inner = cond.trim();
        let inner = inner
            .strip_prefix("${{")
            .and_then(|s| s.strip_suffix("}}"))
            .unwrap_or(inner);
        let status = ["always(", "success(", "failure(", "cancelled("]
            .iter()
            .any(|f| inner.contains(f));
        Ok(eval(inner, ctx)?.truthy() && (status || !ctx.failed()))
    }
}

/// One step as it went.
#[derive(Debug, Default)]
struct Step {
    name: String,
    ran: bool,
    code: i32,
    stdout: String,
    stderr: String,
    /// The job summary's length when the step started.
    summary_before: usize,
}

/// The action run by a stand-in runner in a workspace of its own.
struct Runner {
    action: Value,
    ws: tempfile::TempDir,
    tmp: tempfile::TempDir,
    inputs: BTreeMap<String, String>,
    outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// `GITHUB_PATH` additions, newest first.
    path: Vec<String>,
    failed: bool,
    steps: Vec<Step>,
}

impl expr::Context for Runner {
    fn lookup(&self, path: &str) -> Result<String, String> {
        let parts: Vec<&str> = path.split('.').collect();
        match parts.as_slice() {
            ["inputs", name] => self
                .inputs
                .get(*name)
                .cloned()
                .ok_or_else(|| format!("input `{name}` is not declared")),
            ["steps", id, "outputs", name] => Ok(self
                .outputs
                .get(*id)
                .and_then(|o| o.get(*name))
                .cloned()
                .unwrap_or_default()),
            ["github", "action_path"] => Ok(repo().display().to_string()),
            ["runner", "os"] => Ok("Linux".into()),
            _ => Err(format!(
                "`{path}` is not known to this test: teach tests/action.rs"
            )),
        }
    }

    fn failed(&self) -> bool {
        self.failed
    }
}

/// A stand-in for cargo: records its command line and "installs" the test build under `--root`.
const CARGO_STUB: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$CARGO_STUB_LOG"
root=
while [ $# -gt 0 ]; do
  if [ "$1" = --root ]; then root=$2; fi
  shift
done
[ -n "$root" ] || { echo "cargo stub: no --root" >&2; exit 101; }
mkdir -p "$root/bin"
ln -sf "$TEST_MCPBENCH" "$root/bin/mcpbench"
ln -sf "$TEST_MOCK_BACKEND" "$root/bin/mock-backend"
"#;

impl Runner {
    /// The action's inputs: their defaults, then `given` (each must be declared).
    fn new(ws: tempfile::TempDir, given: &[(&str, &str)]) -> Runner {
        let action = read(ACTION);
        let mut inputs = BTreeMap::new();
        for (name, spec) in action["inputs"].as_object().expect("inputs") {
            let default = spec["default"].as_str().unwrap_or_default();
            inputs.insert(name.clone(), default.to_string());
        }
        for (name, value) in given {
            assert!(inputs.contains_key(*name), "{ACTION} has no input {name}");
            inputs.insert(name.to_string(), value.to_string());
        }
        let tmp = scratch();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        std::fs::create_dir_all(tmp.path().join("tools")).unwrap();
        let cargo = tmp.path().join("tools/cargo");
        std::fs::write(&cargo, CARGO_STUB).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(tmp.path().join("summary.md"), "").unwrap();
        Runner {
            action,
            ws,
            tmp,
            inputs,
            outputs: BTreeMap::new(),
            path: Vec::new(),
            failed: false,
            steps: Vec::new(),
        }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    fn summary(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("summary.md")).unwrap()
    }

    /// The command line the stand-in cargo was given, if it ran.
    fn cargo_args(&self) -> Option<Vec<String>> {
        let text = std::fs::read_to_string(self.tmp.path().join("cargo.args")).ok()?;
        Some(text.lines().map(str::to_string).collect())
    }

    fn output(&self, step: &str, name: &str) -> &str {
        self.outputs
            .get(step)
            .and_then(|o| o.get(name))
            .map_or("", String::as_str)
    }

    fn step(&self, name_start: &str) -> &Step {
        self.steps
            .iter()
            .find(|s| s.name.starts_with(name_start))
            .unwrap_or_else(|| panic!("no step `{name_start}…` in {:?}", self.steps))
    }

    /// Every step in order.
    fn run_all(mut self) -> Runner {
        let steps = self.action["runs"]["steps"].as_array().unwrap().clone();
        for (i, step) in steps.iter().enumerate() {
            self.run_step(i, step);
        }
        self
    }

    /// One step, if its `if:` holds.
    fn run_step(&mut self, i: usize, step: &Value) {
        let name = step["name"].as_str().unwrap_or("unnamed").to_string();
        let cond = step["if"].as_str().unwrap_or("success()");
        let go = expr::condition(cond, self).unwrap_or_else(|e| panic!("{name}: if: {e}"));
        let mut done = Step {
            name: name.clone(),
            summary_before: self.summary().len(),
            ..Default::default()
        };
        if go {
            done.ran = true;
            let outputs = if let Some(uses) = step["uses"].as_str() {
                self.uses(&name, uses, step)
            } else {
                self.shell(i, step, &mut done)
            };
            if let Some(id) = step["id"].as_str() {
                self.outputs.insert(id.to_string(), outputs);
            }
            self.failed |= done.code != 0;
        }
        self.steps.push(done);
    }

    /// A `uses:` step, not run: the cache misses, the upload's files must be there.
    fn uses(&self, name: &str, uses: &str, step: &Value) -> BTreeMap<String, String> {
        let with = |key: &str| {
            let raw = step["with"][key].as_str().unwrap_or_default();
            expr::template(raw, self).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        if uses.starts_with("actions/cache@") {
            assert!(!with("key").is_empty(), "{name}: an empty cache key");
            BTreeMap::from([("cache-hit".to_string(), "false".to_string())])
        } else if uses.starts_with("actions/upload-artifact@") {
            let path = self.ws.path().join(with("path"));
            assert!(
                path.is_dir(),
                "{name}: nothing to upload at {}",
                path.display()
            );
            BTreeMap::new()
        } else {
            panic!("{name}: `{uses}` is not known to this test")
        }
    }

    /// A `run:` step with bash, as GitHub runs it; its outputs.
    fn shell(&mut self, i: usize, step: &Value, done: &mut Step) -> BTreeMap<String, String> {
        let name = done.name.clone();
        assert_eq!(step["shell"].as_str(), Some("bash"), "{name}: shell");
        let fail = |e: String| -> String { panic!("{name}: {e}") };
        let script = expr::template(step["run"].as_str().unwrap(), self).unwrap_or_else(fail);
        let dir = self.tmp.path();
        let (file, out, add_path) = (
            dir.join(format!("step-{i}.sh")),
            dir.join(format!("step-{i}.output")),
            dir.join(format!("step-{i}.path")),
        );
        std::fs::write(&file, script).unwrap();
        std::fs::write(&out, "").unwrap();
        std::fs::write(&add_path, "").unwrap();
        let mut path: Vec<String> = self.path.clone();
        path.push(dir.join("tools").display().to_string());
        path.push("/usr/local/bin:/usr/bin:/bin".into());
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&file)
            .current_dir(self.ws.path())
            .env_clear()
            .env("PATH", path.join(":"))
            .env("HOME", self.home())
            .env("GITHUB_OUTPUT", &out)
            .env("GITHUB_PATH", &add_path)
            .env("GITHUB_STEP_SUMMARY", dir.join("summary.md"))
            .env("GITHUB_ACTION_PATH", repo())
            .env("GITHUB_WORKSPACE", self.ws.path())
            .env("RUNNER_OS", "Linux")
            .env("RUNNER_ARCH", "X64")
            .env("RUNNER_TEMP", dir)
            .env("RUST_LOG", "warn")
            .env("CARGO_STUB_LOG", dir.join("cargo.args"))
            .env("TEST_MCPBENCH", env!("CARGO_BIN_EXE_mcpbench"))
            .env("TEST_MOCK_BACKEND", env!("CARGO_BIN_EXE_mock-backend"));
        if let Some(env) = step["env"].as_object() {
            for (k, v) in env {
                let v = expr::template(v.as_str().unwrap(), self).unwrap_or_else(fail);
                cmd.env(k, v);
            }
        }
        let o = cmd.output().expect("bash");
        done.code = o.status.code().unwrap_or(-1);
        done.stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        done.stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        for line in std::fs::read_to_string(&add_path).unwrap().lines().rev() {
            self.path.insert(0, line.to_string());
        }
        let mut outputs = BTreeMap::new();
        for line in std::fs::read_to_string(&out).unwrap().lines() {
            let (k, v) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("{name}: GITHUB_OUTPUT line {line:?}"));
            outputs.insert(k.to_string(), v.to_string());
        }
        outputs
    }
}

/// The action run in a fresh workspace holding the scenario.
fn run_action(inputs: &[(&str, &str)]) -> Runner {
    Runner::new(workspace(SCENARIO), inputs).run_all()
}

/// Every step of a run, for failure messages.
fn transcript(r: &Runner) -> String {
    r.steps
        .iter()
        .map(|s| {
            format!(
                "--- {} (ran {}, exit {})\n{}{}",
                s.name, s.ran, s.code, s.stdout, s.stderr
            )
        })
        .collect()
}

/// Run directories under the results' `run`: itself, or run-1 … run-N.
fn run_dirs(results: &Path) -> Vec<PathBuf> {
    let run = results.join("run");
    if run.join("summary.json").is_file() {
        return vec![run];
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&run)
        .unwrap_or_else(|e| panic!("{}: {e}", run.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn the_action_is_wired() {
    let action = read(ACTION);
    assert_eq!(action["runs"]["using"], "composite");
    let steps = action["runs"]["steps"].as_array().unwrap();
    let always = |s: &Value| s["if"].as_str().is_some_and(|c| c.contains("always()"));
    for (name, input) in action["inputs"].as_object().unwrap() {
        assert!(
            input["description"].as_str().is_some_and(|d| !d.is_empty()),
            "input {name} needs a description"
        );
    }
    let ids: Vec<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
    for (name, output) in action["outputs"].as_object().unwrap() {
        let value = output["value"].as_str().unwrap();
        let id = value
            .strip_prefix("${{ steps.")
            .and_then(|v| v.split('.').next())
            .unwrap_or_else(|| panic!("output {name}: {value}"));
        assert!(
            ids.contains(&id),
            "output {name} reads a step that is not there: {value}"
        );
    }
    for s in steps {
        let name = s["name"].as_str().expect("every step has a name");
        if let Some(run) = s["run"].as_str() {
            assert!(
                !run.contains("${{"),
                "{name}: expressions go through env:, never into the script (injection)"
            );
        }
        if let Some(u) = s["uses"].as_str() {
            let version = u.split_once('@').map(|(_, v)| v).unwrap_or("");
            assert!(
                version
                    .strip_prefix('v')
                    .is_some_and(|m| m.parse::<u32>().is_ok()),
                "{u}: pin actions by major version"
            );
        }
    }
    let upload = steps
        .iter()
        .position(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .expect("an upload step");
    assert!(
        always(&steps[upload]),
        "the results are uploaded whatever failed"
    );
    assert_eq!(steps[upload]["with"]["path"], "${{ inputs.results }}");
    let summary = steps
        .iter()
        .position(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("$GITHUB_STEP_SUMMARY"))
        })
        .expect("a summary step");
    assert!(
        always(&steps[summary]),
        "the report is summarised whatever failed"
    );
    let last = steps.last().unwrap();
    assert!(always(last), "the gate runs last, whatever failed");
    assert!(summary < steps.len() - 1 && upload < steps.len() - 1);
    let install = steps.iter().find(|s| s["id"] == "install").unwrap()["run"]
        .as_str()
        .unwrap();
    assert!(
        install.contains("cargo install --locked")
            && install.contains("--path \"$GITHUB_ACTION_PATH\""),
        "{install}"
    );

    // The usage example: `uses: ./` with declared inputs, every required one given.
    let usage = read(USAGE);
    let job = usage["jobs"].as_object().unwrap().values().next().unwrap();
    let step = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["uses"] == "./")
        .expect("the example uses the action as ./");
    let with = step["with"].as_object().unwrap();
    let declared = action["inputs"].as_object().unwrap();
    for key in with.keys() {
        assert!(
            declared.contains_key(key),
            "{USAGE}: input {key} is not declared"
        );
    }
    for (name, spec) in declared {
        if spec["required"] == "true" {
            assert!(
                with.contains_key(name),
                "{USAGE}: the required input {name} is missing"
            );
        }
    }
}

#[test]
fn the_action_runs_a_scenario_and_reports_it() {
    let fast = servers(ResponseMode::Json, 0, 100, Default::default());
    // The quoted threshold (a space inside) is one argument: args split like a shell's.
    let args = format!(
        "--url {} --duration 2s --set load.warmup=0s --repeat 2 --set 'thresholds.p99=< 5s'",
        fast.mcp_url()
    );
    let r = run_action(&[("scenario", SCENARIO), ("args", &args)]);
    let log = transcript(&r);
    assert!(
        r.steps
            .iter()
            .all(|s| s.code == 0 && (s.ran || s.name.starts_with("Compare"))),
        "{log}"
    );

    let home = r.home().display().to_string();
    let expected = [
        "install",
        "--locked",
        "--root",
        &format!("{home}/.cargo"),
        "--path",
    ];
    let cargo = r.cargo_args().expect("the install step ran cargo");
    assert_eq!(cargo[..5], expected, "{cargo:?}");
    assert_eq!(
        Path::new(&cargo[5]),
        repo(),
        "built from the action's own checkout"
    );
    let key = r.output("key", "key");
    let digest = key
        .strip_prefix("mcpbench-Linux-X64-source-")
        .unwrap_or_else(|| panic!("cache key {key}"));
    assert!(
        digest.len() == 16 && digest.chars().all(|c| c.is_ascii_hexdigit()),
        "{key}"
    );

    assert_eq!(r.output("run", "exit-code"), "0", "{log}");
    assert_eq!(r.output("run", "results"), "mcpbench-results");
    let results = r.ws.path().join("mcpbench-results");
    let dirs = run_dirs(&results);
    assert_eq!(dirs.len(), 2, "--repeat 2: {dirs:?}");
    for d in &dirs {
        let summary = valid_summary(d);
        let thresholds = summary["thresholds"].as_array().unwrap();
        assert!(
            thresholds.iter().all(|t| t["passed"] == true),
            "{thresholds:?}"
        );
    }
    let (cases, failed) = junit(&results.join("junit.xml"));
    assert!(cases > 0 && failed.is_empty(), "{failed:?}");

    let job_summary = r.summary();
    assert!(
        job_summary.contains("every threshold held"),
        "{job_summary}"
    );
    for d in &dirs {
        let report = std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(
            job_summary.contains(report.trim()),
            "{} not in:\n{job_summary}",
            d.display()
        );
    }
    assert!(!r.step("Compare").ran, "no baseline, no comparison");
}

#[test]
fn a_breach_fails_the_job_last_after_the_summary() {
    let fast = servers(ResponseMode::Json, 0, 100, Default::default());
    // Every call of the REST-backed tool waits 250 ms in the backend: p99 past the scenario's
    // 50 ms, and a regression against the fast run.
    let slow = servers(
        ResponseMode::Json,
        0,
        100,
        mock_backend::Knobs {
            latency: Some(mock_backend::Latency::Fixed(Duration::from_millis(250))),
            ..Default::default()
        },
    );
    // Single runs: the comparison's noise is then the spread of each run's intervals, where a
    // 250 ms backend stands far clear (with two runs a side |t| would need to pass 63.7).
    let short = "--duration 3s --set load.warmup=0s";
    let main = run_action(&[
        ("scenario", SCENARIO),
        ("args", &format!("--url {} {short}", fast.mcp_url())),
    ]);
    let ws = workspace(SCENARIO);
    crate::ci_recipes::copy_dir(
        &main.ws.path().join("mcpbench-results/run"),
        &ws.path().join("baseline"),
        None,
    );
    let inputs = [
        ("scenario", SCENARIO),
        ("args", &format!("--url {} {short}", slow.mcp_url())),
        ("baseline", "baseline"),
    ];
    let mut pr = Runner::new(ws, &inputs).run_all();
    let log = transcript(&pr);
    assert_eq!(pr.output("run", "exit-code"), "1", "{log}");
    assert_eq!(pr.output("compare", "exit-code"), "1", "{log}");
    let results = pr.ws.path().join("mcpbench-results");
    let (_, failed) = junit(&results.join("junit.xml"));
    assert!(failed.iter().any(|f| f.starts_with("p99")), "{failed:?}");

    let job_summary = pr.summary();
    assert!(
        job_summary.contains("a threshold was breached"),
        "{job_summary}"
    );
    let report = std::fs::read_to_string(results.join("run/report.md")).unwrap();
    assert!(job_summary.contains(report.trim()), "{job_summary}");
    let compare = std::fs::read_to_string(results.join("compare.md")).unwrap();
    assert!(compare.contains("**regressed**"), "{compare}");
    assert!(job_summary.contains(compare.trim()), "{job_summary}");

    let gate = pr.steps.last().unwrap();
    assert!(gate.ran && gate.code == 1, "{log}");
    assert!(
        gate.stdout
            .contains("::error title=mcpbench::a threshold was breached"),
        "{log}"
    );
    assert_eq!(
        gate.summary_before,
        job_summary.len(),
        "the summary was written before the gate"
    );
    assert!(pr.step("Upload").ran);
    assert!(
        pr.steps[..pr.steps.len() - 1].iter().all(|s| s.code == 0),
        "{log}"
    );

    // fail-on-threshold / fail-on-regression false: the same findings are warnings.
    pr.inputs.insert("fail-on-threshold".into(), "false".into());
    pr.inputs
        .insert("fail-on-regression".into(), "false".into());
    let steps = pr.action["runs"]["steps"].as_array().unwrap().clone();
    pr.run_step(steps.len() - 1, steps.last().unwrap());
    let gate = pr.steps.last().unwrap();
    assert_eq!(gate.code, 0, "{}", gate.stdout);
    assert!(
        gate.stdout
            .contains("::warning title=mcpbench::a threshold was breached")
    );
    assert!(
        gate.stdout
            .contains("::warning title=mcpbench::a regression")
    );
}

#[test]
fn set_up_errors_are_exit_2_and_said_in_the_summary() {
    // A scenario that is not there, a released version to install.
    let r = run_action(&[
        ("scenario", "scenarios/missing.toml"),
        ("version", "0.1.0"),
        ("baseline", "baseline"),
    ]);
    let log = transcript(&r);
    let home = r.home().display().to_string();
    let root = format!("{home}/.cargo");
    let expected = [
        "install",
        "--locked",
        "--root",
        &root,
        "--version",
        "0.1.0",
        "mcpbench",
    ];
    assert_eq!(r.cargo_args().unwrap(), expected);
    assert_eq!(r.output("key", "key"), "mcpbench-Linux-X64-0.1.0");
    assert_eq!(r.output("run", "exit-code"), "2", "{log}");
    assert!(r.step("Run").stderr.contains("missing.toml"), "{log}");
    assert!(
        !r.step("Compare").ran,
        "no comparison of a run that did not happen"
    );
    assert!(
        r.summary().contains("**the run failed** (exit 2"),
        "{}",
        r.summary()
    );
    assert_eq!(r.steps.last().unwrap().code, 2, "{log}");

    // An unmatched quote in args: said, exit 2, mcpbench not started.
    let r = run_action(&[("scenario", SCENARIO), ("args", "--set 'load.warmup=0s")]);
    let log = transcript(&r);
    assert_eq!(r.output("run", "exit-code"), "2", "{log}");
    assert!(
        r.step("Run").stdout.contains("cannot split the input args"),
        "{log}"
    );
    assert!(!r.ws.path().join("mcpbench-results/run").exists(), "{log}");
    assert_eq!(r.steps.last().unwrap().code, 2, "{log}");
}

/// The evaluator follows GitHub's rules where the action relies on them.
#[test]
fn expressions_evaluate_as_on_github() {
    struct Ctx(bool);
    impl expr::Context for Ctx {
        fn lookup(&self, path: &str) -> Result<String, String> {
            match path {
                "inputs.baseline" => Ok(String::new()),
                "steps.run.outputs.exit-code" => Ok("1".into()),
                other => Err(format!("unknown {other}")),
            }
        }
        fn failed(&self) -> bool {
            self.0
        }
    }
    let ok = Ctx(false);
    let failed = Ctx(true);
    let cond = |c: &str, ctx: &Ctx| expr::condition(c, ctx).unwrap();
    assert!(cond("inputs.baseline == ''", &ok));
    assert!(
        !cond("inputs.baseline == ''", &failed),
        "success() is implied"
    );
    assert!(cond("${{ always() && inputs.baseline == '' }}", &failed));
    assert!(cond(
        "always() && (steps.run.outputs.exit-code == '0' || steps.run.outputs.exit-code == '1')",
        &failed
    ));
    assert!(!cond("always() && inputs.baseline != ''", &ok));
    assert_eq!(
        expr::template("a-${{ steps.run.outputs.exit-code }}-${{ 'it''s' }}", &ok).unwrap(),
        "a-1-it's"
    );
    assert!(expr::eval("github.token", &ok).is_err());
    assert!(expr::eval("format('{0}', 1)", &ok).is_err());
}
