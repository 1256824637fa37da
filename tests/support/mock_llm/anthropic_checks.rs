//! The conversation invariants of an Anthropic Messages request, which the API enforces with a
//! 400: every `tool_use` answered by exactly one `tool_result` at the start of the next user
//! message, thinking returned with the signature it was given, no empty text, and the
//! prompt-cache markers where nova places them (system prompt, last tool, last user message;
//! at most four).

use super::Reply;
use serde_json::Value;

/// One line per problem found in `body`.
pub fn check(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if body.get("stream") != Some(&Value::Bool(true)) {
        out.push("request does not set `stream: true`".into());
    }
    if body["max_tokens"].as_u64().unwrap_or(0) == 0 {
        out.push("request has no positive `max_tokens`".into());
    }
    let Some(msgs) = body["messages"].as_array() else {
        return vec!["request has no `messages` array".into()];
    };
    check_cache_markers(body, msgs, &mut out);
    if msgs.first().is_some_and(|m| m["role"] != "user") {
        out.push("message 0: the conversation does not start with a user message".into());
    }
    let mut pending: Vec<&str> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let Some(blocks) = m["content"].as_array() else {
            out.push(format!("message {i}: content is not a block list"));
            continue;
        };
        if blocks.is_empty() {
            out.push(format!("message {i}: no content"));
        }
        for b in blocks {
            if b["type"] == "text" && b["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
                out.push(format!("message {i}: empty text block"));
            }
        }
        match m["role"].as_str() {
            Some("assistant") => {
                unanswered(i, &pending, &mut out);
                pending = assistant(i, blocks, &mut out);
            }
            Some("user") => {
                results(i, blocks, &pending, &mut out);
                pending.clear();
            }
            other => out.push(format!(
                "message {i}: role {other:?} is neither user nor assistant"
            )),
        }
    }
    unanswered(msgs.len(), &pending, &mut out);
    out
}

/// The tool_use ids of an assistant message; checks its thinking blocks.
fn assistant<'a>(i: usize, blocks: &'a [Value], out: &mut Vec<String>) -> Vec<&'a str> {
    let mut ids = Vec::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("tool_use") => match b["id"].as_str() {
                Some(id) if ids.contains(&id) => {
                    out.push(format!("message {i}: duplicate tool_use id {id:?}"))
                }
                Some(id)
                    if !id.is_empty()
                        && id.len() <= 64
                        && id
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    ids.push(id)
                }
                other => out.push(format!("message {i}: invalid tool_use id {other:?}")),
            },
            Some("thinking") => {
                let text = b["thinking"].as_str().unwrap_or("");
                if b["signature"].as_str() != Some(Reply::signature_of(text).as_str()) {
                    out.push(format!(
                        "message {i}: thinking block not returned with its signature: {b}"
                    ));
                }
            }
            Some("redacted_thinking") => {
                if b["data"].as_str().is_none_or(str::is_empty) {
                    out.push(format!("message {i}: redacted_thinking without its data"));
                }
            }
            Some("text") => {}
            other => out.push(format!("message {i}: unexpected assistant block {other:?}")),
        }
    }
    ids
}

/// Checks a user message's tool results against the calls of the message before it.
fn results(i: usize, blocks: &[Value], pending: &[&str], out: &mut Vec<String>) {
    let mut answered: Vec<&str> = Vec::new();
    let mut others_seen = false;
    for b in blocks {
        if b["type"] != "tool_result" {
            others_seen = true;
            continue;
        }
        if others_seen {
            out.push(format!("message {i}: tool_result after other content"));
        }
        match b["tool_use_id"].as_str() {
            Some(id) if !pending.contains(&id) => out.push(format!(
                "message {i}: tool_result for {id:?}, which the previous message did not call"
            )),
            Some(id) if answered.contains(&id) => {
                out.push(format!("message {i}: second tool_result for {id:?}"))
            }
            Some(id) => answered.push(id),
            None => out.push(format!("message {i}: tool_result without tool_use_id")),
        }
        if let Some(parts) = b["content"].as_array()
            && b["is_error"] == true
            && parts.iter().any(|p| p["type"] != "text")
        {
            out.push(format!(
                "message {i}: error tool_result with non-text content"
            ));
        }
    }
    let missing: Vec<&&str> = pending.iter().filter(|id| !answered.contains(id)).collect();
    if !missing.is_empty() {
        out.push(format!(
            "message {i}: tool_use ids {missing:?} have no tool_result"
        ));
    }
}

fn unanswered(i: usize, pending: &[&str], out: &mut Vec<String>) {
    if !pending.is_empty() {
        out.push(format!(
            "message {i}: tool_use ids {pending:?} are not answered by the next (user) message"
        ));
    }
}

fn check_cache_markers(body: &Value, msgs: &[Value], out: &mut Vec<String>) {
    // A marker with the default lifetime, or the hour `PI_CACHE_RETENTION=long` asks for.
    let marked = |b: &Value| {
        b.get("cache_control").is_some_and(|c| {
            *c == serde_json::json!({"type": "ephemeral"})
                || *c == serde_json::json!({"type": "ephemeral", "ttl": "1h"})
        })
    };
    let count = body.to_string().matches("\"cache_control\"").count();
    if count > 4 {
        out.push(format!("{count} cache_control markers (the API allows 4)"));
    }
    // A one-off summary caches nothing at all, as Pi sends it.
    if count == 0 {
        return;
    }
    match &body["system"] {
        Value::Null => {}
        Value::Array(blocks) if blocks.last().is_some_and(marked) => {}
        other => out.push(format!("system prompt without a cache marker: {other}")),
    }
    if let Some(tools) = body["tools"].as_array()
        && !tools.last().is_some_and(marked)
    {
        out.push("the last tool has no cache marker".into());
    }
    if let Some(last) = msgs.last().filter(|m| m["role"] == "user")
        && !last["content"]
            .as_array()
            .and_then(|c| c.last())
            .is_some_and(marked)
    {
        out.push("the last user message has no cache marker".into());
    }
}
