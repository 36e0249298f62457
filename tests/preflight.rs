//! Preflight checks generated arguments with a complete JSON Schema validator: a target whose
//! input schemas use `anyOf`, `oneOf`, `allOf`, `$ref`, `pattern`, `const`, `enum` of numbers,
//! `exclusiveMinimum` and `format` gets arguments that break them refused before load, with
//! the scenario location; arguments that fit them run.

use crate::support::{repo, run_in, scratch};

/// (tool, arguments that break its schema, arguments that fit it)
const CASES: &[(&str, &str, &str)] = &[
    (
        "any_of",
        r#"{ id = "abc" }"#,
        r#"{ id = "inv-${range:1..9}" }"#,
    ),
    ("one_of", r#"{ n = 6 }"#, r#"{ n = "${pick:2,3,4,9}" }"#),
    ("all_of", r#"{ a = 1 }"#, r#"{ a = 1, b = 2 }"#),
    (
        "ref",
        r#"{ limit = 50 }"#,
        r#"{ limit = "${range:1..10}" }"#,
    ),
    (
        "pattern",
        r#"{ q = "ABC" }"#,
        r#"{ q = "${pick:abc,xyz}" }"#,
    ),
    ("const", r#"{ v = 3 }"#, r#"{ v = 2 }"#),
    ("enum_number", r#"{ n = 7 }"#, r#"{ n = "${pick:1,2,3}" }"#),
    ("exclusive", r#"{ x = 0 }"#, r#"{ x = "${range:1..5}" }"#),
    (
        "format",
        r#"{ email = "not an address" }"#,
        r#"{ email = "user${seq}@example.com" }"#,
    ),
];

fn scenario(tool: &str, arguments: &str) -> String {
    let script = repo().join("tests/fixtures/schema_stdio.py");
    format!(
        "[target]\ncommand = [\"python3\", \"{}\"]\n[load]\nconcurrency = 1\nrequests = 5\n[[workload]]\nmethod = \"tools/call\"\ntool = \"{tool}\"\narguments = {arguments}\n",
        script.display()
    )
}

#[test]
fn arguments_that_break_a_schema_keyword_are_refused_before_load() {
    for (tool, bad, _) in CASES {
        let dir = scratch();
        let err = run_in(&scenario(tool, bad), dir.path())
            .expect_err(&format!("{tool}: {bad} breaks the schema"));
        let msg = err.to_string();
        assert!(
            msg.contains("test.toml:9:13: `workload[1].arguments")
                && msg.contains(&format!(
                    "the arguments generated for tool `{tool}` do not fit its input schema"
                )),
            "{tool}: {msg}"
        );
        assert!(!dir.path().join("run").exists(), "{tool}: nothing was run");
    }
}

#[test]
fn arguments_that_fit_every_keyword_run() {
    for (tool, _, good) in CASES {
        let dir = scratch();
        let out = run_in(&scenario(tool, good), dir.path())
            .unwrap_or_else(|e| panic!("{tool}: {good}: {e}"));
        let t = &out.summary.totals;
        assert_eq!((t.started, t.ok), (5, 5), "{tool}");
    }
}
