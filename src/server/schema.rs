//! A small JSON Schema validator for tool `inputSchema`s.
//!
//! It covers the keywords the reference server's own schemas use (`type`, `properties`,
//! `required`, `additionalProperties`, `minimum`, `maximum`, `minLength`, `maxLength`, `enum`,
//! `items`), which is all a benchmark tool needs; 2025-11-25 asks servers to report invalid
//! arguments as an `isError` tool result, and the message names the offending argument.

use serde_json::Value;

/// Checks `value` against `schema`; the error names the path of the first problem.
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "arguments")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => type_name(v) == other,
    }
}

fn check(schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    match s.get("type") {
        Some(Value::String(t)) if !type_matches(t, v) => {
            return Err(format!("{path}: expected {t}, got {}", type_name(v)));
        }
        Some(Value::Array(ts))
            if !ts
                .iter()
                .any(|t| t.as_str().is_some_and(|t| type_matches(t, v))) =>
        {
            return Err(format!(
                "{path}: got {}, which is not an allowed type",
                type_name(v)
            ));
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(format!("{path}: must be one of {}", list.join(", ")));
    }
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = s.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                return Err(format!("{path}: {n} is less than the minimum {min}"));
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                return Err(format!("{path}: {n} is more than the maximum {max}"));
            }
        }
        Value::String(text) => {
            let len = text.chars().count() as u64;
            if let Some(min) = s.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                return Err(format!("{path}: must be at least {min} characters"));
            }
            if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                return Err(format!("{path}: must be at most {max} characters"));
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
        }
        Value::Object(map) => {
            if let Some(Value::Array(req)) = s.get("required") {
                for r in req.iter().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        return Err(format!("{path}: missing required property `{r}`"));
                    }
                }
            }
            let props = s.get("properties").and_then(Value::as_object);
            for (k, item) in map {
                match props.and_then(|p| p.get(k)) {
                    Some(ps) => check(ps, item, &format!("{path}.{k}"))?,
                    None => {
                        if s.get("additionalProperties") == Some(&Value::Bool(false)) {
                            return Err(format!("{path}: unexpected property `{k}`"));
                        }
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validates_the_keywords_it_knows() {
        let s = json!({
            "type": "object",
            "properties": {
                "ms": {"type": "integer", "minimum": 0, "maximum": 10},
                "name": {"type": "string", "minLength": 1, "maxLength": 3},
                "p": {"type": "string", "enum": ["low", "high"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["ms"],
            "additionalProperties": false
        });
        assert!(
            validate(
                &s,
                &json!({"ms": 5, "name": "abc", "p": "low", "tags": ["a"]})
            )
            .is_ok()
        );
        assert!(validate(&s, &json!({"ms": 5.0})).is_ok());
        assert_eq!(
            validate(&s, &json!({})).unwrap_err(),
            "arguments: missing required property `ms`"
        );
        assert_eq!(
            validate(&s, &json!({"ms": "5"})).unwrap_err(),
            "arguments.ms: expected integer, got string"
        );
        assert!(
            validate(&s, &json!({"ms": 11}))
                .unwrap_err()
                .contains("maximum")
        );
        assert!(
            validate(&s, &json!({"ms": 1, "name": ""}))
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(
            validate(&s, &json!({"ms": 1, "p": "mid"}))
                .unwrap_err()
                .contains("one of")
        );
        assert!(
            validate(&s, &json!({"ms": 1, "x": 1}))
                .unwrap_err()
                .contains("unexpected property `x`")
        );
        assert!(
            validate(&s, &json!({"ms": 1, "tags": [1]}))
                .unwrap_err()
                .contains("arguments.tags[0]")
        );
        assert!(validate(&s, &json!([1])).is_err());
    }
}
