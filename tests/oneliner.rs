//! The one-line quick test: `mcpbench run URL [--tool NAME --args JSON]` (or `-- CMD` for a
//! stdio server) against the reference server, the scenario it writes next to its results,
//! that scenario run again, and the mistakes a user makes with it.

use std::path::Path;

use crate::support::{mcpbench, scratch, valid_summary};

/// The reference server (and its mock backend) in this process, on 127.0.0.1:0.
fn reference() -> mcpbench::server::EmbeddedServers {
    crate::support::servers(
        mcpbench::server::ResponseMode::Json,
        0,
        100,
        mock_backend::Knobs::default(),
    )
}

/// The one directory under `root` (a default run directory).
fn only_dir(root: &Path) -> std::path::PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// The names of a summary's operations, and what its load was.
fn workload(summary: &serde_json::Value) -> (Vec<String>, serde_json::Value) {
    let ops = summary["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    let mut load = summary["load"].clone();
    load.as_object_mut().unwrap().remove("workers");
    (ops, load)
}

#[test]
fn a_tool_call_writes_its_scenario_and_that_scenario_repeats_the_run() {
    let servers = reference();
    let url = servers.mcp_url();
    let dir = scratch();
    let (code, out, err) = mcpbench(
        &[
            "run",
            &url,
            "-c",
            "2",
            "-d",
            "1s",
            "--tool",
            "echo",
            "--args",
            r#"{"message":"hi ${range:1..9}"}"#,
            "-H",
            "X-Quick: yes",
            "--set",
            "load.timeout=3s",
            "--quiet",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("tools/call:echo"), "{out}");
    assert!(
        out.contains("report.md, report.html, scenario.toml)"),
        "the results line names the scenario: {out}"
    );
    // A readable default run directory, named after the tool; its scenario said on stderr.
    let run = only_dir(&dir.path().join("results"));
    let name = run.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.ends_with("Z-echo"), "{name}");
    let file = format!("results/{name}/scenario.toml");
    assert!(
        err.contains(&format!(
            "scenario: {file} (repeat the test: mcpbench run {file})"
        )),
        "{err}"
    );
    let first = valid_summary(&run);
    assert_eq!(first["errors"]["failed"], 0, "{first:#}");
    assert_eq!(first["scenario"]["file"], file.as_str());
    // The scenario is a real one, in the documented format, with every flag written in.
    let text = std::fs::read_to_string(run.join("scenario.toml")).unwrap();
    assert!(
        text.starts_with(&format!(
            "# Written by `mcpbench run {url} -c 2 -d 1s --tool echo"
        )),
        "{text}"
    );
    for line in [
        "name = \"echo\"",
        &format!("url = \"{url}\""),
        "X-Quick = \"yes\"",
        "concurrency = 2",
        "duration = \"1s\"",
        "timeout = \"3s\"",
        "tool = \"echo\"",
        "arguments = { message = \"hi ${range:1..9}\" }",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    let (code, _, err) = mcpbench(&["validate", &file], dir.path());
    assert_eq!(code, 0, "{err}");
    // Run again from the file alone: the same workload at the same load.
    let (code, out, err) = mcpbench(&["run", &file, "-o", "again", "--quiet"], dir.path());
    assert_eq!(code, 0, "{out}{err}");
    let again = valid_summary(&dir.path().join("again"));
    assert_eq!(workload(&again), workload(&first));
    assert_eq!(again["target"]["url"], url.as_str());
    assert_eq!(again["scenario"]["name"], "echo");
    assert_eq!(again["errors"]["failed"], 0, "{again:#}");
}

#[test]
fn without_a_tool_each_request_is_tools_list() {
    let servers = reference();
    let dir = scratch();
    let url = servers.mcp_url();
    let (code, out, err) = mcpbench(
        &["run", &url, "-d", "1s", "-c", "1", "-o", "out", "-q"],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("scenario: out/scenario.toml"), "{err}");
    let summary = valid_summary(&dir.path().join("out"));
    let (ops, load) = workload(&summary);
    assert_eq!(ops, ["initialize", "tools/list"]);
    assert_eq!(load["concurrency"], 1);
    assert_eq!(summary["scenario"]["name"], "tools-list");
    let text = std::fs::read_to_string(dir.path().join("out/scenario.toml")).unwrap();
    assert!(
        text.ends_with("[[workload]]\nmethod = \"tools/list\"\n"),
        "{text}"
    );
}

/// `-- CMD` runs a stdio server; the scenario records the directory it started in, so that a
/// relative command still works when the scenario is run from elsewhere.
#[test]
fn a_stdio_server_after_double_dash_and_its_scenario_from_another_directory() {
    let dir = scratch();
    let srv = dir.path().join("srv");
    std::fs::create_dir(&srv).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_mcpbench"), srv.join("server")).unwrap();
    let args = [
        "run",
        "--rate",
        "40",
        "-d",
        "1s",
        "--tool",
        "echo",
        "--args",
        r#"{"message":"over stdio"}"#,
        "-o",
        "../first",
        "-q",
        "--",
        "./server",
        "serve",
        "--stdio",
    ];
    let (code, out, err) = mcpbench(&args, &srv);
    assert_eq!(code, 0, "{out}{err}");
    let first = valid_summary(&dir.path().join("first"));
    assert_eq!(first["target"]["transport"], "stdio");
    assert_eq!(first["load"]["model"], "open");
    let text = std::fs::read_to_string(dir.path().join("first/scenario.toml")).unwrap();
    assert!(
        text.contains("command = [\"./server\", \"serve\", \"--stdio\"]")
            && text.contains(&format!("cwd = \"{}\"", srv.display()))
            && text.contains("model = \"open\"\nrate = 40.0\n"),
        "{text}"
    );
    let (code, out, err) = mcpbench(
        &["run", "first/scenario.toml", "-o", "again", "-q"],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let again = valid_summary(&dir.path().join("again"));
    assert_eq!(workload(&again), workload(&first));
}

/// Mistakes get one clear error and exit 2; the ones the command line alone shows write
/// nothing.
#[test]
fn mistakes_are_usage_errors_that_say_what_to_give() {
    let servers = reference();
    let url = servers.mcp_url();
    let dir = scratch();
    let quickstart = crate::support::repo().join("scenarios/quickstart.toml");
    let quickstart = quickstart.to_str().unwrap();
    // The running server's address without its scheme: what a user types from oha's habits.
    let bare = url.trim_start_matches("http://");
    let did_you_mean = format!(
        "is neither a scenario file (there is none) nor a URL (http://, https://, ws:// or \
         wss://); did you mean {url}?"
    );
    let cases: [(&[&str], &str); 7] = [
        (
            &["run", &url, "--tool", "echo", "--args", "{message: hi}"],
            "invalid value '{message: hi}' for '--args <JSON>': not JSON",
        ),
        (
            &["run", &url, "--tool", "echo", "--args", r#"["hi"]"#],
            "the arguments are a JSON object (named arguments), e.g. --args '{\"message\":\"hi\"}'",
        ),
        (
            &["run", "ftp://127.0.0.1/mcp"],
            "mcpbench reaches MCP servers at http://, https://, ws:// or wss:// URLs, not ftp://",
        ),
        (&["run", bare], &did_you_mean),
        (
            &["run", quickstart, "--tool", "echo"],
            "a scenario file has its own target and workload; --tool, --args and `-- CMD` make a \
             quick test without one",
        ),
        (
            &["run", &url, "--", "python3", "server.py"],
            "give the target once",
        ),
        (
            &["run", &url, "--url", &url],
            "replaces a scenario file's target; a quick test's target is the URL given first",
        ),
    ];
    for (args, expected) in cases {
        let (code, out, err) = mcpbench(args, dir.path());
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    assert!(!dir.path().join("results").exists());
    // A tool the server does not offer: caught before load, at the scenario's line.
    let (code, out, err) = mcpbench(
        &["run", &url, "--tool", "ech", "-d", "1s", "-q"],
        dir.path(),
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("scenario.toml:16:8: `workload[1].tool`: unknown tool `ech`")
            && err.contains("did you mean `echo`?"),
        "{err}"
    );
}
