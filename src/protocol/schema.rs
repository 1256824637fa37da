//! The few wire fields whose Rust type says less than the wire does, described for the
//! published JSON Schema (`schema/`, written by `crate::schema`). Built only with the `schema`
//! feature.

use schemars::{Schema, SchemaGenerator, json_schema};

/// The definitions the session store fills in: this module may not know its entry shapes.
pub const SESSION_ENTRY: &str = "SessionEntry";
pub const SESSION_VIEW: &str = "SessionView";

/// A request's `id`: the reader refuses any other kind, and a response echoes it as it came.
pub fn request_id(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The request's id, echoed as it came.",
        "type": ["string", "number"]
    })
}

/// One line of the session file, as the session store writes it.
pub fn session_entry(_: &mut SchemaGenerator) -> Schema {
    reference(SESSION_ENTRY)
}

/// `get_entries` and `get_tree`: views of the session file in its own entry shapes.
pub fn session_view(_: &mut SchemaGenerator) -> Schema {
    reference(SESSION_VIEW)
}

fn reference(name: &str) -> Schema {
    json_schema!({ "$ref": format!("#/$defs/{name}") })
}
