//! The invariants of a pi-messages request as a gateway would hold it to them: a model, a
//! `context` whose messages are Pi's (`user`, `assistant`, `toolResult`), every tool call of a
//! reply answered by exactly one result right after it, no failed reply sent back, a positive
//! output budget, and thinking signatures the mock gave coming back on the thinking they sign.

use super::Reply;
use serde_json::Value;

/// One line per problem found in `body`.
pub fn check(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if body["model"].as_str().is_none_or(str::is_empty) {
        out.push("request names no model".into());
    }
    if body["options"]["maxTokens"].as_u64().is_none_or(|n| n == 0) {
        out.push("options.maxTokens is not a positive number".into());
    }
    let Some(msgs) = body["context"]["messages"].as_array() else {
        return vec!["request has no `context.messages` array".into()];
    };
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        match m["role"].as_str() {
            Some("user") => {
                if m["content"].as_array().is_none_or(Vec::is_empty) {
                    out.push(format!("message {i}: user message without content"));
                }
            }
            Some("assistant") => {
                if matches!(m["stopReason"].as_str(), Some("error" | "aborted")) {
                    out.push(format!("message {i}: a failed reply was sent back"));
                }
                let blocks = m["content"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                for b in blocks {
                    if b["type"] == "thinking"
                        && let (Some(t), Some(sig)) =
                            (b["thinking"].as_str(), b["thinkingSignature"].as_str())
                        && sig.starts_with("mock-signature-")
                        && sig != Reply::signature_of(t)
                    {
                        out.push(format!("message {i}: thinking signature does not match"));
                    }
                }
                let calls: Vec<&str> = blocks
                    .iter()
                    .filter(|b| b["type"] == "toolCall")
                    .map(|b| b["id"].as_str().unwrap_or(""))
                    .collect();
                for (k, id) in calls.iter().enumerate() {
                    let r = &msgs.get(i + 1 + k);
                    if r.is_none_or(|r| r["role"] != "toolResult" || r["toolCallId"] != *id) {
                        out.push(format!(
                            "message {i}: tool call {id:?} is not answered by message {}",
                            i + 1 + k
                        ));
                    }
                }
                i += 1 + calls.len();
                continue;
            }
            Some("toolResult") => {
                out.push(format!("message {i}: tool result without a preceding call"));
            }
            other => out.push(format!("message {i}: unknown role {other:?}")),
        }
        i += 1;
    }
    out
}
