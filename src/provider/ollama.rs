//! Ollama's native `/api/chat`: NDJSON, one JSON object per line, whole tool calls with object
//! arguments, and a final `done:true` line carrying the stop reason and token counts.
//!
//! Preferred over Ollama's `/v1` because it returns thinking as its own field and reports errors
//! that happen after the headers were sent as an `{"error": ...}` line.

use super::lines::{LineSplitter, MAX_LINE_BYTES};
use super::{ProviderError, ProviderEvent, Request, prepare};
use crate::protocol::{ContentBlock, Message, Model, StopReason, UserContent, joined_text};
use serde::Deserialize;
use serde_json::{Value, json};

/// `<base>/api/chat`. Tolerates a trailing `/` and a base that already ends in `/v1` or `/api`
/// (copied from an OpenAI-style configuration).
pub fn endpoint(base_url: &str) -> String {
    format!("{}/api/chat", root(base_url))
}

/// The server root, for endpoints other than chat (the model list).
pub(crate) fn root(base_url: &str) -> &str {
    let base = base_url.trim_end_matches('/');
    base.strip_suffix("/v1")
        .or_else(|| base.strip_suffix("/api"))
        .unwrap_or(base)
}

pub fn build_body(req: &Request) -> Value {
    let mut messages = Vec::new();
    if !req.system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": req.system_prompt}));
    }
    for m in prepare::request_messages(req.messages, req.model) {
        match m {
            Message::User(u) => {
                let mut msg = json!({"role": "user", "content": u.content.joined_text()});
                if let UserContent::Blocks(blocks) = &u.content {
                    add_images(&mut msg, blocks);
                }
                messages.push(msg);
            }
            Message::Assistant(a) => {
                let text = joined_text(&a.content);
                let thinking = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Thinking { thinking, .. } => Some(thinking.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let calls: Vec<Value> = a
                    .tool_calls()
                    .map(|(_, name, arguments)| {
                        json!({"function": {"name": name, "arguments": arguments_object(arguments)}})
                    })
                    .collect();
                if text.is_empty() && thinking.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut msg = json!({"role": "assistant", "content": text});
                if !thinking.is_empty() {
                    msg["thinking"] = json!(thinking);
                }
                if !calls.is_empty() {
                    msg["tool_calls"] = json!(calls);
                }
                messages.push(msg);
            }
            // `prepare` has already turned summaries into user messages.
            Message::CompactionSummary(_) => {}
            Message::ToolResult(r) => {
                let mut msg = json!({
                    "role": "tool",
                    "tool_name": r.tool_name,
                    "content": joined_text(&r.content),
                });
                add_images(&mut msg, &r.content);
                messages.push(msg);
            }
        }
    }

    let mut body = json!({
        "model": req.model.id,
        "messages": messages,
        "stream": true,
        "options": {"num_predict": super::max_output_tokens(req)},
    });
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect();
        body["tools"] = json!(tools);
    }
    // Ollama rejects `think` for models without thinking support.
    if req.model.reasoning {
        body["think"] = json!(true);
    }
    body
}

fn add_images(msg: &mut Value, blocks: &[ContentBlock]) {
    let images: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Image { data, .. } => Some(data.as_str()),
            _ => None,
        })
        .collect();
    if !images.is_empty() {
        msg["images"] = json!(images);
    }
}

/// Ollama wants arguments as an object; arguments kept as raw text are parsed if they can be.
fn arguments_object(arguments: &Value) -> Value {
    match arguments {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| json!({})),
        Value::Null => json!({}),
        other => other.clone(),
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    message: Option<ChunkMessage>,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ChunkToolCall>>,
}

#[derive(Deserialize)]
struct ChunkToolCall {
    #[serde(default)]
    id: Option<String>,
    function: ChunkFunction,
}

#[derive(Deserialize)]
struct ChunkFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

/// Turns the NDJSON body into events; see the module docs for the format.
#[derive(Debug)]
pub struct Accumulator {
    lines: LineSplitter,
    model: Model,
    id_prefix: String,
    tool_calls: usize,
    done: bool,
}

impl Accumulator {
    pub fn new(model: &Model) -> Self {
        Self::with_id_prefix(model, super::fresh_call_id_prefix())
    }

    fn with_id_prefix(model: &Model, id_prefix: String) -> Self {
        Accumulator {
            lines: LineSplitter::new(MAX_LINE_BYTES),
            model: model.clone(),
            id_prefix,
            tool_calls: 0,
            done: false,
        }
    }

    /// Feeds body bytes, appending the events they complete to `out`. Events parsed before an
    /// error are still appended, so a reply cut by a server error keeps what arrived.
    pub fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        for line in self.lines.push(bytes)? {
            self.line(&line, out)?;
        }
        Ok(())
    }

    /// Ends the body: parses an unterminated last line and fails if `done` never came.
    pub fn finish(mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let rest = std::mem::replace(&mut self.lines, LineSplitter::new(0)).finish();
        if let Some(line) = rest {
            self.line(&line, out)?;
        }
        if self.done {
            Ok(())
        } else {
            Err(ProviderError::EndedEarly)
        }
    }

    fn line(&mut self, line: &str, events: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let line = line.trim();
        if line.is_empty() || self.done {
            return Ok(());
        }
        let chunk: Chunk =
            serde_json::from_str(line).map_err(|e| ProviderError::invalid_json(line, &e))?;
        if let Some(error) = chunk.error {
            return Err(ProviderError::Api(match error {
                Value::String(s) => s,
                other => other.to_string(),
            }));
        }
        if let Some(message) = chunk.message {
            if let Some(thinking) = message.thinking.filter(|t| !t.is_empty()) {
                events.push(ProviderEvent::Thinking(thinking));
            }
            if let Some(content) = message.content.filter(|c| !c.is_empty()) {
                events.push(ProviderEvent::Text(content));
            }
            for call in message.tool_calls.unwrap_or_default() {
                let index = self.tool_calls;
                self.tool_calls += 1;
                let id = call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{}_{index}", self.id_prefix));
                events.push(ProviderEvent::ToolCall {
                    index,
                    id: Some(id),
                    name: Some(call.function.name),
                    arguments: super::arguments_text(&call.function.arguments),
                });
            }
        }
        if chunk.done {
            self.done = true;
            events.push(ProviderEvent::Usage(super::priced_usage(
                &self.model,
                chunk.prompt_eval_count.unwrap_or(0),
                chunk.eval_count.unwrap_or(0),
                0,
            )));
            let reason = match chunk.done_reason.as_deref() {
                Some("length") => StopReason::Length,
                _ if self.tool_calls > 0 => StopReason::ToolUse,
                _ => StopReason::Stop,
            };
            events.push(ProviderEvent::Finish(reason));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::protocol::{StopReason, ToolResultMessage, UserMessage};
    use crate::provider::ToolSpec;
    use crate::provider::prepare::tests::{assistant, call, model, result, user_text};
    use crate::provider::test_support::{Outcome, all_splits_agree};
    use ProviderEvent::*;

    fn run(chunks: &[&[u8]]) -> Outcome {
        let mut acc = Accumulator::with_id_prefix(&model("ollama", true), "t".into());
        let mut events = Vec::new();
        for c in chunks {
            if let Err(e) = acc.push(c, &mut events) {
                return (events, Some(e));
            }
        }
        let err = acc.finish(&mut events).err();
        (events, err)
    }

    fn check(stream: &str) -> Outcome {
        all_splits_agree(stream.as_bytes(), run)
    }

    const DONE: &str = r#"{"model":"qwen3:8b","created_at":"2026-12-02T10:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":812345,"load_duration":1234,"prompt_eval_count":1000,"prompt_eval_duration":2000,"eval_count":200,"eval_duration":3000}"#;

    fn usage() -> ProviderEvent {
        let u = crate::provider::priced_usage(&model("ollama", true), 1000, 200, 0);
        assert_eq!(u.total_tokens, 1200);
        assert!((u.cost.total - (0.003 + 0.003)).abs() < 1e-12);
        Usage(u)
    }

    #[test]
    fn text() {
        let stream = format!(
            "{}\n{}\n{DONE}\n",
            r#"{"model":"qwen3:8b","created_at":"2026-12-02T10:00:00Z","message":{"role":"assistant","content":"Hel"},"done":false}"#,
            r#"{"model":"qwen3:8b","created_at":"2026-12-02T10:00:00Z","message":{"role":"assistant","content":"lo, wörld ✓"},"done":false}"#,
        );
        assert_eq!(
            check(&stream),
            (
                vec![
                    Text("Hel".into()),
                    Text("lo, wörld ✓".into()),
                    usage(),
                    Finish(StopReason::Stop)
                ],
                None
            )
        );
        // The final newline is optional.
        assert_eq!(check(stream.trim_end()), check(&stream));
    }

    #[test]
    fn thinking_then_text_with_crlf() {
        let stream = format!(
            "{}\r\n{}\r\n{}\r\n{}\r\n",
            r#"{"model":"qwen3:8b","message":{"role":"assistant","content":"","thinking":"The user"},"done":false}"#,
            r#"{"model":"qwen3:8b","message":{"role":"assistant","content":"","thinking":" wants hi."},"done":false}"#,
            r#"{"model":"qwen3:8b","message":{"role":"assistant","content":"Hi!"},"done":false}"#,
            DONE.replace("\"stop\"", "\"length\""),
        );
        assert_eq!(
            check(&stream),
            (
                vec![
                    Thinking("The user".into()),
                    Thinking(" wants hi.".into()),
                    Text("Hi!".into()),
                    usage(),
                    Finish(StopReason::Length)
                ],
                None
            )
        );
    }

    #[test]
    fn parallel_tool_calls() {
        let stream = format!(
            "{}\n{}\n{DONE}\n",
            r#"{"model":"qwen3:8b","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_k2","function":{"index":0,"name":"read","arguments":{"path":"src/main.rs"}}},{"function":{"index":1,"name":"bash","arguments":{"command":"ls -la","timeout":5}}}]},"done":false}"#,
            r#"{"model":"qwen3:8b","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"ls","arguments":{}}}]},"done":false}"#,
        );
        assert_eq!(
            check(&stream),
            (
                vec![
                    ToolCall {
                        index: 0,
                        id: Some("call_k2".into()),
                        name: Some("read".into()),
                        arguments: r#"{"path":"src/main.rs"}"#.into()
                    },
                    ToolCall {
                        index: 1,
                        id: Some("call_t_1".into()),
                        name: Some("bash".into()),
                        arguments: r#"{"command":"ls -la","timeout":5}"#.into()
                    },
                    ToolCall {
                        index: 2,
                        id: Some("call_t_2".into()),
                        name: Some("ls".into()),
                        arguments: "{}".into()
                    },
                    usage(),
                    Finish(StopReason::ToolUse)
                ],
                None
            )
        );
    }

    #[test]
    fn errors() {
        let stream = format!(
            "{}\n{}\n",
            r#"{"model":"qwen3:8b","message":{"role":"assistant","content":"Hi"},"done":false}"#,
            r#"{"error":"model runner has unexpectedly stopped"}"#
        );
        assert_eq!(
            check(&stream),
            (
                vec![Text("Hi".into())],
                Some(ProviderError::Api(
                    "model runner has unexpectedly stopped".into()
                ))
            )
        );

        let stream = r#"{"model":"qwen3:8b","message":{"role":"assistant","content":"Hi"},"done":false}
"#;
        assert_eq!(
            check(stream),
            (vec![Text("Hi".into())], Some(ProviderError::EndedEarly))
        );

        let (events, err) = check("{\"model\":\"qwen3:8b\",\"mess\n");
        assert!(events.is_empty());
        let err = err.unwrap().to_string();
        assert!(err.contains("{\"model\":\"qwen3:8b\",\"mess"), "{err}");
    }

    #[test]
    fn endpoints() {
        for base in [
            "http://127.0.0.1:11434",
            "http://127.0.0.1:11434/",
            "http://127.0.0.1:11434/v1/",
        ] {
            assert_eq!(endpoint(base), "http://127.0.0.1:11434/api/chat");
        }
    }

    #[test]
    fn body() {
        let m = Model {
            reasoning: true,
            ..model("ollama", true)
        };
        let messages = vec![
            Message::User(UserMessage {
                content: UserContent::Blocks(vec![
                    ContentBlock::text("What is in"),
                    ContentBlock::text("this picture?"),
                    ContentBlock::image("aW1n", "image/png"),
                ]),
                timestamp: 1,
            }),
            assistant(
                vec![
                    ContentBlock::Thinking {
                        thinking: "Let me look.".into(),
                        thinking_signature: None,
                        redacted: None,
                    },
                    ContentBlock::text("Reading."),
                    call("c1", "read"),
                    call("c2", "read"),
                ],
                StopReason::ToolUse,
            ),
            result("c1", vec![ContentBlock::text("a cat")]),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "c2".into(),
                tool_name: "view_image".into(),
                content: vec![
                    ContentBlock::text("Read image"),
                    ContentBlock::image("Y2F0", "image/jpeg"),
                ],
                details: None,
                is_error: false,
                timestamp: 3,
            }),
            user_text("thanks"),
        ];
        let tools = [ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }];
        let req = Request {
            model: &m,
            system_prompt: "You are nova.",
            messages: &messages,
            tools: &tools,
            api_key: None,
            headers: vec![],
            max_tokens: None,
        };
        assert_eq!(
            build_body(&req),
            json!({
                "model": "m1",
                "stream": true,
                "think": true,
                "options": {"num_predict": 32000},
                "messages": [
                    {"role": "system", "content": "You are nova."},
                    {"role": "user", "content": "What is in\nthis picture?", "images": ["aW1n"]},
                    {"role": "assistant", "content": "Reading.", "thinking": "Let me look.",
                     "tool_calls": [
                        {"function": {"name": "read", "arguments": {"path": "c1"}}},
                        {"function": {"name": "read", "arguments": {"path": "c2"}}},
                     ]},
                    {"role": "tool", "tool_name": "read", "content": "a cat"},
                    {"role": "tool", "tool_name": "view_image", "content": "Read image",
                     "images": ["Y2F0"]},
                    {"role": "user", "content": "thanks"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "read", "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                }}],
            })
        );

        let mut small = m.clone();
        small.reasoning = false;
        small.max_tokens = 4096;
        let req = Request {
            model: &small,
            tools: &[],
            ..req
        };
        let body = build_body(&req);
        assert!(body.get("think").is_none() && body.get("tools").is_none());
        assert_eq!(body["options"]["num_predict"], 4096);
        for (asked, sent) in [(1000, 1000), (100_000, 4096)] {
            let body = build_body(&Request {
                max_tokens: Some(asked),
                ..req.clone()
            });
            assert_eq!(body["options"]["num_predict"], sent);
        }
    }
}
