//! Real MCP messages of several sizes, shared by the criterion benches and the
//! instruction-count gate so both measure the same bytes.

/// A `tools/call` result of the reference server's `echo` (≈ 120 bytes).
pub const SMALL: &str = r#"{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello from mcpbench"}],"isError":false}}"#;

/// A `tools/list` page: ten tools with descriptions and input schemas (≈ 3 KB).
pub fn medium() -> String {
    let tools: Vec<String> = (0..10)
        .map(|i| {
            format!(
                r#"{{"name":"tool-{i}","title":"Tool {i}","description":"Looks up records of kind {i} by a free-text query, with paging.","inputSchema":{{"type":"object","properties":{{"query":{{"type":"string","minLength":1,"maxLength":200}},"limit":{{"type":"integer","minimum":1,"maximum":100}}}},"required":["query"],"additionalProperties":false}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{}],"nextCursor":"cGFnZS0y"}}}}"#,
        tools.join(",")
    )
}

/// A `search-contacts` result: fifty contacts, as escaped text and as `structuredContent`
/// (≈ 12 KB).
pub fn large() -> String {
    let results: Vec<String> = (0..50)
        .map(|i| format!(r#"{{"id":{i},"name":"Contact {i}","email":"c{i}@example.com","phone":"1-770-736-8031 x56442","company":"Romaguera-Crona"}}"#))
        .collect();
    let body = format!(
        r#"{{"query":"a","total":50,"results":[{}]}}"#,
        results.join(",")
    );
    let escaped = serde_json::to_string(&body).unwrap();
    format!(
        r#"{{"jsonrpc":"2.0","id":12345,"result":{{"content":[{{"type":"text","text":{escaped}}}],"isError":false,"structuredContent":{body}}}}}"#
    )
}

/// The three sizes by name.
pub fn sized() -> [(&'static str, String); 3] {
    [
        ("small", SMALL.to_string()),
        ("medium", medium()),
        ("large", large()),
    ]
}

/// The SSE bytes of a response on a Streamable HTTP stream: a priming event, then the message.
pub fn sse_stream() -> String {
    format!("id: 1\ndata:\n\nevent: message\ndata: {SMALL}\n\n")
}

/// A scenario line set whose one workload entry renders a `tools/call` with generated
/// arguments.
pub const GENERATED_CALL: &str = "[load]\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"search-contacts\"\narguments = { query = \"${pick:Leanne,Ervin,Clementine}\", limit = \"${range:1..20}\" }\n";
