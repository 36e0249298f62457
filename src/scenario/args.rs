//! Tool arguments as compiled templates with generators.
//!
//! A scenario writes arguments as TOML; strings may hold generator expressions:
//!
//! | expression            | yields                                                     |
//! |-----------------------|------------------------------------------------------------|
//! | `${pick:a,b,c}`       | one of the options, uniformly at random                    |
//! | `${range:1..1000}`    | an integer in the inclusive range, uniformly at random     |
//! | `${seq}`, `${seq:100}`| 1, 2, 3 … (or from 100), one sequence per workload entry   |
//! | `${random:16}`        | a random alphanumeric string of that length                |
//! | `${env:NAME}`         | the environment variable, read once when the plan is built |
//! | `${row:field}`        | the field of the current row of the entry's `rows` file    |
//! | `$${`                 | a literal `${`                                             |
//!
//! A string that is exactly one `range` or `seq` expression becomes a JSON integer, and
//! exactly one `pick` whose options are all numbers becomes a JSON number; anything else is
//! interpolated into a string. The template is compiled once into literal byte runs and
//! generator slots, so writing a request body is a few `memcpy`s and integer formats — no
//! allocation, no JSON tree.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use rand::{Rng, RngExt};

use crate::protocol::jsonrpc::write_json_str;

/// A generator expression or argument value that can't be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ArgError {
    /// Dotted path inside `arguments` (empty for the whole table).
    pub path: String,
    pub message: String,
    pub hint: &'static str,
}

const EXPR_HINT: &str = "generators: ${pick:a,b,c}, ${range:1..100}, ${seq}, ${seq:START}, ${random:LEN}, ${env:NAME}, ${row:FIELD}; write $${ for a literal ${";

#[derive(Debug, Clone)]
enum Gen {
    Pick {
        raw: Vec<Box<[u8]>>,
        in_string: Vec<Box<[u8]>>,
    },
    Range {
        lo: i64,
        hi: i64,
    },
    Seq(Arc<AtomicI64>),
    Random {
        len: usize,
    },
    /// A field of the request's row: its index among the row file's fields.
    Row(usize),
}

/// One field of one row: the JSON value, and the inside of a JSON string.
type Field = (Box<[u8]>, Box<[u8]>);

/// Rows of a JSON Lines file, pre-rendered: every field of every row as a JSON value and as
/// the inside of a JSON string. Requests take rows in order, wrapping around.
#[derive(Debug)]
pub struct Rows {
    fields: Vec<String>,
    /// [row][field] → (JSON value, string content)
    values: Vec<Vec<Field>>,
    next: std::sync::atomic::AtomicUsize,
}

impl Rows {
    /// Reads a JSON Lines file of objects; every row must have every field of the first.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut fields: Vec<String> = Vec::new();
        let mut values = Vec::new();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: not a JSON object: {e}", path.display(), n + 1))?;
            if fields.is_empty() {
                fields = obj.keys().cloned().collect();
            }
            let mut row = Vec::with_capacity(fields.len());
            for f in &fields {
                let v = obj.get(f).ok_or_else(|| {
                    format!("{}:{}: the row has no field `{f}`", path.display(), n + 1)
                })?;
                let raw = serde_json::to_vec(v).unwrap_or_default();
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                row.push((raw.into_boxed_slice(), escaped(&text).into_boxed_slice()));
            }
            values.push(row);
        }
        if values.is_empty() {
            return Err(format!("{} has no rows", path.display()));
        }
        Ok(Rows {
            fields,
            values,
            next: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn field(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f == name)
    }

    fn take(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.values.len()
    }
}

#[derive(Debug, Clone, Copy)]
enum Seg {
    Lit { start: u32, end: u32 },
    Gen { idx: u32, in_string: bool },
}

/// Compiled arguments (a JSON value) with generator slots.
#[derive(Debug, Clone)]
pub struct ArgTemplate {
    segs: Vec<Seg>,
    pool: Vec<u8>,
    gens: Vec<Gen>,
    rows: Option<Arc<Rows>>,
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

impl ArgTemplate {
    /// Compiles a TOML table of arguments. `env` looks up environment variables; `rows` feeds
    /// `${row:field}`.
    pub fn compile(
        table: &toml::Table,
        env: &dyn Fn(&str) -> Option<String>,
        rows: Option<Arc<Rows>>,
    ) -> Result<Self, ArgError> {
        let mut b = Builder {
            t: ArgTemplate {
                segs: Vec::new(),
                pool: Vec::new(),
                gens: Vec::new(),
                rows,
            },
            env,
        };
        b.table(table, "")?;
        Ok(b.t)
    }

    /// The empty object `{}`.
    pub fn empty() -> Self {
        let mut t = ArgTemplate {
            segs: Vec::new(),
            pool: Vec::new(),
            gens: Vec::new(),
            rows: None,
        };
        t.lit(b"{}");
        t
    }

    /// Arguments that are this JSON value every time (a replayed request's).
    pub fn json(value: &serde_json::Value) -> Self {
        let mut t = ArgTemplate {
            segs: Vec::new(),
            pool: Vec::new(),
            gens: Vec::new(),
            rows: None,
        };
        t.lit(value.to_string().as_bytes());
        t
    }

    fn lit(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let start = self.pool.len() as u32;
        self.pool.extend_from_slice(bytes);
        let end = self.pool.len() as u32;
        match self.segs.last_mut() {
            Some(Seg::Lit { end: e, .. }) if *e == start => *e = end,
            _ => self.segs.push(Seg::Lit { start, end }),
        }
    }

    /// True when there are no generators: every request carries the same arguments.
    pub fn is_static(&self) -> bool {
        self.gens.is_empty()
    }

    /// Appends one rendering of the arguments (a JSON value) to `out`.
    #[inline]
    pub fn write<R: Rng>(&self, out: &mut Vec<u8>, rng: &mut R) {
        self.render(out, rng, true);
    }

    /// Renders like [`ArgTemplate::write`]; `advance` false leaves sequences and row cursors
    /// where they are (for checking samples before the run).
    #[inline]
    fn render<R: Rng>(&self, out: &mut Vec<u8>, rng: &mut R, advance: bool) {
        let mut num = itoa::Buffer::new();
        // One row per request, whichever fields of it the arguments use.
        let row = self.rows.as_ref().map(|r| {
            let i = if advance {
                r.take()
            } else {
                rng.random_range(0..r.values.len())
            };
            (r, i)
        });
        for seg in &self.segs {
            match *seg {
                Seg::Lit { start, end } => {
                    out.extend_from_slice(&self.pool[start as usize..end as usize])
                }
                Seg::Gen { idx, in_string } => match &self.gens[idx as usize] {
                    Gen::Pick {
                        raw,
                        in_string: esc,
                    } => {
                        let i = rng.random_range(0..raw.len());
                        out.extend_from_slice(if in_string { &esc[i] } else { &raw[i] });
                    }
                    Gen::Range { lo, hi } => {
                        out.extend_from_slice(num.format(rng.random_range(*lo..=*hi)).as_bytes())
                    }
                    Gen::Seq(next) => {
                        let v = if advance {
                            next.fetch_add(1, Ordering::Relaxed)
                        } else {
                            next.load(Ordering::Relaxed)
                        };
                        out.extend_from_slice(num.format(v).as_bytes())
                    }
                    Gen::Random { len } => {
                        out.extend((0..*len).map(|_| ALNUM[rng.random_range(0..ALNUM.len())]));
                    }
                    Gen::Row(f) => {
                        if let Some((rows, i)) = row {
                            let (raw, esc) = &rows.values[i][*f];
                            out.extend_from_slice(if in_string { esc } else { raw });
                        }
                    }
                },
            }
        }
    }

    /// One rendering as a JSON value (for checking against a tool's input schema).
    pub fn sample<R: Rng>(&self, rng: &mut R) -> serde_json::Value {
        let mut out = Vec::new();
        self.render(&mut out, rng, false);
        serde_json::from_slice(&out).unwrap_or(serde_json::Value::Null)
    }
}

struct Builder<'e> {
    t: ArgTemplate,
    env: &'e dyn Fn(&str) -> Option<String>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn err(path: &str, message: String) -> ArgError {
    ArgError {
        path: path.to_string(),
        message,
        hint: EXPR_HINT,
    }
}

enum Piece<'a> {
    Text(String),
    Expr(&'a str),
}

/// Splits a string into text and `${...}` expressions.
fn pieces<'a>(s: &'a str, path: &str) -> Result<Vec<Piece<'a>>, ArgError> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        text.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(r) = after.strip_prefix("$${") {
            text.push_str("${");
            rest = r;
        } else if let Some(r) = after.strip_prefix("${") {
            let close = r
                .find('}')
                .ok_or_else(|| err(path, format!("unclosed `${{` in {s:?}")))?;
            if !text.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut text)));
            }
            out.push(Piece::Expr(&r[..close]));
            rest = &r[close + 1..];
        } else {
            text.push('$');
            rest = &after[1..];
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

impl Builder<'_> {
    fn table(&mut self, table: &toml::Table, path: &str) -> Result<(), ArgError> {
        self.t.lit(b"{");
        for (i, (k, v)) in table.iter().enumerate() {
            if i > 0 {
                self.t.lit(b",");
            }
            let mut key = Vec::new();
            write_json_str(&mut key, k);
            self.t.lit(&key);
            self.t.lit(b":");
            self.value(v, &join(path, k))?;
        }
        self.t.lit(b"}");
        Ok(())
    }

    fn value(&mut self, v: &toml::Value, path: &str) -> Result<(), ArgError> {
        match v {
            toml::Value::String(s) => self.string(s, path),
            toml::Value::Integer(i) => {
                self.t.lit(itoa::Buffer::new().format(*i).as_bytes());
                Ok(())
            }
            toml::Value::Float(f) => {
                let n = serde_json::Number::from_f64(*f).ok_or_else(|| {
                    err(
                        path,
                        format!("{f} cannot be written as JSON (NaN or infinity)"),
                    )
                })?;
                self.t.lit(n.to_string().as_bytes());
                Ok(())
            }
            toml::Value::Boolean(b) => {
                self.t.lit(if *b { b"true" } else { b"false" });
                Ok(())
            }
            toml::Value::Datetime(d) => {
                let mut s = Vec::new();
                write_json_str(&mut s, &d.to_string());
                self.t.lit(&s);
                Ok(())
            }
            toml::Value::Array(items) => {
                self.t.lit(b"[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.t.lit(b",");
                    }
                    self.value(item, &format!("{path}[{i}]"))?;
                }
                self.t.lit(b"]");
                Ok(())
            }
            toml::Value::Table(t) => self.table(t, path),
        }
    }

    fn string(&mut self, s: &str, path: &str) -> Result<(), ArgError> {
        let pieces = pieces(s, path)?;
        if let [Piece::Expr(e)] = pieces.as_slice()
            && let Some(g) = self.typed_whole(e, path)?
        {
            self.push_gen(g, false);
            return Ok(());
        }
        self.t.lit(b"\"");
        for p in pieces {
            match p {
                Piece::Text(text) => self.t.lit(&escaped(&text)),
                Piece::Expr(e) => match self.expr(e, path)? {
                    Expr::Literal(text) => self.t.lit(&escaped(&text)),
                    Expr::Gen(g) => self.push_gen(g, true),
                },
            }
        }
        self.t.lit(b"\"");
        Ok(())
    }

    /// A whole-string expression that yields a non-string JSON value.
    fn typed_whole(&mut self, e: &str, path: &str) -> Result<Option<Gen>, ArgError> {
        match self.expr(e, path)? {
            Expr::Gen(g @ (Gen::Range { .. } | Gen::Seq(_) | Gen::Row(_))) => Ok(Some(g)),
            Expr::Gen(Gen::Pick { raw: _, in_string }) => {
                // The options as written are the insides of their JSON strings.
                if in_string.iter().all(|o| is_json_number(o)) {
                    Ok(Some(Gen::Pick {
                        raw: in_string,
                        in_string: Vec::new(),
                    }))
                } else {
                    // Not numeric: fall back to string interpolation, recompiled there.
                    Ok(None)
                }
            }
            _ => Ok(None),
        }
    }

    fn push_gen(&mut self, g: Gen, in_string: bool) {
        self.t.gens.push(g);
        let idx = (self.t.gens.len() - 1) as u32;
        self.t.segs.push(Seg::Gen { idx, in_string });
    }

    fn expr(&mut self, e: &str, path: &str) -> Result<Expr, ArgError> {
        let (name, arg) = match e.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a)),
            None => (e.trim(), None),
        };
        match (name, arg) {
            ("pick", Some(list)) => {
                let options: Vec<&str> = list.split(',').map(str::trim).collect();
                if options.iter().any(|o| o.is_empty()) {
                    return Err(err(path, format!("`${{{e}}}` has an empty option")));
                }
                let raw = options
                    .iter()
                    .map(|o| {
                        let mut v = Vec::new();
                        write_json_str(&mut v, o);
                        v.into_boxed_slice()
                    })
                    .collect::<Vec<_>>();
                let in_string = options
                    .iter()
                    .map(|o| escaped(o).into_boxed_slice())
                    .collect();
                Ok(Expr::Gen(Gen::Pick { raw, in_string }))
            }
            ("range", Some(r)) => {
                let (lo, hi) = r
                    .split_once("..")
                    .and_then(|(a, b)| {
                        Some((
                            a.trim().parse::<i64>().ok()?,
                            b.trim().trim_start_matches('=').parse::<i64>().ok()?,
                        ))
                    })
                    .ok_or_else(|| {
                        err(
                            path,
                            format!("`${{{e}}}` is not a range like ${{range:1..100}}"),
                        )
                    })?;
                if lo > hi {
                    return Err(err(
                        path,
                        format!("`${{{e}}}`: the range is empty ({lo} > {hi})"),
                    ));
                }
                Ok(Expr::Gen(Gen::Range { lo, hi }))
            }
            ("seq", start) => {
                let start = match start {
                    None => 1,
                    Some(s) => s.trim().parse::<i64>().map_err(|_| {
                        err(
                            path,
                            format!("`${{{e}}}`: the start of a sequence must be an integer"),
                        )
                    })?,
                };
                Ok(Expr::Gen(Gen::Seq(Arc::new(AtomicI64::new(start)))))
            }
            ("random", Some(n)) => {
                let len = n
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&l| l > 0 && l <= 16 * 1024 * 1024)
                    .ok_or_else(|| {
                        err(
                            path,
                            format!("`${{{e}}}`: the length must be an integer from 1 to 16777216"),
                        )
                    })?;
                Ok(Expr::Gen(Gen::Random { len }))
            }
            ("env", Some(var)) => self.env_var(var.trim(), path),
            ("row", Some(field)) => {
                let rows = self.t.rows.as_ref().ok_or_else(|| {
                    err(
                        path,
                        format!("`${{{e}}}` needs a `rows` file on this workload entry"),
                    )
                })?;
                let f = rows.field(field.trim()).ok_or_else(|| {
                    err(
                        path,
                        format!(
                            "`${{{e}}}`: the rows have no field `{}` (fields: {})",
                            field.trim(),
                            rows.fields.join(", ")
                        ),
                    )
                })?;
                Ok(Expr::Gen(Gen::Row(f)))
            }
            (var, None)
                if !var.is_empty()
                    && var
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') =>
            {
                self.env_var(var, path)
            }
            _ => Err(err(path, format!("unknown generator `${{{e}}}`"))),
        }
    }

    fn env_var(&self, var: &str, path: &str) -> Result<Expr, ArgError> {
        (self.env)(var)
            .map(Expr::Literal)
            .ok_or_else(|| err(path, format!("environment variable `{var}` is not set")))
    }
}

enum Expr {
    Literal(String),
    Gen(Gen),
}

/// Whether `text` is a finite JSON number (`1`, `-2.5e3`; not `NaN`, `inf`, `+1` or `0x10`).
fn is_json_number(text: &[u8]) -> bool {
    std::str::from_utf8(text).is_ok_and(|s| {
        s.parse::<f64>().is_ok_and(f64::is_finite)
            && serde_json::from_str::<serde_json::Number>(s).is_ok()
    })
}

/// `s` escaped as the inside of a JSON string (no quotes).
fn escaped(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 2);
    write_json_str(&mut v, s);
    v.pop();
    v.remove(0);
    v
}

/// Expands `${NAME}` / `${env:NAME}` in a plain string (headers, URLs); `$${` is a literal.
pub fn expand_env(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ArgError> {
    let mut out = String::new();
    for p in pieces(s, "")? {
        match p {
            Piece::Text(t) => out.push_str(&t),
            Piece::Expr(e) => {
                let var = e.strip_prefix("env:").unwrap_or(e).trim();
                let v = env(var)
                    .ok_or_else(|| err("", format!("environment variable `{var}` is not set")))?;
                out.push_str(&v);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    fn compile(src: &str) -> Result<ArgTemplate, ArgError> {
        let t: toml::Table = toml::from_str(src).unwrap();
        ArgTemplate::compile(&t, &env, None)
    }

    fn render(t: &ArgTemplate, rng: &mut SmallRng) -> serde_json::Value {
        let mut out = Vec::new();
        t.write(&mut out, rng);
        serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
    }

    #[test]
    fn static_values_render_as_json() {
        let t = compile("s = \"a \\\"q\\\" \\n\"\ni = -3\nf = 1.5\nb = true\narr = [1, \"x\", { k = 2 }]\nobj = { nested = { deep = \"$${literal}\" } }").unwrap();
        assert!(t.is_static());
        let v = render(&t, &mut SmallRng::seed_from_u64(1));
        assert_eq!(
            v,
            serde_json::json!({"s": "a \"q\" \n", "i": -3, "f": 1.5, "b": true, "arr": [1, "x", {"k": 2}], "obj": {"nested": {"deep": "${literal}"}}})
        );
    }

    #[test]
    fn generators_have_their_types_and_ranges() {
        let t = compile(
            "name = \"${pick:Leanne,Ervin}\"\nid = \"${range:5..7}\"\nn = \"${seq:10}\"\nmixed = \"id-${seq}-${pick:a,b}\"\nnum = \"${pick:1,2.5}\"\nr = \"${random:8}\"\ntok = \"${env:TOKEN}\"",
        )
        .unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let mut names = std::collections::HashSet::new();
        for i in 0..200 {
            let v = render(&t, &mut rng);
            names.insert(v["name"].as_str().unwrap().to_string());
            let id = v["id"].as_i64().unwrap();
            assert!((5..=7).contains(&id));
            assert_eq!(v["n"].as_i64().unwrap(), 10 + i);
            let mixed = v["mixed"].as_str().unwrap();
            assert!(mixed.starts_with(&format!("id-{}-", 1 + i)), "{mixed}");
            assert!(v["num"].is_number());
            assert_eq!(v["r"].as_str().unwrap().len(), 8);
            assert_eq!(v["tok"], "s3cret");
        }
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn bad_expressions_name_the_path() {
        let e = compile("a = { b = \"${range:9..1}\" }").unwrap_err();
        assert_eq!(e.path, "a.b");
        assert!(e.message.contains("empty"), "{}", e.message);
        assert!(
            compile("x = \"${nope:1}\"")
                .unwrap_err()
                .message
                .contains("unknown generator")
        );
        assert!(compile("x = \"${pick:a,,b}\"").is_err());
        assert!(compile("x = \"${range:1..\"").is_err());
        assert!(
            compile("x = \"${env:MISSING}\"")
                .unwrap_err()
                .message
                .contains("MISSING")
        );
        assert!(compile("x = \"${random:0}\"").is_err());
    }

    #[test]
    fn rows_feed_whole_values_and_interpolations_from_one_row_per_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        std::fs::write(
            &path,
            "{\"q\": \"Leanne\", \"n\": 1}\n\n{\"q\": \"Ervin \\\"E\\\"\", \"n\": 2}\n",
        )
        .unwrap();
        let rows = Arc::new(Rows::load(&path).unwrap());
        assert_eq!(rows.len(), 2);
        let t: toml::Table = toml::from_str(
            "query = \"${row:q}\"\nlimit = \"${row:n}\"\nlabel = \"#${row:n}: ${row:q}\"",
        )
        .unwrap();
        let tpl = ArgTemplate::compile(&t, &env, Some(rows)).unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let a = render(&tpl, &mut rng);
        let b = render(&tpl, &mut rng);
        let c = render(&tpl, &mut rng);
        assert_eq!(
            a,
            serde_json::json!({"query": "Leanne", "limit": 1, "label": "#1: Leanne"})
        );
        assert_eq!(
            b,
            serde_json::json!({"query": "Ervin \"E\"", "limit": 2, "label": "#2: Ervin \"E\""})
        );
        assert_eq!(c, a, "rows wrap around");
        let e = ArgTemplate::compile(
            &toml::from_str("x = \"${row:nope}\"").unwrap(),
            &env,
            Some(Arc::new(Rows::load(&path).unwrap())),
        )
        .unwrap_err();
        assert!(e.message.contains("no field `nope`"), "{}", e.message);
        assert!(
            ArgTemplate::compile(&toml::from_str("x = \"${row:q}\"").unwrap(), &env, None)
                .unwrap_err()
                .message
                .contains("needs a `rows` file")
        );
        std::fs::write(&path, "{\"q\": 1}\n{\"other\": 2}\n").unwrap();
        assert!(
            Rows::load(&path)
                .unwrap_err()
                .contains(":2: the row has no field `q`")
        );
    }

    #[test]
    fn env_expansion() {
        assert_eq!(
            expand_env("Bearer ${TOKEN}", &env).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand_env("Bearer ${env:TOKEN}", &env).unwrap(),
            "Bearer s3cret"
        );
        assert!(expand_env("${NOPE}", &env).is_err());
    }
}
