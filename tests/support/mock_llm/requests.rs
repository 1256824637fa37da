//! What the mock received: every request as [`Recorded`], and the conversation invariants each
//! chat request is checked against.

use serde_json::Value;

// ---------------------------------------------------------------------------------------------

/// Which wire format a chat request used (chosen by its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    Ollama,
    OpenAi,
    Anthropic,
    /// OpenAI Responses, `/v1/responses`.
    Responses,
    /// Gemini, `/v1beta/models/<model>:streamGenerateContent`.
    Google,
    /// Bedrock, `/model/<modelId>/converse-stream` (binary event stream).
    Bedrock,
    /// Pi's own messages (the Radius gateway's), `/pi/v1/messages`: kept off Anthropic's path.
    PiMessages,
}

/// One request as the mock received it. Header names are lower-cased. `body` is the parsed JSON
/// (a string holding the raw text when it did not parse; `null` when empty).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The request's `messages` array (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn is_chat(&self) -> bool {
        route_format(&self.path).is_some()
    }
}

pub(super) fn route_format(path: &str) -> Option<WireFormat> {
    let path = path.split('?').next().unwrap_or(path);
    if path == "/api/chat" {
        Some(WireFormat::Ollama)
    } else if path.ends_with("/chat/completions") {
        Some(WireFormat::OpenAi)
    } else if path.starts_with("/pi/") && path.ends_with("/messages") {
        Some(WireFormat::PiMessages)
    } else if path == "/v1/messages" {
        Some(WireFormat::Anthropic)
    } else if path.ends_with("/responses") {
        Some(WireFormat::Responses)
    } else if path.ends_with(":streamGenerateContent") {
        Some(WireFormat::Google)
    } else if path.starts_with("/model/") && path.ends_with("/converse-stream") {
        Some(WireFormat::Bedrock)
    } else {
        None
    }
}

fn content_is_empty(content: &Value) -> bool {
    match content {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(parts) => parts.iter().all(|p| match p.get("text") {
            Some(Value::String(t)) => t.is_empty() && p.get("image_url").is_none(),
            _ => p.get("image_url").is_none() && p.get("type").is_none(),
        }),
        _ => false,
    }
}

fn role(m: &Value) -> &str {
    m["role"].as_str().unwrap_or("")
}

fn calls_of(m: &Value) -> &[Value] {
    m["tool_calls"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Check a chat request body against the conversation invariants; returns one line per problem.
///
/// Both formats: a `messages` array; streaming requested; no empty assistant message (no
/// content and no tool calls); no tool message that answers nothing. Ollama: each assistant
/// `tool_calls` entry is answered by exactly one `role:"tool"` message before the next
/// user/assistant message (and a `tool_name`, when given, names one of those calls). OpenAI: each
/// `tool_calls[].id` is answered by exactly one `role:"tool"` message with that `tool_call_id`
/// directly after the assistant message; a user message (for example carrying the tools'
/// images) may follow them.
pub fn check_conversation(format: WireFormat, body: &Value) -> Vec<String> {
    match format {
        WireFormat::Anthropic => return super::anthropic_checks::check(body),
        WireFormat::Responses => return super::responses_checks::check(body),
        WireFormat::Google => return super::google_checks::check(body),
        WireFormat::Bedrock => return super::bedrock_checks::check(body),
        WireFormat::PiMessages => return super::pi_checks::check(body),
        WireFormat::Ollama | WireFormat::OpenAi => {}
    }
    let mut out = Vec::new();
    let Some(msgs) = body["messages"].as_array() else {
        return vec!["request has no `messages` array".into()];
    };
    match format {
        WireFormat::Ollama => {
            if body.get("stream") == Some(&Value::Bool(false)) {
                out.push("request has `stream: false`; the mock only streams".into());
            }
        }
        WireFormat::OpenAi
        | WireFormat::Anthropic
        | WireFormat::Responses
        | WireFormat::Google
        | WireFormat::Bedrock
        | WireFormat::PiMessages => {
            if body.get("stream") != Some(&Value::Bool(true)) {
                out.push("request does not set `stream: true`".into());
            }
        }
    }
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        match role(m) {
            "assistant" => {
                let calls = calls_of(m);
                if calls.is_empty() && content_is_empty(&m["content"]) {
                    out.push(format!(
                        "message {i}: empty assistant message (no content, no tool calls)"
                    ));
                }
                let mut j = i + 1;
                while j < msgs.len() && role(&msgs[j]) == "tool" {
                    j += 1;
                }
                let results = &msgs[i + 1..j];
                if calls.is_empty() {
                    for k in i + 1..j {
                        out.push(format!(
                            "message {k}: tool message without a preceding tool call"
                        ));
                    }
                } else {
                    match format {
                        WireFormat::Ollama => check_ollama_results(i, calls, results, &mut out),
                        WireFormat::OpenAi
                        | WireFormat::Anthropic
                        | WireFormat::Responses
                        | WireFormat::Google
                        | WireFormat::Bedrock
                        | WireFormat::PiMessages => {
                            check_openai_results(i, calls, results, &mut out)
                        }
                    }
                }
                i = j;
                continue;
            }
            "tool" => out.push(format!(
                "message {i}: tool message without a preceding tool call"
            )),
            "user" | "system" | "developer" => {}
            other => out.push(format!("message {i}: unknown role {other:?}")),
        }
        i += 1;
    }
    out
}

fn check_ollama_results(i: usize, calls: &[Value], results: &[Value], out: &mut Vec<String>) {
    if results.len() != calls.len() {
        out.push(format!(
            "message {i}: assistant made {} tool call(s) but {} tool message(s) follow before the \
             next user/assistant message",
            calls.len(),
            results.len()
        ));
    }
    let mut names: Vec<&str> = calls
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap_or(""))
        .collect();
    for (k, r) in results.iter().enumerate() {
        if let Some(name) = r.get("tool_name").and_then(Value::as_str) {
            match names.iter().position(|n| *n == name) {
                Some(p) => {
                    names.remove(p);
                }
                None => out.push(format!(
                    "message {}: tool message for {name:?} answers none of the calls of message {i}",
                    i + 1 + k
                )),
            }
        }
    }
}

fn check_openai_results(i: usize, calls: &[Value], results: &[Value], out: &mut Vec<String>) {
    let mut ids: Vec<&str> = Vec::new();
    for c in calls {
        match c["id"].as_str() {
            Some(id) if !id.is_empty() => {
                if ids.contains(&id) {
                    out.push(format!("message {i}: duplicate tool call id {id:?}"));
                } else {
                    ids.push(id);
                }
            }
            _ => out.push(format!("message {i}: tool call without an id: {c}")),
        }
    }
    let mut answered: Vec<&str> = Vec::new();
    for (k, r) in results.iter().enumerate() {
        let at = i + 1 + k;
        match r["tool_call_id"].as_str() {
            None => out.push(format!("message {at}: tool message without `tool_call_id`")),
            Some(id) if !ids.contains(&id) => out.push(format!(
                "message {at}: tool message answers unknown tool call id {id:?}"
            )),
            Some(id) if answered.contains(&id) => out.push(format!(
                "message {at}: second tool message for tool call id {id:?}"
            )),
            Some(id) => answered.push(id),
        }
    }
    for id in ids {
        if !answered.contains(&id) {
            out.push(format!(
                "message {i}: tool call {id:?} has no tool message directly after the assistant \
                 message"
            ));
        }
    }
}
