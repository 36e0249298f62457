//! Turning a byte offset in a scenario file into what a person needs to fix it: line, column
//! and the dotted key (`load.concurrency`, `workload[2].tool`); and back, a key to where its
//! value is written ([`offset_of`]).

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A position in the source, 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
    /// Dotted key path at that position; empty at top level.
    pub key: String,
}

/// Locates `offset` (clamped to the text) in `src`.
pub fn locate(src: &str, offset: usize) -> Location {
    let offset = offset.min(src.len());
    let before = &src[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = src[line_start..offset].chars().count() + 1;
    let line_end = src[line_start..]
        .find('\n')
        .map_or(src.len(), |i| line_start + i);
    let text = &src[line_start..line_end];
    let mut path = table_path(&src[..line_start]);
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        // On a header line itself: the path is the header.
        path = table_path(&src[..line_end]);
    } else if let Some(eq) = text.find('=') {
        let line_key = clean_key(&text[..eq]);
        if !line_key.is_empty() {
            push(&mut path, &line_key);
        }
        let col = offset - line_start;
        if col > eq
            && let Some(inner) = inner_key(&text[eq + 1..col.min(text.len())])
        {
            push(&mut path, &inner);
        }
    }
    Location {
        line,
        column,
        key: path,
    }
}

fn push(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn clean_key(k: &str) -> String {
    k.trim().trim_matches('"').trim_matches('\'').to_string()
}

/// Inside an inline table `{ a = 1, b = "x" }`, the key whose value contains the end of
/// `before`.
fn inner_key(before: &str) -> Option<String> {
    let open = before.rfind('{')?;
    let inside = &before[open + 1..];
    let seg_start = inside.rfind(',').map_or(0, |i| i + 1);
    let seg = &inside[seg_start..];
    let eq = seg.find('=')?;
    let k = clean_key(&seg[..eq]);
    (!k.is_empty()).then_some(k)
}

/// The table path in force at the end of `src`, with `[[array]]` entries numbered from 1.
fn table_path(src: &str) -> String {
    let mut current = String::new();
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut in_multiline = false;
    for line in src.lines() {
        let t = line.trim();
        let quotes = t.matches("\"\"\"").count() + t.matches("'''").count();
        if quotes % 2 == 1 {
            in_multiline = !in_multiline;
            continue;
        }
        if in_multiline {
            continue;
        }
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = clean_key(name);
            let n = match counts.iter_mut().find(|(k, _)| *k == name) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    counts.push((name.clone(), 1));
                    1
                }
            };
            current = format!("{name}[{n}]");
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            current = clean_key(name);
        }
    }
    current
}

/// Where the value of a dotted key as [`locate`] names it (`target.url`, `workload[2].tool`,
/// `thresholds."tools/call:echo".p99`) starts in `src`; `None` when it is not written there.
pub fn offset_of(src: &str, key: &str) -> Option<usize> {
    let doc = DeTable::parse(src).ok()?;
    let segments = key_segments(key);
    let (last, path) = segments.split_last()?;
    let mut table = doc.get_ref();
    for (name, nth) in path {
        table = match nth_of(entry(table, name)?, *nth)?.get_ref() {
            DeValue::Table(t) => t,
            _ => return None,
        };
    }
    Some(nth_of(entry(table, &last.0)?, last.1)?.span().start)
}

/// The value of `name` in a table.
fn entry<'a, 'i>(t: &'a DeTable<'i>, name: &str) -> Option<&'a Spanned<DeValue<'i>>> {
    t.iter()
        .find(|(k, _)| k.get_ref().as_ref() == name)
        .map(|(_, v)| v)
}

/// Entry `nth` (1-based) of an array value, or the value itself when `nth` is `None`.
fn nth_of<'a, 'i>(
    v: &'a Spanned<DeValue<'i>>,
    nth: Option<usize>,
) -> Option<&'a Spanned<DeValue<'i>>> {
    match (v.get_ref(), nth) {
        (_, None) => Some(v),
        (DeValue::Array(a), Some(n)) => a.get(n.checked_sub(1)?),
        _ => None,
    }
}

/// The segments of a dotted key, each a name and the 1-based entry of an array it picks
/// (`workload[2]`); quotes removed.
fn key_segments(key: &str) -> Vec<(String, Option<usize>)> {
    let mut out = Vec::new();
    let mut seg = String::new();
    let mut quoted = false;
    for c in key.chars().chain(std::iter::once('.')) {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => {
                let s = std::mem::take(&mut seg);
                let nth = s
                    .strip_suffix(']')
                    .and_then(|r| r.rsplit_once('['))
                    .and_then(|(name, n)| Some((name.to_string(), n.parse().ok()?)));
                out.push(match nth {
                    Some((name, n)) => (name, Some(n)),
                    None => (s, None),
                });
            }
            c => seg.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "name = \"x\"\n[load]\nconcurrency = \"many\"\n\n[[workload]]\ntool = \"a\"\n[[workload]]\narguments = { query = 5, limit = 3 }\n";

    #[test]
    fn finds_line_column_and_key() {
        let off = SRC.find("\"many\"").unwrap();
        assert_eq!(
            locate(SRC, off),
            Location {
                line: 3,
                column: 15,
                key: "load.concurrency".into()
            }
        );
        let off = SRC.find("5,").unwrap();
        assert_eq!(locate(SRC, off).key, "workload[2].arguments.query");
        let off = SRC.find("3 }").unwrap();
        assert_eq!(locate(SRC, off).key, "workload[2].arguments.limit");
        let off = SRC.find("\"a\"").unwrap();
        assert_eq!(locate(SRC, off).key, "workload[1].tool");
        assert_eq!(locate(SRC, 0).key, "name");
        assert_eq!(locate(SRC, SRC.find("[load]").unwrap()).key, "load");
    }

    #[test]
    fn finds_where_a_key_is_written() {
        for (key, value) in [
            ("load.concurrency", "\"many\""),
            ("workload[1].tool", "\"a\""),
            ("workload[2].arguments.limit", "3 }"),
        ] {
            let off = offset_of(SRC, key).unwrap();
            assert_eq!(off, SRC.find(value).unwrap(), "{key}");
            assert_eq!(locate(SRC, off).key, key);
        }
        let quoted = "[thresholds.\"tools/call:echo\"]\np99 = \"5ms\"\n";
        assert_eq!(
            offset_of(quoted, "thresholds.\"tools/call:echo\".p99"),
            quoted.find("\"5ms\"")
        );
        for absent in ["load.rate", "workload[3].tool", "name.x", "workload"] {
            assert_eq!(
                offset_of(SRC, absent).is_some(),
                absent == "workload",
                "{absent}"
            );
        }
    }
}
