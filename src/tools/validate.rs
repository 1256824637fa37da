//! Checking tool arguments against the JSON Schema the model was given, before a tool runs.
//! Only the subset our schemas use is understood: `type`, `properties`, `required`, `items` and
//! `additionalProperties: false`. Like Pi, scalars are coerced first where the intent is clear
//! (a model that writes `"offset": "10"` means 10), and every remaining problem is reported at
//! once so the model can fix them all in one retry.

use serde_json::{Map, Value};

/// The coerced arguments, or Pi's multi-line validation failure text.
pub fn validate(tool: &str, schema: &Value, args: &Value) -> Result<Value, String> {
    let coerced = coerce(args.clone(), schema);
    let mut problems = Vec::new();
    check(&coerced, schema, "", &mut problems);
    if problems.is_empty() {
        return Ok(coerced);
    }
    let list: Vec<String> = problems
        .iter()
        .map(|(path, msg)| format!("  - {path}: {msg}"))
        .collect();
    let received = serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string());
    Err(format!(
        "Validation failed for tool \"{tool}\":\n{}\n\nReceived arguments:\n{received}",
        list.join("\n")
    ))
}

fn schema_type(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

fn coerce(value: Value, schema: &Value) -> Value {
    match (schema_type(schema), value) {
        (Some("number"), Value::String(s)) => parse_number(&s, false).unwrap_or(Value::String(s)),
        (Some("integer"), Value::String(s)) => parse_number(&s, true).unwrap_or(Value::String(s)),
        // `10.0` is an integer to JSON Schema, but must become `10` to decode as one.
        (Some("integer"), Value::Number(n)) => n
            .as_f64()
            .filter(|_| n.is_f64())
            .and_then(|f| parse_number(&f.to_string(), true))
            .unwrap_or(Value::Number(n)),
        (Some("string"), Value::Number(n)) => Value::String(n.to_string()),
        (Some("string"), Value::Bool(b)) => Value::String(b.to_string()),
        (Some("object"), Value::Object(map)) => {
            let props = schema.get("properties").and_then(Value::as_object);
            Value::Object(
                map.into_iter()
                    .map(|(k, v)| match props.and_then(|p| p.get(&k)) {
                        Some(sub) => {
                            let v = coerce(v, sub);
                            (k, v)
                        }
                        None => (k, v),
                    })
                    .collect(),
            )
        }
        (Some("array"), Value::Array(items)) => match schema.get("items") {
            Some(sub) => Value::Array(items.into_iter().map(|v| coerce(v, sub)).collect()),
            None => Value::Array(items),
        },
        (_, v) => v,
    }
}

fn parse_number(s: &str, integer: bool) -> Option<Value> {
    let f: f64 = s.trim().parse().ok()?;
    if !f.is_finite() || (integer && f.fract() != 0.0) {
        return None;
    }
    // Integral values become JSON integers so they print as `10`, not `10.0`.
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        return Some(Value::from(f as i64));
    }
    serde_json::Number::from_f64(f).map(Value::Number)
}

fn matches_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn check(value: &Value, schema: &Value, path: &str, problems: &mut Vec<(String, String)>) {
    if let Some(ty) = schema_type(schema)
        && !matches_type(value, ty)
    {
        let at = if path.is_empty() { "root" } else { path };
        problems.push((at.to_owned(), format!("must be {ty}")));
        return;
    }
    match value {
        Value::Object(map) => check_object(map, schema, path, problems),
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item, sub, &join(path, &i.to_string()), problems);
                }
            }
        }
        _ => {}
    }
}

fn check_object(
    map: &Map<String, Value>,
    schema: &Value,
    path: &str,
    problems: &mut Vec<(String, String)>,
) {
    let props = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for key in required.into_iter().flatten().filter_map(Value::as_str) {
        if !map.contains_key(key) {
            problems.push((
                join(path, key),
                format!("must have required property '{key}'"),
            ));
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (key, v) in map {
        match props.and_then(|p| p.get(key)) {
            Some(sub) => check(v, sub, &join(path, key), problems),
            None if closed => problems.push((
                join(path, key),
                "must not have additional properties".to_owned(),
            )),
            None => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer"},
                "timeout": {"type": "number"},
                "edits": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                    "required": ["oldText", "newText"],
                    "additionalProperties": false
                }}
            },
            "required": ["path", "edits"]
        })
    }

    #[test]
    fn valid_arguments_pass_with_coercion() {
        let args = json!({"path": "a", "offset": "10", "timeout": "1.5", "edits": []});
        let out = validate("t", &schema(), &args).unwrap();
        assert_eq!(out["offset"], json!(10));
        assert_eq!(out["timeout"], json!(1.5));
        let out = validate(
            "t",
            &schema(),
            &json!({"path": "a", "offset": 3.0, "edits": []}),
        );
        assert!(out.unwrap()["offset"].is_i64());
        // A number where a string is expected is taken as its text.
        let out = validate("t", &schema(), &json!({"path": 7, "edits": []})).unwrap();
        assert_eq!(out["path"], "7");
    }

    #[test]
    fn every_problem_is_listed_with_the_received_arguments() {
        let args = json!({
            "offset": 1.5,
            "timeout": "soon",
            "edits": [{"oldText": "a"}, "x", {"oldText": "a", "newText": "b", "extra": 1}]
        });
        let err = validate("edit", &schema(), &args).unwrap_err();
        let expected = "Validation failed for tool \"edit\":\n\
            \x20 - path: must have required property 'path'\n\
            \x20 - offset: must be integer\n\
            \x20 - timeout: must be number\n\
            \x20 - edits.0.newText: must have required property 'newText'\n\
            \x20 - edits.1: must be object\n\
            \x20 - edits.2.extra: must not have additional properties\n\
            \n\
            Received arguments:\n";
        assert!(err.starts_with(expected), "{err}");
        assert!(err.ends_with(&serde_json::to_string_pretty(&args).unwrap()));
        assert!(err.contains("\n  \"offset\": 1.5,\n"));
    }

    #[test]
    fn non_object_arguments_fail_at_root() {
        let err = validate("read", &schema(), &json!([])).unwrap_err();
        assert!(err.contains("  - root: must be object\n"), "{err}");
    }
}
