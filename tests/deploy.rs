//! The Kubernetes deployment (`deploy/kubernetes/`), checked offline: every object valid
//! against the Kubernetes API schemas (kubernetes-validate, strict), the Jobs' arguments
//! accepted by our own command line once Kubernetes has expanded `$(VAR)`, the shard count
//! and paths of the load and merge Jobs in agreement, and the scenario in the ConfigMap a
//! valid scenario that splits over the Job's shards. kubernetes-validate and PyYAML come from
//! the pinned venv of `interop/setup.sh` (nextest `full` profile, like the interop tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use mcpbench::cli::Cli;
use mcpbench::scenario::Shard;
use serde_json::Value;

use crate::support::repo;

/// Kubernetes versions the manifests are validated against: the oldest they need (a Job's
/// `backoffLimitPerIndex` and `maxFailedIndexes` are GA since 1.33) and the newest the pinned
/// kubernetes-validate knows.
const KUBERNETES: &[&str] = &["1.33.0", "1.37.0"];

/// Not a Kubernetes object: kustomize's own file (checked by [`kustomization_lists_manifests`]).
const KUSTOMIZATION: &str = "kustomization.yaml";

fn deploy_dir() -> PathBuf {
    repo().join("deploy/kubernetes")
}

/// A program of the pinned venv, or a failure saying how to install it.
fn venv(program: &str) -> PathBuf {
    let p = repo().join(".cache/interop-venv/bin").join(program);
    assert!(
        p.exists(),
        "{} is missing: the deployment tests need the pinned Python packages (kubernetes-validate, \
         PyYAML) — run interop/setup.sh (scripts/test does)",
        p.display()
    );
    p
}

/// Every YAML file of the deployment but the kustomization, sorted.
fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .expect("deploy/kubernetes exists")
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "yaml" || e == "yml")
                && p.file_name().is_some_and(|n| n != KUSTOMIZATION)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in deploy/kubernetes");
    files
}

/// One YAML document and the file it came from.
struct Doc {
    file: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// Every non-empty document of `files`, read by PyYAML (the parser kubernetes-validate uses)
/// and handed over as JSON.
fn documents(files: &[PathBuf]) -> Vec<Doc> {
    const DUMP: &str = "import json, sys, yaml\n\
        out = []\n\
        for p in sys.argv[1:]:\n\
        \x20   with open(p) as f:\n\
        \x20       out += [{'file': p, 'doc': d} for d in yaml.safe_load_all(f) if d is not None]\n\
        json.dump(out, sys.stdout)\n";
    let out = Command::new(venv("python"))
        .arg("-c")
        .arg(DUMP)
        .args(files)
        .output()
        .expect("run the venv's python");
    assert!(
        out.status.success(),
        "reading the manifests failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).expect("PyYAML's dump is JSON");
    all.into_iter()
        .map(|mut d| Doc {
            file: d["file"].as_str().unwrap().to_string(),
            value: d["doc"].take(),
        })
        .collect()
}

fn jobs(docs: &[Doc]) -> Vec<&Doc> {
    docs.iter().filter(|d| d.kind() == "Job").collect()
}

/// The one Job whose first container's first argument is `subcommand`.
fn job<'a>(docs: &'a [Doc], subcommand: &str) -> &'a Doc {
    let found: Vec<&Doc> = jobs(docs)
        .into_iter()
        .filter(|j| args(&containers(j)[0]).first().map(String::as_str) == Some(subcommand))
        .collect();
    assert_eq!(found.len(), 1, "expected one `{subcommand}` Job");
    found[0]
}

fn containers(job: &Doc) -> Vec<Value> {
    let spec = &job.value["spec"]["template"]["spec"];
    let mut all = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    all.extend(spec["containers"].as_array().cloned().unwrap_or_default());
    all
}

fn args(container: &Value) -> Vec<String> {
    container["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().expect("args are strings").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn is_indexed(job: &Doc) -> bool {
    job.value["spec"]["completionMode"] == "Indexed"
}

fn completions(job: &Doc) -> usize {
    job.value["spec"]["completions"]
        .as_u64()
        .unwrap_or_else(|| panic!("{}: job/{} sets no completions", job.file, job.name()))
        as usize
}

/// What Kubernetes can substitute for `$(VAR)` in a container's arguments: its `env`, and for
/// an Indexed Job the completion index the Job controller adds. Sample values.
fn variables(job: &Doc, container: &Value, index: usize) -> BTreeMap<String, String> {
    let mut vars: BTreeMap<String, String> = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let name = e["name"]
                .as_str()
                .expect("env names are strings")
                .to_string();
            let value = match name.as_str() {
                "RUN_ID" => "run-1".to_string(),
                _ => format!("sample-{name}"),
            };
            (name, value)
        })
        .collect();
    if is_indexed(job) {
        vars.insert("JOB_COMPLETION_INDEX".into(), index.to_string());
    }
    vars
}

/// Kubernetes' expansion of a container argument: `$(NAME)` from `vars`, `$$` a literal `$`.
/// A name not in `vars` is refused: Kubernetes would pass `$(NAME)` on unexpanded.
fn expand(arg: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = after.strip_prefix('(')
            && let Some(end) = r.find(')')
        {
            let name = &r[..end];
            let value = vars.get(name).ok_or_else(|| {
                format!(
                    "`{arg}`: $({name}) is not in the container's env (defined: {}), so \
                     Kubernetes would pass it on unexpanded",
                    vars.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })?;
            out.push_str(value);
            rest = &r[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A container's arguments as the process receives them, for completion index `index`.
fn expanded(job: &Doc, container: &Value, index: usize) -> Vec<String> {
    let vars = variables(job, container, index);
    args(container)
        .iter()
        .map(|a| {
            expand(a, &vars).unwrap_or_else(|e| panic!("{}: job/{}: {e}", job.file, job.name()))
        })
        .collect()
}

/// The value of `--flag VALUE` or `--flag=VALUE`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&eq)
        }
    })
}

#[test]
#[ignore = "needs the pinned Python peers (interop/setup.sh): scripts/test runs this"]
fn manifests_are_valid_kubernetes_objects() {
    let files = manifests();
    let docs = documents(&files);
    for version in KUBERNETES {
        let out = Command::new(venv("kubernetes-validate"))
            .args(["--strict", "-k", version])
            .args(&files)
            .output()
            .expect("run kubernetes-validate");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "kubernetes-validate --strict -k {version} refused the manifests:\n{text}"
        );
        // An unknown apiVersion or kind is only a warning (exit 0): every document must have
        // been checked against a schema and passed.
        let passed = text.lines().filter(|l| l.contains(" passed for ")).count();
        let other: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains(" passed for "))
            .collect();
        assert!(
            other.is_empty() && passed == docs.len(),
            "kubernetes-validate -k {version}: {passed} of {} documents passed:\n{text}",
            docs.len()
        );
    }
}

/// `kubectl apply -k` applies what the kustomization lists: files that are here and validated.
#[test]
#[ignore = "needs the pinned Python peers (interop/setup.sh): scripts/test runs this"]
fn kustomization_lists_manifests() {
    let file = deploy_dir().join(KUSTOMIZATION);
    let docs = documents(std::slice::from_ref(&file));
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].kind(), "Kustomization");
    let resources = docs[0].value["resources"]
        .as_array()
        .expect("the kustomization lists resources");
    assert!(!resources.is_empty());
    let validated = manifests();
    for r in resources {
        let path = deploy_dir().join(r.as_str().expect("resources are paths"));
        assert!(
            validated.contains(&path),
            "{KUSTOMIZATION} lists {}, which is not a manifest in deploy/kubernetes",
            path.display()
        );
    }
}

/// Every container of every Job runs `mcpbench ARGS` (the image's entry point): the arguments,
/// as Kubernetes expands them, must be accepted by our command line.
#[test]
#[ignore = "needs the pinned Python peers (interop/setup.sh): scripts/test runs this"]
fn job_arguments_parse_with_our_command_line() {
    let docs = documents(&manifests());
    let jobs = jobs(&docs);
    assert!(jobs.len() >= 2, "expected the load and the merge Job");
    for job in jobs {
        let indexes = if is_indexed(job) { completions(job) } else { 1 };
        for container in containers(job) {
            assert!(
                container["command"].is_null(),
                "{}: job/{}: `command` would replace the image's entry point (mcpbench)",
                job.file,
                job.name()
            );
            for index in 0..indexes {
                let argv = expanded(job, &container, index);
                if let Err(e) =
                    Cli::try_parse_from(std::iter::once("mcpbench".into()).chain(argv.clone()))
                {
                    panic!(
                        "{}: job/{} (index {index}): `mcpbench {}` is refused:\n{e}",
                        job.file,
                        job.name(),
                        argv.join(" ")
                    );
                }
            }
        }
    }
}

/// The load Job runs N shards, writes each under the directory the merge Job merges, and keeps
/// the barrier out of it (the merge takes every subdirectory for a run).
#[test]
#[ignore = "needs the pinned Python peers (interop/setup.sh): scripts/test runs this"]
fn load_and_merge_jobs_agree() {
    let docs = documents(&manifests());
    let load = job(&docs, "run");
    let merge = job(&docs, "merge");
    assert!(
        is_indexed(load),
        "{}: the load Job must be Indexed",
        load.file
    );
    let n = completions(load);
    let spec = &load.value["spec"];
    assert_eq!(
        spec["parallelism"].as_u64(),
        Some(n as u64),
        "{}: parallelism must equal completions: shard 0 waits at the barrier for all {n}",
        load.file
    );
    let c = &containers(load)[0];
    let raw = args(c);
    assert_eq!(
        flag(&raw, "--shards").map(str::parse::<usize>),
        Some(Ok(n)),
        "{}: --shards must equal completions ({n})",
        load.file
    );
    let output = flag(&raw, "--output").expect("the load Job sets --output");
    assert!(
        output.contains("$(JOB_COMPLETION_INDEX)"),
        "{}: each shard needs its own --output (with $(JOB_COMPLETION_INDEX)): {output}",
        load.file
    );
    let merge_args = expanded(merge, &containers(merge)[0], 0);
    let merged_from = Path::new(&merge_args[1]);
    let merged_to = flag(&merge_args, "--output").expect("the merge Job sets --output");
    let mut outputs = Vec::new();
    for index in 0..n {
        let argv = expanded(load, c, index);
        let out = PathBuf::from(flag(&argv, "--output").unwrap());
        assert_eq!(
            out.parent(),
            Some(merged_from),
            "shard {index} writes {}, but the merge Job merges the subdirectories of {}",
            out.display(),
            merged_from.display()
        );
        let barrier = flag(&argv, "--start-barrier").expect("the load Job sets --start-barrier");
        assert!(
            !Path::new(barrier).starts_with(merged_from),
            "the barrier {barrier} is inside {}, which the merge takes for shards",
            merged_from.display()
        );
        outputs.push(out);
    }
    outputs.sort();
    outputs.dedup();
    assert_eq!(outputs.len(), n, "shards share an output directory");
    assert!(
        !Path::new(merged_to).starts_with(merged_from),
        "the merged result {merged_to} would land among the shards"
    );
}

/// The scenario the load Job runs (from the ConfigMap mounted at its path) is valid with only
/// the environment the Job gives it, and splits into the Job's shards.
#[test]
#[ignore = "needs the pinned Python peers (interop/setup.sh): scripts/test runs this"]
fn configmap_scenario_is_valid_and_splits() {
    let docs = documents(&manifests());
    let load = job(&docs, "run");
    let c = &containers(load)[0];
    let raw = args(c);
    let path = Path::new(&raw[1]);
    let pod = &load.value["spec"]["template"]["spec"];
    let mount = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
        .unwrap_or_else(|| {
            panic!(
                "no volume of the load Job is mounted above {}",
                path.display()
            )
        });
    let volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume is declared");
    let cm_name = volume["configMap"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{} is not mounted from a ConfigMap", path.display()));
    assert!(
        volume["configMap"]["items"].is_null() && mount["subPath"].is_null(),
        "keep the ConfigMap mounted whole: the key is the file name"
    );
    let key = path
        .strip_prefix(mount["mountPath"].as_str().unwrap())
        .unwrap()
        .to_str()
        .unwrap();
    let cm = docs
        .iter()
        .find(|d| d.kind() == "ConfigMap" && d.name() == cm_name)
        .unwrap_or_else(|| panic!("no ConfigMap {cm_name} in deploy/kubernetes"));
    let text = cm.value["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{}: ConfigMap {cm_name} has no key {key}", cm.file));

    // `${NAME}` may only name what the Job's env provides (sample values here).
    let env = variables(load, c, 0);
    let plan =
        mcpbench::scenario::parse(&raw[1], text, &|k| env.get(k).cloned()).unwrap_or_else(|e| {
            panic!(
                "{}: ConfigMap {cm_name}, key {key}, with the load Job's env ({}):\n{e}",
                cm.file,
                env.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        });
    let n = completions(load);
    for index in 0..n {
        if let Err(e) = plan.sharded(Shard { index, count: n }) {
            panic!("the scenario does not split into {n} shards: {e}");
        }
    }
}
