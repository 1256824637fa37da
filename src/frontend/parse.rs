//! Turns one record into a [`Command`] or an error [`Response`] that names the problem.
//! Nothing here panics, whatever the bytes: the fuzz target drives this with arbitrary input.

use super::reader::MAX_RECORD;
use super::salvage;
use crate::protocol::{Command, Response};
use serde_json::{Map, Value};
use strum::VariantNames;

#[derive(Debug)]
pub enum Parsed {
    /// Whitespace only: ignored, no response.
    Blank,
    Command {
        id: Option<Value>,
        /// The request's `type`, echoed as the response's `command`.
        name: String,
        command: Command,
    },
    Error(Response),
}

/// The answer to a record over the limit; `head` is its start, which may show its `id`.
pub fn oversized_response(head: &[u8]) -> Response {
    Response::error(
        salvage::readable_id(head),
        "parse",
        format!(
            "Record exceeded the {} MiB limit; it was discarded up to the next newline",
            MAX_RECORD / (1024 * 1024)
        ),
    )
}

pub fn parse_record(line: &[u8]) -> Parsed {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Blank;
    }
    // Pi decodes stdin as UTF-8 with replacement, so bad bytes inside a string become U+FFFD
    // rather than costing the whole command (outside strings they stay a syntax error).
    let text = String::from_utf8_lossy(line);
    let text = salvage::replace_lone_surrogates(&text);
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return parse_error(
                salvage::readable_id(text.as_bytes()),
                format!("Failed to parse command: {e}"),
            );
        }
    };
    let Value::Object(mut object) = value else {
        return parse_error(
            None,
            format!("Command must be a JSON object, got {}", kind(&value)),
        );
    };
    let id = match object.remove("id") {
        None | Some(Value::Null) => None,
        Some(v @ (Value::String(_) | Value::Number(_))) => Some(v),
        Some(other) => {
            let command = match object.get("type") {
                Some(Value::String(t)) => t.clone(),
                _ => "parse".to_owned(),
            };
            return Parsed::Error(Response::error(
                None,
                command,
                format!("\"id\" must be a string or number, got {}", kind(&other)),
            ));
        }
    };
    let name = match object.remove("type") {
        Some(Value::String(t)) => t,
        None => return parse_error(id, "Command is missing the \"type\" field".to_owned()),
        Some(other) => {
            return parse_error(
                id,
                format!("\"type\" must be a string, got {}", kind(&other)),
            );
        }
    };
    if !Command::VARIANTS.contains(&name.as_str()) {
        return Parsed::Error(Response::error(
            id,
            name.clone(),
            format!("Unknown command: {name}"),
        ));
    }
    let mut tagged = Map::with_capacity(1);
    tagged.insert(name.clone(), Value::Object(object));
    match serde_path_to_error::deserialize::<_, Command>(Value::Object(tagged)) {
        Ok(command) => Parsed::Command { id, name, command },
        Err(e) => {
            // The first path segment is the re-tagged command name itself.
            let path = e.path().to_string();
            let field = path.split_once('.').map(|(_, rest)| rest).unwrap_or("");
            let problem = e.into_inner();
            let error = if field.is_empty() {
                format!("Invalid \"{name}\" command: {problem}")
            } else {
                format!("Invalid \"{name}\" command: field \"{field}\": {problem}")
            };
            Parsed::Error(Response::error(id, name, error))
        }
    }
}

fn parse_error(id: Option<Value>, error: String) -> Parsed {
    Parsed::Error(Response::error(id, "parse", error))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error_of(line: &str) -> Response {
        match parse_record(line.as_bytes()) {
            Parsed::Error(r) => r,
            other => panic!("expected an error for {line}, got {other:?}"),
        }
    }

    #[test]
    fn every_listed_command_type_decodes() {
        let args = json!({
            "message": "m", "provider": "p", "modelId": "m", "mode": "all",
            "requestId": 1, "approved": true, "sessionId": "s", "name": "n", "entryId": "e", "enabled": true,
            "level": "high", "command": "true", "tools": ["read"]
        });
        for t in <Command as strum::VariantNames>::VARIANTS {
            let mut obj = args.clone();
            obj["type"] = json!(t);
            match parse_record(obj.to_string().as_bytes()) {
                Parsed::Command { name, .. } => assert_eq!(name, *t),
                other => panic!("{t}: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_utf8_and_lone_surrogates_become_replacement_characters() {
        let mut line = br#"{"type":"prompt","message":"a"#.to_vec();
        line.extend([0xff, 0xc3]);
        line.extend(br#"b\ud800c\udc00","id":1}"#);
        match parse_record(&line) {
            Parsed::Command {
                command: Command::Prompt { message, .. },
                ..
            } => assert_eq!(message, "a\u{fffd}\u{fffd}b\u{fffd}c\u{fffd}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn blank_and_crlf() {
        assert!(matches!(parse_record(b"  \r"), Parsed::Blank));
        assert!(matches!(
            parse_record(b"{\"type\":\"get_state\",\"id\":\"a\"}\r"),
            Parsed::Command { id: Some(_), .. }
        ));
    }

    #[test]
    fn errors_name_the_problem_and_keep_the_id() {
        let r = error_of("{not json");
        assert_eq!((r.command.as_str(), &r.id), ("parse", &None));
        assert!(r.error.unwrap().starts_with("Failed to parse command:"));

        let r = error_of(r#"{"id":"kept","type":"prompt","message":"cut short"#);
        assert_eq!((r.command.as_str(), r.id), ("parse", Some(json!("kept"))));

        for (line, needle) in [
            ("null", "got null"),
            ("[1]", "got an array"),
            ("5", "got a number"),
        ] {
            let r = error_of(line);
            assert_eq!(r.command, "parse");
            assert!(r.error.as_deref().unwrap().contains(needle), "{line}");
        }

        let r = error_of(r#"{"id":"x"}"#);
        assert_eq!((r.command.as_str(), r.id), ("parse", Some(json!("x"))));

        let r = error_of(r#"{"id":7,"type":3}"#);
        assert_eq!((r.command.as_str(), r.id), ("parse", Some(json!(7))));
        assert!(r.error.unwrap().contains("\"type\" must be a string"));

        let r = error_of(r#"{"id":"u","type":"dance"}"#);
        assert_eq!(r.command, "dance");
        assert_eq!(r.error.as_deref(), Some("Unknown command: dance"));
        assert_eq!(r.id, Some(json!("u")));

        let r = error_of(r#"{"id":"p","type":"prompt","message":5}"#);
        assert_eq!(r.command, "prompt");
        let e = r.error.unwrap();
        assert!(
            e.contains("\"message\"") && e.contains("invalid type"),
            "{e}"
        );

        let r = error_of(r#"{"id":"p","type":"prompt"}"#);
        assert!(r.error.unwrap().contains("missing field `message`"));

        let r = error_of(r#"{"type":"prompt","message":"m","images":[{"data":"x"}]}"#);
        let e = r.error.unwrap();
        assert!(e.contains("images[0]") || e.contains("images.0"), "{e}");

        let r = error_of(r#"{"type":"set_steering_mode","mode":"sometimes"}"#);
        assert!(r.error.unwrap().contains("one-at-a-time"));
    }
}
