//! The conversation invariants of a Gemini `streamGenerateContent` request, which the API
//! enforces with a 400: turns are `user` or `model` and the first is the user's, no turn is
//! empty, every function call is answered by a function response in the user turn right after
//! it (by id when calls carry ids), and the signatures the mock gave (a thought's, the first
//! call of a step's) come back on the same parts.

use super::Reply;
use serde_json::Value;

/// One line per problem found in `body`.
pub fn check(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(contents) = body["contents"].as_array() else {
        return vec!["request has no `contents` array".into()];
    };
    if contents.first().is_some_and(|c| c["role"] != "user") {
        out.push("content 0: the conversation does not start with a user turn".into());
    }
    for decl in body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
    {
        if decl["name"].as_str().is_none_or(str::is_empty) {
            out.push("a function declaration has no name".into());
        }
    }
    for (i, c) in contents.iter().enumerate() {
        let parts = c["parts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if parts.is_empty() {
            out.push(format!("content {i}: no parts"));
        }
        match c["role"].as_str() {
            Some("user") => {}
            Some("model") => check_model_turn(i, parts, contents.get(i + 1), &mut out),
            other => out.push(format!(
                "content {i}: role {other:?} is neither user nor model"
            )),
        }
        for p in parts {
            if p.get("text")
                .is_some_and(|t| t.as_str().is_none_or(str::is_empty))
                && p.get("thoughtSignature").is_none()
            {
                out.push(format!("content {i}: empty text part"));
            }
        }
        if c["role"] == "user" {
            let answers = parts.iter().any(|p| p.get("functionResponse").is_some());
            let after_calls = i > 0
                && contents[i - 1]["parts"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p.get("functionCall").is_some()));
            if answers && !after_calls {
                out.push(format!(
                    "content {i}: function responses that answer no function call"
                ));
            }
        }
    }
    out
}

fn check_model_turn(i: usize, parts: &[Value], next: Option<&Value>, out: &mut Vec<String>) {
    let mut calls = Vec::new();
    for p in parts {
        if p["thought"] == true {
            let text = p["text"].as_str().unwrap_or_default();
            let want = Reply::google_signature_of(text);
            if p["thoughtSignature"].as_str() != Some(want.as_str()) {
                out.push(format!("content {i}: a thought without its signature"));
            }
        }
        if let Some(call) = p.get("functionCall") {
            let id = call["id"].as_str();
            if calls.is_empty() {
                let want = id.map(Reply::google_signature_of);
                if want.is_some() && p["thoughtSignature"].as_str() != want.as_deref() {
                    out.push(format!(
                        "content {i}: the step's first function call without its signature"
                    ));
                }
            }
            calls.push((id, call["name"].as_str().unwrap_or_default()));
        }
    }
    if calls.is_empty() {
        return;
    }
    let responses: Vec<(Option<&str>, &str)> = next
        .filter(|n| n["role"] == "user")
        .and_then(|n| n["parts"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("functionResponse"))
        .map(|r| (r["id"].as_str(), r["name"].as_str().unwrap_or_default()))
        .collect();
    let mut open = calls.clone();
    for (id, name) in &responses {
        match open.iter().position(|c| c.0 == *id && c.1 == *name) {
            Some(at) => {
                open.remove(at);
            }
            None => out.push(format!(
                "content {}: function response {name:?} (id {id:?}) answers no call of content {i}",
                i + 1
            )),
        }
    }
    for (id, name) in open {
        out.push(format!(
            "content {i}: function call {name:?} (id {id:?}) has no response in the next turn"
        ));
    }
}
