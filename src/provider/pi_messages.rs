//! Pi's own message protocol, `pi-messages`, as the Radius gateway speaks it: one
//! `POST {base}/messages` of `{model, context, options}`, where `context` is the conversation in
//! Pi's message shapes (`systemPrompt`, `messages` tagged by `role`, `tools`), answered by an SSE
//! stream whose every `data:` payload is one of Pi's assistant-message events (`text_delta`,
//! `toolcall_end`, …, each keyed by `contentIndex`) and which ends with a `done` or `error` event
//! carrying the stop reason and usage.
//!
//! The gateway routes the request to the model's own provider, so the body carries the whole
//! conversation as Pi holds it (signatures and all) and nothing provider-specific.

use super::body::BodyEncoder;
use super::lines::SseDecoder;
use super::prepare::{self, Part, View};
use super::{ProviderError, ProviderEvent, Request, Tokens};
use crate::protocol::{AssistantMessage, Model, StopReason, ThinkingLevel, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `<base>/messages`, for a base like `https://radius.pi.dev/v1`.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/messages", base_url.trim_end_matches('/'))
}

/// The request body, serialised straight from the prepared view of the conversation.
pub fn build_body<E: BodyEncoder>(req: &Request, out: E) -> serde_json::Result<E::Output> {
    let prepared = prepare::request_messages(req.messages, req.model);
    let messages: Vec<OutMessage> = prepared
        .iter()
        .map(|view| match view {
            View::User(parts) => OutMessage::User {
                content: parts.iter().map(OutPart::from).collect(),
            },
            View::Assistant(a) => OutMessage::Assistant(a),
            View::ToolResult {
                tool_call_id,
                tool_name,
                content,
                is_error,
            } => OutMessage::ToolResult {
                tool_call_id,
                tool_name,
                content: content.iter().map(OutPart::from).collect(),
                is_error: *is_error,
            },
        })
        .collect();
    let reasoning = req
        .thinking
        .filter(|level| req.model.reasoning && *level != ThinkingLevel::Off)
        .map(ThinkingLevel::as_str);
    out.encode(
        &Body {
            model: &req.model.id,
            context: Context {
                system_prompt: (!req.system_prompt.is_empty()).then_some(req.system_prompt),
                messages,
                tools: (!req.tools.is_empty()).then_some(req.tools),
            },
            options: Options {
                max_tokens: super::max_output_tokens(req),
                reasoning,
                cache_retention: match super::retention(req) {
                    super::Retention::Long => Some("long"),
                    super::Retention::None => Some("none"),
                    super::Retention::Short => None,
                },
            },
        },
        req,
        &prepared,
    )
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    context: Context<'a>,
    options: Options,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Context<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system_prompt: Option<&'a str>,
    messages: Vec<OutMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a [ToolSpec]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    max_tokens: u64,
    /// The thinking level by Pi's name; the gateway maps it to the model's own setting.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<&'static str>,
    /// `long` with `PI_CACHE_RETENTION=long`, `none` for a one-off summary; otherwise the
    /// gateway's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_retention: Option<&'static str>,
}

/// A message in Pi's shape. Replies go out whole, as Pi stored them, since the gateway needs
/// their signatures and provider to send them back to the model that wrote them.
#[derive(Serialize)]
#[serde(
    tag = "role",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
enum OutMessage<'a> {
    User {
        content: Vec<OutPart<'a>>,
    },
    Assistant(&'a AssistantMessage),
    ToolResult {
        tool_call_id: &'a str,
        tool_name: &'a str,
        content: Vec<OutPart<'a>>,
        is_error: bool,
    },
}

#[derive(Serialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
enum OutPart<'a> {
    Text { text: &'a str },
    Image { data: &'a str, mime_type: &'a str },
}

impl<'a> From<&'a Part<'a>> for OutPart<'a> {
    fn from(part: &'a Part<'a>) -> Self {
        match part {
            Part::Text(text) => OutPart::Text { text },
            Part::Image { data, mime_type } => OutPart::Image { data, mime_type },
        }
    }
}

/// One event of the stream. Fields are loose so that a wrong type is ignored rather than fatal;
/// what the reply needs is checked where it is used.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    content_index: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    content_signature: Option<Value>,
    #[serde(default)]
    redacted: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    tool_name: Option<Value>,
    #[serde(default)]
    tool_call: Option<Value>,
    #[serde(default)]
    reason: Option<Value>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error_message: Option<Value>,
    #[serde(default)]
    response_id: Option<Value>,
}

/// What a content index of the reply holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text {
        streamed: bool,
    },
    Thinking {
        streamed: bool,
    },
    /// Tool call number `index` of the reply.
    Call {
        index: usize,
        streamed: bool,
    },
}

/// Turns the SSE body into events; see the module docs for the format.
#[derive(Debug)]
pub struct Accumulator {
    sse: SseDecoder,
    model: Model,
    id_prefix: String,
    blocks: Vec<Block>,
    calls: usize,
    /// Set by the terminal `done` event; anything after it is ignored.
    done: bool,
    facts: super::ReplyFacts,
}

impl Accumulator {
    pub fn new(model: &Model) -> Self {
        Self::with_id_prefix(model, super::fresh_call_id_prefix())
    }

    /// Invented call ids are `call_<id_prefix>_<n>`; tests fix the prefix.
    pub(crate) fn with_id_prefix(model: &Model, id_prefix: String) -> Self {
        Accumulator {
            sse: SseDecoder::default(),
            model: model.clone(),
            id_prefix,
            blocks: Vec::new(),
            calls: 0,
            done: false,
            facts: super::ReplyFacts::default(),
        }
    }

    pub fn facts(&self) -> &super::ReplyFacts {
        &self.facts
    }

    /// Feeds body bytes, appending the events they complete to `out`. Events parsed before an
    /// error are still appended, so a reply cut by a server error keeps what arrived.
    pub fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        for event in self.sse.push(bytes)? {
            self.frame(&event.data, out)?;
        }
        Ok(())
    }

    /// Ends the body: a reply without its `done` event was cut short.
    pub fn finish(mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let sse = std::mem::take(&mut self.sse);
        for event in sse.finish()? {
            self.frame(&event.data, out)?;
        }
        if self.done {
            Ok(())
        } else {
            Err(ProviderError::EndedEarly)
        }
    }

    fn frame(&mut self, data: &str, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let event: Event =
            serde_json::from_str(data).map_err(|e| ProviderError::invalid_json(data, &e))?;
        match event.kind.as_str() {
            "done" => self.done(&event, out),
            "error" => Err(ProviderError::Api(
                text(event.error_message.as_ref())
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or_else(|| "the gateway ended the reply with an error".to_owned()),
            )),
            "text_start" | "thinking_start" | "toolcall_start" => self.start(&event, out),
            "text_delta" | "thinking_delta" | "toolcall_delta" => self.delta(&event, out),
            "text_end" | "thinking_end" | "toolcall_end" => self.end(&event, out),
            // `start` and any event a later gateway adds carry nothing nova needs.
            _ => Ok(()),
        }
    }

    /// The index an event names: a start must open the next block, the others an open one (a
    /// bad index from the wire must not index past the blocks).
    fn index(&self, event: &Event) -> Result<usize, ProviderError> {
        let starts = event.kind.ends_with("_start");
        let limit = self.blocks.len();
        let index = event
            .content_index
            .as_ref()
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| if starts { i == limit } else { i < limit });
        index.ok_or_else(|| {
            let shown = event
                .content_index
                .as_ref()
                .map_or_else(|| "none".to_owned(), Value::to_string);
            ProviderError::Api(format!(
                "invalid contentIndex {} in a {} event of the gateway's stream",
                quoted(&shown),
                event.kind
            ))
        })
    }

    fn start(&mut self, event: &Event, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        self.index(event)?;
        let block = match event.kind.as_str() {
            "text_start" => Block::Text { streamed: false },
            "thinking_start" => Block::Thinking { streamed: false },
            _ => {
                let index = self.calls;
                self.calls += 1;
                let id = text(event.id.as_ref())
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{}_{index}", self.id_prefix));
                out.push(ProviderEvent::ToolCall {
                    index,
                    id: Some(id),
                    name: text(event.tool_name.as_ref()).filter(|n| !n.is_empty()),
                    arguments: String::new(),
                });
                Block::Call {
                    index,
                    streamed: false,
                }
            }
        };
        self.blocks.push(block);
        Ok(())
    }

    fn delta(&mut self, event: &Event, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let at = self.index(event)?;
        let Some(delta) = text(event.delta.as_ref()).filter(|d| !d.is_empty()) else {
            return Ok(());
        };
        // A delta of another kind than its block is ignored, as its block cannot hold it.
        match (&mut self.blocks[at], event.kind.as_str()) {
            (Block::Text { streamed }, "text_delta") => {
                *streamed = true;
                out.push(ProviderEvent::Text(delta));
            }
            (Block::Thinking { streamed }, "thinking_delta") => {
                *streamed = true;
                out.push(ProviderEvent::Thinking(delta));
            }
            (Block::Call { index, streamed }, "toolcall_delta") => {
                *streamed = true;
                out.push(ProviderEvent::ToolCall {
                    index: *index,
                    id: None,
                    name: None,
                    arguments: delta,
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// A block's end carries the whole block: what was not streamed is sent from it, and its
    /// signature closes it.
    fn end(&mut self, event: &Event, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let at = self.index(event)?;
        let signature = text(event.content_signature.as_ref()).filter(|s| !s.is_empty());
        match (self.blocks[at], event.kind.as_str()) {
            (Block::Text { streamed }, "text_end") => {
                if let Some(content) = text(event.content.as_ref()).filter(|_| !streamed) {
                    out.push(ProviderEvent::Text(content));
                }
                if let Some(signature) = signature {
                    out.push(ProviderEvent::TextSignature(signature));
                }
            }
            (Block::Thinking { streamed }, "thinking_end") => {
                if event.redacted == Some(Value::Bool(true)) {
                    if let Some(payload) = signature {
                        out.push(ProviderEvent::RedactedThinking(payload));
                    }
                    return Ok(());
                }
                if let Some(content) = text(event.content.as_ref()).filter(|_| !streamed) {
                    out.push(ProviderEvent::Thinking(content));
                }
                if let Some(signature) = signature {
                    out.push(ProviderEvent::ThinkingSignature(signature));
                }
            }
            (Block::Call { index, streamed }, "toolcall_end") if !streamed => {
                let arguments = event
                    .tool_call
                    .as_ref()
                    .and_then(|call| call.get("arguments"))
                    .map_or_else(|| "{}".to_owned(), super::arguments_text);
                out.push(ProviderEvent::ToolCall {
                    index,
                    id: None,
                    name: None,
                    arguments,
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn done(&mut self, event: &Event, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let reason = text(event.reason.as_ref()).unwrap_or_default();
        let stop = match reason.as_str() {
            "stop" => StopReason::Stop,
            "length" => StopReason::Length,
            "toolUse" => StopReason::ToolUse,
            other => {
                return Err(ProviderError::Api(format!(
                    "the gateway ended the reply with an unknown stop reason {}",
                    quoted(other)
                )));
            }
        };
        self.done = true;
        self.facts.raw_stop_reason = Some(reason);
        self.facts.response_id = text(event.response_id.as_ref()).filter(|id| !id.is_empty());
        if let Some(usage) = event.usage.as_ref() {
            out.push(ProviderEvent::Usage(self.priced(usage)));
        }
        out.push(ProviderEvent::Finish(stop));
        Ok(())
    }

    /// The gateway's counts, in Pi's fields, priced with the model's rates.
    fn priced(&self, usage: &Value) -> crate::protocol::Usage {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        super::priced(
            &self.model,
            Tokens {
                input: count("input"),
                output: count("output"),
                cache_read: count("cacheRead"),
                cache_write: count("cacheWrite"),
                cache_write_1h: None,
            },
        )
    }
}

/// A string field's text; anything else is treated as absent.
fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

/// A value from the wire, quoted and cut short enough for an error text.
fn quoted(value: &str) -> String {
    let cut: String = value.chars().take(40).collect();
    format!("{cut:?}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
