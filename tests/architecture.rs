//! The layering ARCHITECTURE.md promises, checked on the source: parts import downwards only
//! (the scenario layer knows no server, metrics know no transport, reports know no driver, the
//! dashboard reads the live view only),
//! and the reference server's modules import each other one way (no cycle among siblings).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::repo;

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

/// The top-level parts (`crate::server`, `mock_backend`…) a file names, as `crate::X` or `X`.
fn parts_named(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `mcpbench_knobs::` is not `crate::`
        }
        let rest = &code[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        out.insert(format!("crate::{name}"));
    }
    if code.contains("mock_backend::") {
        out.insert("mock_backend".into());
    }
    out
}

fn check_layer(layer: &str, forbidden: &[&str]) {
    let dir = repo().join("src").join(layer);
    let files = if dir.is_dir() {
        rust_files(&dir)
    } else {
        vec![repo().join("src").join(format!("{layer}.rs"))]
    };
    assert!(!files.is_empty(), "{layer}");
    for f in files {
        let named = parts_named(&code(&f));
        for bad in forbidden {
            assert!(
                !named.contains(*bad),
                "{} names {bad}: {layer} must not depend on it",
                f.display()
            );
        }
    }
}

/// Each part and what it must not name: the arrows of ARCHITECTURE.md's layering, reversed.
#[rustfmt::skip]
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("scenario", &["crate::server", "crate::driver", "crate::report", "mock_backend"]),
    ("metrics", &["crate::transport", "crate::driver", "crate::report", "crate::server", "crate::scenario"]),
    ("report", &["crate::driver", "crate::transport", "crate::server"]),
    ("protocol", &["crate::transport", "crate::driver", "crate::report", "crate::server", "crate::scenario"]),
    ("transport", &["crate::driver", "crate::report", "crate::server", "crate::scenario"]),
    ("server", &["crate::driver", "crate::report", "crate::scenario", "crate::transport"]),
    ("ui", &["crate::driver", "crate::transport", "crate::server", "crate::scenario"]),
    ("doctor", &["crate::transport", "crate::server", "crate::report", "crate::scenario", "crate::cli"]),
    // `mcpbench mcp` sits beside the CLI, not on it; it reaches the server through its public seam.
    ("agent", &["crate::cli", "crate::ui", "crate::gateway"]),
    ("otlp", &["crate::driver", "crate::server", "crate::scenario", "crate::ui", "crate::cli"]),
];

#[test]
fn parts_import_downwards_only() {
    for (layer, forbidden) in FORBIDDEN {
        check_layer(layer, forbidden);
    }
}

/// The driver orchestrates; the summary is built in `report::build`.
#[test]
fn the_driver_does_not_build_the_summary() {
    for f in rust_files(&repo().join("src/driver")) {
        let c = code(&f);
        for built in ["Summary {", "Operation {", "Totals {", "LoadInfo {"] {
            assert!(!c.contains(built), "{} builds `{built}`", f.display());
        }
    }
}

/// The sibling modules of `src/server/` a server file names (`super::x`, `super::{x, y}`,
/// `crate::server::x`); the parent's shared items (`State`, `Config`…) are not siblings.
fn server_siblings(code: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |name: &str| {
        let name: String = name
            .trim()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if siblings.contains(&name) {
            out.insert(name);
        }
    };
    for prefix in ["super::", "crate::server::"] {
        for (i, _) in code.match_indices(prefix) {
            let rest = &code[i + prefix.len()..];
            if let Some(list) = rest.strip_prefix('{') {
                let list = &list[..list.find('}').unwrap_or(list.len())];
                list.split(',').for_each(&mut add);
            } else {
                add(rest);
            }
        }
    }
    out
}

#[test]
fn server_modules_import_each_other_one_way() {
    let dir = repo().join("src/server");
    let files: BTreeMap<String, PathBuf> = rust_files(&dir)
        .into_iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
        .filter(|(name, _)| name != "mod" && name != "conformance_tests")
        .collect();
    let siblings: BTreeSet<String> = files.keys().cloned().collect();
    let graph: BTreeMap<&String, BTreeSet<String>> = files
        .iter()
        .map(|(name, p)| {
            let mut deps = server_siblings(&code(p), &siblings);
            deps.remove(name);
            (name, deps)
        })
        .collect();
    // Depth-first search for a cycle; the path to it is the error.
    fn visit<'a>(
        n: &'a String,
        g: &'a BTreeMap<&String, BTreeSet<String>>,
        path: &mut Vec<&'a String>,
        done: &mut BTreeSet<&'a String>,
    ) {
        if done.contains(n) {
            return;
        }
        if let Some(i) = path.iter().position(|p| *p == n) {
            panic!("server modules import in a cycle: {:?} -> {n}", &path[i..]);
        }
        path.push(n);
        for d in &g[n] {
            let (key, _) = g.get_key_value(d).unwrap();
            visit(key, g, path, done);
        }
        path.pop();
        done.insert(n);
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        visit(n, &graph, &mut Vec::new(), &mut done);
    }
    // The checker itself sees the arrows it must see.
    assert!(graph[&"dispatch".to_string()].contains("fixtures"));
    assert!(graph[&"fixtures".to_string()].contains("tools"));
    assert!(graph[&"http".to_string()].contains("legacy_sse"));
}
