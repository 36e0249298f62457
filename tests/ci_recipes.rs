//! The CI recipes (`docs/ci/github-actions.yml`, `docs/ci/gitlab-ci.yml`) and their scenario
//! (`scenarios/ci.toml`), checked without a CI service:
//!
//! - both files are read by a strict YAML reader (the subset the recipes use: block mappings
//!   and sequences, literal block scalars, quoted and plain scalars, one-line flow sequences;
//!   anything else, and the classic mistakes such as a plain scalar holding `: `, is refused),
//!   and compared with PyYAML's reading when a PyYAML is installed (the pinned interop venv);
//! - every `mcpbench …` command of every `run:` step and `script:` entry, its variables taken
//!   from the recipe's `env:` / `variables:`, is accepted by our command line, and each of its
//!   flags is listed by `mcpbench SUB --help`;
//! - the pieces are wired together: the JUnit report and the artifacts are the files the run
//!   writes, uploaded even when a step failed, the baseline a pull request restores is the one
//!   main saves, and every action is pinned by major version;
//! - the recipe's core runs for real, with its own command lines: `probe` (0 once a server
//!   answers, 1 before), `run` against a fast reference server (the baseline) and against one
//!   whose backend is slow (a breached threshold: exit 1, a JUnit failure), then `compare` of
//!   the two (a regression: exit 1) and of the baseline with itself (exit 0). Runs are cut to
//!   3 s with `--duration` and `--set load.warmup=0s` appended to the recipe's command.
//!
//! What this cannot check is GitHub's and GitLab's side: the actions and API calls themselves.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;
use mcpbench::cli::Cli;
use mcpbench::server::ResponseMode;
use serde_json::Value;

use crate::support::{repo, scratch, servers, valid_summary};

const GITHUB: &str = "docs/ci/github-actions.yml";
const GITLAB: &str = "docs/ci/gitlab-ci.yml";
const SCENARIO: &str = "scenarios/ci.toml";

/// A strict reader of the YAML the recipes are written in, to `serde_json::Value` with every
/// scalar a string (as PyYAML's `BaseLoader` reads it). The GitHub Action's test reads
/// `action.yml` with it too.
pub(crate) mod yaml {
    use serde_json::{Map, Value};

    pub fn parse(file: &str, text: &str) -> Result<Value, String> {
        let mut p = Reader {
            file,
            lines: text.lines().map(str::to_string).collect(),
            pos: 0,
        };
        p.document()
    }

    struct Reader<'a> {
        file: &'a str,
        lines: Vec<String>,
        pos: usize,
    }

    fn blank_or_comment(line: &str) -> bool {
        let t = line.trim_start_matches(' ');
        t.is_empty() || t.starts_with('#')
    }

    fn is_item(t: &str) -> bool {
        t == "-" || t.starts_with("- ")
    }

    /// `key: rest` (rest without the separator), for a plain or quoted key.
    fn key_split(t: &str) -> Option<(&str, &str)> {
        let end = if t.starts_with('"') || t.starts_with('\'') {
            let q = t.chars().next()?;
            t[1..].find(q)? + 2
        } else {
            let mut found = None;
            for (i, c) in t.char_indices() {
                if c == ':' && (i + 1 == t.len() || t[i + 1..].starts_with(' ')) {
                    found = Some(i);
                    break;
                }
                if c == ' ' && t[i + 1..].starts_with('#') {
                    return None;
                }
            }
            found?
        };
        let rest = t[end..].strip_prefix(':')?;
        (rest.is_empty() || rest.starts_with(' ')).then_some((&t[..end], rest))
    }

    /// Cuts a ` #` comment off a plain scalar.
    fn uncomment(s: &str) -> &str {
        let mut prev = ' ';
        for (i, c) in s.char_indices() {
            if c == '#' && prev == ' ' {
                return s[..i].trim_end();
            }
            prev = c;
        }
        s.trim_end()
    }

    impl Reader<'_> {
        fn err(&self, line: usize, msg: impl std::fmt::Display) -> String {
            format!(
                "{}:{}: {msg}\n  {}",
                self.file,
                line + 1,
                self.lines.get(line).map_or("", String::as_str)
            )
        }

        fn indent(&self, line: usize) -> Result<usize, String> {
            let l = &self.lines[line];
            let n = l.len() - l.trim_start_matches(' ').len();
            if l[n..].starts_with('\t') {
                return Err(self.err(line, "a tab in the indentation"));
            }
            Ok(n)
        }

        fn skip_blank(&mut self) {
            while self.pos < self.lines.len() && blank_or_comment(&self.lines[self.pos]) {
                self.pos += 1;
            }
        }

        /// The indentation of the next line with content, if any.
        fn next_indent(&mut self) -> Result<Option<usize>, String> {
            self.skip_blank();
            if self.pos < self.lines.len() {
                self.indent(self.pos).map(Some)
            } else {
                Ok(None)
            }
        }

        fn document(&mut self) -> Result<Value, String> {
            match self.next_indent()? {
                Some(0) => {}
                Some(_) => return Err(self.err(self.pos, "the document must start at column 1")),
                None => return Err(format!("{}: empty", self.file)),
            }
            if self.lines[self.pos].starts_with("---") || self.lines[self.pos].starts_with('%') {
                return Err(self.err(self.pos, "document markers and directives are not used"));
            }
            let v = self.block(0)?;
            if self.next_indent()?.is_some() {
                return Err(self.err(self.pos, "unexpected indentation"));
            }
            Ok(v)
        }

        fn block(&mut self, indent: usize) -> Result<Value, String> {
            if is_item(&self.lines[self.pos][indent..]) {
                self.sequence(indent)
            } else {
                self.mapping(indent)
            }
        }

        /// The value of a key or item with nothing after it: a more indented block, a sequence
        /// at the key's own indentation (mapping values only), or an empty scalar.
        fn nested(&mut self, indent: usize, same_level_items: bool) -> Result<Value, String> {
            match self.next_indent()? {
                Some(i) if i > indent => self.block(i),
                Some(i)
                    if i == indent
                        && same_level_items
                        && is_item(&self.lines[self.pos][indent..]) =>
                {
                    self.sequence(indent)
                }
                _ => Ok(Value::String(String::new())),
            }
        }

        fn mapping(&mut self, indent: usize) -> Result<Value, String> {
            let mut map = Map::new();
            while let Some(i) = self.next_indent()? {
                if i < indent {
                    break;
                }
                let no = self.pos;
                if i > indent {
                    return Err(self.err(no, "unexpected indentation"));
                }
                let line = self.lines[no][indent..].to_string();
                if is_item(&line) {
                    return Err(self.err(no, "a sequence item where a key was expected"));
                }
                let (raw_key, rest) = key_split(&line).ok_or_else(|| {
                    self.err(
                        no,
                        "expected `key: value` (a plain scalar cannot hold `: `)",
                    )
                })?;
                let key = if raw_key.starts_with('"') || raw_key.starts_with('\'') {
                    self.quoted(no, raw_key)?.0
                } else if raw_key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
                    && !raw_key.is_empty()
                {
                    raw_key.to_string()
                } else {
                    return Err(self.err(
                        no,
                        format!("suspicious key `{raw_key}`: quote it if it is meant"),
                    ));
                };
                if map.contains_key(&key) {
                    return Err(self.err(no, format!("duplicate key `{key}`")));
                }
                self.pos += 1;
                let rest = rest.trim_start_matches(' ');
                let value = if rest.is_empty() || rest.starts_with('#') {
                    self.nested(indent, true)?
                } else {
                    self.scalar(no, rest, indent)?
                };
                map.insert(key, value);
            }
            Ok(Value::Object(map))
        }

        fn sequence(&mut self, indent: usize) -> Result<Value, String> {
            let mut items = Vec::new();
            while let Some(i) = self.next_indent()? {
                if i < indent {
                    break;
                }
                let no = self.pos;
                if i > indent {
                    return Err(self.err(no, "unexpected indentation"));
                }
                let line = self.lines[no][indent..].to_string();
                if !is_item(&line) {
                    break;
                }
                let rest = line[1..].trim_start_matches(' ');
                let at = indent + (line.len() - rest.len());
                let value = if rest.is_empty() || rest.starts_with('#') {
                    self.pos += 1;
                    self.nested(indent, false)?
                } else if is_item(rest) || key_split(rest).is_some() {
                    // A mapping or sequence that starts on the item's line: read it as if the
                    // dash were a space.
                    self.lines[no] = format!("{}{rest}", " ".repeat(at));
                    self.block(at)?
                } else {
                    self.pos += 1;
                    self.scalar(no, rest, indent)?
                };
                items.push(value);
            }
            Ok(Value::Array(items))
        }

        /// A scalar starting on line `no` (already consumed) as the value of something at
        /// `indent`.
        fn scalar(&mut self, no: usize, s: &str, indent: usize) -> Result<Value, String> {
            let value = match s.chars().next().unwrap_or(' ') {
                '|' => return self.literal(no, s, indent),
                '>' => return Err(self.err(no, "folded block scalars (`>`) are not used")),
                '{' => return Err(self.err(no, "flow mappings are not used")),
                '[' => {
                    let close = s
                        .find(']')
                        .ok_or_else(|| self.err(no, "a flow sequence must end on its line"))?;
                    if !uncomment(&s[close + 1..]).is_empty() {
                        return Err(self.err(no, "text after a flow sequence"));
                    }
                    let inner = s[1..close].trim();
                    let mut items = Vec::new();
                    if !inner.is_empty() {
                        for item in inner.split(',') {
                            let item = item.trim();
                            let v = if item.starts_with('"') || item.starts_with('\'') {
                                let (v, after) = self.quoted(no, item)?;
                                if !after.trim().is_empty() {
                                    return Err(self.err(no, "text after a quoted item"));
                                }
                                v
                            } else if item.is_empty()
                                || item.contains(": ")
                                || item.contains(['[', '{', '}', '#'])
                            {
                                return Err(self.err(no, format!("flow item `{item}`")));
                            } else {
                                item.to_string()
                            };
                            items.push(Value::String(v));
                        }
                    }
                    Value::Array(items)
                }
                '"' | '\'' => {
                    let (v, after) = self.quoted(no, s)?;
                    if !uncomment(after).is_empty() {
                        return Err(self.err(no, "text after a quoted scalar"));
                    }
                    Value::String(v)
                }
                '&' | '*' | '!' | '%' | '@' | '`' | '?' | ':' | ',' | ']' | '}' => {
                    return Err(self.err(
                        no,
                        "anchors, aliases, tags and reserved indicators are not used (quote the scalar)",
                    ));
                }
                _ => {
                    let v = uncomment(s);
                    if v.contains(": ") || v.ends_with(':') {
                        return Err(
                            self.err(no, "a plain scalar cannot hold `: ` (quote it, or use `|`)")
                        );
                    }
                    Value::String(v.to_string())
                }
            };
            if let Some(i) = self.next_indent()?
                && i > indent
            {
                return Err(self.err(
                    self.pos,
                    "a continuation line (multi-line flow scalars are not used: use `|`)",
                ));
            }
            Ok(value)
        }

        /// `|` or `|-` and the lines more indented than `indent` that follow.
        fn literal(&mut self, no: usize, s: &str, indent: usize) -> Result<Value, String> {
            let strip = match uncomment(&s[1..]) {
                "" => false,
                "-" => true,
                other => return Err(self.err(no, format!("block scalar header `|{other}`"))),
            };
            let start = self.pos;
            let mut end = self.pos;
            let mut block = None;
            while end < self.lines.len() {
                let l = &self.lines[end];
                if l.trim_start_matches(' ').is_empty() {
                    end += 1;
                    continue;
                }
                let i = self.indent(end)?;
                if i <= indent {
                    break;
                }
                let b = *block.get_or_insert(i);
                if i < b {
                    return Err(self.err(end, "less indented than the block's first line"));
                }
                end += 1;
            }
            let Some(b) = block else {
                return Err(self.err(no, "an empty block scalar"));
            };
            let mut lines: Vec<&str> = self.lines[start..end]
                .iter()
                .map(|l| l.get(b..).unwrap_or(""))
                .collect();
            while lines.last().is_some_and(|l| l.is_empty()) {
                lines.pop();
            }
            self.pos = end;
            let mut text = lines.join("\n");
            if !strip {
                text.push('\n');
            }
            Ok(Value::String(text))
        }

        /// A quoted scalar at the start of `s` and what follows it.
        fn quoted<'s>(&self, no: usize, s: &'s str) -> Result<(String, &'s str), String> {
            let mut out = String::new();
            let mut chars = s.char_indices().skip(1);
            if s.starts_with('\'') {
                while let Some((i, c)) = chars.next() {
                    if c == '\'' {
                        if s[i + 1..].starts_with('\'') {
                            out.push('\'');
                            chars.next();
                        } else {
                            return Ok((out, &s[i + 1..]));
                        }
                    } else {
                        out.push(c);
                    }
                }
            } else {
                while let Some((i, c)) = chars.next() {
                    match c {
                        '"' => return Ok((out, &s[i + 1..])),
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('n') => out.push('\n'),
                            Some('t') => out.push('\t'),
                            Some(c @ ('"' | '\\' | '/')) => out.push(c),
                            other => {
                                return Err(
                                    self.err(no, format!("escape `\\{other:?}` is not used"))
                                );
                            }
                        },
                        c => out.push(c),
                    }
                }
            }
            Err(self.err(no, "a quoted scalar must end on its line"))
        }
    }
}

/// Just enough of the POSIX shell to find simple commands, their words (literal text and
/// variables) and their redirections in the recipes' scripts.
pub(crate) mod shell {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Piece {
        Lit(String),
        Var(String),
        /// Command substitution, special parameters, backquotes, unterminated quotes: fine
        /// around an mcpbench command, refused inside one.
        Opaque(String),
    }

    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Word(pub Vec<Piece>);

    impl Word {
        fn lit(&mut self, c: char) {
            if let Some(Piece::Lit(s)) = self.0.last_mut() {
                s.push(c);
            } else {
                self.0.push(Piece::Lit(c.to_string()));
            }
        }

        /// The word when it is plain text.
        pub fn literal(&self) -> Option<&str> {
            match self.0.as_slice() {
                [Piece::Lit(s)] => Some(s),
                _ => None,
            }
        }

        pub fn expand(&self, vars: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
            let mut out = String::new();
            for p in &self.0 {
                match p {
                    Piece::Lit(s) => out.push_str(s),
                    Piece::Var(v) => out.push_str(
                        &vars(v).ok_or_else(|| format!("`${v}` is not defined by the recipe"))?,
                    ),
                    Piece::Opaque(s) => return Err(format!("`{s}` cannot be checked here")),
                }
            }
            Ok(out)
        }
    }

    #[derive(Debug, Clone)]
    pub struct Redirect {
        pub fd: u32,
        /// None: a duplication (`2>&1`).
        pub target: Option<Word>,
    }

    #[derive(Debug, Clone, Default)]
    pub struct Simple {
        pub line: String,
        pub words: Vec<Word>,
        pub redirects: Vec<Redirect>,
    }

    const KEYWORDS: &[&str] = &[
        "if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time",
    ];

    impl Simple {
        /// The words from the program on: keywords and `NAME=value` assignments skipped.
        pub fn argv(&self) -> &[Word] {
            let skip = self
                .words
                .iter()
                .take_while(|w| {
                    w.literal().is_some_and(|s| KEYWORDS.contains(&s))
                        || matches!(w.0.first(), Some(Piece::Lit(s))
                            if s.split_once('=').is_some_and(|(n, _)| !n.is_empty()
                                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')))
                })
                .count();
            &self.words[skip..]
        }

        pub fn is_mcpbench(&self) -> bool {
            self.argv()
                .first()
                .and_then(Word::literal)
                .is_some_and(|p| p == "mcpbench" || p.ends_with("/mcpbench"))
        }

        /// Where the command's standard output goes, if redirected to a file.
        pub fn stdout(&self) -> Option<&Word> {
            self.redirects
                .iter()
                .rev()
                .find(|r| r.fd == 1)
                .and_then(|r| r.target.as_ref())
        }
    }

    /// `$NAME`, `${NAME}`, `$(…)`, `$?` at `chars[i]` (a `$`): the piece and the index after it.
    fn dollar(chars: &[char], i: usize) -> (Piece, usize) {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        match chars.get(i + 1) {
            Some('{') => match chars[i + 2..].iter().position(|&c| c == '}') {
                Some(n) => {
                    let name: String = chars[i + 2..i + 2 + n].iter().collect();
                    let piece = if !name.is_empty() && name.chars().all(ident) {
                        Piece::Var(name)
                    } else {
                        Piece::Opaque(format!("${{{name}}}"))
                    };
                    (piece, i + 3 + n)
                }
                None => (Piece::Opaque(chars[i..].iter().collect()), chars.len()),
            },
            Some('(') => {
                let mut depth = 0;
                let mut j = i + 1;
                while j < chars.len() {
                    match chars[j] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let end = (j + 1).min(chars.len());
                (Piece::Opaque(chars[i..end].iter().collect()), end)
            }
            Some(&c) if ident(c) && !c.is_ascii_digit() => {
                let n = chars[i + 1..].iter().take_while(|&&c| ident(c)).count();
                (
                    Piece::Var(chars[i + 1..i + 1 + n].iter().collect()),
                    i + 1 + n,
                )
            }
            Some(&c) if "?#@*!$-0123456789".contains(c) => (Piece::Opaque(format!("${c}")), i + 2),
            _ => (Piece::Lit("$".into()), i + 1),
        }
    }

    /// The simple commands of a script, in order.
    pub fn commands(script: &str) -> Vec<Simple> {
        let joined = script.replace("\\\n", " ");
        let mut out = Vec::new();
        for line in joined.lines() {
            lex_line(line, &mut out);
        }
        out
    }

    fn lex_line(line: &str, out: &mut Vec<Simple>) {
        let chars: Vec<char> = line.chars().collect();
        let mut cmd = Simple {
            line: line.trim().to_string(),
            ..Default::default()
        };
        let mut word: Option<Word> = None;
        let mut pending: Option<u32> = None;
        let finish_word = |word: &mut Option<Word>, cmd: &mut Simple, pending: &mut Option<u32>| {
            if let Some(w) = word.take() {
                match pending.take() {
                    Some(fd) => cmd.redirects.push(Redirect {
                        fd,
                        target: Some(w),
                    }),
                    None => cmd.words.push(w),
                }
            }
        };
        let finish_cmd = |word: &mut Option<Word>,
                          cmd: &mut Simple,
                          pending: &mut Option<u32>,
                          out: &mut Vec<Simple>| {
            finish_word(word, cmd, pending);
            if !cmd.words.is_empty() || !cmd.redirects.is_empty() {
                let line = cmd.line.clone();
                out.push(std::mem::replace(
                    cmd,
                    Simple {
                        line,
                        ..Default::default()
                    },
                ));
            }
        };
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            match c {
                ' ' | '\t' => {
                    finish_word(&mut word, &mut cmd, &mut pending);
                    i += 1;
                }
                '#' if word.is_none() => break,
                ';' | '|' | '(' | ')' => {
                    finish_cmd(&mut word, &mut cmd, &mut pending, out);
                    i += if c == '|' && next == Some('|') { 2 } else { 1 };
                }
                '&' if next != Some('>') => {
                    finish_cmd(&mut word, &mut cmd, &mut pending, out);
                    i += if next == Some('&') { 2 } else { 1 };
                }
                '>' | '<' | '&' => {
                    let digits = word
                        .as_ref()
                        .and_then(Word::literal)
                        .and_then(|s| s.parse::<u32>().ok());
                    let fd = match digits {
                        Some(fd) if c != '&' => {
                            word = None;
                            fd
                        }
                        _ => {
                            finish_word(&mut word, &mut cmd, &mut pending);
                            if c == '<' { 0 } else { 1 }
                        }
                    };
                    i += 1;
                    if c == '&' || chars.get(i) == Some(&'>') {
                        i += 1; // `&>` or `>>`
                    }
                    if chars.get(i) == Some(&'&') {
                        i += 1;
                        while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '-') {
                            i += 1;
                        }
                        cmd.redirects.push(Redirect { fd, target: None });
                    } else {
                        while chars.get(i) == Some(&' ') {
                            i += 1;
                        }
                        pending = Some(fd);
                    }
                }
                '\'' => {
                    let w = word.get_or_insert_with(Word::default);
                    match chars[i + 1..].iter().position(|&c| c == '\'') {
                        Some(n) => {
                            for &c in &chars[i + 1..i + 1 + n] {
                                w.lit(c);
                            }
                            i += n + 2;
                        }
                        None => {
                            w.0.push(Piece::Opaque(chars[i..].iter().collect()));
                            i = chars.len();
                        }
                    }
                }
                '"' => {
                    let w = word.get_or_insert_with(Word::default);
                    let mut j = i + 1;
                    let mut closed = false;
                    while j < chars.len() {
                        match chars[j] {
                            '"' => {
                                closed = true;
                                j += 1;
                                break;
                            }
                            '\\' if chars.get(j + 1).is_some_and(|c| "\"\\$`".contains(*c)) => {
                                w.lit(chars[j + 1]);
                                j += 2;
                            }
                            '$' => {
                                let (p, after) = dollar(&chars, j);
                                match p {
                                    Piece::Lit(_) => w.lit('$'),
                                    p => w.0.push(p),
                                }
                                j = after;
                            }
                            '`' => {
                                w.0.push(Piece::Opaque("`".into()));
                                j += 1;
                            }
                            c => {
                                w.lit(c);
                                j += 1;
                            }
                        }
                    }
                    if !closed {
                        w.0.push(Piece::Opaque("unterminated \"".into()));
                    }
                    i = j;
                }
                '$' => {
                    let (p, after) = dollar(&chars, i);
                    let w = word.get_or_insert_with(Word::default);
                    match p {
                        Piece::Lit(_) => w.lit('$'),
                        p => w.0.push(p),
                    }
                    i = after;
                }
                '`' => {
                    word.get_or_insert_with(Word::default)
                        .0
                        .push(Piece::Opaque("`".into()));
                    i += 1;
                }
                '\\' => {
                    if let Some(n) = next {
                        word.get_or_insert_with(Word::default).lit(n);
                    }
                    i += 2;
                }
                c => {
                    word.get_or_insert_with(Word::default).lit(c);
                    i += 1;
                }
            }
        }
        finish_cmd(&mut word, &mut cmd, &mut pending, out);
    }
}

/// One shell script of a recipe and the variables it sees.
struct Script {
    place: String,
    text: String,
    vars: BTreeMap<String, String>,
}

/// One `mcpbench …` command of a recipe.
struct Invocation {
    place: String,
    cmd: shell::Simple,
    vars: BTreeMap<String, String>,
}

impl Invocation {
    /// The command's arguments (after `mcpbench`), its variables expanded, `overrides` first.
    fn args(&self, overrides: &[(&str, &str)]) -> Result<Vec<String>, String> {
        let lookup = |name: &str| {
            overrides
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
                .or_else(|| self.vars.get(name).cloned())
        };
        self.cmd.argv()[1..]
            .iter()
            .map(|w| w.expand(&lookup))
            .collect()
    }

    fn subcommand(&self) -> String {
        self.args(&[])
            .ok()
            .and_then(|a| a.first().cloned())
            .unwrap_or_default()
    }

    fn stdout(&self) -> Option<String> {
        let lookup = |name: &str| self.vars.get(name).cloned();
        self.cmd.stdout().map(|w| {
            w.expand(&lookup)
                .unwrap_or_else(|e| panic!("{}: `{}`: {e}", self.place, self.cmd.line))
        })
    }
}

/// A string-valued mapping of a YAML document (`env:`, `variables:`).
fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The shell scripts of a GitHub Actions workflow (`run:` of every step) or a GitLab CI file
/// (`before_script`, `script`, `after_script` of every job and template).
fn scripts(file: &str, doc: &Value) -> Vec<Script> {
    let mut out = Vec::new();
    if let Some(jobs) = doc["jobs"].as_object() {
        let top = string_map(&doc["env"]);
        for (job_name, job) in jobs {
            let steps = job["steps"].as_array().cloned().unwrap_or_default();
            for (i, step) in steps.iter().enumerate() {
                if let Some(run) = step["run"].as_str() {
                    let mut vars = top.clone();
                    vars.extend(string_map(&job["env"]));
                    vars.extend(string_map(&step["env"]));
                    out.push(Script {
                        place: format!(
                            "{file}: jobs.{job_name}.steps[{i}] ({})",
                            step["name"].as_str().unwrap_or("unnamed")
                        ),
                        text: run.to_string(),
                        vars,
                    });
                }
            }
        }
    } else {
        let top = string_map(&doc["variables"]);
        for (job_name, job) in doc.as_object().expect("a mapping") {
            for key in ["before_script", "script", "after_script"] {
                let entries = match &job[key] {
                    Value::String(s) => vec![s.clone()],
                    Value::Array(a) => a
                        .iter()
                        .map(|e| {
                            e.as_str()
                                .unwrap_or_else(|| panic!("{file}: {job_name}.{key}: not a string"))
                                .to_string()
                        })
                        .collect(),
                    _ => continue,
                };
                let mut vars = top.clone();
                vars.extend(string_map(&job["variables"]));
                for (i, text) in entries.into_iter().enumerate() {
                    out.push(Script {
                        place: format!("{file}: {job_name}.{key}[{i}]"),
                        text,
                        vars: vars.clone(),
                    });
                }
            }
        }
    }
    out
}

fn invocations(file: &str, doc: &Value) -> Vec<Invocation> {
    scripts(file, doc)
        .into_iter()
        .flat_map(|s| {
            shell::commands(&s.text)
                .into_iter()
                .filter(shell::Simple::is_mcpbench)
                .map(move |cmd| Invocation {
                    place: s.place.clone(),
                    cmd,
                    vars: s.vars.clone(),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A recipe file of the repository, read.
fn recipe(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(rel)).unwrap();
    yaml::parse(rel, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// Every problem with the recipe's mcpbench commands: each must parse with our command line
/// and use only flags its subcommand's `--help` lists. `subcommands` must all be there.
fn command_problems(file: &str, doc: &Value, subcommands: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let all = invocations(file, doc);
    let mut help: BTreeMap<String, String> = BTreeMap::new();
    for inv in &all {
        let args = match inv.args(&[]) {
            Ok(a) => a,
            Err(e) => {
                problems.push(format!("{}: `{}`: {e}", inv.place, inv.cmd.line));
                continue;
            }
        };
        if let Err(e) =
            Cli::try_parse_from(std::iter::once("mcpbench".to_string()).chain(args.clone()))
        {
            problems.push(format!(
                "{}: `{}` is refused by mcpbench's command line:\n{e}",
                inv.place, inv.cmd.line
            ));
            continue;
        }
        let sub = args[0].clone();
        let text = help.entry(sub.clone()).or_insert_with(|| {
            let (code, out, err) = crate::support::mcpbench(&[&sub, "--help"], &repo());
            assert_eq!(code, 0, "mcpbench {sub} --help: {err}");
            out
        });
        for a in &args[1..] {
            if a == "--" {
                break;
            }
            if a.starts_with('-')
                && a.len() > 1
                && !a[1..].starts_with(|c: char| c.is_ascii_digit())
            {
                let flag = a.split('=').next().unwrap();
                let listed = text
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .any(|w| w == flag);
                if !listed {
                    problems.push(format!(
                        "{}: `{}`: `{flag}` is not in `mcpbench {sub} --help`",
                        inv.place, inv.cmd.line
                    ));
                }
            }
        }
    }
    for sub in subcommands {
        if !all.iter().any(|i| i.subcommand() == *sub) {
            problems.push(format!("{file}: no `mcpbench {sub}` command"));
        }
    }
    problems
}

/// The value of `--NAME VALUE` or `--NAME=VALUE` in an argument list.
fn flag<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        names.iter().find_map(|n| {
            if a == n {
                args.get(i + 1).map(String::as_str)
            } else {
                a.strip_prefix(n).and_then(|r| r.strip_prefix('='))
            }
        })
    })
}

/// The positional arguments after the subcommand (flags and their values left out).
fn positionals(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        if a.starts_with('-') {
            // Every flag the recipes use takes a value, except these.
            if !a.contains('=')
                && ![
                    "--no-tui",
                    "--quiet",
                    "-q",
                    "--exit-on-finish",
                    "--connect",
                    "--insecure",
                ]
                .contains(&a.as_str())
            {
                it.next();
            }
        } else {
            out.push(a.as_str());
        }
    }
    out
}

/// The one command of this subcommand (several must be the same command: a baseline is only
/// comparable with a run made the same way).
fn the<'a>(file: &str, all: &'a [Invocation], sub: &str) -> &'a Invocation {
    let found: Vec<&Invocation> = all.iter().filter(|i| i.subcommand() == sub).collect();
    assert!(!found.is_empty(), "{file}: no `mcpbench {sub}`");
    for other in &found[1..] {
        assert_eq!(
            (other.args(&[]).unwrap(), other.stdout()),
            (found[0].args(&[]).unwrap(), found[0].stdout()),
            "{file}: `{}` ({}) and `{}` ({}) differ",
            other.cmd.line,
            other.place,
            found[0].cmd.line,
            found[0].place
        );
    }
    found[0]
}

/// Runs an invocation for real in `cwd` (stdout to its redirection's file, relative to `cwd`):
/// (exit code, stdout if not redirected, stderr).
fn execute(
    inv: &Invocation,
    overrides: &[(&str, &str)],
    extra: &[&str],
    cwd: &Path,
) -> (i32, String, String) {
    let mut args = inv.args(overrides).unwrap();
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpbench"));
    cmd.args(&args).current_dir(cwd).env("RUST_LOG", "warn");
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    match inv.stdout() {
        Some(file) => cmd.stdout(std::fs::File::create(cwd.join(file)).unwrap()),
        None => cmd.stdout(Stdio::piped()),
    };
    let out = cmd.output().expect("run mcpbench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A JUnit file read by Python's XML parser: (test cases, names of those that failed).
pub(crate) fn junit(path: &Path) -> (usize, Vec<String>) {
    const READ: &str = "import sys, xml.etree.ElementTree as ET\n\
        root = ET.parse(sys.argv[1]).getroot()\n\
        assert root.tag in ('testsuites', 'testsuite'), root.tag\n\
        cases = root.iter('testcase')\n\
        n = 0\n\
        for c in cases:\n\
        \x20   n += 1\n\
        \x20   if c.find('failure') is not None or c.find('error') is not None:\n\
        \x20       print('failed', c.get('name'))\n\
        print('cases', n)\n";
    let out = Command::new("python3")
        .args(["-c", READ])
        .arg(path)
        .output()
        .expect("python3 (the stdio fixture servers need it too)");
    assert!(
        out.status.success(),
        "{} is not JUnit XML: {}\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap_or_default()
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let cases = text
        .lines()
        .find_map(|l| l.strip_prefix("cases "))
        .unwrap()
        .parse()
        .unwrap();
    let failed = text
        .lines()
        .filter_map(|l| l.strip_prefix("failed "))
        .map(str::to_string)
        .collect();
    (cases, failed)
}

/// Copies a directory's files (those named in `only`, if given) and its subdirectories'.
pub(crate) fn copy_dir(from: &Path, to: &Path, only: Option<&[&str]>) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if p.is_dir() {
            copy_dir(&p, &to.join(&name), only);
        } else if only.is_none_or(|o| o.contains(&name.as_str())) {
            std::fs::copy(&p, to.join(&name)).unwrap();
        }
    }
}

/// A CI workspace: the scenario where the recipe expects it, and `results/` (the recipes'
/// server step makes it).
pub(crate) fn workspace(scenario: &str) -> tempfile::TempDir {
    let ws = scratch();
    let dst = ws.path().join(scenario);
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::copy(repo().join(scenario), &dst)
        .unwrap_or_else(|e| panic!("the recipe's scenario {scenario}: {e}"));
    std::fs::create_dir_all(ws.path().join("results")).unwrap();
    ws
}

/// The recipe's probe, run, and compare, for real. `baseline_files`: what the recipe keeps of
/// a main run as the baseline (None: the whole directory).
fn run_recipe(file: &str, baseline_files: Option<&[&str]>) {
    let doc = recipe(file);
    let all = invocations(file, &doc);
    let probe = the(file, &all, "probe");
    let run = the(file, &all, "run");
    let compare = the(file, &all, "compare");

    let fast = servers(ResponseMode::Json, 0, 100, Default::default());
    // Every call of the REST-backed tools waits 250 ms in the backend: p99 far past any CI
    // budget, and the p50 of search-contacts a clear regression.
    let slow = servers(
        ResponseMode::Json,
        0,
        100,
        mock_backend::Knobs {
            latency: Some(mock_backend::Latency::Fixed(Duration::from_millis(250))),
            ..Default::default()
        },
    );
    let (fast_url, slow_url) = (fast.mcp_url(), slow.mcp_url());

    // The readiness loop: 0 once the server answers, 1 (try again) before.
    let here = scratch();
    let (code, out, err) = execute(probe, &[("MCP_URL", &fast_url)], &[], here.path());
    assert_eq!(code, 0, "{}: `{}`: {out}{err}", probe.place, probe.cmd.line);
    let dead = format!("http://127.0.0.1:{}/mcp", crate::support::DEAD_PORT);
    let (code, out, err) = execute(probe, &[("MCP_URL", &dead)], &[], here.path());
    assert_eq!(
        code, 1,
        "a server not up yet must be exit 1 (the loop retries): {out}{err}"
    );

    let args = run.args(&[]).unwrap();
    let output = flag(&args, &["--output", "-o"]).expect("the run names its --output directory");
    let junit_file = run.stdout().expect("the run's JUnit goes to a file");
    assert_eq!(
        flag(&args, &["--format"]),
        Some("junit"),
        "{}",
        run.cmd.line
    );
    let scenario = positionals(&args)
        .first()
        .map(|s| s.to_string())
        .expect("the run's scenario");
    assert_eq!(scenario, SCENARIO, "{file}: the recipe runs {scenario}");
    let short = ["--duration", "3s", "--set", "load.warmup=0s"];
    // The recipe repeats its run ($REPEAT, 3), and so does this test: with two runs a side the
    // between-runs t-test needs |t| over 63.7 (one degree of freedom), which a 25-fold p50
    // regression missed on a loaded machine (t = 56).
    assert_eq!(
        run.vars.get("REPEAT").map(String::as_str),
        Some("3"),
        "{file}"
    );
    let fast = [("MCP_URL", fast_url.as_str())];
    let slow = [("MCP_URL", slow_url.as_str())];

    // Main: a run against the fast server, kept as the baseline when its thresholds held.
    let main = workspace(&scenario);
    let (code, _, err) = execute(run, &fast, &short, main.path());
    let dir = main.path().join(output);
    let runs: Vec<_> = ["run-1", "run-2", "run-3"]
        .iter()
        .map(|r| valid_summary(&dir.join(r)))
        .collect();
    let summary = &runs[2];
    let thresholds = summary["thresholds"]
        .as_array()
        .expect("thresholds")
        .clone();
    let names: Vec<&str> = thresholds
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"p99") && names.contains(&"error_rate"),
        "{scenario}: thresholds {names:?}"
    );
    // The exit code is 1 when a threshold was breached in any of the runs, and the JUnit
    // report has a suite per run: a loaded machine can breach p99 in one run of three.
    let held = runs
        .iter()
        .flat_map(|s| s["thresholds"].as_array().expect("thresholds"))
        .all(|t| t["passed"] == true);
    let all: Vec<_> = runs.iter().map(|s| &s["thresholds"]).collect();
    assert_eq!(code, if held { 0 } else { 1 }, "{err}\n{all:#?}");
    let error_rate = thresholds
        .iter()
        .find(|t| t["name"] == "error_rate")
        .unwrap();
    assert_eq!(
        error_rate["passed"], true,
        "the reference server fails nothing: {error_rate}"
    );
    let (cases, failed) = junit(&main.path().join(&junit_file));
    assert!(
        cases > 2 * thresholds.len(),
        "{cases} test cases: a suite per run"
    );
    assert_eq!(
        failed.is_empty(),
        held,
        "JUnit failures {failed:?} vs thresholds {all:#?}"
    );
    for f in ["report.html", "report.md", "summary.json", "latency.hlog"] {
        for r in ["run-1", "run-2", "run-3"] {
            assert!(
                dir.join(r).join(f).is_file(),
                "{f} missing from {}/{r}",
                dir.display()
            );
        }
    }

    // A pull request that made the server slow: thresholds breached, a regression.
    let pr = workspace(&scenario);
    let (code, _, err) = execute(run, &slow, &short, pr.path());
    assert_eq!(code, 1, "a breached threshold is exit 1: {err}");
    let slow_summary = valid_summary(&pr.path().join(output).join("run-1"));
    let p99 = slow_summary["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "p99")
        .unwrap()
        .clone();
    assert_eq!(p99["passed"], false, "{p99}");
    let (_, failed) = junit(&pr.path().join(&junit_file));
    assert!(
        failed.iter().any(|f| f.starts_with("p99")),
        "the breached threshold is a failed test case: {failed:?}"
    );

    let cmp_args = compare.args(&[]).unwrap();
    let pos = positionals(&cmp_args);
    assert_eq!(pos.len(), 2, "compare BASE CURRENT: {}", compare.cmd.line);
    assert_eq!(
        pos[1], output,
        "{file}: compare's CURRENT is the run's --output"
    );
    let (base, report) = (pos[0].to_string(), compare.stdout());
    let read_report = |ws: &Path, stdout: String| match &report {
        Some(f) => std::fs::read_to_string(ws.join(f)).unwrap(),
        None => stdout,
    };

    copy_dir(&dir, &pr.path().join(&base), baseline_files);
    let (code, out, err) = execute(compare, &[], &[], pr.path());
    let md = read_report(pr.path(), out);
    assert_eq!(code, 1, "a regression is exit 1: {err}\n{md}");
    assert!(md.contains("**regressed**"), "{md}");

    copy_dir(&dir, &main.path().join(&base), baseline_files);
    let (code, out, err) = execute(compare, &[], &[], main.path());
    let md = read_report(main.path(), out);
    assert_eq!(code, 0, "a run compared with itself: {err}\n{md}");
    assert!(md.contains("**0 regressed**"), "{md}");
}

/// Python with PyYAML, if there is one: the pinned interop venv's, else the system's.
fn pyyaml() -> Option<std::path::PathBuf> {
    [
        repo().join(".cache/interop-venv/bin/python"),
        "python3".into(),
    ]
    .into_iter()
    .find(|p| {
        Command::new(p)
            .args(["-c", "import yaml"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn recipes_are_yaml() {
    let python = pyyaml();
    // The GitHub Action and its usage example (tests/action.rs) are read the same way.
    for file in [
        GITHUB,
        GITLAB,
        "action.yml",
        "docs/ci/github-action-usage.yml",
    ] {
        let ours = recipe(file);
        let Some(python) = &python else {
            eprintln!(
                "no PyYAML here (interop/setup.sh installs it): {file} read by our reader only"
            );
            continue;
        };
        let out = Command::new(python)
            .args([
                "-c",
                "import json, sys, yaml\njson.dump(yaml.load(open(sys.argv[1]), Loader=yaml.BaseLoader), sys.stdout)",
            ])
            .arg(repo().join(file))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "PyYAML refuses {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(ours, theirs, "{file}: PyYAML reads it differently");
    }
}

#[test]
fn every_mcpbench_command_in_the_recipes_is_valid() {
    for file in [GITHUB, GITLAB] {
        let problems = command_problems(file, &recipe(file), &["serve", "probe", "run", "compare"]);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

/// The checks above fail on the mistakes they are for.
#[test]
fn the_recipe_checks_catch_mistakes() {
    let doc = |text: &str| yaml::parse("t.yml", text);
    let good = "env:\n  MCP_URL: http://localhost:8080/mcp\njobs:\n  load:\n    steps:\n      - run: |\n          mcpbench probe \"$MCP_URL\" --timeout 2s\n          code=0\n          mcpbench run s.toml --url \"$MCP_URL\" --no-tui --format junit > j.xml || code=$?\n";
    let problems = |text: &str| command_problems("t.yml", &doc(text).unwrap(), &["probe", "run"]);
    assert_eq!(problems(good), Vec::<String>::new());
    let cases = [
        ("--no-tui", "--no-tuii", "--no-tuii"),
        ("--format junit", "--format xml", "xml"),
        ("mcpbench probe", "mcpbench prob", "prob"),
        (
            "\"$MCP_URL\" --timeout",
            "\"$MCP_URI\" --timeout",
            "$MCP_URI",
        ),
        (
            "mcpbench run s.toml",
            "mcpbnech run s.toml",
            "no `mcpbench run`",
        ),
    ];
    for (from, to, expect) in cases {
        let bad = good.replacen(from, to, 1);
        assert_ne!(bad, good);
        let p = problems(&bad).join("\n");
        assert!(p.contains(expect), "{to}: {p}");
    }
    // Short flags are found in --help too (`-H, --header`).
    let short = good.replacen("--timeout 2s", "-H 'X: y' --timeout 2s", 1);
    assert_eq!(problems(&short), Vec::<String>::new());

    for (bad, expect) in [
        ("a: b: c\n", "cannot hold `: `"),
        ("a:\n  - echo \"x: y\"\n", "suspicious key"),
        ("a:\n\t- x\n", "tab"),
        ("a: 1\na: 2\n", "duplicate key"),
        ("a: >\n  x\n", "folded"),
        ("a: *x\n", "aliases"),
        ("a: b\n  c\n", "continuation"),
        ("a: \"b\n", "end on its line"),
    ] {
        let e = doc(bad).expect_err(bad);
        assert!(e.contains(expect), "{bad:?}: {e}");
    }
    assert_eq!(
        doc("a: [x, 'y z']\nb:\n- c\n- d: e\n  f: |\n    one\n\n    two\n").unwrap(),
        serde_json::json!({"a": ["x", "y z"], "b": ["c", {"d": "e", "f": "one\n\ntwo\n"}]})
    );

    let cmds = shell::commands(
        "if mcpbench probe \"$U\" -H 'A: ${T}'; then exit 0; fi\nx=1 mcpbench run a > o.xml 2>&1 || c=$?",
    );
    let mcp: Vec<_> = cmds.iter().filter(|c| c.is_mcpbench()).collect();
    assert_eq!(mcp.len(), 2);
    let lookup = |n: &str| (n == "U").then(|| "http://u".to_string());
    let words: Vec<String> = mcp[0]
        .argv()
        .iter()
        .map(|w| w.expand(&lookup).unwrap())
        .collect();
    assert_eq!(words, ["mcpbench", "probe", "http://u", "-H", "A: ${T}"]);
    assert_eq!(
        mcp[1].stdout().and_then(shell::Word::literal),
        Some("o.xml")
    );
}

/// The steps are wired together: the files the run writes are the ones reported and uploaded,
/// even after a failed step, and the baseline pull requests read is the one main keeps.
#[test]
fn recipes_wire_the_results_into_the_ci() {
    // GitHub Actions
    let gh = recipe(GITHUB);
    let all = invocations(GITHUB, &gh);
    let run = the(GITHUB, &all, "run");
    let args = run.args(&[]).unwrap();
    let output = flag(&args, &["--output", "-o"]).unwrap().to_string();
    let junit_file = run.stdout().unwrap();
    let compare = the(GITHUB, &all, "compare");
    let cmp_args = compare.args(&[]).unwrap();
    let base = positionals(&cmp_args)[0].to_string();
    assert!(gh["on"]["pull_request"].is_string() || gh["on"]["pull_request"].is_object());
    assert!(
        gh["on"]["push"].is_object(),
        "main's runs make the baseline"
    );
    let steps = gh["jobs"].as_object().unwrap().values().next().unwrap()["steps"]
        .as_array()
        .unwrap()
        .clone();
    let uses = |prefix: &str| -> Vec<&Value> {
        steps
            .iter()
            .filter(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
            .collect()
    };
    for s in &steps {
        if let Some(u) = s["uses"].as_str() {
            let (_, version) = u
                .split_once('@')
                .unwrap_or_else(|| panic!("{u}: not pinned"));
            assert!(
                version
                    .strip_prefix('v')
                    .is_some_and(|m| m.parse::<u32>().is_ok()),
                "{u}: pin actions by major version"
            );
        }
    }
    let always = |s: &Value| s["if"].as_str().is_some_and(|c| c.contains("always()"));
    let upload = uses("actions/upload-artifact@")[0];
    assert!(always(upload), "the results are uploaded whatever failed");
    let uploaded = upload["with"]["path"]
        .as_str()
        .unwrap()
        .trim_end_matches('/');
    for f in [&output, &junit_file] {
        assert!(
            f.starts_with(uploaded),
            "{f} is not in the artifact ({uploaded})"
        );
    }
    let reporter = uses("dorny/test-reporter@")[0];
    assert!(always(reporter));
    assert_eq!(reporter["with"]["path"].as_str(), Some(junit_file.as_str()));
    assert_eq!(reporter["with"]["reporter"].as_str(), Some("java-junit"));
    let restore = uses("actions/cache/restore@")[0];
    let save = uses("actions/cache/save@")[0];
    assert_eq!(
        restore["with"]["path"].as_str(),
        Some(base.as_str()),
        "compare reads the restored baseline"
    );
    assert_eq!(save["with"]["path"].as_str(), Some(base.as_str()));
    let prefix = restore["with"]["restore-keys"].as_str().unwrap();
    assert!(
        save["with"]["key"].as_str().unwrap().starts_with(prefix),
        "main saves what PRs restore"
    );
    assert!(
        save["if"].as_str().unwrap().contains("push"),
        "only main's runs become the baseline"
    );
    let keep = steps
        .iter()
        .find(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.trim() == format!("cp -r {output} {base}"))
        })
        .expect("a step copies the run to the baseline");
    assert_eq!(keep["if"], save["if"]);
    let last = steps.last().unwrap();
    assert!(
        always(last),
        "the last step fails the job on a breach or a regression"
    );
    let gate = last["run"].as_str().unwrap();
    assert!(gate.contains("exit \"$status\""), "{gate}");

    // GitLab CI
    let gl = recipe(GITLAB);
    let all = invocations(GITLAB, &gl);
    let run = the(GITLAB, &all, "run");
    let args = run.args(&[]).unwrap();
    let output = flag(&args, &["--output", "-o"]).unwrap().to_string();
    let junit_file = run.stdout().unwrap();
    let template = &gl[".mcpbench"];
    let artifacts = &template["artifacts"];
    assert_eq!(artifacts["when"], "always");
    assert_eq!(
        artifacts["reports"]["junit"].as_str(),
        Some(junit_file.as_str())
    );
    assert!(
        artifacts["expose_as"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    let paths: Vec<&str> = artifacts["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    for f in [&output, &junit_file] {
        assert!(
            paths.iter().any(|p| f.starts_with(p.trim_end_matches('/'))),
            "{f} not in {paths:?}"
        );
    }
    for (job, rule) in [
        ("mcpbench-main", "$CI_DEFAULT_BRANCH"),
        ("mcpbench-mr", "merge_request_event"),
    ] {
        assert_eq!(gl[job]["extends"], ".mcpbench");
        assert!(
            gl[job]["rules"][0]["if"].as_str().unwrap().contains(rule),
            "{job}"
        );
    }
    let mr_script: String = gl["mcpbench-mr"]["script"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    for needed in [
        "job=mcpbench-main",
        "summary.json",
        "latency.hlog",
        &format!("raw/{output}"),
    ] {
        assert!(
            mr_script.contains(needed),
            "the MR job's baseline download lacks {needed}"
        );
    }
}

#[test]
fn github_recipe_runs() {
    run_recipe(GITHUB, None);
}

#[test]
fn gitlab_recipe_runs() {
    // The MR job downloads these three files of main's run into baseline/.
    run_recipe(
        GITLAB,
        Some(&["summary.json", "latency.hlog", "timeseries.csv"]),
    );
}

/// scenarios/ci.toml: the built-in servers by default, 30 s at most, gated on p99 and errors.
#[test]
fn ci_scenario_is_small_and_gated() {
    let text = std::fs::read_to_string(repo().join(SCENARIO)).unwrap();
    let t: toml::Table = text.parse().unwrap();
    assert!(
        !t.contains_key("target") && !t.contains_key("targets"),
        "loopback by default"
    );
    let secs = |v: &toml::Value| -> f64 {
        let s = v.as_str().unwrap();
        let (n, unit) = s.split_at(s.find(|c: char| c.is_alphabetic()).unwrap());
        n.parse::<f64>().unwrap()
            * match unit {
                "s" => 1.0,
                "m" => 60.0,
                "ms" => 0.001,
                u => panic!("unit {u}"),
            }
    };
    assert!(secs(&t["load"]["duration"]) <= 30.0);
    assert!(secs(&t["load"]["warmup"]) < secs(&t["load"]["duration"]));
    for key in ["p99", "error_rate"] {
        assert!(t["thresholds"].get(key).is_some(), "thresholds.{key}");
    }
    let (code, out, err) = crate::support::mcpbench(&["validate", SCENARIO], &repo());
    assert_eq!(code, 0, "{out}{err}");
}
