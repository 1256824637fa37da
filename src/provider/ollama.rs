//! Ollama's native `/api/chat`: NDJSON, one JSON object per line, whole tool calls with object
//! arguments, and a final `done:true` line carrying the stop reason and token counts.
//!
//! Preferred over Ollama's `/v1` because it returns thinking as its own field and reports errors
//! that happen after the headers were sent as an `{"error": ...}` line.

use super::body::BodyEncoder;
use super::lines::{LineSplitter, MAX_LINE_BYTES};
use super::prepare::{self, Joined, Part, View};
use super::{ProviderError, ProviderEvent, Request};
use crate::protocol::{AssistantMessage, ContentBlock, Model, StopReason, ThinkingLevel, ToolSpec};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Value, json};
use std::borrow::Cow;

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

/// The request body, serialised straight from the prepared view of the conversation.
pub fn build_body<E: BodyEncoder>(req: &Request, out: E) -> serde_json::Result<E::Output> {
    let prepared = prepare::request_messages(req.messages, req.model);
    let mut messages = Vec::with_capacity(prepared.len() + 1);
    if !req.system_prompt.is_empty() {
        messages.push(Msg::System {
            content: req.system_prompt,
        });
    }
    for view in &prepared {
        messages.push(match view {
            View::User(parts) => Msg::User {
                content: Joined::parts(parts),
                images: Images::of(parts),
            },
            View::Assistant(a) => {
                let content = Joined::text(&a.content);
                let thinking = Joined::thinking(&a.content);
                let calls = a.tool_calls().next().is_some();
                if content.is_empty() && thinking.is_empty() && !calls {
                    continue;
                }
                Msg::Assistant {
                    content,
                    thinking: (!thinking.is_empty()).then_some(thinking),
                    tool_calls: calls.then_some(Calls(a)),
                }
            }
            View::ToolResult {
                tool_name, content, ..
            } => Msg::Tool {
                tool_name,
                content: Joined::parts(content),
                images: Images::of(content),
            },
        });
    }

    out.encode(
        &Body {
            model: &req.model.id,
            messages,
            stream: true,
            options: Options {
                num_predict: super::max_output_tokens(req),
                num_ctx: req.model.load.num_ctx,
            },
            keep_alive: req.model.load.keep_alive.as_ref(),
            tools: (!req.tools.is_empty()).then_some(Tools(req.tools)),
            think: req.model.reasoning.then(|| think(req)),
        },
        req,
        &prepared,
    )
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Msg<'a>>,
    stream: bool,
    options: Options,
    #[serde(skip_serializing_if = "Option::is_none")]
    keep_alive: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    /// Ollama rejects `think` for models without thinking support.
    #[serde(skip_serializing_if = "Option::is_none")]
    think: Option<Value>,
}

/// `think` for a reasoning model: a boolean, or a level name for models such as gpt-oss that
/// cannot stop thinking; those models name their values in models.json's `thinkingLevelMap`,
/// as Pi's do.
fn think(req: &Request) -> Value {
    match req.thinking {
        None => json!(true),
        Some(level) => match req.model.thinking_value(level) {
            Some(value) => json!(value),
            None => json!(level != ThinkingLevel::Off),
        },
    }
}

#[derive(Serialize)]
struct Options {
    num_predict: u64,
    /// Without it Ollama silently drops the start of a prompt longer than the context length
    /// the model happens to be loaded with, system prompt and tools first.
    #[serde(skip_serializing_if = "Option::is_none")]
    num_ctx: Option<u64>,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Msg<'a> {
    System {
        content: &'a str,
    },
    User {
        content: Joined<'a, Part<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        images: Option<Images<'a>>,
    },
    Assistant {
        content: Joined<'a, ContentBlock>,
        #[serde(skip_serializing_if = "Option::is_none")]
        thinking: Option<Joined<'a, ContentBlock>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_calls: Option<Calls<'a>>,
    },
    Tool {
        tool_name: &'a str,
        content: Joined<'a, Part<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        images: Option<Images<'a>>,
    },
}

/// The base64 data of the images in some content, which Ollama takes beside the text.
struct Images<'a>(&'a [Part<'a>]);

impl<'a> Images<'a> {
    fn of(parts: &'a [Part<'a>]) -> Option<Self> {
        parts.iter().any(Part::is_image).then_some(Images(parts))
    }
}

impl Serialize for Images<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().filter_map(|p| match p {
            Part::Image { data, .. } => Some(data),
            Part::Text(_) => None,
        }))
    }
}

/// A reply's tool calls, arguments as objects.
struct Calls<'a>(&'a AssistantMessage);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Call<'a> {
            function: Function<'a>,
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: Cow<'a, Value>,
        }
        serializer.collect_seq(self.0.tool_calls().map(|(_, name, arguments)| Call {
            function: Function {
                name,
                arguments: arguments_object(arguments),
            },
        }))
    }
}

/// Ollama wants arguments as an object; arguments kept as raw text are parsed if they can be.
fn arguments_object(arguments: &Value) -> Cow<'_, Value> {
    match arguments {
        Value::String(s) => Cow::Owned(serde_json::from_str(s).unwrap_or_else(|_| json!({}))),
        Value::Null => Cow::Owned(json!({})),
        other => Cow::Borrowed(other),
    }
}

struct Tools<'a>(&'a [ToolSpec]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: ToolFunction<'a>,
        }
        #[derive(Serialize)]
        struct ToolFunction<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
        }
        serializer.collect_seq(self.0.iter().map(|t| Tool {
            kind: "function",
            function: ToolFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        }))
    }
}

/// Below this share of nova's estimate, a reported prompt count means the server cut the
/// prompt. The estimate (chars / 4) undercounts code rather than overcounts it, so honest counts
/// stay well above half of it.
const TRUNCATED_BELOW: f64 = 0.5;
/// Prompts smaller than this are not judged: the fixed framing of a chat template weighs too
/// much in them.
const TRUNCATION_MIN_ESTIMATE: u64 = 1024;
/// A count this small is no context length a model is loaded with: it is a server that reused
/// its cache and counted only the new tokens, not a cut.
const TRUNCATION_MIN_REPORTED: u64 = 256;

/// What to say when Ollama read far fewer prompt tokens than nova sent, which is what its silent
/// cut to the loaded context length looks like; `None` when the counts agree well enough.
pub(super) fn truncation(estimate: u64, reported: Option<u64>) -> Option<String> {
    let reported = reported.filter(|&r| r >= TRUNCATION_MIN_REPORTED)?;
    let cut = estimate >= TRUNCATION_MIN_ESTIMATE
        && (reported as f64) < estimate as f64 * TRUNCATED_BELOW;
    cut.then(|| {
        format!(
            "Ollama read only {reported} prompt tokens of about {estimate}: it cut the prompt to the \
             context length the model is loaded with, dropping the start of the conversation \
             (system prompt and tools first). Declare the model's contextWindow in models.json \
             (sent as num_ctx), or raise ollama.maxDiscoveredContext in settings"
        )
    })
}

/// The key of the warning that a prompt was cut, said once per session.
pub(super) const TRUNCATED: &str = "ollama-truncated";

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
    facts: super::ReplyFacts,
    done: bool,
}

impl Accumulator {
    /// What the server has said about the reply so far, beside its content.
    pub fn facts(&self) -> &super::ReplyFacts {
        &self.facts
    }

    pub fn new(model: &Model) -> Self {
        Self::with_id_prefix(model, super::fresh_call_id_prefix())
    }

    fn with_id_prefix(model: &Model, id_prefix: String) -> Self {
        Accumulator {
            lines: LineSplitter::new(MAX_LINE_BYTES),
            model: model.clone(),
            id_prefix,
            tool_calls: 0,
            facts: super::ReplyFacts::default(),
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
            self.facts.raw_stop_reason.clone_from(&chunk.done_reason);
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
    use crate::protocol::{Message, StopReason, ToolResultMessage, UserContent, UserMessage};
    use crate::provider::prepare::tests::{assistant, call, model, result, user_text};
    use crate::provider::test_support::{Outcome, all_splits_agree};
    use ProviderEvent::*;
    use serde_json::json;
    use std::sync::Arc;

    /// The body `build_body` writes, parsed back for comparison.
    fn body_of(req: &Request) -> serde_json::Value {
        serde_json::from_slice(&build_body(req, crate::provider::body::Buffer).unwrap()).unwrap()
    }

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
    fn truncation_is_judged_against_the_estimate() {
        assert_eq!(truncation(10_000, None), None);
        assert_eq!(truncation(10_000, Some(6_000)), None);
        assert_eq!(truncation(1_000, Some(300)), None);
        assert_eq!(truncation(10_000, Some(10)), None);
        let said = truncation(10_000, Some(4096)).unwrap();
        assert!(
            said.contains("only 4096 prompt tokens of about 10000"),
            "{said}"
        );
        // The error text reads as an overflow, so the agent compacts and retries.
        assert_eq!(
            ProviderError::Api(said).kind(),
            crate::provider::ErrorKind::Overflow
        );
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
        let messages: Vec<Arc<Message>> = [
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
                duration_ms: None,
                timestamp: 3,
            }),
            user_text("thanks"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
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
            max_tokens: None,
            thinking: None,
            session_id: None,
        };
        assert_eq!(
            body_of(&req),
            json!({
                "model": "m1",
                "stream": true,
                "think": true,
                "options": {"num_predict": 64000},
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
        let body = body_of(&req);
        assert!(body.get("think").is_none() && body.get("tools").is_none());
        assert_eq!(body["options"]["num_predict"], 4096);
        assert!(body["options"].get("num_ctx").is_none() && body.get("keep_alive").is_none());
        let mut loaded = small.clone();
        loaded.load.num_ctx = Some(8192);
        loaded.load.keep_alive = Some(json!("30m"));
        let body = body_of(&Request {
            model: &loaded,
            ..req.clone()
        });
        assert_eq!(
            body["options"],
            json!({"num_predict": 4096, "num_ctx": 8192})
        );
        assert_eq!(body["keep_alive"], "30m");
        for (asked, sent) in [(1000, 1000), (100_000, 4096)] {
            let body = body_of(&Request {
                max_tokens: Some(asked),
                ..req.clone()
            });
            assert_eq!(body["options"]["num_predict"], sent);
        }
    }
}
