//! Amazon Bedrock's Converse API (`POST {base}/model/{modelId}/converse-stream`), Pi's
//! `bedrock-converse-stream`. The reply is AWS's binary event stream: length-prefixed,
//! CRC-checked frames, decoded by AWS's own `aws-smithy-eventstream`, each with an
//! `:event-type` header and a JSON payload — `messageStart`, `contentBlockStart` (a tool call's
//! id and name), `contentBlockDelta` (text, reasoning text or signature or encrypted reasoning,
//! a piece of a tool call's input), `contentBlockStop`, `messageStop` (the stop reason) and
//! `metadata` (usage). A frame whose `:message-type` is `exception` ends the reply with that
//! error. How the request is addressed and signed is [`super::aws`]'s business.

use super::body::BodyEncoder;
use super::prepare::{self, Part, View};
use super::{ProviderError, ProviderEvent, Request, Tokens};
use crate::protocol::{AssistantMessage, ContentBlock, Model, StopReason, ThinkingLevel, ToolSpec};
use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use base64::Engine as _;
use bytes::BytesMut;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;

/// `<base>/model/<modelId>/converse-stream`, the id percent-encoded as one path segment (an
/// inference profile ARN holds `:` and `/`).
pub fn endpoint(base_url: &str, model: &str) -> String {
    let mut id = String::with_capacity(model.len() * 3);
    for b in model.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            id.push(char::from(b));
        } else {
            id.push_str(&format!("%{b:02X}"));
        }
    }
    format!(
        "{}/model/{id}/converse-stream",
        base_url.trim_end_matches('/')
    )
}

/// What Bedrock takes in place of an empty text, which it rejects.
const EMPTY_TEXT: &str = "<empty>";
/// A frame longer than this is refused: the format's own limit is 16 MiB.
const MAX_FRAME_BYTES: usize = 24 << 20;
/// Pi's thinking budgets for Claude models that think within a budget.
const BUDGETS: [(ThinkingLevel, u64); 4] = [
    (ThinkingLevel::Minimal, 1024),
    (ThinkingLevel::Low, 2048),
    (ThinkingLevel::Medium, 8192),
    (ThinkingLevel::High, 16_384),
];
const MIN_ANSWER_TOKENS: u64 = 1024;

/// The request body, serialised straight from the prepared view of the conversation.
pub fn build_body<E: BodyEncoder>(req: &Request, out: E) -> serde_json::Result<E::Output> {
    let prepared = prepare::request_messages(req.messages, req.model);
    let claude = is_claude(req.model);
    // A one-off summary caches nothing, as in Pi.
    let caching = caches_prompts(req.model) && super::retention(req) != super::Retention::None;
    let cache_point = CachePoint {
        kind: "default",
        ttl: (super::retention(req) == super::Retention::Long)
            .then_some(super::LONG_CACHE_BREAKPOINT),
    };
    let mut messages: Vec<Msg> = Vec::with_capacity(prepared.len());
    let mut i = 0;
    while i < prepared.len() {
        match &prepared[i] {
            View::User(parts) => {
                let mut content: Vec<Block> = parts.iter().filter_map(Block::from_part).collect();
                if content.is_empty() {
                    content.push(Block::Text {
                        text: Cow::Borrowed(EMPTY_TEXT),
                    });
                }
                messages.push(Msg {
                    role: "user",
                    content,
                });
                i += 1;
            }
            View::Assistant(a) => {
                let content = assistant_blocks(a, req.model, claude);
                // Bedrock rejects a message without content.
                if !content.is_empty() {
                    messages.push(Msg {
                        role: "assistant",
                        content,
                    });
                }
                i += 1;
            }
            View::ToolResult { .. } => {
                // All results of a reply go in one user message.
                let mut content = Vec::new();
                while let Some(View::ToolResult {
                    tool_call_id,
                    content: parts,
                    is_error,
                    ..
                }) = prepared.get(i)
                {
                    let mut result: Vec<Block> =
                        parts.iter().filter_map(Block::from_part).collect();
                    if result.is_empty() {
                        result.push(Block::Text {
                            text: Cow::Borrowed(EMPTY_TEXT),
                        });
                    }
                    content.push(Block::ToolResult {
                        tool_result: ToolResult {
                            tool_use_id: tool_id(tool_call_id),
                            content: result,
                            status: if *is_error { "error" } else { "success" },
                        },
                    });
                    i += 1;
                }
                messages.push(Msg {
                    role: "user",
                    content,
                });
            }
        }
    }
    if caching && let Some(last) = messages.last_mut().filter(|m| m.role == "user") {
        last.content.push(Block::CachePoint { cache_point });
    }
    let mut system = Vec::new();
    if !req.system_prompt.is_empty() {
        system.push(Block::Text {
            text: Cow::Borrowed(req.system_prompt),
        });
        if caching {
            system.push(Block::CachePoint { cache_point });
        }
    }
    let (fields, max_tokens) = reasoning_fields(req, claude);
    out.encode(
        &Body {
            messages,
            system: (!system.is_empty()).then_some(system),
            inference_config: InferenceConfig { max_tokens },
            tool_config: (!req.tools.is_empty()).then_some(ToolConfig {
                tools: Tools(req.tools),
            }),
            additional_model_request_fields: fields,
        },
        req,
        &prepared,
    )
}

/// Whether the model is Anthropic's Claude (by id or name, since an application inference
/// profile's ARN does not name the model), which takes Anthropic's thinking fields and signs
/// its reasoning.
fn is_claude(model: &Model) -> bool {
    let id = model.id.to_ascii_lowercase();
    let name = model.name.to_ascii_lowercase();
    id.contains("anthropic.claude") || id.contains("anthropic/claude") || name.contains("claude")
}

/// The id and name, lowercased, and with separators read as dashes: what Pi matches families on.
fn candidates(model: &Model) -> [String; 2] {
    let dashed = |s: &str| {
        s.to_ascii_lowercase()
            .chars()
            .map(|c| {
                if c.is_whitespace() || matches!(c, '_' | '.' | ':') {
                    '-'
                } else {
                    c
                }
            })
            .collect()
    };
    [dashed(&model.id), dashed(&model.name)]
}

fn any_family(model: &Model, families: &[&str]) -> bool {
    candidates(model)
        .iter()
        .any(|c| families.iter().any(|f| c.contains(f)))
}

/// Claude models that think adaptively with an effort (Opus 4.6 on, Sonnet 4.6 on).
fn adaptive(model: &Model) -> bool {
    model.adaptive_thinking()
        || any_family(
            model,
            &[
                "opus-4-6",
                "opus-4-7",
                "opus-4-8",
                "opus-5",
                "sonnet-4-6",
                "sonnet-5",
                "haiku-5",
                "fable-5",
            ],
        )
}

/// Claude models Bedrock caches prompts for at a cache point (3.5 Haiku, 3.7 Sonnet, 4 on).
fn caches_prompts(model: &Model) -> bool {
    is_claude(model)
        && any_family(
            model,
            &[
                "-4-",
                "opus-5",
                "sonnet-5",
                "haiku-5",
                "fable-5",
                "claude-3-7-sonnet",
                "claude-3-5-haiku",
            ],
        )
}

/// `additionalModelRequestFields` for the thinking level, and the output budget, as Pi sends
/// them: Anthropic's thinking settings for Claude, a reasoning effort for OpenAI's models.
fn reasoning_fields(req: &Request, claude: bool) -> (Option<Value>, u64) {
    let max_tokens = super::max_output_tokens(req);
    let model = req.model;
    let Some(level) = req
        .thinking
        .filter(|l| model.reasoning && *l != ThinkingLevel::Off)
    else {
        return (None, max_tokens);
    };
    let effort =
        |fallback: &'static str| model.thinking_value(level).unwrap_or(fallback).to_owned();
    if claude {
        if adaptive(model) {
            let fallback = match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                _ => "high",
            };
            let fields = serde_json::json!({
                "thinking": {"type": "adaptive", "display": "summarized"},
                "output_config": {"effort": effort(fallback)},
            });
            return (Some(fields), max_tokens);
        }
        let wanted = BUDGETS
            .iter()
            .rev()
            .find(|(l, _)| *l <= level)
            .map_or(MIN_ANSWER_TOKENS, |(_, b)| *b);
        let max_tokens =
            super::fit_to_context(req, max_tokens.saturating_add(wanted).min(model.max_tokens));
        let budget = wanted
            .min(max_tokens.saturating_sub(MIN_ANSWER_TOKENS))
            .max(1024);
        let fields = serde_json::json!({
            "thinking": {"type": "enabled", "budget_tokens": budget, "display": "summarized"},
            "anthropic_beta": ["interleaved-thinking-2025-05-14"],
        });
        return (Some(fields), max_tokens);
    }
    let level_name = |high: &'static str| match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        ThinkingLevel::High => "high",
        ThinkingLevel::Xhigh | ThinkingLevel::Max | ThinkingLevel::Off => high,
    };
    if any_family(model, &["gpt-oss"]) {
        return (
            Some(serde_json::json!({"reasoning_effort": level_name("high")})),
            max_tokens,
        );
    }
    if any_family(model, &["gpt-"]) {
        let top = if level == ThinkingLevel::Max {
            "max"
        } else {
            "xhigh"
        };
        let fields = serde_json::json!({"reasoning": {"effort": effort(level_name(top))}});
        return (Some(fields), max_tokens);
    }
    (None, max_tokens)
}

/// A reply as Bedrock takes it back. Reasoning goes back signed only to Claude, and only to
/// the model that wrote it; unsigned Claude reasoning (an aborted reply) goes as text, which
/// Bedrock would refuse as reasoning; encrypted reasoning as its opaque bytes.
fn assistant_blocks<'a>(a: &'a AssistantMessage, model: &Model, claude: bool) -> Vec<Block<'a>> {
    let same_model =
        a.provider == model.provider && a.api == model.api.as_str() && a.model == model.id;
    let mut blocks = Vec::with_capacity(a.content.len());
    for block in &a.content {
        match block {
            ContentBlock::Text { text, .. } if text.trim().is_empty() => {}
            ContentBlock::Text { text, .. } => blocks.push(Block::Text {
                text: Cow::Borrowed(text),
            }),
            ContentBlock::Thinking { .. } if !same_model => {}
            ContentBlock::Thinking {
                thinking_signature,
                redacted: Some(true),
                ..
            } => {
                if let Some(data) = thinking_signature.as_deref().filter(|d| !d.is_empty()) {
                    blocks.push(Block::Reasoning {
                        reasoning_content: Reasoning::Redacted {
                            redacted_content: data,
                        },
                    });
                }
            }
            ContentBlock::Thinking { thinking, .. } if thinking.trim().is_empty() => {}
            ContentBlock::Thinking {
                thinking,
                thinking_signature,
                ..
            } => {
                let signature = thinking_signature
                    .as_deref()
                    .filter(|s| !s.trim().is_empty());
                match (claude, signature) {
                    (true, None) => blocks.push(Block::Text {
                        text: Cow::Borrowed(thinking),
                    }),
                    (true, Some(signature)) => blocks.push(Block::Reasoning {
                        reasoning_content: Reasoning::Text {
                            reasoning_text: ReasoningText {
                                text: thinking,
                                signature: Some(signature),
                            },
                        },
                    }),
                    (false, _) => blocks.push(Block::Reasoning {
                        reasoning_content: Reasoning::Text {
                            reasoning_text: ReasoningText {
                                text: thinking,
                                signature: None,
                            },
                        },
                    }),
                }
            }
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => blocks.push(Block::ToolUse {
                tool_use: ToolUse {
                    tool_use_id: tool_id(id),
                    name,
                    input: Input(arguments),
                },
            }),
            ContentBlock::Image { .. } => {}
        }
    }
    blocks
}

/// A tool call id as Bedrock accepts it (`[a-zA-Z0-9_-]`, at most 64 chars), made the same way
/// for a call and its result.
fn tool_id(id: &str) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.len() <= 64 && id.chars().all(allowed) {
        return Cow::Borrowed(id);
    }
    Cow::Owned(
        id.chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .take(64)
            .collect(),
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    messages: Vec<Msg<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Vec<Block<'a>>>,
    inference_config: InferenceConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    additional_model_request_fields: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InferenceConfig {
    max_tokens: u64,
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum Block<'a> {
    Text { text: Cow<'a, str> },
    Image { image: Image<'a> },
    ToolUse { tool_use: ToolUse<'a> },
    ToolResult { tool_result: ToolResult<'a> },
    Reasoning { reasoning_content: Reasoning<'a> },
    CachePoint { cache_point: CachePoint },
}

impl<'a> Block<'a> {
    /// A user part as a block; blank text is left out, as Bedrock rejects it.
    fn from_part(part: &'a Part<'a>) -> Option<Self> {
        match part {
            Part::Text(t) if t.trim().is_empty() => None,
            Part::Text(t) => Some(Block::Text {
                text: Cow::Borrowed(t),
            }),
            Part::Image { data, mime_type } => Some(Block::Image {
                image: Image {
                    format: image_format(mime_type),
                    source: ImageSource { bytes: data },
                },
            }),
        }
    }
}

/// Bedrock's name for an image type; the tools produce only these four.
fn image_format(mime_type: &str) -> &'static str {
    match mime_type {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "png",
    }
}

#[derive(Serialize)]
struct Image<'a> {
    format: &'static str,
    source: ImageSource<'a>,
}

/// The image's bytes, base64 as the JSON protocol carries blobs (and as nova keeps them).
#[derive(Serialize)]
struct ImageSource<'a> {
    bytes: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse<'a> {
    tool_use_id: Cow<'a, str>,
    name: &'a str,
    input: Input<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult<'a> {
    tool_use_id: Cow<'a, str>,
    content: Vec<Block<'a>>,
    status: &'static str,
}

#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum Reasoning<'a> {
    Text { reasoning_text: ReasoningText<'a> },
    Redacted { redacted_content: &'a str },
}

#[derive(Serialize)]
struct ReasoningText<'a> {
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<&'a str>,
}

#[derive(Serialize, Clone, Copy)]
struct CachePoint {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

/// A call's arguments as the JSON object (a document) Bedrock requires. Arguments kept as raw
/// text go as the object they spell, or as `{}`; keys Bedrock rejects (empty ones) are dropped.
struct Input<'a>(&'a Value);

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let parsed;
        let map = match self.0 {
            Value::Object(map) => map,
            Value::String(text) => {
                parsed = serde_json::from_str::<Map<String, Value>>(text).unwrap_or_default();
                &parsed
            }
            _ => return Map::new().serialize(serializer),
        };
        if map.keys().all(|k| !k.is_empty()) {
            map.serialize(serializer)
        } else {
            serializer.collect_map(map.iter().filter(|(k, _)| !k.is_empty()))
        }
    }
}

#[derive(Serialize)]
struct ToolConfig<'a> {
    tools: Tools<'a>,
}

/// `[{"toolSpec": {"name", "description", "inputSchema": {"json": …}}}]`.
struct Tools<'a>(&'a [ToolSpec]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Schema<'a> {
            json: &'a Value,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Spec<'a> {
            name: &'a str,
            description: &'a str,
            input_schema: Schema<'a>,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Tool<'a> {
            tool_spec: Spec<'a>,
        }
        serializer.collect_seq(self.0.iter().map(|t| Tool {
            tool_spec: Spec {
                name: &t.name,
                description: &t.description,
                input_schema: Schema {
                    json: &t.parameters,
                },
            },
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// The reply
// ---------------------------------------------------------------------------------------------

/// A `contentBlockStart`: only tool calls announce themselves.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockStart {
    content_block_index: u64,
    #[serde(default)]
    start: Option<StartBody>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartBody {
    #[serde(default)]
    tool_use: Option<ToolUseStart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolUseStart {
    #[serde(default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockDelta {
    content_block_index: u64,
    #[serde(default)]
    delta: Option<DeltaBody>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeltaBody {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<ToolUseDelta>,
    #[serde(default)]
    reasoning_content: Option<ReasoningDelta>,
}

#[derive(Deserialize)]
struct ToolUseDelta {
    #[serde(default)]
    input: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReasoningDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    /// Base64, as the JSON protocol carries blobs.
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockStop {
    content_block_index: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageStop {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase")]
struct RawUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_write_input_tokens: Option<u64>,
}

/// A content block the stream has opened, by Bedrock's block index.
#[derive(Debug)]
enum Open {
    Text,
    Thinking,
    /// Encrypted reasoning, gathered until the block ends.
    Redacted(Vec<u8>),
    Tool(usize),
}

/// Turns the event stream into events; see the module docs for the format.
#[derive(Debug)]
pub struct Accumulator {
    buffer: BytesMut,
    decoder: MessageFrameDecoder,
    model: Model,
    id_prefix: String,
    open: HashMap<u64, Open>,
    calls: usize,
    stop: Option<String>,
    usage: Option<RawUsage>,
    facts: super::ReplyFacts,
}

impl Accumulator {
    pub fn new(model: &Model) -> Self {
        Self::with_id_prefix(model, super::fresh_call_id_prefix())
    }

    /// Invented call ids are `call_<id_prefix>_<n>`; tests fix the prefix.
    pub(crate) fn with_id_prefix(model: &Model, id_prefix: String) -> Self {
        Accumulator {
            buffer: BytesMut::new(),
            decoder: MessageFrameDecoder::new(),
            model: model.clone(),
            id_prefix,
            open: HashMap::new(),
            calls: 0,
            stop: None,
            usage: None,
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
        self.buffer.extend_from_slice(bytes);
        loop {
            match self.decoder.decode_frame(&mut self.buffer) {
                Ok(DecodedFrame::Complete(message)) => self.message(&message, out)?,
                Ok(DecodedFrame::Incomplete) if self.buffer.len() > MAX_FRAME_BYTES => {
                    return Err(ProviderError::Api(format!(
                        "Bedrock sent an event-stream frame over {} MiB",
                        MAX_FRAME_BYTES >> 20
                    )));
                }
                Ok(DecodedFrame::Incomplete) => return Ok(()),
                Err(e) => {
                    return Err(ProviderError::Api(format!(
                        "unreadable event-stream frame from Bedrock: {e}"
                    )));
                }
            }
        }
    }

    /// Ends the body: the reply ends with the stop reason its `messageStop` gave.
    pub fn finish(mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let indexes: Vec<u64> = self.open.keys().copied().collect();
        for index in indexes {
            self.close(index, out);
        }
        if !self.buffer.is_empty() {
            return Err(ProviderError::EndedEarly);
        }
        let Some(reason) = self.stop.take() else {
            return Err(ProviderError::EndedEarly);
        };
        let stop = match reason.as_str() {
            "end_turn" | "stop_sequence" => StopReason::Stop,
            "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
            "tool_use" => StopReason::ToolUse,
            "guardrail_intervened" | "content_filtered" => {
                return Err(ProviderError::ContentFilter);
            }
            other => {
                return Err(ProviderError::Api(format!(
                    "Provider stopped with: {other}"
                )));
            }
        };
        if let Some(usage) = self.usage.take() {
            out.push(ProviderEvent::Usage(self.priced(usage)));
        }
        out.push(ProviderEvent::Finish(stop));
        Ok(())
    }

    fn message(
        &mut self,
        message: &Message,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let header = |name: &str| {
            message
                .headers()
                .iter()
                .find(|h| h.name().as_str() == name)
                .and_then(|h| match h.value() {
                    HeaderValue::String(s) => Some(s.as_str().to_owned()),
                    _ => None,
                })
        };
        let payload = message.payload();
        match header(":message-type").as_deref() {
            Some("event") | None => {}
            Some("exception") => {
                let kind = header(":exception-type").unwrap_or_default();
                return Err(exception(&kind, payload));
            }
            Some(other) => {
                let code = header(":error-code").unwrap_or_else(|| other.to_owned());
                let text = header(":error-message").unwrap_or_default();
                return Err(ProviderError::Api(format!("{code}: {text}")));
            }
        }
        let Some(kind) = header(":event-type") else {
            return Ok(());
        };
        match kind.as_str() {
            "messageStart" => {}
            "contentBlockStart" => {
                let start: BlockStart = read(&kind, payload)?;
                if let Some(tool) = start.start.and_then(|s| s.tool_use) {
                    self.close(start.content_block_index, out);
                    let index = self.calls;
                    self.calls += 1;
                    let id = tool
                        .tool_use_id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| format!("call_{}_{index}", self.id_prefix));
                    self.open
                        .insert(start.content_block_index, Open::Tool(index));
                    out.push(ProviderEvent::ToolCall {
                        index,
                        id: Some(id),
                        name: tool.name.filter(|n| !n.is_empty()),
                        arguments: String::new(),
                    });
                }
            }
            "contentBlockDelta" => {
                let delta: BlockDelta = read(&kind, payload)?;
                if let Some(body) = delta.delta {
                    self.delta(delta.content_block_index, body, out);
                }
            }
            "contentBlockStop" => {
                let stop: BlockStop = read(&kind, payload)?;
                self.close(stop.content_block_index, out);
            }
            "messageStop" => {
                let stop: MessageStop = read(&kind, payload)?;
                self.facts.raw_stop_reason.clone_from(&stop.stop_reason);
                self.stop = stop.stop_reason.or(Some(String::new()));
            }
            "metadata" => {
                let metadata: Metadata = read(&kind, payload)?;
                if metadata.usage.is_some() {
                    self.usage = metadata.usage;
                }
            }
            // An event type newer than this code: nothing in it is needed.
            _ => {}
        }
        Ok(())
    }

    fn delta(&mut self, index: u64, body: DeltaBody, out: &mut Vec<ProviderEvent>) {
        if let Some(text) = body.text {
            self.open.entry(index).or_insert(Open::Text);
            if matches!(self.open.get(&index), Some(Open::Text)) {
                out.push(ProviderEvent::Text(text));
            }
        } else if let Some(tool) = body.tool_use {
            if let Some(Open::Tool(call)) = self.open.get(&index) {
                out.push(ProviderEvent::ToolCall {
                    index: *call,
                    id: None,
                    name: None,
                    arguments: tool.input.unwrap_or_default(),
                });
            }
        } else if let Some(reasoning) = body.reasoning_content {
            if let Some(data) = reasoning.redacted_content.filter(|d| !d.is_empty()) {
                // Encrypted reasoning replaces whatever readable reasoning the block had.
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.as_bytes())
                    .unwrap_or_default();
                match self.open.get_mut(&index) {
                    Some(Open::Redacted(kept)) => kept.extend_from_slice(&bytes),
                    _ => {
                        self.open.insert(index, Open::Redacted(bytes));
                    }
                }
                return;
            }
            let open = self.open.entry(index).or_insert(Open::Thinking);
            if !matches!(open, Open::Thinking) {
                return;
            }
            if let Some(text) = reasoning.text.filter(|t| !t.is_empty()) {
                out.push(ProviderEvent::Thinking(text));
            }
            if let Some(signature) = reasoning.signature.filter(|s| !s.is_empty()) {
                out.push(ProviderEvent::ThinkingSignature(signature));
            }
        }
    }

    /// Ends a block: encrypted reasoning goes out whole.
    fn close(&mut self, index: u64, out: &mut Vec<ProviderEvent>) {
        if let Some(Open::Redacted(bytes)) = self.open.remove(&index) {
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            out.push(ProviderEvent::RedactedThinking(data));
        }
    }

    fn priced(&self, usage: RawUsage) -> crate::protocol::Usage {
        let count = |n: Option<u64>| n.unwrap_or(0);
        let mut priced = super::priced(
            &self.model,
            Tokens {
                input: count(usage.input_tokens),
                output: count(usage.output_tokens),
                cache_read: count(usage.cache_read_input_tokens),
                cache_write: count(usage.cache_write_input_tokens),
                cache_write_1h: None,
            },
        );
        if let Some(total) = usage.total_tokens.filter(|t| *t > 0) {
            priced.total_tokens = total;
        }
        priced
    }
}

/// An event's JSON payload; the error quotes it.
fn read<T: serde::de::DeserializeOwned>(kind: &str, payload: &[u8]) -> Result<T, ProviderError> {
    serde_json::from_slice(payload).map_err(|e| {
        ProviderError::invalid_json(&format!("{kind} {}", String::from_utf8_lossy(payload)), &e)
    })
}

/// An exception frame as an error named as Pi names it (`Throttling error: …`), which is how
/// it is classified: throttling and server trouble are retried, an overlong prompt compacts.
fn exception(kind: &str, payload: &[u8]) -> ProviderError {
    let message = serde_json::from_slice::<Value>(payload)
        .ok()
        .and_then(|v| {
            v.get("message")
                .or_else(|| v.get("Message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(payload).trim().to_owned());
    let prefix = match kind.to_ascii_lowercase().as_str() {
        "internalserverexception" => "Internal server error".to_owned(),
        "modelstreamerrorexception" => "Model stream error".to_owned(),
        "validationexception" => "Validation error".to_owned(),
        "throttlingexception" => "Throttling error".to_owned(),
        "serviceunavailableexception" => "Service unavailable".to_owned(),
        "" => "Bedrock error".to_owned(),
        _ => kind.to_owned(),
    };
    ProviderError::Api(format!("{prefix}: {message}"))
}

/// An HTTP error body as Bedrock sends it (`{"message": …}`, the error's type in the
/// `x-amzn-ErrorType` header), worded as the stream's exceptions are.
pub fn http_error_text(error_type: Option<&str>, body: &str) -> String {
    let kind = error_type
        .and_then(|t| t.split(':').next())
        .map(str::trim)
        .filter(|t| !t.is_empty());
    match kind {
        Some(kind) => match exception(kind, body.as_bytes()) {
            ProviderError::Api(text) => text,
            other => other.to_string(),
        },
        None => body.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
