//! The documentation is checked against the code, so it cannot drift:
//!
//! - every `mcpbench …` command in a shell block (```` ```sh ````, `bash`, `console`) of
//!   README.md, docs/**/*.md and the other user-facing Markdown files is accepted by our
//!   command line (`Cli::try_parse_from`), its file and line named when it is not — `$ `
//!   prompts, `\` continuations, comments, `&&`/`;`/`|` chains and `NAME=value` prefixes are
//!   understood (the shell reader of `ci_recipes`); variables stand for a placeholder value;
//! - every relative link resolves, to a file and, with `#anchor`, to a heading of it; every
//!   repository path written as inline code (`scenarios/x.toml`) or as a command's argument
//!   exists;
//! - the README stays short;
//! - the sample outputs between `<!-- sample: NAME -->` and `<!-- /sample -->` are what the
//!   binary prints today ([`samples`]; `scripts/samples` rewrites them).

mod samples;

use std::path::{Path, PathBuf};

use clap::Parser;
use mcpbench::cli::Cli;

use crate::ci_recipes::shell;
use crate::support::repo;

/// The Markdown files a user reads: README.md, ARCHITECTURE.md, everything under docs/, and
/// the READMEs of scenarios/, results/ and deploy/kubernetes/.
pub(crate) fn doc_files() -> Vec<PathBuf> {
    let root = repo();
    let mut out: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "scenarios/README.md",
        "results/README.md",
        "deploy/kubernetes/README.md",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A path relative to the repository, for messages.
pub(crate) fn rel(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A fenced code block: its info string's first word, the 1-based line of its first content
/// line, and its lines (the fence's indentation removed).
#[derive(Debug)]
pub(crate) struct Block {
    pub lang: String,
    pub first_line: usize,
    pub lines: Vec<String>,
}

/// The fenced code blocks of a Markdown text, in order.
pub(crate) fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, Block)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        match (&mut open, fence) {
            (None, Some(f)) => {
                let lang = trimmed[f.len()..].split_whitespace().next().unwrap_or("");
                let block = Block {
                    lang: lang.to_string(),
                    first_line: i + 2,
                    lines: Vec::new(),
                };
                open = Some((f.to_string(), indent, block));
            }
            (Some((f, _, _)), Some(g)) if *f == g && trimmed.trim_end() == g => {
                out.push(open.take().unwrap().2);
            }
            (Some((_, indent, block)), _) => {
                let cut = line.len() - line.trim_start().len();
                block.lines.push(line[cut.min(*indent)..].to_string());
            }
            (None, None) => {}
        }
    }
    out
}

/// The Markdown text outside fenced code blocks, each line with its 1-based number.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match fence {
            Some(f) if t.trim_end() == f => fence = None,
            Some(_) => {}
            None => match ["```", "~~~"].into_iter().find(|f| t.starts_with(f)) {
                Some(f) => fence = Some(f),
                None => out.push((i + 1, line)),
            },
        }
    }
    out
}

/// Shell blocks hold commands; `console` blocks mark theirs with a `$ ` prompt.
fn is_shell(lang: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console" | "zsh")
}

/// The logical command lines of a shell block: `$ ` prompts removed (in a `console` block only
/// prompted lines are commands, the rest is output), `\` continuations joined; each with the
/// 1-based line it starts on.
pub(crate) fn command_lines(block: &Block) -> Vec<(usize, String)> {
    let console = block.lang == "console";
    let mut out = Vec::new();
    let mut i = 0;
    while i < block.lines.len() {
        let line = block.lines[i].trim_start();
        let start = block.first_line + i;
        i += 1;
        let line = match line.strip_prefix("$ ") {
            Some(rest) => rest,
            None if console => continue,
            None => line,
        };
        let mut logical = line.to_string();
        while logical.ends_with('\\') && i < block.lines.len() {
            logical.pop();
            logical.push(' ');
            logical.push_str(block.lines[i].trim_start().trim_start_matches("> "));
            i += 1;
        }
        out.push((start, logical));
    }
    out
}

/// The arguments (after the program) of every `mcpbench` command in a logical line, variables
/// replaced by `1`; or why one cannot be read.
pub(crate) fn mcpbench_commands(line: &str) -> Vec<Result<Vec<String>, String>> {
    shell::commands(line)
        .iter()
        .filter(|c| c.is_mcpbench())
        .map(|c| {
            c.argv()[1..]
                .iter()
                .map(|w| w.expand(&|_| Some("1".to_string())))
                .collect()
        })
        .collect()
}

/// Whether our command line accepts `args` (a `--help` or `--version` request counts).
fn parses(args: &[String]) -> Result<(), String> {
    match Cli::try_parse_from(std::iter::once("mcpbench".to_string()).chain(args.iter().cloned())) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The top-level folders whose paths, written in the docs, must exist.
const REPO_DIRS: &[&str] = &[
    "scenarios/",
    "docs/",
    "results/baselines/",
    "results/schema.json",
    "results/README.md",
    "benches/",
    "scripts/",
    "deploy/",
    "tests/",
    "src/",
    "interop/",
    "mock-backend/",
    "knobs/",
    "fuzz/",
    ".ci/",
];

/// A word that names a file or folder of this repository (`scenarios/quickstart.toml`).
fn repo_path(word: &str) -> Option<&str> {
    let word = word.trim_end_matches([',', '.', ':', ';']);
    let plain = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c));
    let installed = word.contains("node_modules");
    (plain && !installed && REPO_DIRS.iter().any(|d| word.starts_with(d))).then_some(word)
}

/// Problems with the commands of one file: refused by our command line, or naming a repository
/// path that does not exist.
fn command_problems(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut problems = Vec::new();
    for block in blocks(&text).iter().filter(|b| is_shell(&b.lang)) {
        for (line, logical) in command_lines(block) {
            let place = format!("{}:{line}", rel(file));
            for cmd in mcpbench_commands(&logical) {
                let args = match cmd {
                    Ok(a) => a,
                    Err(e) => {
                        problems.push(format!("{place}: `{}`: {e}", logical.trim()));
                        continue;
                    }
                };
                if let Err(e) = parses(&args) {
                    problems.push(format!("{place}: `{}` is refused:\n{e}", logical.trim()));
                }
                for p in args.iter().filter_map(|a| repo_path(a)) {
                    if !repo().join(p).exists() {
                        problems.push(format!("{place}: `{p}` does not exist"));
                    }
                }
            }
        }
    }
    problems
}

#[test]
fn every_command_in_the_docs_parses() {
    let mut problems = Vec::new();
    let mut n = 0;
    for f in doc_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        n += blocks(&text)
            .iter()
            .filter(|b| is_shell(&b.lang))
            .flat_map(command_lines)
            .map(|(_, l)| mcpbench_commands(&l).len())
            .sum::<usize>();
        problems.extend(command_problems(&f));
    }
    assert!(n >= 45, "only {n} mcpbench commands found in the docs");
    assert!(
        problems.is_empty(),
        "{} command(s) in the docs do not work:\n\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

#[test]
fn commands_are_found_in_every_shell_form() {
    let md = "text\n\n```sh\n$ mcpbench run a.toml   # a comment\nFOO=1 BAR=\"x y\" mcpbench run b.toml \\\n    --set load.warmup=0s\nmcpbench serve --listen 127.0.0.1:0 & mcpbench probe http://127.0.0.1:0/mcp && mcpbench validate c.toml; cat x | target/release/mcpbench run d.toml -H \"Authorization: Bearer $TOKEN\" > out.txt\necho mcpbench run not-this.toml\n```\n\n```console\n$ mcpbench validate e.toml\ne.toml: ok\nmcpbench quickstart: an output line, not a command\n```\n\n```\nmcpbench run plain-block-is-output.toml\n```\n";
    let found: Vec<(usize, Vec<String>)> = blocks(md)
        .iter()
        .filter(|b| is_shell(&b.lang))
        .flat_map(command_lines)
        .flat_map(|(line, l)| {
            mcpbench_commands(&l)
                .into_iter()
                .map(move |c| (line, c.unwrap()))
        })
        .collect();
    let want: Vec<(usize, Vec<&str>)> = vec![
        (4, vec!["run", "a.toml"]),
        (5, vec!["run", "b.toml", "--set", "load.warmup=0s"]),
        (7, vec!["serve", "--listen", "127.0.0.1:0"]),
        (7, vec!["probe", "http://127.0.0.1:0/mcp"]),
        (7, vec!["validate", "c.toml"]),
        (7, vec!["run", "d.toml", "-H", "Authorization: Bearer 1"]),
        (12, vec!["validate", "e.toml"]),
    ];
    let want: Vec<(usize, Vec<String>)> = want
        .into_iter()
        .map(|(l, a)| (l, a.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(found, want);
    // A command our CLI refuses is reported with its place.
    let bad = blocks("```sh\nmcpbench run --no-such-flag\n```\n");
    let (line, l) = &command_lines(&bad[0])[0];
    let args = mcpbench_commands(l).remove(0).unwrap();
    assert_eq!(*line, 2);
    assert!(parses(&args).unwrap_err().contains("--no-such-flag"));
    assert!(parses(&["run".into(), "--help".into()]).is_ok());
    // The value of `--upstream` holds a space: unquoted, the shell splits it (the example
    // that failed as written in issue 27).
    let split = mcpbench_commands("mcpbench serve --upstream files=stdio:python3 my_server.py");
    assert!(parses(split[0].as_ref().unwrap()).is_err());
    let quoted = mcpbench_commands("mcpbench serve --upstream 'files=stdio:python3 my_server.py'");
    assert!(parses(quoted[0].as_ref().unwrap()).is_ok());
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, other punctuation dropped.
pub(crate) fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a Markdown text's headings (`-1`, `-2` … for repeated ones, as GitHub).
fn anchors(text: &str) -> Vec<String> {
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    let mut out = Vec::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let Some(h) = line[hashes..].strip_prefix(' ').filter(|_| hashes > 0) else {
            continue;
        };
        let base = slug(h);
        let n = seen.entry(base.clone()).or_default();
        out.push(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// The inline link targets of a line, outside code spans.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_code = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => in_code = !in_code,
            b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                if let Some(n) = line[i + 2..].find(')') {
                    out.push(&line[i + 2..i + 2 + n]);
                    i += n + 2;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The inline code spans of a line.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Problems with the links and paths of one file: a relative link to nothing or to a heading
/// that is not there, a repository path in inline code that does not exist.
fn link_problems(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let dir = file.parent().unwrap();
    let mut problems = Vec::new();
    for (n, line) in prose(&text) {
        let place = format!("{}:{n}", rel(file));
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let dest = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            if !dest.exists() {
                problems.push(format!("{place}: link to `{target}`: no such file"));
                continue;
            }
            if !anchor.is_empty() && dest.extension().is_some_and(|e| e == "md") {
                let heads = anchors(&std::fs::read_to_string(&dest).unwrap());
                if !heads.iter().any(|a| a == anchor) {
                    problems.push(format!(
                        "{place}: link to `{target}`: no heading with that anchor"
                    ));
                }
            }
        }
        for span in code_spans(line) {
            if let Some(p) = repo_path(span.trim())
                && !repo().join(p).exists()
            {
                problems.push(format!("{place}: `{p}` does not exist"));
            }
        }
    }
    problems
}

#[test]
fn links_and_paths_in_the_docs_exist() {
    let problems: Vec<String> = doc_files().iter().flat_map(|f| link_problems(f)).collect();
    assert!(
        problems.is_empty(),
        "{} broken link(s) or path(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        slug(" Live metrics: Prometheus and OpenTelemetry"),
        "live-metrics-prometheus-and-opentelemetry"
    );
    assert_eq!(slug(" A/B comparisons"), "ab-comparisons");
    assert_eq!(
        slug(" The target's own resources"),
        "the-targets-own-resources"
    );
    assert_eq!(
        slug(" Upstream credentials: `--upstream-header`"),
        "upstream-credentials---upstream-header"
    );
    assert_eq!(
        anchors("# a\n## a\n```\n# not a heading\n```\n"),
        ["a", "a-1"]
    );
    assert_eq!(
        link_targets("see [x](docs/a.md#b) and `[y](not-a-link)` or [z](#c)"),
        ["docs/a.md#b", "#c"]
    );
    assert_eq!(
        repo_path("scenarios/quickstart.toml,"),
        Some("scenarios/quickstart.toml")
    );
    assert_eq!(repo_path("results/<UTC time>-<name>/"), None);
}

/// The most lines README.md may have: it leads to docs/, it does not hold them.
const README_MAX_LINES: usize = 250;

#[test]
fn the_readme_stays_short() {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let n = text.lines().count();
    assert!(
        n <= README_MAX_LINES,
        "README.md has {n} lines (at most {README_MAX_LINES}): move the detail to docs/"
    );
}
