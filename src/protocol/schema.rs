//! Tool input schemas (JSON Schema, 2020-12 unless `$schema` says otherwise): compiled once,
//! then checked against arguments. Preflight checks generated arguments against any target's
//! schemas with it, and the reference server checks every call's arguments with it. `format` is
//! asserted (servers that validate arguments check it); no remote `$ref` is ever fetched.

use std::fmt;

use serde_json::Value;

pub use jsonschema::Validator;

/// Compiles a schema; the error says why it is not a usable JSON Schema.
pub fn compile(schema: &Value) -> Result<Validator, String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Arguments that break their schema: where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The path of the offending value inside the arguments (`["address", "city"]`); empty for
    /// the arguments as a whole.
    pub path: Vec<String>,
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("arguments")?;
        for p in &self.path {
            write!(f, ".{p}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Checks `args` against a compiled schema: the first problem, if any.
pub fn check(v: &Validator, args: &Value) -> Result<(), SchemaError> {
    v.validate(args).map_err(|e| SchemaError {
        path: e
            .instance_path()
            .to_string()
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_argument() {
        let v = compile(&json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b/c": {"type": "integer"}}}}})).unwrap();
        let e = check(&v, &json!({"a": {"b/c": "x"}})).unwrap_err();
        assert_eq!(e.path, ["a", "b/c"]);
        assert_eq!(
            e.to_string(),
            "arguments.a.b/c: \"x\" is not of type \"integer\""
        );
        assert!(check(&v, &json!({"a": {"b/c": 1}})).is_ok());
        assert!(compile(&json!({"type": 5})).is_err());
        let email = compile(&json!({"type": "string", "format": "email"})).unwrap();
        assert!(check(&email, &json!("nope")).is_err(), "format is asserted");
    }
}
