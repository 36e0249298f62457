//! The tools `mcpbench mcp` lists: names, descriptions (written for the agent that reads them),
//! input schemas (checked on every call) and output schemas (what `structuredContent` holds;
//! clients validate results against them).

use serde_json::{Value, json};

use crate::protocol::version::Revision;

/// The tools, in `tools/list` order (their index is the server's tool index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Probe,
    Run,
    Compare,
}

impl Tool {
    pub const ALL: [Tool; 3] = [Tool::Probe, Tool::Run, Tool::Compare];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Probe => "probe",
            Tool::Run => "run",
            Tool::Compare => "compare",
        }
    }

    /// The definition `tools/list` shows.
    pub fn definition(self) -> Value {
        let (title, description, read_only, open_world) = match self {
            Tool::Probe => ("Probe an MCP server", PROBE, true, true),
            Tool::Run => ("Load-test an MCP server", RUN, false, true),
            Tool::Compare => ("Compare two load-test runs", COMPARE, true, false),
        };
        json!({
            "name": self.name(),
            "title": title,
            "description": description,
            "inputSchema": self.input_schema(),
            "outputSchema": self.output_schema(),
            "annotations": {
                "title": title,
                "readOnlyHint": read_only,
                "destructiveHint": false,
                "idempotentHint": read_only,
                "openWorldHint": open_world,
            },
        })
    }

    pub fn input_schema(self) -> Value {
        match self {
            Tool::Probe => probe_input(),
            Tool::Run => run_input(),
            Tool::Compare => compare_input(),
        }
    }

    pub fn output_schema(self) -> Value {
        match self {
            Tool::Probe => probe_output(),
            Tool::Run => run_output(),
            Tool::Compare => compare_output(),
        }
    }
}

const PROBE: &str = "Open one MCP session on a server's Streamable HTTP endpoint with mcpbench's \
client, walk tools/list and close: the protocol revision negotiated, the server's serverInfo, \
its tool names, and how long initialize and tools/list took. Use it before `run` to learn the \
tool names and to check that the server answers. Only servers on this MCP server's allow-list \
(loopback unless configured otherwise) can be probed.";

const RUN: &str = "Run a load test with mcpbench against an MCP server and return its result: \
requests started, ok and failed, throughput, latency percentiles per operation, outcome counts \
(tool errors, JSON-RPC error codes, HTTP statuses, timeouts), the load generator's own CPU, \
thresholds; the run's files (summary.json, latency.hlog, timeseries.csv, report.md, \
report.html) are written to `results_dir`. The target is \"embedded\" (mcpbench's reference \
server, started on 127.0.0.1 for the run; its tools: echo {message}, sleep {ms}, payload \
{bytes}, fail, cpu {iterations}, progress {steps, interval_ms}, search-contacts {query}, \
get-invoice {id}, create-ticket {title}) or a server URL on the allow-list. Give a workload \
(tools to call, weighted), a closed loop (`concurrency` virtual users, each one request at a \
time) or an open loop (`rate` requests per second), and a `duration` (default 10s). Argument \
strings may use generators: ${pick:a,b,c}, ${range:1..100}, ${seq}, ${random:8}. Or give a \
whole scenario as TOML text (`scenario`). Runs are bounded (duration, rate, concurrency, and \
at most rate bound × duration requests) and one runs at a time; the call returns when the run \
ends, so keep the duration well under your client's request timeout.";

const COMPARE: &str = "Compare two finished runs (their results directories, or summary.json \
files), as `mcpbench compare` does: per operation, the change of p50/p90/p95/p99/p99.9 latency, \
throughput and error rate, each with a verdict (regressed, improved, unchanged) that accounts \
for the noise seen across each run's one-second intervals; a change smaller than \
`min_change_percent` (default 10) is never a verdict. Relative paths are also looked up \
under this server's results root.";

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// A JSON number that may be `null` (a value that cannot be measured, or is not finite).
fn number() -> Value {
    json!({"type": ["number", "null"]})
}

fn integer() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn headers() -> Value {
    json!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "HTTP headers for the target, e.g. {\"Authorization\": \"Bearer …\"}. \
            Values are secrets: never echoed back. `${NAME}` reads an environment variable the \
            server was started to pass (`mcpbench mcp --env NAME`)."
    })
}

fn revisions() -> Vec<&'static str> {
    Revision::ALL.iter().map(|r| r.as_str()).collect()
}

fn probe_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "url": string("The server's Streamable HTTP endpoint, e.g. http://127.0.0.1:8080/mcp."),
            "headers": headers(),
            "protocol": {
                "type": "string",
                "enum": revisions(),
                "description": "The revision to offer (handshake era) or use (2026-07-28); default 2025-11-25."
            }
        },
        "required": ["url"],
        "additionalProperties": false
    })
}

fn probe_output() -> Value {
    object(
        json!({
            "url": {"type": "string"},
            "protocol": {"type": "string", "description": "The revision negotiated."},
            "server": {"type": ["object", "null"], "description": "serverInfo as the server sent it."},
            "tools": {"type": "array", "items": {"type": "string"}},
            "latency_ms": object(
                json!({"open": number(), "tools_list": number()}),
                &["open", "tools_list"],
            ),
        }),
        &["url", "protocol", "server", "tools", "latency_ms"],
    )
}

fn duration(description: &str) -> Value {
    json!({"type": ["string", "number"], "description": description})
}

fn run_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "target": string("\"embedded\" (mcpbench's reference server, started on 127.0.0.1 for the run), or the server's URL: http(s)://…/mcp (Streamable HTTP) or ws(s)://… (WebSocket)."),
            "command": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "A stdio server to start and load, instead of `target`: the program and its arguments (only if this MCP server allows stdio targets)."
            },
            "protocol": string("The revision to offer or use (2024-11-05 … 2026-07-28), or \"auto\" (server/discover, else initialize)."),
            "headers": headers(),
            "workload": {
                "type": "array",
                "minItems": 1,
                "maxItems": 32,
                "description": "What each request is, picked by weight.",
                "items": {
                    "type": "object",
                    "properties": {
                        "method": {"type": "string", "enum": ["tools/call", "tools/list"]},
                        "tool": string("The tool to call (tools/call)."),
                        "arguments": {"type": "object", "description": "The tool's arguments; strings may use generators such as ${range:1..100}."},
                        "weight": {"type": "integer", "minimum": 1, "maximum": 1000000}
                    },
                    "required": ["method"],
                    "additionalProperties": false
                }
            },
            "concurrency": {"type": "integer", "minimum": 1, "description": "Closed loop: virtual users, each with one request at a time. With `rate`: the most requests in flight."},
            "rate": {"type": "number", "exclusiveMinimum": 0, "description": "Open loop: requests per second (Poisson arrivals), each timed from when it was due."},
            "duration": duration("How long the run lasts, warm-up included: \"10s\", \"1m\", or a number of seconds. Default 10s."),
            "warmup": duration("The first part of the run, left out of the results (default none)."),
            "timeout": duration("Per-request timeout (default 10s)."),
            "requests": {"type": "integer", "minimum": 1, "description": "Stop once this many requests have started."},
            "name": string("The run's name (in its directory's name; default mcp-run)."),
            "scenario": string("A whole mcpbench scenario as TOML text (the format of `mcpbench run FILE`), instead of the fields above.")
        },
        "additionalProperties": false
    })
}

fn latency() -> Value {
    json!({
        "type": ["object", "null"],
        "description": "Latency of ok responses in milliseconds (null: none).",
        "properties": {
            "count": integer(), "min": number(), "mean": number(), "p50": number(),
            "p90": number(), "p95": number(), "p99": number(), "p999": number(), "max": number()
        },
        "required": ["count", "p50", "p99", "max"]
    })
}

fn totals() -> Value {
    object(
        json!({
            "started": integer(), "completed": integer(), "failed": integer(),
            "cancelled": integer(), "ok": integer(), "dropped": integer(),
            "throughput": number(), "error_rate": number(), "latency_ms": latency()
        }),
        &[
            "started",
            "ok",
            "failed",
            "throughput",
            "error_rate",
            "latency_ms",
        ],
    )
}

fn run_output() -> Value {
    object(
        json!({
            "results_dir": string("The run's directory (absolute)."),
            "summary_json": string("Its summary.json: the complete result."),
            "scenario": {"type": "string"},
            "target": object(
                json!({
                    "kind": {"type": "string"}, "url": {"type": "string"},
                    "transport": {"type": "string"}, "protocol": {"type": "string"}
                }),
                &["kind", "url", "transport", "protocol"],
            ),
            "load": object(
                json!({
                    "model": {"type": "string"}, "concurrency": integer(),
                    "duration_seconds": number(), "warmup_seconds": number(),
                    "requests": {"type": ["integer", "null"]}
                }),
                &["model", "concurrency", "duration_seconds"],
            ),
            "measured_seconds": number(),
            "interrupted": {"type": "boolean"},
            "totals": totals(),
            "session_opening": totals(),
            "operations": {
                "type": "array",
                "items": object(
                    json!({
                        "name": {"type": "string"}, "started": integer(), "ok": integer(),
                        "completed": integer(), "failed": integer(), "cancelled": integer(),
                        "throughput": number(), "latency_ms": latency(),
                        "outcomes": {
                            "type": "object",
                            "additionalProperties": {"type": "integer"},
                            "description": "Non-zero outcome counts: ok, tool_error, timeout, rpc_error:CODE, http:STATUS, …"
                        }
                    }),
                    &["name", "started", "ok", "failed", "throughput", "latency_ms", "outcomes"],
                )
            },
            "generator": object(
                json!({"workers": integer(), "cpu_seconds": number(), "cpu_us_per_request": number()}),
                &["workers", "cpu_seconds", "cpu_us_per_request"],
            ),
            "thresholds": {
                "type": "array",
                "items": object(
                    json!({
                        "name": {"type": "string"}, "condition": {"type": "string"},
                        "value": number(), "unit": {"type": "string"}, "passed": {"type": "boolean"}
                    }),
                    &["name", "condition", "passed"],
                )
            },
            "passed": {"type": "boolean", "description": "No threshold breached."},
            "notes": {"type": "array", "items": {"type": "string"}}
        }),
        &[
            "results_dir",
            "summary_json",
            "scenario",
            "target",
            "load",
            "measured_seconds",
            "interrupted",
            "totals",
            "session_opening",
            "operations",
            "generator",
            "thresholds",
            "passed",
            "notes",
        ],
    )
}

fn compare_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "base": string("The earlier run: its results directory or summary.json."),
            "current": string("The run to judge against it."),
            "min_change_percent": {"type": "number", "minimum": 0, "description": "The smallest change, in percent, that can be a regression or an improvement (default 10)."}
        },
        "required": ["base", "current"],
        "additionalProperties": false
    })
}

fn verdict() -> Value {
    json!({"type": "string", "enum": ["regressed", "improved", "unchanged"]})
}

fn compare_output() -> Value {
    object(
        json!({
            "base": {"type": "string"},
            "current": {"type": "string"},
            "min_change_percent": number(),
            "verdict": verdict(),
            "regressed": integer(),
            "improved": integer(),
            "operations": {
                "type": "array",
                "items": object(
                    json!({
                        "name": {"type": "string"},
                        "verdict": verdict(),
                        "metrics": {
                            "type": "array",
                            "items": object(
                                json!({
                                    "metric": {"type": "string"}, "unit": {"type": "string"},
                                    "base": number(), "current": number(),
                                    "change_percent": number(), "statistic": number(),
                                    "verdict": verdict()
                                }),
                                &["metric", "unit", "base", "current", "change_percent", "verdict"],
                            )
                        }
                    }),
                    &["name", "verdict", "metrics"],
                )
            },
            "unmatched": {"type": "array", "items": {"type": "string"}, "description": "Operations in only one of the runs."},
            "notes": {"type": "array", "items": {"type": "string"}}
        }),
        &[
            "base",
            "current",
            "min_change_percent",
            "verdict",
            "regressed",
            "improved",
            "operations",
            "unmatched",
            "notes",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_compile_and_are_objects() {
        for t in Tool::ALL {
            for s in [t.input_schema(), t.output_schema()] {
                assert_eq!(s["type"], "object", "{}", t.name());
                crate::protocol::schema::compile(&s)
                    .unwrap_or_else(|e| panic!("{}: {e}", t.name()));
            }
            let d = t.definition();
            assert_eq!(d["name"], t.name());
            assert!(d["description"].as_str().unwrap().len() > 100);
        }
    }
}
