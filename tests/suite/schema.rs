//! The published JSON Schema: generated from the wire types, committed under `schema/`, and
//! kept in step with them here. `NOVA_UPDATE_SCHEMA=1` rewrites the files instead of failing.

use crate::support::schema::check_command;
use serde_json::json;
use std::path::Path;

#[test]
fn the_committed_schema_is_the_generated_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(nova::schema::DIR);
    let update = std::env::var_os("NOVA_UPDATE_SCHEMA").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, text) in nova::schema::files() {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} under {} differ from what the wire types generate: run \
         `NOVA_UPDATE_SCHEMA=1 cargo test --test all -- schema::` and commit the result",
        dir.display()
    );
}

/// The command schema accepts what nova's reader decodes and refuses what it refuses.
#[test]
fn the_command_schema_agrees_with_the_reader() {
    use nova::rpc::parse::{Parsed, parse_record};
    let every_field = json!({
        "message": "m", "provider": "p", "modelId": "m", "mode": "all", "requestId": 1,
        "approved": true, "name": "n", "entryId": "e", "enabled": true, "level": "high",
        "command": "true", "tools": ["read"]
    });
    let mut lines = Vec::new();
    for name in <nova::protocol::Command as strum::VariantNames>::VARIANTS {
        let mut line = every_field.clone();
        line["type"] = json!(name);
        line["id"] = json!(format!("id-{name}"));
        lines.push(line);
    }
    lines.extend([
        json!({"type": "prompt", "message": "hi", "id": 7, "unknownField": [1]}),
        json!({"type": "prompt", "message": "hi", "streamingBehavior": "followUp",
               "images": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}),
        json!({"type": "prompt", "message": 5}),
        json!({"type": "prompt"}),
        json!({"type": "prompt", "message": "m", "images": [{"data": "x"}]}),
        json!({"type": "prompt", "message": "m", "streamingBehavior": "later"}),
        json!({"type": "set_steering_mode", "mode": "sometimes"}),
        json!({"type": "set_thinking_level", "level": "huge"}),
        json!({"type": "permission_response", "requestId": "one", "approved": true}),
        json!({"type": "permission_response", "requestId": 1}),
        json!({"type": "set_active_tools", "tools": "read"}),
        json!({"type": "list_sessions", "all": "yes"}),
        json!({"type": "get_state", "id": [1]}),
        json!({"type": "dance"}),
        json!({"message": "no type"}),
    ]);
    for line in lines {
        let decoded = matches!(
            parse_record(line.to_string().as_bytes()),
            Parsed::Command { .. }
        );
        let valid = check_command(&line);
        assert_eq!(
            decoded,
            valid.is_ok(),
            "the reader {} {line}, the schema {}",
            if decoded { "decodes" } else { "refuses" },
            valid.err().unwrap_or_else(|| "accepts it".into())
        );
    }
}

/// The check every test's lines go through refuses what the schema does not describe.
#[test]
fn lines_off_the_schema_are_refused_with_where() {
    use crate::support::schema::check_line;
    let ok = [
        json!({"type": "agent_settled", "aborted": false}),
        json!({"type": "response", "command": "abort", "success": true, "id": 3}),
        json!({"type": "response", "command": "dance", "success": false, "error": "Unknown command: dance"}),
    ];
    for line in ok {
        check_line(&line).unwrap();
    }
    let bad = [
        (
            json!({"type": "agent_settled", "aborted": "yes"}),
            "/aborted",
        ),
        (json!({"type": "agent_dance"}), ""),
        (
            json!({"type": "response", "command": "x", "success": "true"}),
            "/success",
        ),
        (
            json!({"type": "response", "command": "x", "success": true, "id": [1]}),
            "/id",
        ),
    ];
    for (line, at) in bad {
        let e = check_line(&line).unwrap_err();
        assert!(e.contains(&format!("at {at} ")), "{line}: {e}");
    }
}
