//! The conversation invariants of an OpenAI Responses request with `store: false`, which the API
//! enforces with a 400: the whole conversation in `input` (nothing refers to a stored
//! response), every `function_call` answered by exactly one `function_call_output` with its
//! `call_id`, and every reasoning item sent back whole, with the encrypted content the mock gave
//! it, which the request must have asked for.

use super::Reply;
use serde_json::Value;

/// One line per problem found in `body`.
pub fn check(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if body.get("stream") != Some(&Value::Bool(true)) {
        out.push("request does not set `stream: true`".into());
    }
    if body.get("store") != Some(&Value::Bool(false)) {
        out.push("request does not set `store: false`".into());
    }
    if body.get("previous_response_id").is_some() {
        out.push("request refers to a stored response (`previous_response_id`)".into());
    }
    if body["reasoning"]["summary"].is_string()
        && !body["include"]
            .as_array()
            .is_some_and(|i| i.iter().any(|v| v == "reasoning.encrypted_content"))
    {
        out.push("reasoning requested without `include: [\"reasoning.encrypted_content\"]`".into());
    }
    let Some(items) = body["input"].as_array() else {
        return vec!["request has no `input` array".into()];
    };
    let mut calls: Vec<&str> = Vec::new();
    let mut answered: Vec<&str> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item["type"].as_str() {
            Some("function_call") => match item["call_id"].as_str() {
                Some(id) if !id.is_empty() && !calls.contains(&id) => calls.push(id),
                _ => out.push(format!("item {i}: function call without a fresh call_id")),
            },
            Some("function_call_output") => match item["call_id"].as_str() {
                Some(id) if calls.contains(&id) && !answered.contains(&id) => answered.push(id),
                other => out.push(format!("item {i}: output answers no open call ({other:?})")),
            },
            Some("reasoning") => {
                let summary: Vec<&str> = item["summary"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["text"].as_str())
                    .collect();
                let want = Reply::encrypted_of(&summary.join("\n\n"));
                if item["encrypted_content"].as_str() != Some(want.as_str()) {
                    out.push(format!(
                        "item {i}: reasoning item without its encrypted content"
                    ));
                }
                if items.get(i + 1).is_none() {
                    out.push(format!("item {i}: reasoning item without a following item"));
                }
            }
            Some("message") | None => {}
            Some(other) => out.push(format!("item {i}: unknown item type {other:?}")),
        }
    }
    for id in calls {
        if !answered.contains(&id) {
            out.push(format!("function call {id:?} has no output"));
        }
    }
    out
}
