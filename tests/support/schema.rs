//! The published JSON Schema (`schema/`) as a check on everything nova writes: every stdout
//! line the driver reads goes through [`check_line`], so every test also proves the schema
//! describes the wire. The validators are compiled once per test process.
//!
//! Commands and events are a `oneOf` keyed by `type`. A validator only says that a line
//! matched none of the branches, so each branch is also compiled alone and a line is checked
//! against the branch its `type` names: the error then points at the field that is wrong.

use jsonschema::Validator;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

/// One schema file, compiled.
struct File {
    name: &'static str,
    whole: Validator,
    /// Each branch of a root `oneOf` by the `type` it requires, with its index there.
    by_type: HashMap<String, (usize, Validator)>,
}

struct Validators {
    command: File,
    response: File,
    event: File,
}

static VALIDATORS: LazyLock<Validators> = LazyLock::new(|| Validators {
    command: compile("command.schema.json"),
    response: compile("response.schema.json"),
    event: compile("event.schema.json"),
});

fn compile(name: &'static str) -> File {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schema")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let validator = |schema: &Value| {
        jsonschema::validator_for(schema)
            .unwrap_or_else(|e| panic!("{} is not a valid schema: {e}", path.display()))
    };
    let mut by_type = HashMap::new();
    for (i, branch) in schema["oneOf"].as_array().into_iter().flatten().enumerate() {
        let Some(kind) = branch["properties"]["type"]["const"].as_str() else {
            continue;
        };
        let mut alone = branch.clone();
        // What the root says beside its `oneOf` (a command's `id`) holds in every branch.
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            alone["properties"][name] = property.clone();
        }
        alone["$defs"] = schema["$defs"].clone();
        alone["$schema"] = schema["$schema"].clone();
        by_type.insert(kind.to_owned(), (i, validator(&alone)));
    }
    File {
        name,
        whole: validator(&schema),
        by_type,
    }
}

/// Checks one line of nova's stdout against the response or event schema (by its `type`);
/// the error names the file, where in the line and where in the schema.
pub fn check_line(line: &Value) -> Result<(), String> {
    let validators = &*VALIDATORS;
    if line["type"] == "response" {
        validators.response.check(line)
    } else {
        validators.event.check(line)
    }
}

/// Checks a command line against the command schema.
pub fn check_command(line: &Value) -> Result<(), String> {
    VALIDATORS.command.check(line)
}

impl File {
    fn check(&self, line: &Value) -> Result<(), String> {
        let fail = |e: jsonschema::ValidationError, branch: String| {
            format!(
                "schema/{}: {e}\n  at {} (schema path {branch}{})",
                self.name,
                e.instance_path(),
                e.schema_path()
            )
        };
        // The branches' `type` constants exclude one another, so the named branch decides.
        match line["type"].as_str().and_then(|t| self.by_type.get(t)) {
            Some((i, branch)) => branch
                .validate(line)
                .map_err(|e| fail(e, format!("/oneOf/{i}"))),
            None => self
                .whole
                .validate(line)
                .map_err(|e| fail(e, String::new())),
        }
    }
}
