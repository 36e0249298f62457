//! The structure ARCHITECTURE.md promises, checked on the source: every top-level module has a
//! place in one ordered list of layers and imports only from layers below it; the gateway,
//! probe and init reach servers through the client, never the driver; no folder's modules
//! import each other in a circle; functions and files stay small, each file says its purpose
//! on its first line and its name says its layer (no two files share one). ARCHITECTURE.md's
//! layer list is this list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::repo;

/// The layers of `src/`, bottom first: a module may name modules of lower layers only (never
/// its own layer's peers, never a higher one). ARCHITECTURE.md shows the same list, top first.
#[rustfmt::skip]
const LAYERS: &[&[&str]] = &[
    &["metrics", "protocol", "trace"],
    &["transport", "server"],
    &["scenario"],
    &["client", "report"],
    &["gateway", "probe", "otlp", "ui"],
    &["driver"],
    &["doctor", "agent", "fuzzing"],
    &["cli"],
];

/// The most lines a function of `src/` may span (its signature to its closing brace).
const MAX_FUNCTION_LINES: usize = 120;

/// The most lines a file of `src/` may hold.
const MAX_FILE_LINES: usize = 1000;

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A file that holds unit tests only (`tests.rs`, `…_tests.rs`): it may reach anywhere.
fn test_only(path: &Path) -> bool {
    let stem = path.file_stem().unwrap().to_string_lossy();
    stem == "tests" || stem.ends_with("_tests")
}

/// A file's code without its unit tests (they may reach anywhere) and without comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files of a top-level module (`src/x.rs` or everything under `src/x/`), test-only files
/// left out.
fn module_files(name: &str) -> Vec<PathBuf> {
    let dir = repo().join("src").join(name);
    let files = if dir.is_dir() {
        rust_files(&dir)
    } else {
        vec![repo().join("src").join(format!("{name}.rs"))]
    };
    files.into_iter().filter(|f| !test_only(f)).collect()
}

/// The names a piece of code reaches as `prefix::name` (e.g. `crate::server`), where `prefix`
/// is not the tail of a longer path (`mcpbench_knobs::` is not `crate::`).
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let name: String = code[i + prefix.len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        out.insert(name);
    }
    out
}

/// The top-level modules `src/lib.rs` declares.
fn declared_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

#[test]
fn every_top_level_module_has_its_place_in_the_layers() {
    let declared = declared_modules();
    let listed: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|l| l.iter().map(|m| m.to_string()))
        .collect();
    let unplaced: Vec<_> = declared.difference(&listed).collect();
    assert!(
        unplaced.is_empty(),
        "modules without a place in LAYERS (tests/architecture.rs) and ARCHITECTURE.md: {unplaced:?}"
    );
    let gone: Vec<_> = listed.difference(&declared).collect();
    assert!(
        gone.is_empty(),
        "LAYERS names modules src/lib.rs does not declare: {gone:?}"
    );
    // `ls src` shows the architecture: folders, and only the crate's root and binary as files;
    // `bin`, the other programs the package installs (mock-backend), is no module: thin mains.
    for entry in std::fs::read_dir(repo().join("src")).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name == "bin" {
            for main in rust_files(&p) {
                let lines = std::fs::read_to_string(&main).unwrap().lines().count();
                assert!(
                    lines <= 20,
                    "{}: a program in src/bin is a thin main",
                    main.display()
                );
            }
            continue;
        }
        assert!(
            p.is_dir() || name == "lib.rs" || name == "main.rs",
            "src/{name}: a top-level module is a folder (src/x/mod.rs)"
        );
    }
}

#[test]
fn modules_import_from_lower_layers_only() {
    let mut wrong = Vec::new();
    for (level, layer) in LAYERS.iter().enumerate() {
        for module in *layer {
            for f in module_files(module) {
                for named in names_after(&code(&f), "crate::") {
                    if named == *module {
                        continue;
                    }
                    match layer_of(&named) {
                        Some(l) if l < level => {}
                        _ => wrong.push(format!(
                            "{} names crate::{named} ({module} is on layer {level})",
                            f.strip_prefix(repo()).unwrap().display()
                        )),
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up or sideways:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_gateway_probe_and_init_reach_servers_through_the_client() {
    for module in ["gateway", "probe"] {
        for f in module_files(module) {
            let named = names_after(&code(&f), "crate::");
            assert!(
                !named.contains("driver"),
                "{} names the driver: open sessions with crate::client",
                f.display()
            );
        }
    }
    assert!(repo().join("src/probe/init.rs").exists());
    // Only the client picks a session type for a transport kind (the multiplexed transports'
    // connectors are named nowhere else).
    for f in rust_files(&repo().join("src")) {
        let rel = f
            .strip_prefix(repo().join("src"))
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel.starts_with("client/") || rel.starts_with("transport/") || test_only(&f) {
            continue;
        }
        let c = code(&f);
        for connector in [
            "MuxSession",
            "StdioConnector",
            "WsConnector",
            "SseConnector",
        ] {
            assert!(
                !c.contains(connector),
                "src/{rel} picks a session type itself ({connector}): use crate::client::sessions"
            );
        }
    }
}

/// The scenario layer knows no server and no mock backend; the driver builds no summary.
#[test]
fn layers_keep_to_their_job() {
    for f in module_files("scenario") {
        assert!(!code(&f).contains("mock_backend::"), "{}", f.display());
    }
    for f in module_files("driver") {
        let c = code(&f);
        for built in ["Summary {", "Operation {", "Totals {", "LoadInfo {"] {
            assert!(!c.contains(built), "{} builds `{built}`", f.display());
        }
    }
}

/// The modules directly inside `dir` (files and folders), by name.
fn siblings(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() && p.join("mod.rs").exists() {
            out.insert(name, rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs")
            && !["mod", "lib", "main"].contains(&name.as_str())
            && !test_only(&p)
        {
            out.insert(name, vec![p]);
        }
    }
    out
}

/// The siblings a module names: `super::x`, `super::{x, …}` (from a file beside them) or
/// `crate::<folder>::x`.
fn sibling_deps(
    files: &[PathBuf],
    path: &str,
    names: &BTreeSet<String>,
    is_file: bool,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in files {
        let c = code(f);
        let mut found = names_after(&c, &format!("crate::{path}::"));
        if is_file {
            found.extend(names_after(&c, "super::"));
            for (i, _) in c.match_indices("super::{") {
                let list = &c[i + "super::{".len()..];
                let list = &list[..list.find('}').unwrap_or(list.len())];
                found.extend(list.split(',').map(|n| {
                    n.trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<String>()
                }));
            }
        }
        out.extend(found.into_iter().filter(|n| names.contains(n)));
    }
    out
}

/// A circle in a graph, as the path around it.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if done.contains(n) {
            return None;
        }
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        path.push(n.to_string());
        for d in &g[n] {
            if let Some(c) = visit(d, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_folder_imports_in_a_circle() {
    // The checker sees a circle where there is one.
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert!(circle(&g).is_some());
    let src = repo().join("src");
    let mut dirs = vec![src.clone()];
    dirs.extend(
        rust_files(&src)
            .iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf)),
    );
    let dirs: BTreeSet<PathBuf> = dirs.into_iter().collect();
    let mut circles = Vec::new();
    for dir in dirs {
        let mods = siblings(&dir);
        let names: BTreeSet<String> = mods.keys().cloned().collect();
        let path = dir
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('/', "::");
        if path.is_empty() {
            continue; // the top level: its order is LAYERS
        }
        let graph: BTreeMap<String, BTreeSet<String>> = mods
            .iter()
            .map(|(name, files)| {
                let is_file = files.len() == 1 && files[0].file_stem().unwrap() == name.as_str();
                let mut deps = sibling_deps(files, &path, &names, is_file);
                deps.remove(name);
                (name.clone(), deps)
            })
            .collect();
        if let Some(c) = circle(&graph) {
            circles.push(format!(
                "src/{}: {}",
                path.replace("::", "/"),
                c.join(" → ")
            ));
        }
    }
    assert!(
        circles.is_empty(),
        "modules that import each other in a circle:\n{}",
        circles.join("\n")
    );
}

/// Rust source with comments, strings and character literals blanked out (braces in them do
/// not count), lines kept.
fn blank_literals(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_lines = |s: &[char], out: &mut String| {
        out.extend(s.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        let end = if c == '/' && next == Some('/') {
            (i..b.len()).find(|&j| b[j] == '\n').unwrap_or(b.len())
        } else if c == '/' && next == Some('*') {
            (i + 2..b.len())
                .find(|&j| b[j - 1] == '*' && b[j] == '/')
                .map_or(b.len(), |j| j + 1)
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let hashes = b[i + 1..].iter().take_while(|&&h| h == '#').count();
            if b.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body: String = b[i + 2 + hashes..].iter().collect();
            body.find(&close).map_or(b.len(), |k| {
                i + 2 + hashes + body[..k].chars().count() + close.len()
            })
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c == '\'' && next == Some('\\') {
            (i + 2..b.len())
                .find(|&j| b[j] == '\'')
                .map_or(b.len(), |j| j + 1)
        } else if c == '\'' && b.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            out.push(c);
            i += 1;
            continue;
        };
        let end = end.min(b.len());
        keep_lines(&b[i..end], &mut out);
        i = end;
    }
    out
}

/// Each function of a piece of code: its name, first line and length in lines.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let chars: Vec<char> = blank_literals(text).chars().collect();
    let mut line = vec![1usize; chars.len() + 1];
    for k in 0..chars.len() {
        line[k + 1] = line[k] + usize::from(chars[k] == '\n');
    }
    let mut out = Vec::new();
    for at in 0..chars.len().saturating_sub(3) {
        if chars[at..at + 3] != ['f', 'n', ' ']
            || at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_')
        {
            continue;
        }
        let k = at + 3;
        let name: String = chars[k..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        if name.is_empty() {
            continue; // a `fn(…)` pointer type
        }
        // The body: the first `{` outside parentheses, unless a `;` ends a declaration first.
        let mut depth = 0i32;
        let mut open = None;
        for (j, &c) in chars.iter().enumerate().skip(k) {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut braces = 0;
        let mut close = chars.len() - 1;
        for (j, &c) in chars.iter().enumerate().skip(open) {
            if c == '{' {
                braces += 1;
            } else if c == '}' {
                braces -= 1;
                if braces == 0 {
                    close = j;
                    break;
                }
            }
        }
        out.push((name, line[at], line[close] - line[at] + 1));
    }
    out
}

#[test]
fn the_length_counter_counts() {
    let text = "fn a() {\n    let s = \"}\";\n    let c = '}';\n    let r = r#\"{\"#;\n}\n// fn b() {\nfn c(x: fn(u8) -> u8) -> u8 { x(1) }\n";
    let f = functions(text);
    assert_eq!(f, vec![("a".into(), 1, 5), ("c".into(), 7, 1)]);
}

#[test]
fn functions_and_files_stay_small() {
    let mut long = Vec::new();
    for f in rust_files(&repo().join("src")) {
        let rel = f.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            long.push(format!(
                "{rel}: {lines} lines (at most {MAX_FILE_LINES}: split it by concern)"
            ));
        }
        if test_only(&f) {
            continue;
        }
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        for (name, line, n) in functions(text) {
            if n > MAX_FUNCTION_LINES {
                long.push(format!(
                    "{rel}:{line}: fn {name} is {n} lines (at most {MAX_FUNCTION_LINES})"
                ));
            }
        }
    }
    assert!(long.is_empty(), "too long:\n{}", long.join("\n"));
}

#[test]
fn every_file_says_its_purpose_and_its_name_is_its_own() {
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for f in rust_files(&repo().join("src")) {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            text.starts_with("//!"),
            "{}: begin with a `//!` line saying what the file is for",
            f.display()
        );
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if ["mod.rs", "tests.rs", "lib.rs", "main.rs"].contains(&name.as_str()) {
            continue;
        }
        if let Some(other) = seen.insert(name.clone(), f.clone()) {
            panic!(
                "{} and {} share a name: name each for its layer",
                other.display(),
                f.display()
            );
        }
    }
}

#[test]
fn architecture_md_lists_the_same_layers() {
    let doc = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let start = doc
        .find("<!-- layers: checked by tests/architecture.rs -->")
        .expect("ARCHITECTURE.md marks its layer list");
    let block = &doc[start..];
    let block = &block[block.find("```").unwrap() + 3..];
    let block = &block[block.find('\n').unwrap() + 1..block.find("\n```").unwrap()];
    let written: Vec<Vec<String>> = block
        .lines()
        .map(|l| {
            let modules = l.split("  ").next().unwrap_or("");
            modules.split_whitespace().map(str::to_string).collect()
        })
        .filter(|l: &Vec<String>| !l.is_empty())
        .collect();
    let expected: Vec<Vec<String>> = LAYERS
        .iter()
        .rev()
        .map(|l| l.iter().map(|m| m.to_string()).collect())
        .collect();
    assert_eq!(
        written, expected,
        "ARCHITECTURE.md's layers (top first) differ from LAYERS"
    );
}
