//! Turning a byte offset in a scenario file into what a person needs to fix it: line, column
//! and the dotted key (`load.concurrency`, `workload[2].tool`).

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
}
