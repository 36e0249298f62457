//! The sample outputs of the docs, re-made by the real binary and compared: each fenced block
//! between `<!-- sample: NAME -->` and `<!-- /sample -->` must be what [`produce`] makes of
//! NAME today — short runs of `scenarios/quickstart.toml` against the built-in reference
//! server, `init` against a reference server, the dashboard's final view drawn at 100×30 on
//! ratatui's TestBackend. What legitimately varies is masked before comparing ([`mask`]):
//! numbers (one token however many digits, thousands groups and decimals; a latency and its
//! unit one token), runs of spaces, the chart dots, `note:` lines. Row names, column headers,
//! file names and units stay, so a stale sample (a renamed row, a file missing from a
//! `results:` line, a changed layout) fails, naming file, line and the first difference.
//!
//! With `MCPBENCH_BLESS_SAMPLES=1` (what `scripts/samples` sets) the runs last as long as the
//! docs say and the blocks are rewritten with their output instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpbench::driver::{self, Interrupt, RunOptions};
use mcpbench::scenario::{self, Override};
use mcpbench::ui::view::{self, ViewState};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::{doc_files, rel};
use crate::support::{mcpbench, repo, scratch};

/// The environment variable that makes the test rewrite the samples.
const BLESS: &str = "MCPBENCH_BLESS_SAMPLES";

/// The dashboard sample's size.
const SCREEN: (u16, u16) = (100, 30);

/// Whether the samples are being rewritten (`scripts/samples`): runs then last as long as the
/// docs say, so the figures shown are a real run's.
fn blessing() -> bool {
    std::env::var_os(BLESS).is_some()
}

/// One sample block of a Markdown file.
#[derive(Debug)]
struct Block {
    file: PathBuf,
    name: String,
    /// 1-based line of the marker.
    marker: usize,
    /// 0-based lines of the opening and closing fences.
    open: usize,
    close: usize,
    body: String,
}

/// The sample blocks of a file, or what is wrong with their markers.
fn sample_blocks(file: &Path) -> Result<Vec<Block>, String> {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- sample:")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            continue;
        };
        let place = format!("{}:{}", rel(file), i + 1);
        let open = i + 1;
        if !lines.get(open).is_some_and(|l| l.starts_with("```")) {
            return Err(format!(
                "{place}: a sample marker must be followed by a fenced block"
            ));
        }
        let close = (open + 1..lines.len())
            .find(|&j| lines[j].trim_end() == "```")
            .ok_or_else(|| format!("{place}: the sample's block is not closed"))?;
        if lines.get(close + 1).map(|l| l.trim()) != Some("<!-- /sample -->") {
            return Err(format!(
                "{place}: the sample's block must be followed by `<!-- /sample -->`"
            ));
        }
        out.push(Block {
            file: file.to_path_buf(),
            name: name.trim().to_string(),
            marker: i + 1,
            open,
            close,
            body: lines[open + 1..close].join("\n"),
        });
    }
    Ok(out)
}

/// What the samples are made from: a scratch directory holding `scenarios/quickstart.toml`
/// (so commands and the paths they print read as in the docs) and, once made, a run of it.
struct Bench {
    dir: tempfile::TempDir,
    run: Option<(String, String)>,
}

impl Bench {
    fn new() -> Bench {
        let dir = scratch();
        std::fs::create_dir(dir.path().join("scenarios")).unwrap();
        std::fs::copy(
            repo().join("scenarios/quickstart.toml"),
            dir.path().join("scenarios/quickstart.toml"),
        )
        .unwrap();
        Bench { dir, run: None }
    }

    /// `mcpbench ARGS` in the bench directory: its stdout, or why it failed.
    fn mcpbench(&self, args: &[&str]) -> Result<String, String> {
        let (code, out, err) = mcpbench(args, self.dir.path());
        if code == 0 {
            Ok(out)
        } else {
            Err(format!(
                "mcpbench {}: exit {code}\n{out}{err}",
                args.join(" ")
            ))
        }
    }

    /// `mcpbench run scenarios/quickstart.toml` (3 s of it unless blessing): (its results
    /// directory relative to the bench, its stdout).
    fn run(&mut self) -> Result<(String, String), String> {
        if self.run.is_none() {
            let mut args = vec!["run", "scenarios/quickstart.toml", "--no-tui"];
            if !blessing() {
                args.extend(["--duration", "3s", "--set", "load.warmup=1s"]);
            }
            let out = self.mcpbench(&args)?;
            let results = self.dir.path().join("results");
            let dirs: Vec<_> = std::fs::read_dir(&results)
                .map_err(|e| format!("{}: {e}", results.display()))?
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            let [d] = dirs.as_slice() else {
                return Err(format!("one run directory expected, found {dirs:?}"));
            };
            self.run = Some((format!("results/{d}"), out));
        }
        Ok(self.run.clone().unwrap())
    }
}

/// The output a sample of this name shows, made now.
fn produce(name: &str, bench: &mut Bench) -> Result<String, String> {
    match name {
        "run" => bench.run().map(|(_, out)| out),
        "report" => {
            let (dir, _) = bench.run()?;
            bench.mcpbench(&["report", &dir])
        }
        "validate" => bench.mcpbench(&["validate", "scenarios/quickstart.toml"]),
        "init" => init(bench),
        "dashboard" => dashboard(bench),
        other => Err(format!(
            "no sample is called `{other}` (tests/docs/samples.rs, `produce`)"
        )),
    }
}

/// `mcpbench init URL` against a reference server, in a directory of its own.
fn init(bench: &Bench) -> Result<String, String> {
    let servers = crate::support::servers(
        mcpbench::server::ResponseMode::Json,
        0,
        100,
        mock_backend::Knobs::default(),
    );
    let dir = bench.dir.path().join("init");
    std::fs::create_dir_all(&dir).unwrap();
    let (code, out, err) = mcpbench(&["init", &servers.mcp_url()], &dir);
    if code == 0 {
        Ok(out)
    } else {
        Err(format!("mcpbench init: exit {code}\n{out}{err}"))
    }
}

/// The dashboard's final overview of a run of the quickstart (3 s of it unless blessing),
/// drawn at [`SCREEN`].
fn dashboard(bench: &Bench) -> Result<String, String> {
    let file = bench.dir.path().join("scenarios/quickstart.toml");
    let short = [
        Override::set("--duration 3s", "load.duration", "3s".into()),
        Override::set("--set load.warmup=1s", "load.warmup", "1s".into()),
    ];
    let overrides = if blessing() { &short[..0] } else { &short[..] };
    let plan =
        scenario::load_finished(&file, overrides, Default::default()).map_err(|e| e.to_string())?;
    let (tx, rx) = tokio::sync::watch::channel(None);
    let opts = RunOptions {
        output: Some(bench.dir.path().join("dashboard-run")),
        live: Some(Arc::new(tx)),
        ..RunOptions::default()
    };
    driver::run(Arc::new(plan), &opts, Interrupt::default()).map_err(|e| e.to_string())?;
    let live = rx.borrow().as_ref().map(|l| (**l).clone());
    let live = live.ok_or("the run published no live view")?;
    let mut term = Terminal::new(TestBackend::new(SCREEN.0, SCREEN.1)).unwrap();
    let state = ViewState {
        waiting_for_key: true,
        ..ViewState::default()
    };
    term.draw(|f| view::draw(f, Some(&live), &state)).unwrap();
    let buf = term.backend().buffer();
    let rows: Vec<String> = (0..SCREEN.1)
        .map(|y| {
            let row: String = (0..SCREEN.0).map(|x| buf[(x, y)].symbol()).collect();
            row.trim_end().to_string()
        })
        .collect();
    Ok(rows.join("\n"))
}

/// Dashboard rows inside the charts' panels (between their top and bottom border) become one
/// line, and the latency chart's legend one word: the curves, their axis labels and which
/// percentiles fit in the legend (it depends on their widths) vary from run to run; the
/// throughput chart's title does not.
fn fold_charts(lines: Vec<String>) -> Vec<String> {
    let tops: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with('┌'))
        .collect();
    let Some(&top) = tops.get(1) else {
        return lines;
    };
    let Some(bottom) = (top + 1..lines.len()).find(|&i| lines[i].starts_with('└')) else {
        return lines;
    };
    let mut out = lines[..top].to_vec();
    out.push(match lines[top].split_once("┐┌") {
        Some((left, _)) => format!("{left}┐┌ (latency legend) ┐"),
        None => lines[top].clone(),
    });
    out.push("(charts)".into());
    out.extend_from_slice(&lines[bottom..]);
    out
}

/// One line with what varies between runs masked: each number a `#` (a latency with its
/// unit `#t`), spaces collapsed, chart dots dropped, rules and bars one character.
fn mask_line(line: &str) -> String {
    let line = line.replace(
        "at its ceiling: other numbers are suspect",
        "headroom: fine",
    );
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if ('\u{2800}'..='\u{28ff}').contains(&c) {
            i += 1;
        } else if "─█░".contains(c) || c.is_whitespace() {
            let c = if c.is_whitespace() { ' ' } else { c };
            if !out.ends_with(c) {
                out.push(c);
            }
            i += 1;
        } else if c.is_ascii_digit() && matches!(out.chars().last(), Some('p' | 'P')) {
            // A percentile's name (`p99.9`), not a figure.
            while chars.get(i).is_some_and(|c| {
                c.is_ascii_digit()
                    || *c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)
            }) {
                out.push(chars[i]);
                i += 1;
            }
        } else if c.is_ascii_digit() {
            i = number(&chars, i, &mut out);
        } else {
            out.push(c);
            i += 1;
        }
    }
    out.trim().to_string()
}

/// The number starting at `chars[i]` (digits, `.`/`,`/`:` between digits, thousands groups
/// after a space) and its unit, masked into `out`; the index after it.
fn number(chars: &[char], mut i: usize, out: &mut String) -> usize {
    let digit = |j: usize| chars.get(j).is_some_and(|c| c.is_ascii_digit());
    loop {
        while digit(i) {
            i += 1;
        }
        if chars.get(i).is_some_and(|c| ".,:".contains(*c)) && digit(i + 1) {
            i += 1;
        } else if chars.get(i) == Some(&' ')
            && digit(i + 1)
            && digit(i + 2)
            && digit(i + 3)
            && !chars
                .get(i + 4)
                .is_some_and(|c| c.is_alphanumeric() || *c == '.' || *c == 'µ')
        {
            i += 4;
        } else {
            break;
        }
    }
    let word_ends = |j: usize| !chars.get(j).is_some_and(|c| c.is_alphanumeric());
    let at = |s: &str| {
        s.chars()
            .enumerate()
            .all(|(k, c)| chars.get(i + k) == Some(&c))
    };
    if ["µs", "ms", "ns"].iter().any(|u| at(u)) && word_ends(i + 2) {
        out.push_str("#t");
        i + 2
    } else if at("s") && word_ends(i + 1) {
        out.push_str("#t");
        i + 1
    } else if chars.get(i).is_some_and(|c| "kMG".contains(*c)) && word_ends(i + 1) {
        out.push('#');
        i + 1
    } else {
        out.push('#');
        i
    }
}

/// A sample as compared: `note:` lines (they come and go with the machine's load) and blank
/// lines at either end left out, the dashboard's charts folded, each line masked.
fn mask(name: &str, text: &str) -> Vec<String> {
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .map(|l| l.trim_end().to_string())
        .collect();
    let lines = if name == "dashboard" {
        fold_charts(lines)
    } else {
        lines
    };
    let mut out: Vec<String> = lines.iter().map(|l| mask_line(l)).collect();
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    while out.first().is_some_and(String::is_empty) {
        out.remove(0);
    }
    out
}

/// Whether the documented sample is the fresh one, once masked; else the first difference.
fn same(name: &str, documented: &str, fresh: &str) -> Result<(), String> {
    let (d, f) = (mask(name, documented), mask(name, fresh));
    if d == f {
        return Ok(());
    }
    let i = d.iter().zip(&f).take_while(|(a, b)| a == b).count();
    let show = |v: &[String]| v.get(i).cloned().unwrap_or_else(|| "(nothing)".into());
    Err(format!(
        "masked line {}: the docs have\n    {}\nthe binary prints\n    {}",
        i + 1,
        show(&d),
        show(&f)
    ))
}

/// Rewrites the sample blocks of one file with the fresh outputs.
fn bless(file: &Path, blocks: &[&Block], fresh: &BTreeMap<String, String>) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for b in blocks.iter().rev() {
        let new: Vec<String> = fresh[&b.name]
            .trim_end()
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect();
        lines.splice(b.open + 1..b.close, new);
    }
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}

#[test]
fn every_sample_is_what_the_binary_prints() {
    let mut blocks = Vec::new();
    let mut problems = Vec::new();
    for f in doc_files() {
        match sample_blocks(&f) {
            Ok(b) => blocks.extend(b),
            Err(e) => problems.push(e),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for must in ["run", "dashboard", "init", "validate", "report"] {
        assert!(
            blocks.iter().any(|b| b.name == must),
            "no `{must}` sample in the docs"
        );
    }
    let mut bench = Bench::new();
    let mut fresh: BTreeMap<String, String> = BTreeMap::new();
    for b in &blocks {
        if !fresh.contains_key(&b.name) {
            match produce(&b.name, &mut bench) {
                Ok(out) => {
                    fresh.insert(b.name.clone(), out);
                }
                Err(e) => problems.push(format!("{}:{}: {e}", rel(&b.file), b.marker)),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    if blessing() {
        let files: std::collections::BTreeSet<&PathBuf> = blocks.iter().map(|b| &b.file).collect();
        for f in files {
            let mine: Vec<&Block> = blocks.iter().filter(|b| &b.file == f).collect();
            bless(f, &mine, &fresh);
        }
        return;
    }
    for b in &blocks {
        if let Err(e) = same(&b.name, &b.body, &fresh[&b.name]) {
            problems.push(format!(
                "{}:{}: sample `{}` is stale ({e})\nthe binary prints now:\n{}",
                rel(&b.file),
                b.marker,
                b.name,
                fresh[&b.name]
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n\nrun scripts/samples to rewrite the samples, then read the diff",
        problems.join("\n\n")
    );
}

#[test]
fn masking_keeps_the_structure_and_drops_the_figures() {
    let a = "operation        requests   ok/s    p50    p99.9\ntools/call:echo     32 073   7896  189µs   1.02ms\nresults: results/20261203T114032Z-quickstart/ (summary.json, report.md)\nnote: latency clustered at ~40 ms";
    let b = "operation  requests      ok/s  p50  p99.9\ntools/call:echo  999  12.5  2.31ms  998µs\nresults: results/20270101T000000Z-quickstart/ (summary.json, report.md)";
    assert_eq!(same("run", a, b), Ok(()));
    assert_eq!(
        mask_line("tools/call:echo     32 073   7896  189µs 8 users 60 % 19.6k ok/s"),
        "tools/call:echo # # #t # users # % # ok/s"
    );
    assert_eq!(mask_line("p50 1.2ms p99.9 3s"), "p50 #t p99.9 #t");
    // A renamed row, a different unit kind, a file missing from a list: stale.
    assert!(same("run", a, &b.replace("tools/call:echo", "tools/call:ping")).is_err());
    assert!(same("run", a, &b.replace("998µs", "998 calls")).is_err());
    assert!(same("run", a, &b.replace("summary.json, ", "")).is_err());
    // The dashboard's curves and axis labels are one line, its panel titles are kept.
    let screen = "┌ head ─┐\n└───┘\n┌ mean 1 ok/s ──┐┌ p50 1ms ─┐\n│26k│⣀⣀⡠⠤ ││10ms│ ⠉⠒ │\n│0  │     ││    │    │\n└───┘└───┘\n┌ operations ─┐";
    let other = "┌ head ──────┐\n└───┘\n┌ mean 25.1k ok/s ─┐┌ p50 900µs ───┐\n│ 1.2k│ ⣀ ││ 100ms│⠉ │\n└───┘└───┘\n┌ operations ─┐";
    assert_eq!(same("dashboard", screen, other), Ok(()));
    assert!(same("dashboard", screen, &other.replace("mean", "now")).is_err());
    let legend = other.replace("p50 900µs", "latency p50 900µs p99 2ms");
    assert_eq!(same("dashboard", screen, &legend), Ok(()));
}

#[test]
fn a_stale_sample_in_the_readme_fails() {
    let readme = repo().join("README.md");
    let blocks = sample_blocks(&readme).unwrap();
    let run = blocks
        .iter()
        .find(|b| b.name == "run")
        .expect("README.md has the `run` sample");
    // The same sample with other figures passes; with a row label edited it is stale.
    let refigured: Vec<String> = run
        .body
        .lines()
        .map(|l| match l.starts_with("operation") {
            true => l.to_string(),
            false => l.replace(|c: char| c.is_ascii_digit(), "7"),
        })
        .collect();
    let refigured = refigured.join("\n");
    assert_eq!(same("run", &run.body, &refigured), Ok(()));
    let edited = run.body.replacen("tools/call:echo", "tools/call:echo2", 1);
    assert_ne!(edited, run.body, "the sample has a tools/call:echo row");
    let err = same("run", &edited, &run.body).unwrap_err();
    assert!(err.contains("tools/call:echo"), "{err}");
    // And a sample block whose end marker is missing is refused.
    let dir = scratch();
    let f = dir.path().join("x.md");
    std::fs::write(&f, "<!-- sample: run -->\n```\nx\n```\n").unwrap();
    assert!(sample_blocks(&f).unwrap_err().contains("<!-- /sample -->"));
}
