//! The reference server's tools: knobs for benchmarking, a synthetic catalog, and REST-backed
//! tools that make the server a reference gateway.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::RangeInclusive;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use super::backend::Backend;
use super::context::Sink;
use super::policy::Policy;
use super::proxy::ProxiedTool;
use super::wire::{MODERN_RESULT_TAIL, result_json_as};
use crate::protocol::jsonrpc::write_json_str;
use crate::protocol::percent_encode as encode_query;
use crate::protocol::schema::{self, Validator};
use crate::protocol::version::Revision;

/// What a tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolKind {
    Echo,
    Sleep,
    Payload,
    Fail,
    Cpu,
    Progress,
    Synthetic(u32),
    SearchContacts,
    GetInvoice,
    CreateTicket,
    /// A conformance-suite fixture (only with `Config::conformance`): its index in
    /// `fixtures::Fixture::ALL`. The fixtures module makes these tools and runs them; the
    /// catalog does not know it.
    Fixture(usize),
    /// A tool of an upstream (gateway mode): its index in the `Proxy`'s tools.
    Proxied(u32),
}

/// A tool definition.
#[derive(Debug, Clone)]
pub(crate) struct Tool {
    pub name: String,
    pub title: String,
    pub description: String,
    pub input_schema: Value,
    pub kind: ToolKind,
    pub read_only: bool,
    pub open_world: bool,
    /// The revisions whose sessions list and call it (some conformance fixtures exist only in
    /// newer revisions).
    pub revisions: RangeInclusive<Revision>,
    /// A proxied tool's definition as the upstream lists it (rendered instead of the fields
    /// above, with the namespaced name).
    pub definition: Option<Value>,
    /// `input_schema` compiled, on the first call (a catalog of thousands of synthetic tools
    /// costs nothing until they are called).
    validator: OnceLock<Result<Validator, String>>,
}

impl Tool {
    pub(crate) fn new(
        name: impl Into<String>,
        title: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        kind: ToolKind,
    ) -> Self {
        Tool {
            name: name.into(),
            title: title.into(),
            description: description.into(),
            input_schema,
            kind,
            read_only: true,
            open_world: false,
            revisions: Revision::V2024_11_05..=Revision::V2026_07_28,
            definition: None,
            validator: OnceLock::new(),
        }
    }

    /// Whether a session of revision `rev` lists and calls it.
    pub(crate) fn available(&self, rev: Revision) -> bool {
        self.revisions.contains(&rev)
    }

    /// Checks a call's arguments against the input schema; the error names the argument
    /// (2025-11-25 asks for invalid arguments to be reported as a tool error).
    pub(crate) fn check_arguments(&self, args: &Value) -> Result<(), String> {
        let validator = self
            .validator
            .get_or_init(|| schema::compile(&self.input_schema));
        match validator {
            Ok(v) => schema::check(v, args).map_err(|e| e.to_string()),
            Err(e) => Err(format!("the tool's input schema does not compile: {e}")),
        }
    }
}

/// Names of the built-in (non-synthetic) tools, in `tools/list` order.
pub const BUILTIN: &[&str] = &[
    "echo",
    "sleep",
    "payload",
    "fail",
    "cpu",
    "progress",
    "search-contacts",
    "get-invoice",
    "create-ticket",
];

/// Name of synthetic tool `i` (0-based).
pub(crate) fn synthetic_name(i: usize) -> String {
    format!("synthetic-{:05}", i + 1)
}

/// The `instructions` of `initialize` and `server/discover`: what this server offers, from
/// the catalog itself.
pub(crate) fn instructions(tools: &[Tool]) -> String {
    let names = |rest: bool| {
        tools
            .iter()
            .filter(|t| BUILTIN.contains(&t.name.as_str()) && t.open_world == rest)
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "Reference MCP server of mcpbench: tools {}, REST-backed {}.",
        names(false),
        names(true)
    )
}

fn object(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// The built-in tools, in [`BUILTIN`] order.
pub(crate) fn builtin() -> Vec<Tool> {
    let t = |name: &str,
             title: &str,
             description: &str,
             input_schema: Value,
             kind,
             read_only,
             open_world| Tool {
        read_only,
        open_world,
        ..Tool::new(name, title, description, input_schema, kind)
    };
    vec![
        t(
            "echo",
            "Echo",
            "Returns the message it is given.",
            object(
                json!({"message": {"type": "string", "description": "Text to echo back"}}),
                &["message"],
            ),
            ToolKind::Echo,
            true,
            false,
        ),
        t(
            "sleep",
            "Sleep",
            "Waits the given number of milliseconds, then answers.",
            object(
                json!({"ms": {"type": "integer", "minimum": 0, "maximum": 600000}}),
                &["ms"],
            ),
            ToolKind::Sleep,
            true,
            false,
        ),
        t(
            "payload",
            "Payload",
            "Returns a text result of exactly the given number of bytes.",
            object(
                json!({"bytes": {"type": "integer", "minimum": 0, "maximum": 16777216}}),
                &["bytes"],
            ),
            ToolKind::Payload,
            true,
            false,
        ),
        t(
            "fail",
            "Fail",
            "Always fails with a tool error (isError: true).",
            object(json!({"message": {"type": "string"}}), &[]),
            ToolKind::Fail,
            true,
            false,
        ),
        t(
            "cpu",
            "CPU burn",
            "Burns the given number of hash iterations on the server's CPU.",
            object(
                json!({"iterations": {"type": "integer", "minimum": 0, "maximum": 1000000000u64}}),
                &["iterations"],
            ),
            ToolKind::Cpu,
            true,
            false,
        ),
        t(
            "progress",
            "Progress",
            "Sends `steps` progress notifications, one every `interval_ms`, when the request carries _meta.progressToken (else just waits as long), then answers.",
            object(
                json!({"steps": {"type": "integer", "minimum": 1, "maximum": 1000}, "interval_ms": {"type": "integer", "minimum": 0, "maximum": 60000}}),
                &["steps", "interval_ms"],
            ),
            ToolKind::Progress,
            true,
            false,
        ),
        t(
            "search-contacts",
            "Search contacts",
            "Searches the contacts directory (REST backend) by name.",
            object(
                json!({"query": {"type": "string", "maxLength": 200}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}}),
                &["query"],
            ),
            ToolKind::SearchContacts,
            true,
            true,
        ),
        t(
            "get-invoice",
            "Get invoice",
            "Fetches one invoice by id from the billing service (REST backend).",
            object(json!({"id": {"type": "integer", "minimum": 1}}), &["id"]),
            ToolKind::GetInvoice,
            true,
            true,
        ),
        t(
            "create-ticket",
            "Create ticket",
            "Opens a support ticket (REST backend).",
            object(
                json!({"title": {"type": "string", "minLength": 1, "maxLength": 200}, "body": {"type": "string", "maxLength": 10000}, "priority": {"type": "string", "enum": ["low", "normal", "high"]}}),
                &["title"],
            ),
            ToolKind::CreateTicket,
            false,
            true,
        ),
    ]
}

/// `n` synthetic tools for large `tools/list` pages.
pub(crate) fn synthetic(n: usize) -> impl Iterator<Item = Tool> {
    (0..n).map(|i| {
        Tool::new(
            synthetic_name(i),
            format!("Synthetic tool {}", i + 1),
            format!(
                "Synthetic catalog entry {} for large tools/list pages. It echoes its arguments; its schema is typical of a REST operation turned into a tool.",
                i + 1
            ),
            object(
                json!({
                    "query": {"type": "string", "description": "Free-text filter"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Maximum results"},
                    "verbose": {"type": "boolean"}
                }),
                &[],
            ),
            ToolKind::Synthetic(i as u32),
        )
    })
}

/// The upstreams' tools (gateway mode), under their namespaced names.
pub(crate) fn proxied(tools: &[ProxiedTool]) -> impl Iterator<Item = Tool> + '_ {
    tools.iter().enumerate().map(|(i, p)| {
        let text = |k: &str| p.definition[k].as_str().unwrap_or_default().to_string();
        Tool {
            definition: Some(p.definition.clone()),
            ..Tool::new(
                p.name.clone(),
                text("title"),
                text("description"),
                p.definition["inputSchema"].clone(),
                ToolKind::Proxied(i as u32),
            )
        }
    })
}

/// Revisions that render `tools/list` differently: each its own (the conformance fixtures a
/// session lists differ even between 2025-06-18 and 2025-11-25).
fn render_group(rev: Revision) -> usize {
    match rev {
        Revision::V2024_11_05 => 0,
        Revision::V2025_03_26 => 1,
        Revision::V2025_06_18 => 2,
        Revision::V2025_11_25 => 3,
        Revision::V2026_07_28 => 4,
    }
}

/// One pre-rendered `tools/list` page.
#[derive(Debug)]
pub(crate) struct Page {
    /// The complete result object.
    pub result: Bytes,
    /// The names on it, as a JSON array (for the audit log).
    pub names: Bytes,
    pub count: usize,
}

/// What one tenant (or everyone, without a policy) sees: the tools it may call and its
/// `tools/list` pages for each revision.
#[derive(Debug)]
struct View {
    /// Per tool; empty means all.
    allowed: Vec<bool>,
    pages: [Vec<Page>; 5],
}

/// The server's tools, with `tools/list` pages pre-rendered for each revision (and each
/// tenant, under a policy). The 2026-07-28 pages are complete results: `ttlMs`, `cacheScope`,
/// `resultType` and `_meta` included.
#[derive(Debug)]
pub(crate) struct Registry {
    tools: Vec<Tool>,
    /// Fixed once built: FNV, not SipHash, for the lookup every call makes.
    by_name: HashMap<String, usize, BuildHasherDefault<crate::trace::Fnv>>,
    /// View 0 without a policy; view `i` for tenant `i` with one.
    views: Vec<View>,
}

impl Registry {
    /// The catalog of `tools` (names unique), with `tools/list` pages of `page_size` rendered
    /// for every revision (each lists the tools available in it).
    #[cfg(test)]
    pub(crate) fn new(tools: Vec<Tool>, page_size: usize) -> Self {
        Self::with_policy(tools, page_size, None, &super::wire::server_info())
    }

    /// The catalog, with one view per tenant of `policy` (or one for all); 2026-07-28 pages
    /// name the server `info`.
    pub(crate) fn with_policy(
        tools: Vec<Tool>,
        page_size: usize,
        policy: Option<&Policy>,
        info: &Value,
    ) -> Self {
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        let page_size = page_size.max(1);
        let view = |allowed: Vec<bool>| View {
            pages: Revision::ALL.map(|rev| {
                let listed: Vec<&Tool> = tools
                    .iter()
                    .enumerate()
                    .filter(|(i, t)| t.available(rev) && allowed.get(*i).copied().unwrap_or(true))
                    .map(|(_, t)| t)
                    .collect();
                let chunks: Vec<&[&Tool]> = listed.chunks(page_size).collect();
                let n = chunks.len().max(1);
                let empty: &[&Tool] = &[];
                let chunks = if chunks.is_empty() {
                    vec![empty]
                } else {
                    chunks
                };
                chunks
                    .into_iter()
                    .enumerate()
                    .map(|(i, chunk)| {
                        let list: Vec<Value> = chunk.iter().map(|t| render_tool(t, rev)).collect();
                        let mut page = json!({"tools": list});
                        if i + 1 < n {
                            page["nextCursor"] = Value::String(cursor(i + 1));
                        }
                        let names: Vec<&str> = chunk.iter().map(|t| t.name.as_str()).collect();
                        Page {
                            result: Bytes::from(result_json_as(page, rev, true, info)),
                            names: Bytes::from(serde_json::to_vec(&names).unwrap_or_default()),
                            count: chunk.len(),
                        }
                    })
                    .collect()
            }),
            allowed,
        };
        let views = match policy {
            None => vec![view(Vec::new())],
            Some(p) => p
                .tenants
                .iter()
                .map(|t| view(tools.iter().map(|tool| t.allows(&tool.name)).collect()))
                .collect(),
        };
        Registry {
            tools,
            by_name,
            views,
        }
    }

    /// Whether view `view` may call tool `index`.
    pub(crate) fn allowed(&self, view: usize, index: usize) -> bool {
        self.views
            .get(view)
            .is_some_and(|v| v.allowed.get(index).copied().unwrap_or(true))
    }

    /// Every tool's name, in catalog order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// Every tool, in catalog order.
    #[cfg(test)]
    pub(crate) fn tools(&self) -> &[Tool] {
        &self.tools
    }

    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&Tool> {
        self.find(name).map(|(_, t)| t)
    }

    /// The tool called `name` and its index.
    pub(crate) fn find(&self, name: &str) -> Option<(usize, &Tool)> {
        let i = *self.by_name.get(name)?;
        Some((i, self.tools.get(i)?))
    }

    /// The tool at `index` (see [`find`](Self::find)).
    pub(crate) fn tool(&self, index: usize) -> Option<&Tool> {
        self.tools.get(index)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tools.len()
    }

    /// The pre-rendered `tools/list` page of view `view` for a cursor, or `None` for an
    /// invalid cursor.
    pub(crate) fn page(&self, rev: Revision, cursor: Option<&str>, view: usize) -> Option<&Page> {
        let pages = &self.views.get(view)?.pages[render_group(rev)];
        let index = match cursor {
            None => 0,
            Some(c) => parse_cursor(c)?,
        };
        pages.get(index)
    }
}

/// Cursors are opaque to clients; they encode the page index with a prefix so that a cursor
/// from elsewhere is recognisably invalid.
fn cursor(page: usize) -> String {
    format!("mcpbench-page-{page}")
}

fn parse_cursor(c: &str) -> Option<usize> {
    c.strip_prefix("mcpbench-page-")?
        .parse()
        .ok()
        .filter(|&p| p > 0)
}

fn render_tool(t: &Tool, rev: Revision) -> Value {
    if let Some(Value::Object(d)) = &t.definition {
        let mut d = d.clone();
        d.insert("name".into(), Value::String(t.name.clone()));
        if !rev.has_tool_title() {
            d.remove("title");
        }
        if !rev.has_tool_annotations() {
            d.remove("annotations");
        }
        if !rev.has_structured_content() {
            d.remove("outputSchema");
        }
        return Value::Object(d);
    }
    let mut v =
        json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema});
    if rev.has_tool_title() {
        v["title"] = Value::String(t.title.clone());
    }
    if rev.has_tool_annotations() {
        v["annotations"] = json!({
            "title": t.title,
            "readOnlyHint": t.read_only,
            "destructiveHint": false,
            "idempotentHint": t.read_only,
            "openWorldHint": t.open_world,
        });
    }
    v
}

/// The result of a tool call, before it is written as JSON.
#[derive(Debug)]
pub(crate) struct ToolOutput {
    pub text: String,
    pub is_error: bool,
    /// A JSON object (raw bytes) for `structuredContent`, when the tool has structured output.
    pub structured: Option<Bytes>,
}

impl ToolOutput {
    fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
            structured: None,
        }
    }

    fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
            structured: None,
        }
    }

    /// Writes the `CallToolResult` JSON object for `rev` (2026-07-28: with `resultType` and
    /// `_meta`).
    pub(crate) fn write(&self, out: &mut Vec<u8>, rev: Revision) {
        out.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
        write_json_str(out, &self.text);
        out.extend_from_slice(br#"}],"isError":"#);
        out.extend_from_slice(if self.is_error { b"true" } else { b"false" });
        if let Some(s) = self
            .structured
            .as_ref()
            .filter(|_| rev.has_structured_content())
        {
            out.extend_from_slice(br#","structuredContent":"#);
            out.extend_from_slice(s);
        }
        if !rev.has_handshake() {
            out.extend_from_slice(MODERN_RESULT_TAIL.as_bytes());
        }
        out.push(b'}');
    }
}

/// Where a `progress` call reports: the request's token and the transport's sink.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress<'a> {
    /// Raw JSON (a string or an integer).
    pub token: &'a [u8],
    pub sink: &'a Sink,
}

impl Progress<'_> {
    /// Sends `notifications/progress`; a closed sink (client gone) is not an error here: the
    /// transport stops the call.
    async fn send(&self, progress: u64, total: u64) {
        let mut n = Vec::with_capacity(112 + self.token.len());
        n.extend_from_slice(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"#,
        );
        n.extend_from_slice(self.token);
        n.extend_from_slice(br#","progress":"#);
        n.extend_from_slice(itoa::Buffer::new().format(progress).as_bytes());
        n.extend_from_slice(br#","total":"#);
        n.extend_from_slice(itoa::Buffer::new().format(total).as_bytes());
        n.extend_from_slice(b"}}");
        let _ = self.sink.send(Bytes::from(n)).await;
    }
}

/// Runs a tool after validating its arguments against its input schema. `progress` is set when
/// the request asked for progress and the transport can carry notifications.
pub(crate) async fn call(
    tool: &Tool,
    args: &Value,
    backend: Option<&Backend>,
    progress: Option<Progress<'_>>,
) -> ToolOutput {
    if let Err(msg) = tool.check_arguments(args) {
        return ToolOutput::error(format!("invalid arguments for tool `{}`: {msg}", tool.name));
    }
    let int = |k: &str| {
        args.get(k)
            .and_then(Value::as_f64)
            .map(|f| f as u64)
            .unwrap_or(0)
    };
    let string = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or_default();
    match tool.kind {
        ToolKind::Echo => ToolOutput::text(string("message")),
        ToolKind::Sleep => {
            let ms = int("ms");
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ToolOutput::text(format!("slept {ms} ms"))
        }
        ToolKind::Payload => ToolOutput::text(payload(int("bytes") as usize)),
        ToolKind::Fail => {
            let m = args
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the fail tool always fails");
            ToolOutput::error(m)
        }
        ToolKind::Cpu => ToolOutput::text(format!("{:016x}", burn(int("iterations")))),
        ToolKind::Progress => {
            let steps = int("steps");
            let interval = Duration::from_millis(int("interval_ms"));
            match progress {
                Some(p) => {
                    for i in 1..=steps {
                        tokio::time::sleep(interval).await;
                        p.send(i, steps).await;
                    }
                }
                None => tokio::time::sleep(interval.saturating_mul(steps as u32)).await,
            }
            ToolOutput::text(format!("done after {steps} steps"))
        }
        ToolKind::Synthetic(_) => ToolOutput::text(serde_json::to_string(args).unwrap_or_default()),
        // Dispatched to `fixtures::call` before this point.
        ToolKind::Fixture(_) => ToolOutput::error("conformance fixtures run elsewhere"),
        ToolKind::Proxied(_) => ToolOutput::error("proxied tools run elsewhere"),
        ToolKind::SearchContacts => {
            let mut path = format!("/contacts?q={}", encode_query(string("query")));
            if let Some(l) = args.get("limit").and_then(Value::as_u64) {
                path.push_str(&format!("&limit={l}"));
            }
            rest(backend, |b| async move { b.get(&path).await }, "contacts").await
        }
        ToolKind::GetInvoice => {
            let id = int("id");
            let path = format!("/invoices/{id}");
            rest(backend, |b| async move { b.get(&path).await }, "invoice").await
        }
        ToolKind::CreateTicket => {
            let body = Bytes::from(serde_json::to_vec(args).unwrap_or_default());
            rest(
                backend,
                |b| async move { b.post_json("/tickets", body).await },
                "ticket",
            )
            .await
        }
    }
}

async fn rest<'b, F, Fut>(backend: Option<&'b Backend>, send: F, what: &str) -> ToolOutput
where
    F: FnOnce(&'b Backend) -> Fut,
    Fut: Future<Output = Result<(u16, Bytes), super::backend::BackendError>>,
{
    let Some(b) = backend else {
        return ToolOutput::error("this server has no REST backend configured");
    };
    match send(b).await {
        Ok((status, body)) if (200..300).contains(&status) => {
            let structured = serde_json::from_slice::<Value>(&body)
                .ok()
                .filter(Value::is_object)
                .map(|_| body.clone());
            let text = String::from_utf8_lossy(&body).into_owned();
            ToolOutput {
                text,
                is_error: false,
                structured,
            }
        }
        Ok((404, _)) => ToolOutput::error(format!("{what} not found")),
        Ok((status, _)) if (400..500).contains(&status) => ToolOutput::error(format!(
            "the backend rejected the {what} request (HTTP {status})"
        )),
        Ok((status, _)) => ToolOutput::error(format!("the backend failed (HTTP {status})")),
        Err(e) => ToolOutput::error(e.to_string()),
    }
}

fn payload(n: usize) -> String {
    const PATTERN: &[u8] = b"mcpbench-payload-0123456789abcdefghijklmnopqrstuvwxyz ";
    let bytes: Vec<u8> = PATTERN.iter().copied().cycle().take(n).collect();
    String::from_utf8(bytes).expect("ASCII pattern")
}

/// A dependent chain of multiply-xorshift steps the optimizer cannot skip.
fn burn(iterations: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..iterations {
        x ^= i;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 31;
    }
    std::hint::black_box(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::wire::TTL_MS;

    fn registry(synthetic_tools: usize, page_size: usize) -> Registry {
        let tools = builtin().into_iter().chain(synthetic(synthetic_tools));
        Registry::new(tools.collect(), page_size)
    }

    #[test]
    fn registry_pages_and_cursors() {
        let r = registry(25, 10);
        assert_eq!(r.len(), BUILTIN.len() + 25);
        let first: Value = serde_json::from_slice(
            r.page(Revision::V2025_11_25, None, 0)
                .map(|p| &p.result)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(first["tools"].as_array().unwrap().len(), 10);
        assert_eq!(first["nextCursor"], "mcpbench-page-1");
        assert!(first["tools"][0]["title"].is_string());
        let old: Value = serde_json::from_slice(
            r.page(Revision::V2024_11_05, None, 0)
                .map(|p| &p.result)
                .unwrap(),
        )
        .unwrap();
        assert!(
            old["tools"][0].get("title").is_none() && old["tools"][0].get("annotations").is_none()
        );
        let last: Value = serde_json::from_slice(
            r.page(Revision::V2025_11_25, Some("mcpbench-page-3"), 0)
                .map(|p| &p.result)
                .unwrap(),
        )
        .unwrap();
        assert!(last.get("nextCursor").is_none());
        assert!(
            r.page(Revision::V2025_11_25, Some("mcpbench-page-4"), 0)
                .map(|p| &p.result)
                .is_none()
        );
        assert!(
            r.page(Revision::V2025_11_25, Some("garbage"), 0)
                .map(|p| &p.result)
                .is_none()
        );
        assert!(r.get("synthetic-00025").is_some() && r.get("synthetic-00026").is_none());
        let names: Vec<&str> = r.tools()[..BUILTIN.len()]
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, BUILTIN);
        assert_eq!(
            instructions(r.tools()),
            "Reference MCP server of mcpbench: tools echo, sleep, payload, fail, cpu, progress, REST-backed search-contacts, get-invoice, create-ticket."
        );
    }

    #[test]
    fn modern_pages_are_complete_results() {
        let r = registry(3, 5);
        let page: Value = serde_json::from_slice(
            r.page(Revision::V2026_07_28, None, 0)
                .map(|p| &p.result)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(page["resultType"], "complete");
        assert_eq!(page["cacheScope"], "public");
        assert_eq!(page["ttlMs"], TTL_MS);
        assert_eq!(
            page["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "mcpbench-reference"
        );
        assert_eq!(page["nextCursor"], "mcpbench-page-1");
        assert!(page["tools"][0].get("execution").is_none());
        let legacy: Value = serde_json::from_slice(
            r.page(Revision::V2025_11_25, None, 0)
                .map(|p| &p.result)
                .unwrap(),
        )
        .unwrap();
        assert!(legacy.get("resultType").is_none() && legacy.get("ttlMs").is_none());
    }

    #[tokio::test]
    async fn progress_reports_to_the_sink_then_answers() {
        let r = registry(0, 10);
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let p = Progress {
            token: b"\"t\"",
            sink: &tx,
        };
        let args = json!({"steps": 3, "interval_ms": 0});
        let out = call(r.get("progress").unwrap(), &args, None, Some(p)).await;
        assert_eq!(out.text, "done after 3 steps");
        for i in 1..=3 {
            let n: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
            assert_eq!(
                n,
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": "t", "progress": i, "total": 3}})
            );
        }
        assert!(rx.try_recv().is_err(), "nothing after the last step");
        let quiet = call(r.get("progress").unwrap(), &args, None, None).await;
        assert_eq!(quiet.text, "done after 3 steps");
        let mut modern = Vec::new();
        quiet.write(&mut modern, Revision::V2026_07_28);
        let v: Value = serde_json::from_slice(&modern).unwrap();
        assert_eq!(v["resultType"], "complete");
    }

    #[tokio::test]
    async fn tools_validate_and_answer() {
        let r = registry(0, 10);
        let out = call(
            r.get("echo").unwrap(),
            &json!({"message": "hi"}),
            None,
            None,
        )
        .await;
        assert_eq!((out.text.as_str(), out.is_error), ("hi", false));
        let out = call(r.get("echo").unwrap(), &json!({"msg": "hi"}), None, None).await;
        assert!(
            out.is_error
                && out.text.contains(
                    "arguments: Additional properties are not allowed ('msg' was unexpected)"
                ),
            "{}",
            out.text
        );
        assert_eq!(
            call(
                r.get("payload").unwrap(),
                &json!({"bytes": 1000}),
                None,
                None
            )
            .await
            .text
            .len(),
            1000
        );
        assert!(
            call(r.get("fail").unwrap(), &json!({}), None, None)
                .await
                .is_error
        );
        let out = call(
            r.get("search-contacts").unwrap(),
            &json!({"query": "x"}),
            None,
            None,
        )
        .await;
        assert!(out.is_error && !out.text.contains("127.0.0.1"));
        let mut buf = Vec::new();
        ToolOutput {
            text: "a\"b".into(),
            is_error: false,
            structured: Some(Bytes::from_static(b"{\"k\":1}")),
        }
        .write(&mut buf, Revision::V2025_11_25);
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(
            v,
            json!({"content": [{"type": "text", "text": "a\"b"}], "isError": false, "structuredContent": {"k": 1}})
        );
    }
}
