//! scenarios/schema.json, the scenario format for editors, held to the parser: every scenario we
//! ship, document or generate validates; its tables hold exactly the keys the parser accepts
//! (raw.rs's serde structs and `KNOWN_KEYS`); every key the parser accepts, every name of its
//! closed sets and its grammars (durations, latencies, threshold conditions) pass; typical
//! mistakes are refused by both; `mcpbench schema` prints the committed files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use mcpbench::scenario::raw::{self, KNOWN_KEYS};
use mcpbench::scenario::thresholds::Metric;
use serde::de::{self, Deserialize, Visitor};
use serde_json::{Value, json};

use crate::support::{mcpbench, repo, scenario, scratch};

fn schema_json() -> Value {
    let text = std::fs::read_to_string(repo().join("scenarios/schema.json")).unwrap();
    serde_json::from_str(&text).expect("scenarios/schema.json is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema_json()).expect("scenarios/schema.json compiles")
}

/// A scenario's TOML as the JSON an editor validates.
fn to_json(text: &str) -> Value {
    let v: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    serde_json::to_value(v).unwrap()
}

/// What the schema says about `doc`: one line per error, empty when it is valid.
fn schema_errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// The parser's verdict on scenario text (as if the file were `dir/t.toml`, every environment
/// variable set).
fn parses(text: &str, dir: &Path) -> Result<(), String> {
    let file = dir.join("t.toml").display().to_string();
    mcpbench::scenario::parse(&file, text, &|_| Some("x".into()))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `$ref`s followed to what they name (local `#/$defs/NAME` only, as the schema uses).
fn deref<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.strip_prefix("#/$defs/").expect("local $ref");
            deref(root, &root["$defs"][name])
        }
        None => node,
    }
}

/// The object schema of a table: an array of tables is its items.
fn table_node<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    let node = deref(root, node);
    match node.get("items") {
        Some(items) if node["type"] == "array" => deref(root, items),
        _ => node,
    }
}

/// The schema of table `path` (`""`, `load`, `targets.tls`, …).
fn schema_table<'a>(root: &'a Value, path: &str) -> &'a Value {
    let mut node = root;
    for key in path.split('.').filter(|k| !k.is_empty()) {
        node = &table_node(root, node)["properties"][key];
        assert!(!node.is_null(), "the schema has no table `{path}`");
    }
    table_node(root, node)
}

fn property_names(table: &Value) -> BTreeSet<String> {
    table["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// Every table the schema describes with properties of its own, by dotted path.
fn schema_tables(root: &Value, node: &Value, path: &str, out: &mut BTreeSet<String>) {
    let table = table_node(root, node);
    let Some(props) = table["properties"].as_object() else {
        return;
    };
    out.insert(path.to_string());
    for (key, child) in props {
        let child_path = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        schema_tables(root, child, &child_path, out);
    }
}

/// The keys serde accepts in a struct: the field list its derived `Deserialize` hands to
/// `deserialize_struct`, caught by a deserializer that reads nothing else.
fn serde_fields<T: for<'de> Deserialize<'de>>() -> BTreeSet<String> {
    match T::deserialize(FieldCatcher) {
        Err(Caught(Some(fields))) => fields.iter().map(|f| f.to_string()).collect(),
        _ => panic!("not a struct"),
    }
}

#[derive(Debug)]
struct Caught(Option<&'static [&'static str]>);

impl fmt::Display for Caught {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for Caught {}

impl de::Error for Caught {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Caught(None)
    }
}

struct FieldCatcher;

impl<'de> de::Deserializer<'de> for FieldCatcher {
    type Error = Caught;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Caught> {
        Err(Caught(None))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Caught> {
        Err(Caught(Some(fields)))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The serde struct behind each table of `KNOWN_KEYS`.
fn serde_keys(table: &str) -> BTreeSet<String> {
    match table {
        "" => serde_fields::<raw::RawScenario>(),
        "target" | "targets" => serde_fields::<raw::RawTarget>(),
        "target.oauth" | "targets.oauth" => serde_fields::<raw::RawOAuth>(),
        "target.credentials" | "targets.credentials" => serde_fields::<raw::RawCredential>(),
        "target.tls" | "targets.tls" => serde_fields::<raw::RawTls>(),
        "ab" => serde_fields::<raw::RawAb>(),
        "embedded" => serde_fields::<raw::RawEmbedded>(),
        "load" => serde_fields::<raw::RawLoad>(),
        "load.stages" => serde_fields::<raw::RawStage>(),
        "workload" => serde_fields::<raw::RawWorkload>(),
        "workload.expect" => serde_fields::<raw::RawExpect>(),
        "find_max" => serde_fields::<raw::RawFindMax>(),
        "replay" => serde_fields::<raw::RawReplay>(),
        other => panic!("KNOWN_KEYS has table `{other}`: map it to its serde struct here"),
    }
}

/// Drift: for every table, the keys serde accepts, the keys `KNOWN_KEYS` lists (for "did you
/// mean") and the schema's properties are the same set, and each property says what it takes.
/// A key added to one and not the others fails here.
#[test]
fn schema_tables_hold_exactly_the_keys_the_parser_accepts() {
    let root = schema_json();
    let mut tables = BTreeSet::new();
    for (table, keys) in KNOWN_KEYS {
        assert!(tables.insert(table.to_string()), "`{table}` listed twice");
        let known: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(known.len(), keys.len(), "`{table}`: a key listed twice");
        assert_eq!(
            known,
            serde_keys(table),
            "`{table}`: KNOWN_KEYS (left) against the serde struct (right)"
        );
        let node = schema_table(&root, table);
        assert_eq!(
            property_names(node),
            known,
            "`{table}`: the schema's properties (left) against KNOWN_KEYS (right)"
        );
        assert_eq!(
            node["additionalProperties"], false,
            "`{table}` denies unknown keys"
        );
        for (key, prop) in node["properties"].as_object().unwrap() {
            assert!(
                prop["description"].is_string(),
                "`{table}.{key}` has no description of its own"
            );
        }
    }
    // Every table the schema describes is one KNOWN_KEYS lists, but [thresholds] (metrics,
    // or an operation's table of them: not a serde struct, checked below).
    let mut described = BTreeSet::new();
    schema_tables(&root, &root, "", &mut described);
    described.remove("thresholds");
    described.remove("compare");
    assert_eq!(
        described, tables,
        "the schema's tables (left) against KNOWN_KEYS (right)"
    );

    // [thresholds]: the metrics the parser knows, and abort_on_fail; an operation's table
    // takes the metrics that are not about the target's processes.
    let names = |f: fn(&Metric) -> bool| -> BTreeSet<String> {
        Metric::NAMES
            .iter()
            .filter(|(_, m)| f(m))
            .map(|(n, _)| n.to_string())
            .collect()
    };
    let thresholds = &root["properties"]["thresholds"];
    let mut overall = names(|_| true);
    overall.insert("abort_on_fail".into());
    assert_eq!(property_names(thresholds), overall);
    assert_eq!(
        property_names(&thresholds["additionalProperties"]),
        names(|m| !m.is_target()),
        "an operation's table"
    );

    // The revisions are the protocol module's.
    let revisions: Vec<String> = mcpbench::protocol::version::Revision::ALL
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(root["$defs"]["revision"]["enum"], json!(revisions));
}

#[test]
fn schema_is_a_draft_2020_12_schema() {
    let root = schema_json();
    jsonschema::meta::validate(&root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        root["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    for key in ["$id", "title", "description"] {
        assert!(root[key].is_string(), "{key}");
    }
}

/// (a) Every shipped scenario names the schema (`#:schema`, for Taplo and Even Better TOML) and
/// validates against it; so do the examples in the documentation (fragments: only the root's
/// required tables are not asked of them) and the Kubernetes example's scenario.
#[test]
fn shipped_and_documented_scenarios_validate() {
    let v = validator();
    let dir = repo().join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text.lines().next(),
            Some("#:schema ./schema.json"),
            "{}: the first line names the schema",
            p.display()
        );
        mcpbench::scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
        let errors = schema_errors(&v, &to_json(&text));
        assert!(errors.is_empty(), "{}: {errors:#?}", p.display());
        n += 1;
    }
    assert!(n >= 10, "{n} scenarios");

    let yaml = std::fs::read_to_string(repo().join("deploy/kubernetes/scenario.yaml")).unwrap();
    let k8s: String = yaml
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("scenario.toml: |"))
        .skip(1)
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    assert!(k8s.contains("[load]"), "{k8s}");
    let errors = schema_errors(&v, &to_json(&k8s));
    assert!(
        errors.is_empty(),
        "deploy/kubernetes/scenario.yaml: {errors:#?}"
    );

    let mut fragments = schema_json();
    fragments.as_object_mut().unwrap().remove("required");
    fragments.as_object_mut().unwrap().remove("anyOf");
    let fv = jsonschema::validator_for(&fragments).unwrap();
    let mut blocks = 0;
    for doc in ["scenarios/README.md", "README.md", "docs/scenarios.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        for block in text.split("```toml\n").skip(1) {
            let block = block.split("```").next().unwrap();
            let errors = schema_errors(&fv, &to_json(block));
            assert!(errors.is_empty(), "{doc}: {errors:#?}\n{block}");
            blocks += 1;
        }
    }
    assert!(blocks >= 5, "{blocks} examples");
}

/// (a) What `mcpbench init` writes (over HTTP with a header, and for a stdio command)
/// validates too.
#[test]
fn scenarios_init_writes_validate() {
    let servers = crate::support::servers(
        mcpbench::server::ResponseMode::Json,
        0,
        100,
        mock_backend::Knobs::default(),
    );
    let dir = scratch();
    let v = validator();
    let url = servers.mcp_url();
    let exe = env!("CARGO_BIN_EXE_mcpbench");
    let runs: [(&str, Vec<&str>); 2] = [
        ("http.toml", vec![&url, "-H", "X-Test: yes"]),
        ("stdio.toml", vec!["--", exe, "serve", "--stdio"]),
    ];
    for (file, args) in runs {
        let out = dir.path().join(file).display().to_string();
        let mut init = vec!["init", "--output", &out];
        init.extend(args);
        let (code, o, e) = mcpbench(&init, dir.path());
        assert_eq!(code, 0, "{file}: {o}{e}");
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("tool = \"echo\""), "{text}");
        let errors = schema_errors(&v, &to_json(&text));
        assert!(errors.is_empty(), "{file}: {errors:#?}\n{text}");
    }
}

/// Scenarios the parser accepts that, together, use every key of every table: the schema must
/// accept each (it is never stricter than the parser on them).
fn every_key_scenarios(dir: &Path) -> Vec<String> {
    let file = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).unwrap();
        dir.join(name).display().to_string()
    };
    let ca = file("ca.pem", "");
    let cert = file("client.pem", "");
    let key = file("client-key.pem", "");
    file("rows.jsonl", "{\"m\": \"hi\"}\n");
    file("creds.jsonl", "{\"tenant\": \"acme\", \"token\": \"t\"}\n");
    file(
        "trace.jsonl",
        "{\"mcpbench_trace\":1}\n{\"t\":0,\"session\":1,\"method\":\"tools/call\",\
         \"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"hi\"}},\"digest\":null}\n",
    );
    let remote = format!(
        r#"name = "every-remote-key"
description = "a network target with everything it takes"
[target]
transport = "streamable-http"
url = ["https://localhost:8443/mcp", "https://[::1]:8444/mcp"]
protocol = "auto"
http = "2"
sessions_per_connection = 1
tls = {{ ca = "{ca}", cert = "{cert}", key = "{key}" }}
headers = {{ X-Trace = "on", Host = "mcp.example" }}
timing_header = "server-timing:upstream"
tool_prefix = "ref__"
pid = [4242, 4250]
source_address = "127.0.0.0/30"
[[target.credentials]]
tenant = "acme"
token = "${{ACME_TOKEN}}"
[[target.credentials]]
tenant = "globex"
headers = {{ X-Api-Key = "${{GLOBEX_KEY}}" }}
[load]
concurrency = 0
think = "10ms..50ms"
requests = 1000
warmup = "1s"
timeout = "2s"
hang_after = "1s"
workers = 2
sessions = "per-request"
engine = "tasks"
[[load.stages]]
duration = "5s"
concurrency = 8
[[workload]]
method = "tools/list"
expect = {{ tools = ["echo"], tenant_tools = {{ acme = ["echo"] }}, present = ["/tools"], equals = {{ "/tools/0/name" = "echo" }} }}
[[workload]]
method = "tools/call"
tool = "echo"
weight = 3
progress = true
rows = "rows.jsonl"
arguments = {{ message = "${{row:m}}", n = "${{range:1..9}}" }}
expect = {{ is_error = false, output_schema = true }}
[thresholds]
p50 = "< 5ms"
p90 = "< 10 ms"
p99 = "< 20ms"
"p99.9" = "<= 1s"
p999 = "< 1_000ms"
max = "< 2s"
mean = "< 500us"
error_rate = "< 0.1%"
tool_error_rate = "< 1%"
protocol_error_rate = "<= 0.001"
p95 = "< 15ms"
throughput = "> 1_000/s"
abort_on_fail = true
"tools/call:echo".p50 = "< 500µs"
"tools/call:echo".error_rate = "<= 0.01"
[compare]
p95 = "+15%"
"p99.9" = "+25%"
throughput = "-10%"
error_rate = "+0.5pp"
"#
    );
    let stdio = r#"[target]
transport = "stdio"
command = ["python3", "server.py"]
env = { TOKEN = "${TOKEN}" }
cwd = "/tmp"
protocol = "2025-06-18"
[load]
model = "open"
rate = 100
arrival = "uniform"
max_in_flight = 64
release_interval = "0us"
max_queued = 10
duration = "10s"
timeout = "1s"
sessions = "shared"
[find_max]
step = 50
start = 100
max = 1000
step_duration = "2s"
p99 = "50ms"
error_rate = 0.01
[[workload]]
method = "tools/call"
tool = "echo"
arguments = { message = "hi" }
"#;
    let oauth = r#"[target]
url = "http://localhost:8080/mcp"
[target.oauth]
token_url = "http://127.0.0.1:9/token"
client_id = "${OAUTH_CLIENT_ID}"
client_secret = "${OAUTH_CLIENT_SECRET}"
scope = "mcp"
resource = "http://localhost:8080/mcp"
tenant = "acme"
refresh_before = "30s"
[load]
model = "open"
[[load.stages]]
duration = "5s"
rate = 100
[find_max]
search = "adaptive"
factor = 1.5
precision = 0.1
confirm_duration = "10s"
p99 = "20ms"
[[workload]]
method = "tools/list"
"#;
    let embedded = r#"[embedded]
transport = "streamable-http"
protocol = "2026-07-28"
http = "2.0"
response = "sse"
catalog = 100
page_size = 10
backend_latency = "lognormal:p50=2ms,p99=20ms"
backend_error_rate = 0.01
backend_payload = 512
[load]
duration = "1s"
open_rate = 100
[[workload]]
method = "tools/list"
"#;
    let ab = r#"[[targets]]
name = "direct"
url = "ws://localhost:8080/ws"
[[targets]]
name = "via-gateway"
url = "http://localhost:9090/mcp"
credentials_file = "creds.jsonl"
[[targets]]
name = "tls"
url = "wss://localhost:9443/ws"
[targets.tls]
insecure = true
[[targets]]
name = "oauth"
url = "http://localhost:9091/mcp"
[targets.oauth]
token_url = "http://127.0.0.1:9/token"
client_id = "id"
client_secret = "secret"
[[targets]]
name = "tenants"
url = "http://localhost:9092/mcp"
[[targets.credentials]]
tenant = "acme"
token = "t"
[[targets]]
name = "mixed"
url = "http://localhost:9093/mcp"
protocol = ["2025-11-25", "2026-07-28"]
[ab]
slice = "1s"
pairs = 6
levels = [1, 4.5]
[load]
concurrency = 2
duration = "20s"
[[workload]]
method = "tools/list"
"#;
    let replay = r#"[replay]
trace = "trace.jsonl"
mode = "timing"
speed = 2.0
loop = true
check = false
[load]
duration = "5s"
"#;
    let rounds = r#"[load]
concurrency = 4
duration = "2s"
pattern = "first_call"
[[workload]]
method = "tools/call"
tool = "echo"
deterministic = true
arguments = { message = "x" }
"#;
    vec![
        remote,
        replay.into(),
        rounds.into(),
        stdio.into(),
        oauth.into(),
        embedded.into(),
        ab.into(),
    ]
}

/// The dotted table path of every key a JSON document uses (`[[targets]]` counted as
/// `[target]`: one struct).
fn keys_used(v: &Value, table: &str, out: &mut BTreeSet<(String, String)>) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| keys_used(i, table, out)),
        Value::Object(map) => {
            for (k, child) in map {
                out.insert((table.to_string(), k.clone()));
                let sub = if table.is_empty() {
                    k.clone()
                } else {
                    format!("{table}.{k}")
                };
                keys_used(child, &sub, out);
            }
        }
        _ => {}
    }
}

#[test]
fn schema_accepts_every_key_the_parser_accepts() {
    let v = validator();
    let dir = scratch();
    let mut used = BTreeSet::new();
    for text in every_key_scenarios(dir.path()) {
        parses(&text, dir.path()).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let doc = to_json(&text);
        let errors = schema_errors(&v, &doc);
        assert!(errors.is_empty(), "{errors:#?}\n{text}");
        keys_used(&doc, "", &mut used);
    }
    let used: BTreeSet<(String, String)> = used
        .into_iter()
        .map(|(t, k)| (t.replacen("targets", "target", 1), k))
        .collect();
    for (table, keys) in KNOWN_KEYS {
        let table = table.replacen("targets", "target", 1);
        for key in *keys {
            assert!(
                used.contains(&(table.clone(), key.to_string())),
                "no accepted scenario here uses `{table}.{key}`: add it to every_key_scenarios"
            );
        }
    }
}

/// Every `enum` of the schema, with a scenario around one of its names: each name it lists
/// must be one the parser accepts. A new `enum` needs a scenario here.
#[test]
fn closed_sets_are_names_the_parser_accepts() {
    const LIST: &str = "[[workload]]\nmethod = \"tools/list\"\n";
    const LOAD: &str = "[load]\nduration = \"1s\"\n";
    let around: BTreeMap<&str, fn(&str) -> String> = BTreeMap::from([
        (
            "/$defs/revision/enum",
            (|v| format!("[target]\nurl = \"http://h/mcp\"\nprotocol = \"{v}\"\n{LOAD}{LIST}"))
                as fn(&str) -> String,
        ),
        ("/$defs/transport/enum", |v| {
            let at = match v {
                "stdio" => "command = [\"srv\"]",
                "websocket" | "ws" => "url = \"ws://h/ws\"",
                _ => "url = \"http://h/mcp\"",
            };
            format!("[target]\ntransport = \"{v}\"\n{at}\n{LOAD}{LIST}")
        }),
        ("/$defs/http/enum", |v| {
            format!("[target]\nurl = \"http://h/mcp\"\nhttp = \"{v}\"\n{LOAD}{LIST}")
        }),
        ("/properties/embedded/properties/response/enum", |v| {
            format!("[embedded]\nresponse = \"{v}\"\n{LOAD}{LIST}")
        }),
        ("/properties/load/properties/model/enum", |v| {
            let rate = if v == "open" { "rate = 5\n" } else { "" };
            format!("[load]\nmodel = \"{v}\"\n{rate}duration = \"1s\"\n{LIST}")
        }),
        ("/properties/load/properties/arrival/enum", |v| {
            format!(
                "[load]\nmodel = \"open\"\nrate = 5\narrival = \"{v}\"\nduration = \"1s\"\n{LIST}"
            )
        }),
        ("/properties/load/properties/sessions/enum", |v| {
            format!("[load]\nsessions = \"{v}\"\nduration = \"1s\"\n{LIST}")
        }),
        ("/properties/load/properties/pattern/enum", |v| {
            format!("[load]\npattern = \"{v}\"\nduration = \"1s\"\n{LIST}")
        }),
        ("/properties/load/properties/engine/enum", |v| {
            format!("[load]\nengine = \"{v}\"\nduration = \"1s\"\n{LIST}")
        }),
        ("/properties/replay/properties/mode/enum", |v| {
            format!("[replay]\ntrace = \"trace.jsonl\"\nmode = \"{v}\"\n{LOAD}")
        }),
        ("/properties/workload/items/properties/method/enum", |v| {
            let tool = if v == "tools/call" {
                "tool = \"echo\"\n"
            } else {
                ""
            };
            format!("{LOAD}[[workload]]\nmethod = \"{v}\"\n{tool}")
        }),
        ("/properties/find_max/properties/search/enum", |v| {
            format!("{LOAD}[find_max]\nsearch = \"{v}\"\np99 = \"10ms\"\n{LIST}")
        }),
    ]);
    fn enums(v: &Value, at: &str, out: &mut Vec<(String, Vec<String>)>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    let path = format!("{at}/{k}");
                    if k == "enum" {
                        let names = c.as_array().unwrap().iter();
                        out.push((path, names.map(|n| n.as_str().unwrap().into()).collect()));
                    } else {
                        enums(c, &path, out);
                    }
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    enums(c, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    enums(&schema_json(), "", &mut found);
    let dir = scratch();
    std::fs::write(
        dir.path().join("trace.jsonl"),
        "{\"mcpbench_trace\":1}\n{\"t\":0,\"session\":1,\"method\":\"tools/list\"}\n",
    )
    .unwrap();
    let v = validator();
    for (path, names) in &found {
        let make = around
            .get(path.as_str())
            .unwrap_or_else(|| panic!("{path}: add a scenario around its names"));
        for name in names {
            let text = make(name);
            parses(&text, dir.path()).unwrap_or_else(|e| panic!("{path} `{name}`: {e}"));
            let errors = schema_errors(&v, &to_json(&text));
            assert!(errors.is_empty(), "{path} `{name}`: {errors:#?}");
        }
    }
    assert_eq!(found.len(), around.len(), "{found:?}");
}

const MIN: &str =
    "[load]\nconcurrency = 2\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n";
const OPEN: &str = "[load]\nmodel = \"open\"\nrate = 5\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n";
const CALL: &str = "[load]\nconcurrency = 2\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/call\"\ntool = \"echo\"\narguments = { message = \"hi\" }\n";
const REMOTE: &str = "[target]\nurl = \"http://localhost:8080/mcp\"\n[load]\nconcurrency = 2\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n";
const FIND: &str = "[load]\nconcurrency = 2\nduration = \"1s\"\n[find_max]\np99 = \"10ms\"\n[[workload]]\nmethod = \"tools/list\"\n";
const AB: &str = "[[targets]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n[[targets]]\nname = \"b\"\nurl = \"http://127.0.0.1:2/mcp\"\n[ab]\npairs = 5\n[load]\nconcurrency = 2\nduration = \"20s\"\n[[workload]]\nmethod = \"tools/list\"\n";
const LIMITS: &str = "[embedded]\ncatalog = 10\nbackend_latency = \"5ms\"\nbackend_error_rate = 0.5\n[load]\nconcurrency = 2\nduration = \"1s\"\n[thresholds]\np99 = \"< 20ms\"\n\"tools/list\".p90 = \"< 20ms\"\n[[workload]]\nmethod = \"tools/list\"\n";

/// (c) Typical mistakes, each one edit of a scenario both accept: the parser refuses it, and
/// so does the schema (an editor underlines it before `mcpbench validate` is run).
#[test]
fn mistakes_are_refused_by_the_schema_and_the_parser() {
    let cases: &[(&str, &str, &str)] = &[
        (MIN, "concurrency = 2", "concurency = 2"),
        (MIN, "concurrency = 2", "concurrency = \"ten\""),
        (MIN, "concurrency = 2", "concurrency = 0"),
        (MIN, "concurrency = 2", "concurrency = 200000"),
        (
            MIN,
            "concurrency = 2",
            "concurrency = 2\nmodel = \"bursty\"",
        ),
        (MIN, "concurrency = 2", "concurrency = 2\nrate = 5"),
        (
            MIN,
            "concurrency = 2",
            "concurrency = 2\nrelease_interval = \"1ms\"",
        ),
        (
            MIN,
            "concurrency = 2",
            "concurrency = 2\nsessions = \"per-user\"",
        ),
        (MIN, "concurrency = 2", "concurrency = 2\nworkers = 0"),
        (MIN, "concurrency = 2", "concurrency = 2\nthink = \"fast\""),
        (MIN, "concurrency = 2", "concurrency = 2\ntimeout = 5"),
        (MIN, "concurrency = 2", "concurrency = 2\nrequests = 0"),
        (MIN, "duration = \"1s\"", "duration = \"5\""),
        (MIN, "duration = \"1s\"", "duration = \"5 s\""),
        (MIN, "duration = \"1s\"", "duration = \"1d\""),
        (MIN, "duration = \"1s\"\n", ""),
        (MIN, "duration = \"1s\"", "warmup = \"1s\""),
        (
            MIN,
            "duration = \"1s\"",
            "duration = \"1s\"\n[[load.stages]]\nduration = \"1s\"\nconcurrency = 2",
        ),
        (MIN, "[load]", "[loads]"),
        (MIN, "[load]", "nam = \"x\"\n[load]"),
        (MIN, "[load]", "name = \"a/b\"\n[load]"),
        (MIN, "[load]", "[embedded]\nresponse = \"xml\"\n[load]"),
        (MIN, "[load]", "[embedded]\ntransport = \"grpc\"\n[load]"),
        (
            MIN,
            "[load]",
            "[embedded]\nprotocol = \"2025-01-01\"\n[load]",
        ),
        (MIN, "[load]", "[ab]\npairs = 5\n[load]"),
        (
            MIN,
            "[load]",
            "[target]\nurl = \"http://h/mcp\"\n[embedded]\ncatalog = 1\n[load]",
        ),
        (MIN, "[[workload]]\nmethod = \"tools/list\"\n", ""),
        (MIN, "method = \"tools/list\"", "method = \"tools/get\""),
        (
            MIN,
            "method = \"tools/list\"",
            "method = \"tools/list\"\ntool = \"echo\"",
        ),
        (MIN, "method = \"tools/list\"", "method = \"tools/call\""),
        (
            MIN,
            "method = \"tools/list\"",
            "method = \"tools/list\"\nweight = 0",
        ),
        (
            MIN,
            "method = \"tools/list\"",
            "method = \"tools/list\"\nexpect = { is_error = false }",
        ),
        (
            MIN,
            "method = \"tools/list\"",
            "method = \"tools/list\"\nexpect = { present = [\"tools\"] }",
        ),
        (CALL, "tool = \"echo\"", "tool = \"\""),
        (
            CALL,
            "tool = \"echo\"",
            "tool = \"echo\"\nexpect = { tools = [\"echo\"] }",
        ),
        (
            CALL,
            "tool = \"echo\"",
            "tool = \"echo\"\nprogress = \"yes\"",
        ),
        (OPEN, "rate = 5", "rate = 5\nthink = \"1ms\""),
        (OPEN, "rate = 5", "rate = -1"),
        (OPEN, "rate = 5", "rate = 5\nmax_in_flight = 0"),
        (OPEN, "rate = 5", "rate = 5\narrival = \"bursty\""),
        (OPEN, "rate = 5\n", ""),
        (
            OPEN,
            "duration = \"1s\"",
            "[[load.stages]]\nduration = \"1s\"\nconcurrency = 3",
        ),
        (REMOTE, "[target]", "[target]\ntransport = \"grpc\""),
        (REMOTE, "[target]", "[target]\nhttp = \"3\""),
        (REMOTE, "[target]", "[target]\nname = \"x\""),
        (REMOTE, "[target]", "[target]\nprotocol = \"2025-01-01\""),
        (
            REMOTE,
            "[target]",
            "[target]\nprotocol = [\"auto\", \"2025-11-25\"]",
        ),
        (REMOTE, "[target]", "[target]\ncommand = [\"srv\"]"),
        (REMOTE, "[target]", "[target]\ntool_prefix = \"a b\""),
        (REMOTE, "[target]", "[target]\npid = 0"),
        (REMOTE, "[target]", "[target]\npid = [7, 7]"),
        (REMOTE, "[target]", "[target]\npid = \"7\""),
        (REMOTE, "[target]", "[target]\ntiming_header = \"a:b:c\""),
        (
            REMOTE,
            "[target]",
            "[target]\nheaders = { \"bad header\" = \"x\" }",
        ),
        (
            REMOTE,
            "[target]\nurl = \"http:",
            "[target]\ntls = { cert = \"c.pem\" }\nurl = \"https:",
        ),
        (
            REMOTE,
            "[target]",
            "[target]\ncredentials = [{ token = \"t\" }]",
        ),
        (
            REMOTE,
            "[target]",
            "[target]\ncredentials = [{ tenant = \"a\" }]",
        ),
        (
            REMOTE,
            "[target]",
            "[target]\noauth = { token_url = \"http://h/t\", client_id = \"i\" }",
        ),
        (
            REMOTE,
            "url = \"http://localhost:8080/mcp\"",
            "url = \"ftp://127.0.0.1/mcp\"",
        ),
        (REMOTE, "url = \"http://localhost:8080/mcp\"", "url = []"),
        (
            REMOTE,
            "url = \"http://localhost:8080/mcp\"",
            "transport = \"stdio\"",
        ),
        (FIND, "p99 = \"10ms\"", "start = 1"),
        (
            FIND,
            "p99 = \"10ms\"",
            "p99 = \"10ms\"\nstep = 5\nfactor = 2",
        ),
        (FIND, "p99 = \"10ms\"", "p99 = \"10ms\"\nfactor = 1"),
        (FIND, "p99 = \"10ms\"", "p99 = \"10ms\"\nprecision = 0.9"),
        (
            FIND,
            "p99 = \"10ms\"",
            "p99 = \"10ms\"\nsearch = \"binary\"",
        ),
        (
            FIND,
            "p99 = \"10ms\"",
            "p99 = \"10ms\"\nsearch = \"adaptive\"\nstep = 5",
        ),
        (
            FIND,
            "p99 = \"10ms\"",
            "p99 = \"10ms\"\nstep = 5\nconfirm_duration = \"5s\"",
        ),
        (FIND, "p99 = \"10ms\"", "p99 = \"10ms\"\nerror_rate = 2"),
        (AB, "pairs = 5", "pairs = 2"),
        (AB, "pairs = 5", "levels = []"),
        (AB, "pairs = 5", "slice = \"two\""),
        (AB, "name = \"a\"", "name = \"a b\""),
        (AB, "name = \"a\"\n", ""),
        (AB, "[ab]", "[target]\nurl = \"http://h/mcp\"\n[ab]"),
        (AB, "[ab]", "[find_max]\np99 = \"1ms\"\n[ab]"),
        (LIMITS, "catalog = 10", "catalog = 200000"),
        (LIMITS, "catalog = 10", "page_size = 0"),
        (
            LIMITS,
            "backend_latency = \"5ms\"",
            "backend_latency = \"gaussian:5ms\"",
        ),
        (
            LIMITS,
            "backend_latency = \"5ms\"",
            "backend_latency = \"uniform:1ms\"",
        ),
        (
            LIMITS,
            "backend_error_rate = 0.5",
            "backend_error_rate = 1.5",
        ),
        (LIMITS, "p99 = \"< 20ms\"", "p99 = \"< 20\""),
        (LIMITS, "p99 = \"< 20ms\"", "p99 = \"20ms\""),
        (LIMITS, "p99 = \"< 20ms\"", "p98 = \"< 20ms\""),
        (LIMITS, "p99 = \"< 20ms\"", "p99 = 20"),
        (LIMITS, "p99 = \"< 20ms\"", "error_rate = \"< 1ms\""),
        (LIMITS, "p99 = \"< 20ms\"", "throughput = \"> 10 rps\""),
        (LIMITS, "p99 = \"< 20ms\"", "abort_on_fail = \"yes\""),
        (LIMITS, "\"tools/list\".p90", "\"tools/list\".p98"),
        (LIMITS, "\"tools/list\".p90", "\"tools/list\".abort_on_fail"),
    ];
    let dir = scratch();
    let v = validator();
    for base in [MIN, OPEN, CALL, REMOTE, FIND, AB, LIMITS] {
        parses(base, dir.path()).unwrap_or_else(|e| panic!("{e}\n{base}"));
        assert!(v.is_valid(&to_json(base)), "{base}");
    }
    for (base, from, to) in cases {
        assert!(base.contains(from), "{from:?} is not in\n{base}");
        let text = base.replacen(from, to, 1);
        assert!(
            parses(&text, dir.path()).is_err(),
            "the parser accepts:\n{text}"
        );
        assert!(!v.is_valid(&to_json(&text)), "the schema accepts:\n{text}");
    }
}

/// (c) The three mistakes people make most, pointed at where they are; and what the schema
/// refuses for a type is refused by `mcpbench validate` (exit 2, same key).
#[test]
fn typical_mistakes_point_at_their_key_and_validate_refuses_them() {
    let v = validator();
    let dir = scratch();
    for (from, to, at, key) in [
        (
            "concurrency = 2",
            "concurency = 2",
            "/load",
            "load.concurency",
        ),
        (
            "concurrency = 2",
            "concurrency = \"ten\"",
            "/load/concurrency",
            "load.concurrency",
        ),
        (
            "concurrency = 2",
            "concurrency = 2\nmodel = \"bursty\"",
            "/load/model",
            "load.model",
        ),
    ] {
        let text = MIN.replacen(from, to, 1);
        let errors: Vec<String> = v
            .iter_errors(&to_json(&text))
            .map(|e| e.instance_path().to_string())
            .collect();
        assert!(errors.iter().any(|p| p == at), "{to}: {errors:?}");
        let file = scenario(dir.path(), "mistake.toml", &text);
        let (code, out, err) = mcpbench(&["validate", file.to_str().unwrap()], dir.path());
        assert_eq!(code, 2, "{to}: {out}{err}");
        assert!(err.contains(&format!("`{key}`")), "{to}: {err}");
    }
}

/// A pattern of the schema, compiled by the same validator the tests use.
fn pattern(pointer: &str) -> jsonschema::Validator {
    let root = schema_json();
    let p = root.pointer(pointer).unwrap_or_else(|| panic!("{pointer}"));
    jsonschema::validator_for(&json!({ "type": "string", "pattern": p })).unwrap()
}

/// The duration pattern accepts what `mcpbench_knobs::parse_duration` accepts, and the
/// patterns of think times, backend latencies and threshold conditions what the parser does.
#[test]
fn grammars_agree_with_the_parser() {
    let duration = pattern("/$defs/duration/pattern");
    for s in [
        "0", "0s", "1s", "1.5s", "1.s", ".5s", "250us", "250µs", "250μs", "10ns", "1m30s", "1h",
        " 5ms ", "1s.5ms", "1m1m", "", " ", "5", "00", "s", "5 s", "5sec", "1.2.3s", "-1s", "+1s",
        "1e3ms", "1m 30s", "inf", "ms5", ".s", "5S", "1d", "1..5s",
    ] {
        assert_eq!(
            duration.is_valid(&json!(s)),
            mcpbench_knobs::parse_duration(s).is_ok(),
            "duration {s:?}"
        );
    }

    let latency = pattern("/properties/embedded/properties/backend_latency/pattern");
    for s in [
        "5ms",
        "0",
        "fixed:5ms",
        "fixed: 5ms ",
        "uniform:1ms..10ms",
        "uniform: 1ms .. 10ms",
        "lognormal:p50=2ms,p99=20ms",
        "lognormal:p99=20ms,p50=2ms",
        "gaussian:5ms",
        "uniform:1ms",
        "lognormal:p50=2ms",
        "lognormal:p50=2ms,p99=20ms,p50=3ms",
        "5",
        "fixed:",
        "lognormal: p50=2ms,p99=20ms",
        "Fixed:5ms",
        "uniform:1ms..10ms..20ms",
        "5ms:",
    ] {
        assert_eq!(
            latency.is_valid(&json!(s)),
            s.parse::<mcpbench_knobs::Latency>().is_ok(),
            "backend_latency {s:?}"
        );
    }

    let dir = scratch();
    let think = pattern("/properties/load/properties/think/pattern");
    for s in [
        "10ms..50ms",
        "100ms",
        "0..1s",
        " 1s .. 2s ",
        "fast",
        "10ms-50ms",
        "10ms..",
        "..10ms",
        "1s..2s..3s",
        "5",
    ] {
        let text = format!(
            "[load]\nthink = \"{s}\"\nduration = \"1s\"\n[[workload]]\nmethod = \"tools/list\"\n"
        );
        assert_eq!(
            think.is_valid(&json!(s)),
            parses(&text, dir.path()).is_ok(),
            "think {s:?}"
        );
    }

    // Conditions, on a stdio target (its process is watched, for the target's metrics).
    let latency = "/$defs/latency_threshold/pattern";
    let conditions: [(&str, &str, &[&str]); 6] = [
        (
            "p99",
            latency,
            &[
                "< 20ms",
                "<=1s",
                "> 500us",
                "< 500µs",
                ">= 1_000.5 ms",
                "< .5s",
                "< 1.ms",
                "< 20",
                "20ms",
                "=< 20ms",
                "< 20 sec",
                "< ms",
                "< 5μs",
                "< 1.2.3ms",
                "< 1m",
            ],
        ),
        (
            "error_rate",
            "/$defs/error_rate_threshold/pattern",
            &[
                "< 0.1%", "< 0.001", "<= 1", "< 1 %", "< 1ms", "< 5/s", "0.1%", "< %",
            ],
        ),
        (
            "throughput",
            "/$defs/throughput_threshold/pattern",
            &[
                "> 1000/s",
                ">= 50",
                "> 1_000 /s",
                "> 1000/m",
                "> 10 rps",
                "> /s",
            ],
        ),
        (
            "target_cpu_per_request",
            "/properties/thresholds/properties/target_cpu_per_request/pattern",
            &["< 40us", "<= 1.5 ms", "< 40µs", "< 40", "< 1s", "< 40μs"],
        ),
        (
            "target_memory_growth",
            "/properties/thresholds/properties/target_memory_growth/pattern",
            &["< 50MB", "< 1 GiB", "<= 512KB", "< 50", "< 50mb", "< 1TB"],
        ),
        (
            "target_memory_per_session",
            "/properties/thresholds/properties/target_memory_per_session/pattern",
            &[
                "< 4KiB", "<= 512 B", "< 1.5KB", "< 1 MiB", "< 4", "< 4kb", "< 1GB",
            ],
        ),
    ];
    for (metric, pointer, samples) in conditions {
        let p = pattern(pointer);
        for s in samples {
            let text =
                format!("[target]\ncommand = [\"srv\"]\n{MIN}[thresholds]\n{metric} = \"{s}\"\n");
            assert_eq!(
                p.is_valid(&json!(s)),
                parses(&text, dir.path()).is_ok(),
                "{metric} {s:?}"
            );
        }
    }
}

/// (d) `mcpbench schema scenario` prints the committed file (JSON), `schema summary` the
/// result schema; both exit 0.
#[test]
fn schema_command_prints_the_committed_schemas() {
    for (which, file) in [
        ("scenario", "scenarios/schema.json"),
        ("summary", "results/schema.json"),
    ] {
        let (code, out, err) = mcpbench(&["schema", which], &repo());
        assert_eq!(code, 0, "{err}");
        assert!(
            out == std::fs::read_to_string(repo().join(file)).unwrap(),
            "`mcpbench schema {which}` is not {file} as committed"
        );
        let v: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
    let (code, _, err) = mcpbench(&["schema", "plan"], &repo());
    assert_eq!(code, 2, "{err}");
}
