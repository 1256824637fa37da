//! What Bedrock's ConverseStream enforces on a request, checked by the mock: the conversation
//! starts with the user and alternates, no message or text is empty, every `toolUse` is answered
//! by a `toolResult` with its id in the user message right after it, and signed reasoning comes
//! back with the signature the mock gave; and the request is authenticated, with a SigV4
//! signature (its `Authorization` and `x-amz-date`) or a bearer token.

use super::{Recorded, Reply};
use serde_json::Value;

/// One line per problem found in `body`.
pub fn check(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(messages) = body["messages"].as_array() else {
        return vec!["request has no `messages` array".into()];
    };
    if messages.first().is_some_and(|m| m["role"] != "user") {
        out.push("message 0: the conversation does not start with the user".into());
    }
    for (i, m) in messages.iter().enumerate() {
        let content = m["content"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if content.is_empty() {
            out.push(format!("message {i}: no content"));
        }
        if i > 0 && messages[i - 1]["role"] == m["role"] {
            out.push(format!("message {i}: two {} messages in a row", m["role"]));
        }
        for block in content {
            if block
                .get("text")
                .is_some_and(|t| t.as_str().is_none_or(|t| t.trim().is_empty()))
            {
                out.push(format!("message {i}: blank text block"));
            }
            let reasoning = &block["reasoningContent"]["reasoningText"];
            if let (Some(text), Some(signature)) =
                (reasoning["text"].as_str(), reasoning["signature"].as_str())
                && signature != Reply::signature_of(text)
            {
                out.push(format!(
                    "message {i}: reasoning came back with another signature"
                ));
            }
        }
        let calls: Vec<&str> = content
            .iter()
            .filter_map(|b| b["toolUse"]["toolUseId"].as_str())
            .collect();
        if calls.is_empty() {
            continue;
        }
        let answers: Vec<&str> = messages
            .get(i + 1)
            .and_then(|n| n["content"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|b| b["toolResult"]["toolUseId"].as_str())
            .collect();
        for id in calls {
            if answers.iter().filter(|a| **a == id).count() != 1 {
                out.push(format!(
                    "message {i}: toolUse {id} is not answered exactly once"
                ));
            }
        }
    }
    out
}

/// The request's credentials: a SigV4 signature or a bearer token.
pub fn check_auth(request: &Recorded) -> Vec<String> {
    let Some(auth) = request.header("authorization") else {
        return vec!["no Authorization header".into()];
    };
    if auth.starts_with("Bearer ") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let signed = auth.starts_with("AWS4-HMAC-SHA256 Credential=")
        && auth.contains("/bedrock/aws4_request")
        && auth.contains("SignedHeaders=")
        && auth.contains("x-amz-date")
        && auth.contains("Signature=");
    if !signed {
        out.push(format!(
            "Authorization is neither SigV4 for bedrock nor a bearer token: {auth}"
        ));
    }
    if request.header("x-amz-date").is_none() {
        out.push("a SigV4 request without x-amz-date".into());
    }
    out
}
