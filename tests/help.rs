//! Help that teaches: every help page, walked from clap's definition of the command line (a
//! new command is covered by itself), has a one-line description, examples that parse, every
//! positional argument described and every fixed set of values listed; numbers refused are
//! explained (`-1` is not taken for a flag); one flag name per meaning.

use clap::{CommandFactory, Parser};
use mcpbench::cli::Cli;

use crate::ci_recipes::shell;
use crate::support::{mcpbench, repo};

/// Every help page: the words after `mcpbench` (none for the top level) and the command.
fn pages() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(path: Vec<String>, cmd: &clap::Command, out: &mut Vec<(Vec<String>, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(p, sub, out);
        }
        out.push((path, cmd.clone()));
    }
    let mut out = Vec::new();
    walk(Vec::new(), &Cli::command(), &mut out);
    out
}

/// The lines of the page's "Examples:" block (indented lines up to the first blank one).
fn examples(page: &str) -> Vec<&str> {
    page.lines()
        .skip_while(|l| *l != "Examples:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect()
}

/// The mcpbench commands of one example line, as argument lists (after `mcpbench`), its
/// variables (`$MCP_TOKEN`) left as written.
fn example_commands(line: &str) -> Result<Vec<Vec<String>>, String> {
    let literal = |name: &str| Some(format!("${name}"));
    shell::commands(line)
        .iter()
        .filter(|c| c.is_mcpbench())
        .map(|c| c.argv()[1..].iter().map(|w| w.expand(&literal)).collect())
        .collect()
}

/// What is wrong with one page's examples: none, a line without an mcpbench command, a
/// command mcpbench refuses, none of this page's command.
fn example_problems(path: &[String], page: &str) -> Vec<String> {
    let name = format!("mcpbench {}", path.join(" "));
    let lines = examples(page);
    if lines.is_empty() {
        return vec![format!("{name}: no Examples: block")];
    }
    let mut problems = Vec::new();
    let mut own = false;
    for line in lines {
        let commands = match example_commands(line) {
            Ok(c) if !c.is_empty() => c,
            Ok(_) => {
                problems.push(format!("{name}: `{line}` runs no mcpbench command"));
                continue;
            }
            Err(e) => {
                problems.push(format!("{name}: `{line}`: {e}"));
                continue;
            }
        };
        for args in commands {
            own |= args.starts_with(path);
            let parsed = Cli::try_parse_from(std::iter::once("mcpbench".into()).chain(args));
            if let Err(e) = parsed {
                use clap::error::ErrorKind::*;
                if !matches!(e.kind(), DisplayHelp | DisplayVersion) {
                    problems.push(format!("{name}: `{line}` is refused:\n{e}"));
                }
            }
        }
    }
    if !own {
        problems.push(format!("{name}: no example runs `{name}`"));
    }
    problems
}

/// What is wrong with one command's arguments: a positional without help, an option whose
/// fixed set of values is not listed on the page (or does not parse).
fn argument_problems(path: &[String], cmd: &clap::Command, page: &str) -> Vec<String> {
    let name = format!("mcpbench {}", path.join(" "));
    let mut problems = Vec::new();
    let valued = |a: &&clap::Arg| !a.is_hide_set() && a.get_action().takes_values();
    for arg in cmd.get_arguments().filter(valued) {
        let id = arg.get_id();
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string());
        if arg.is_positional() && help.as_deref().is_none_or(|h| h.trim().is_empty()) {
            problems.push(format!("{name}: <{id}> has no description"));
        }
        let values = arg.get_possible_values();
        for v in &values {
            if !page.contains(v.get_name()) {
                problems.push(format!("{name} --{id}: `{}` is not listed", v.get_name()));
            }
            // The value alone, through the option's own parser.
            let alone = clap::Arg::new("x")
                .long("x")
                .value_parser(arg.get_value_parser().clone());
            let parsed =
                clap::Command::new("t")
                    .arg(alone)
                    .try_get_matches_from(["t", "--x", v.get_name()]);
            if let Err(e) = parsed {
                problems.push(format!(
                    "{name} --{id}: `{}` does not parse: {e}",
                    v.get_name()
                ));
            }
        }
        if values.is_empty() && help.as_deref().is_some_and(lists_choices) {
            problems.push(format!(
                "{name} --{id}: its help names a fixed set of values, which clap does not list: {}",
                help.unwrap_or_default()
            ));
        }
    }
    problems
}

/// Help text that names the choices itself (`` `text` (a table) or `json` ``): two plain
/// words in backquotes joined by "or".
fn lists_choices(help: &str) -> bool {
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    let quoted: Vec<&str> = help.split('`').skip(1).step_by(2).collect();
    help.split(" or `").skip(1).any(|after| {
        let word = after.split('`').next().unwrap_or("");
        plain(word) && quoted.iter().filter(|w| plain(w)).count() >= 2
    })
}

/// Every command and `trace` subcommand: a one-line description (one sentence, at most 100
/// characters), the rest of it after a blank line in `--help`; an "Examples:" block whose
/// lines run mcpbench commands that parse, one of them this page's command; each positional
/// described; each fixed set of values listed.
#[test]
fn every_help_page_has_a_one_line_description_and_examples_that_parse() {
    let mut problems = Vec::new();
    let all = pages();
    assert!(all.len() >= 19, "{} pages", all.len());
    for (path, cmd) in &all {
        let name = format!("mcpbench {}", path.join(" "));
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        let sentence = about.trim_end_matches('.');
        if about.is_empty() || about.len() > 100 || about.contains('\n') || sentence.contains(". ")
        {
            problems.push(format!(
                "{name}: about is not one short sentence: {about:?}"
            ));
        }
        let args: Vec<&str> = path.iter().map(String::as_str).chain(["--help"]).collect();
        let (code, page, err) = mcpbench(&args, &repo());
        assert_eq!(code, 0, "{name} --help: {err}");
        let mut lines = page.lines();
        let first = lines.next().unwrap_or("");
        if first.trim_end_matches('.') != sentence || lines.next() != Some("") {
            problems.push(format!(
                "{name} --help: begins with {first:?}, not the description and a blank line"
            ));
        }
        problems.extend(example_problems(path, &page));
        problems.extend(argument_problems(path, cmd, &page));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The walk's checks catch what they are for.
#[test]
fn the_help_checks_catch_mistakes() {
    let path = vec!["validate".to_string()];
    let page = |ex: &str| format!("Check.\n\nExamples:\n  {ex}\n\nMore:\n  not an example\n");
    assert!(example_problems(&path, &page("mcpbench validate s.toml --connect")).is_empty());
    assert!(
        example_problems(&path, &page("mcpbench validate s.toml -H \"X: $T\" > out")).is_empty()
    );
    for bad in [
        "mcpbench validate s.toml --connet",
        "mcpbench run s.toml",
        "validate s.toml",
    ] {
        assert!(!example_problems(&path, &page(bad)).is_empty(), "{bad}");
    }
    assert!(!example_problems(&path, "Check.\n").is_empty());
    assert!(lists_choices("`text` (a table) or `json`"));
    assert!(lists_choices("`markdown`, `json` or `junit`"));
    assert!(!lists_choices(
        "e.g. `load.timeout=2s` or `load.sessions=shared`"
    ));
    assert!(!lists_choices("`--call echo` or `json`"));
}

/// Every option that takes a number takes `-1` as a value (not as an unknown flag), and an
/// option that refuses it says what it takes; a duration option takes `-5s` and says why not.
#[test]
fn a_negative_number_is_a_value_that_gets_an_explanation() {
    use std::any::TypeId;
    let numeric = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<f64>(),
    ];
    let mut checked = 0;
    for (path, cmd) in pages() {
        for arg in cmd.get_arguments().filter(|a| !a.is_positional()) {
            let Some(long) = arg.get_long() else { continue };
            let ty = arg.get_value_parser().type_id();
            let duration = ty == TypeId::of::<std::time::Duration>()
                || arg.get_value_names().is_some_and(|n| n == ["DURATION"]);
            if !duration && !numeric.iter().any(|t| ty == *t) {
                continue;
            }
            checked += 1;
            let flag = format!("--{long}");
            let value = if duration { "-5s" } else { "-1" };
            let args = std::iter::once("mcpbench".to_string())
                .chain(path.iter().cloned())
                .chain([flag.clone(), value.to_string()]);
            let Err(e) = Cli::try_parse_from(args) else {
                continue;
            };
            let text = e.to_string();
            assert_ne!(
                e.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{path:?} {flag} {value}: {text}"
            );
            let refused = e.kind() == clap::error::ErrorKind::ValueValidation;
            if refused && duration {
                assert!(
                    text.contains("invalid duration \"-5s\""),
                    "{path:?} {flag} {value}: {text}"
                );
            } else if refused {
                assert!(
                    text.starts_with(&format!("error: {flag} takes ")) && text.contains("; got -1"),
                    "{path:?} {flag} -1: {text}"
                );
            }
        }
    }
    assert!(checked >= 20, "{checked} number and duration options");
    // The real binary, as a user meets it: one line, exit 2.
    let (code, out, err) = mcpbench(
        &["run", "scenarios/quickstart.toml", "--concurrency", "-1"],
        &repo(),
    );
    assert_eq!(code, 2, "{out}");
    assert_eq!(
        err.trim_end(),
        "error: --concurrency takes a whole number ≥ 1 (virtual users); got -1"
    );
    let (code, _, err) = mcpbench(&["doctor", "--concurrency", "-5"], &repo());
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: --concurrency takes a whole number ≥ 1 (virtual users); got -5"),
        "{err}"
    );
}

/// Every command that writes a file or directory calls it `--output`/`-o`; `record --out`
/// still works for old scripts, unlisted.
#[test]
fn output_is_one_flag_name_across_commands() {
    for (path, cmd) in pages() {
        for arg in cmd.get_arguments() {
            let long = arg.get_long().unwrap_or("");
            if long == "out" || arg.get_short() == Some('o') {
                assert_eq!(
                    (long, arg.get_short()),
                    ("output", Some('o')),
                    "{path:?} --{long}"
                );
            }
        }
    }
    let old = Cli::try_parse_from([
        "mcpbench",
        "record",
        "--upstream",
        "http://127.0.0.1:1/mcp",
        "--out",
        "t.jsonl",
    ])
    .unwrap();
    match old.command {
        mcpbench::cli::Command::Record(r) => assert_eq!(r.output, std::path::Path::new("t.jsonl")),
        other => panic!("{other:?}"),
    }
    let (_, page, _) = mcpbench(&["record", "--help"], &repo());
    assert!(
        !page.contains("--out ") && page.contains("-o, --output <FILE>"),
        "{page}"
    );
}
