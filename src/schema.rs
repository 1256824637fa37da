//! The published JSON Schema of the RPC mode (`schema/` in the repository), generated from the
//! wire types so it cannot drift from them: `tests/suite/schema.rs` regenerates the files and
//! fails when the committed ones differ. Built only with the `schema` feature, which the tests
//! turn on; the shipped binary carries none of this.

use crate::protocol::schema::{SESSION_VIEW, request_id};
use crate::protocol::{Command, Event, Response};
use crate::session::{EntriesSince, Entry, Tree};
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, json_schema};
use serde_json::{Map, Value};

/// Where the files go, relative to the repository.
pub const DIR: &str = "schema";

/// Every schema file: its name and its text (pretty-printed, ending with a newline).
pub fn files() -> Vec<(&'static str, String)> {
    [
        ("command.schema.json", commands()),
        ("response.schema.json", output::<Response>()),
        ("event.schema.json", output::<Event>()),
    ]
    .into_iter()
    .map(|(name, schema)| {
        let text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        (name, text + "\n")
    })
    .collect()
}

/// A line on stdin. The reader takes `id` off before the rest is decoded as a [`Command`], so
/// it is added here rather than being a field of every variant.
fn commands() -> Schema {
    let mut generator = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let mut schema = generator.root_schema_for::<Command>();
    let id = request_id(&mut generator);
    if let Some(object) = schema.as_object_mut() {
        object.insert(
            "description".into(),
            "A command: one JSON object per line on nova's stdin. Fields a command does not \
             know are ignored."
                .into(),
        );
        object.insert("type".into(), "object".into());
        object.insert(
            "properties".into(),
            serde_json::json!({ "id": id.to_value() }),
        );
    }
    schema
}

/// A line on stdout of kind `T`, with the session file's shapes that some of them carry.
fn output<T: JsonSchema>() -> Schema {
    let mut generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(RecursiveTransform(absent_is_never_null))
        .into_generator();
    // Named, so this puts the entry's definition where `SESSION_ENTRY` refers.
    generator.subschema_for::<Entry>();
    let views = json_schema!({
        "anyOf": [
            generator.subschema_for::<EntriesSince>(),
            generator.subschema_for::<Tree>(),
        ]
    });
    generator
        .definitions_mut()
        .insert(SESSION_VIEW.into(), views.to_value());
    generator.root_schema_for::<T>()
}

/// nova leaves an optional field out rather than writing `null` (the derives describe an
/// `Option` as nullable whether or not it is skipped when empty), so a property the schema does
/// not require is not nullable either. A map keyed by an enum is described with a property per
/// key and is no struct, so such a map's field names its schema as a plain map.
fn absent_is_never_null(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let required: Vec<Value> = match object.get("required") {
        Some(Value::Array(names)) => names.clone(),
        _ => Vec::new(),
    };
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if let Value::Object(property) = property
            && !required.contains(&Value::from(name.as_str()))
        {
            drop_null(property);
        }
    }
}

fn drop_null(property: &mut Map<String, Value>) {
    let null = Value::from("null");
    if let Some(Value::Array(types)) = property.get_mut("type") {
        types.retain(|t| *t != null);
        if let [only] = types.as_slice() {
            let only = only.clone();
            property.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(branches)) = property.get_mut("anyOf") {
        branches.retain(|b| b.get("type") != Some(&null));
        if let [Value::Object(only)] = branches.as_slice() {
            let only = only.clone();
            property.remove("anyOf");
            property.extend(only);
        }
    }
}
