//! Tool calls a model wrote as text. Small local models often answer a tool-calling request
//! with the call as a JSON object in their reply (bare, in a ```json fence, or in tags of their
//! chat template) instead of the template's own call syntax, which the server then passes on as
//! plain text. With a model's `compat.toolCallsInText`, the OpenAI-compatible accumulator holds a
//! reply that may be such a call and, when the reply ends, turns it into real tool calls if the
//! whole of it is nothing else; otherwise the text goes out unchanged. Off by default: a reply
//! that is only a JSON object naming a function is then taken as a call, not as text.
//!
//! Nothing here widens what a model can do: it could have made the same call through the API.

use serde_json::Value;

/// Whether `text` (the reply so far) may still turn out to be a call: it is empty or starts,
/// after white space, with something a written call starts with.
pub fn may_be_call(text: &str) -> bool {
    let text = text.trim_start();
    text.is_empty() || text.starts_with(['{', '`', '<', '['])
}

/// One call read from text: the function's name and its arguments as JSON text.
#[derive(Debug, PartialEq, Eq)]
pub struct WrittenCall {
    pub name: String,
    pub arguments: String,
}

/// The calls `text` consists of, or `None` when it holds anything but calls: one or more JSON
/// objects `{"name": "...", "arguments": {...}}` (or `"parameters"`, or arguments as JSON text),
/// or an array of them, each optionally wrapped in a code fence or in `<tag>…</tag>`.
pub fn parse(text: &str) -> Option<Vec<WrittenCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (inner, after) = unwrap(rest)?;
        let inner = inner.trim();
        let mut values = serde_json::Deserializer::from_str(inner).into_iter::<Value>();
        let mut any = false;
        for value in values.by_ref() {
            let value = value.ok()?;
            any = true;
            match value {
                Value::Array(items) => {
                    for item in items {
                        calls.push(call(item)?);
                    }
                }
                other => calls.push(call(other)?),
            }
        }
        if !any || values.byte_offset() != inner.len() {
            return None;
        }
        rest = after.trim_start();
    }
    (!calls.is_empty()).then_some(calls)
}

/// Splits off the first wrapped part of `text`: a fenced block, a tagged block, or (bare JSON)
/// all of it. Returns what is inside and what follows.
fn unwrap(text: &str) -> Option<(&str, &str)> {
    if let Some(fenced) = text.strip_prefix("```") {
        // The info string (```json) ends at the first line break.
        let body_start = fenced.find('\n')? + 1;
        let body = &fenced[body_start..];
        let end = body.find("```")?;
        return Some((&body[..end], &body[end + 3..]));
    }
    if let Some(tagged) = text.strip_prefix('<') {
        let name_end = tagged.find('>')?;
        let name = &tagged[..name_end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let body = &tagged[name_end + 1..];
        let close = format!("</{name}>");
        let end = body.find(&close)?;
        return Some((&body[..end], &body[end + close.len()..]));
    }
    // Bare JSON up to the next fence or tag, so that calls in several forms still parse.
    let end = text.find(['`', '<']).unwrap_or(text.len());
    (end > 0).then(|| (&text[..end], &text[end..]))
}

fn call(value: Value) -> Option<WrittenCall> {
    let Value::Object(mut fields) = value else {
        return None;
    };
    // Some templates nest the call: {"function": {"name": …, "arguments": …}}.
    if let Some(Value::Object(inner)) = fields.remove("function") {
        return call(Value::Object(inner));
    }
    let Some(Value::String(name)) = fields.remove("name") else {
        return None;
    };
    let arguments = match fields
        .remove("arguments")
        .or_else(|| fields.remove("parameters"))
    {
        Some(Value::Object(args)) => Value::Object(args).to_string(),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(_)) => text,
            _ => return None,
        },
        None => "{}".to_owned(),
        Some(_) => return None,
    };
    if name.is_empty() || !fields.is_empty() {
        return None;
    }
    Some(WrittenCall { name, arguments })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, arguments: &str) -> Vec<WrittenCall> {
        vec![WrittenCall {
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }]
    }

    #[test]
    fn the_forms_small_models_write_are_calls() {
        let want = one("write", r#"{"path":"hello.py","content":"print('hello')"}"#);
        let fenced = "```json\n{\n  \"name\": \"write\",\n  \"arguments\": {\n    \"path\": \"hello.py\",\n    \"content\": \"print('hello')\"\n  }\n}\n```";
        assert_eq!(parse(fenced), Some(want));
        let bare = r#"{"name": "write", "arguments": {"path": "a.py"}}"#;
        assert_eq!(parse(bare), Some(one("write", r#"{"path":"a.py"}"#)));
        let tagged =
            "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
        assert_eq!(parse(tagged), Some(one("bash", r#"{"command":"ls"}"#)));
        let as_text = r#"{"name": "read", "arguments": "{\"path\": \"x\"}"}"#;
        assert_eq!(parse(as_text), Some(one("read", r#"{"path": "x"}"#)));
        let nested = r#"{"function": {"name": "ls", "parameters": {}}}"#;
        assert_eq!(parse(nested), Some(one("ls", "{}")));
    }

    #[test]
    fn several_calls_in_several_wrappers() {
        let text = "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n\
                    <tool_call>{\"name\":\"b\",\"arguments\":{\"x\":1}}</tool_call>";
        let calls = parse(text).unwrap_or_default();
        assert_eq!(
            calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let listed = r#"[{"name":"a","arguments":{}},{"name":"b","arguments":{}}]"#;
        assert_eq!(parse(listed).map(|c| c.len()), Some(2));
        let two_bare = r#"{"name":"a","arguments":{}} {"name":"b","arguments":{}}"#;
        assert_eq!(parse(two_bare).map(|c| c.len()), Some(2));
    }

    #[test]
    fn anything_else_stays_text() {
        for text in [
            "",
            "Hello",
            "Here is the call: {\"name\": \"a\", \"arguments\": {}}",
            "{\"name\": \"a\", \"arguments\": {}} and then some words",
            "```python\nprint('hi')\n```",
            "{\"name\": 3}",
            "{\"title\": \"x\"}",
            "{\"name\": \"a\", \"arguments\": {}, \"extra\": 1}",
            "{\"name\": \"a\", \"arguments\": [1]}",
            "<b>bold</b>",
            "{\"name\": \"a\", \"arguments\": {",
            "```json\n{\"name\": \"a\"}",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_reply_is_held_only_while_it_may_be_a_call() {
        assert!(may_be_call(""));
        assert!(may_be_call("  \n{\"na"));
        assert!(may_be_call("``"));
        assert!(may_be_call("<tool"));
        assert!(!may_be_call("Sure, "));
        assert!(!may_be_call(" I will"));
    }
}
