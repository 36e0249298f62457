//! `expect` rules checked on every answer of a workload entry that has them: the tools a
//! tenant is shown, result fields, the tool's output schema. An answer that breaks one is an
//! `assertion` outcome; its first example per interval is kept with the failure samples.
//! Opt-in: a checked answer is parsed once more (an entry without rules costs nothing).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::client::Preflight;
use crate::protocol::schema::{self, Validator};
use crate::scenario::plan::{Expect, Method, WorkItem};

/// The rules of one workload entry, ready to check.
pub struct Check {
    is_error: Option<bool>,
    present: Vec<String>,
    equals: Vec<(String, Value)>,
    /// The tool's `outputSchema`, compiled.
    output: Option<Validator>,
    tools: Option<BTreeSet<String>>,
    /// Per tenant index (of the target's credentials).
    tenant_tools: Vec<Option<BTreeSet<String>>>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("is_error", &self.is_error)
            .field("present", &self.present)
            .field("output_schema", &self.output.is_some())
            .finish()
    }
}

impl Check {
    /// The entry's rules against what the preflight found; an `output_schema` rule for a tool
    /// that declares none is refused before load.
    pub fn new(
        e: &Expect,
        item: &WorkItem,
        pre: &Preflight,
        tenants: &[String],
    ) -> Result<Check, String> {
        let output = match &item.method {
            Method::ToolsCall { tool } if e.output_schema => {
                let declared = pre
                    .tools
                    .iter()
                    .find(|(n, _)| n == tool)
                    .map(|(_, d)| &d["outputSchema"])
                    .filter(|s| s.is_object());
                let Some(s) = declared else {
                    return Err(format!(
                        "expect.output_schema: the target's tool `{tool}` declares no outputSchema"
                    ));
                };
                Some(schema::compile(s).map_err(|e| {
                    format!(
                        "expect.output_schema: the outputSchema of `{tool}` does not compile: {e}"
                    )
                })?)
            }
            _ => None,
        };
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        let tenant_tools = tenants
            .iter()
            .map(|t| {
                e.tenant_tools
                    .iter()
                    .find(|(n, _)| n == t)
                    .map(|(_, v)| set(v))
            })
            .collect();
        if let Some((t, _)) = e.tenant_tools.iter().find(|(t, _)| !tenants.contains(t)) {
            return Err(format!(
                "expect.tenant_tools names tenant `{t}`, which no target.credentials entry has"
            ));
        }
        Ok(Check {
            is_error: e.is_error,
            present: e.present.clone(),
            equals: e.equals.clone(),
            output,
            tools: e.tools.as_deref().map(set),
            tenant_tools,
        })
    }

    /// Checks one answer (the whole JSON-RPC message) of a user of `tenant`: what is wrong,
    /// if anything.
    pub fn check(&self, message: &[u8], tenant: Option<usize>) -> Result<(), String> {
        let v: Value =
            serde_json::from_slice(message).map_err(|_| "the answer is not JSON".to_string())?;
        let result = &v["result"];
        if let Some(want) = self.is_error {
            let got = result["isError"].as_bool().unwrap_or(false);
            if got != want {
                return Err(format!("isError is {got}, expected {want}"));
            }
        }
        for p in &self.present {
            if result.pointer(p).is_none() {
                return Err(format!("{p} is missing"));
            }
        }
        for (p, want) in &self.equals {
            match result.pointer(p) {
                Some(got) if same(got, want) => {}
                Some(got) => return Err(format!("{p} is {}, expected {want}", short(got))),
                None => return Err(format!("{p} is missing, expected {want}")),
            }
        }
        if let Some(validator) = &self.output {
            let Some(s) = result.get("structuredContent") else {
                return Err("no structuredContent, and the tool declares an outputSchema".into());
            };
            if let Err(e) = schema::check(validator, s) {
                let at: String = e.path.iter().map(|p| format!("/{p}")).collect();
                return Err(format!(
                    "structuredContent{at} breaks the outputSchema: {}",
                    e.message
                ));
            }
        }
        let expected = tenant
            .and_then(|t| self.tenant_tools.get(t))
            .and_then(Option::as_ref)
            .map(|s| (s, tenant))
            .or(self.tools.as_ref().map(|s| (s, None)));
        if let Some((want, _)) = expected {
            let listed: BTreeSet<&str> = result["tools"]
                .as_array()
                .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
                .unwrap_or_default();
            if let Some(extra) = listed.iter().find(|n| !want.contains(**n)) {
                return Err(format!(
                    "tools/list shows `{extra}`, which is not in the expected set"
                ));
            }
            let last_page = result.get("nextCursor").is_none_or(Value::is_null);
            if last_page && let Some(missing) = want.iter().find(|n| !listed.contains(n.as_str())) {
                return Err(format!("tools/list does not show `{missing}`"));
            }
        }
        Ok(())
    }
}

/// JSON equality where numbers compare by value (`7` equals `7.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(e: Expect, tools: Vec<(String, Value)>, tenants: &[&str]) -> Check {
        let item = WorkItem {
            method: Method::ToolsCall { tool: "t".into() },
            weight: 1,
            op: 1,
            arguments: crate::scenario::args::ArgTemplate::empty(),
            progress: false,
            place: crate::scenario::Place {
                file: "t.toml".into(),
                line: 1,
                column: 1,
                key: "workload[1]".into(),
            },
            arguments_place: None,
            expect: None,
            deterministic: false,
            digest: None,
        };
        let pre = Preflight {
            revision: crate::protocol::version::Revision::V2025_11_25,
            tools,
        };
        let tenants: Vec<String> = tenants.iter().map(|s| s.to_string()).collect();
        Check::new(&e, &item, &pre, &tenants).unwrap()
    }

    fn msg(result: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": result})).unwrap()
    }

    #[test]
    fn result_rules() {
        let c = check(
            Expect {
                is_error: Some(false),
                present: vec!["/content/0/text".into()],
                equals: vec![("/structuredContent/id".into(), json!(7))],
                ..Expect::default()
            },
            vec![],
            &[],
        );
        let good = json!({"content": [{"type": "text", "text": "x"}], "isError": false, "structuredContent": {"id": 7.0}});
        assert_eq!(c.check(&msg(good), None), Ok(()));
        let bad = json!({"content": [{"type": "text", "text": "x"}], "isError": true});
        assert_eq!(
            c.check(&msg(bad), None).unwrap_err(),
            "isError is true, expected false"
        );
        let wrong = json!({"content": [{"type": "text"}], "structuredContent": {"id": 8}});
        assert_eq!(
            c.check(&msg(wrong), None).unwrap_err(),
            "/content/0/text is missing"
        );
        let other = json!({"content": [{"text": "x"}], "structuredContent": {"id": 8}});
        assert_eq!(
            c.check(&msg(other), None).unwrap_err(),
            "/structuredContent/id is 8, expected 7"
        );
    }

    #[test]
    fn output_schemas_and_tool_sets() {
        let def = json!({"name": "t", "outputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}});
        let c = check(
            Expect {
                output_schema: true,
                ..Expect::default()
            },
            vec![("t".into(), def)],
            &[],
        );
        assert!(
            c.check(&msg(json!({"structuredContent": {"id": 1}})), None)
                .is_ok()
        );
        let e = c
            .check(&msg(json!({"structuredContent": {"id": "x"}})), None)
            .unwrap_err();
        assert!(
            e.starts_with("structuredContent/id breaks the outputSchema"),
            "{e}"
        );
        let sets = check(
            Expect {
                tenant_tools: vec![("a".into(), vec!["x".into(), "y".into()])],
                ..Expect::default()
            },
            vec![],
            &["a", "b"],
        );
        let list = |names: &[&str]| {
            msg(json!({"tools": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}))
        };
        assert!(sets.check(&list(&["x", "y"]), Some(0)).is_ok());
        assert_eq!(
            sets.check(&list(&["x", "y", "z"]), Some(0)).unwrap_err(),
            "tools/list shows `z`, which is not in the expected set"
        );
        assert_eq!(
            sets.check(&list(&["x"]), Some(0)).unwrap_err(),
            "tools/list does not show `y`"
        );
        assert!(sets.check(&list(&["z"]), Some(1)).is_ok(), "b has no rule");
    }
}
