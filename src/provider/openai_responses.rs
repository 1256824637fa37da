//! OpenAI Responses (`POST /responses` with `stream: true`), Pi's `openai-responses`: SSE events
//! typed by `type`. A reply is a list of output items, each announced by
//! `response.output_item.added` and closed by `response.output_item.done`: `reasoning` (its
//! summary streams as `response.reasoning_summary_text.delta`), `message` (`output_text` and
//! `refusal` deltas) and `function_call` (arguments as `response.function_call_arguments.delta`).
//! The reply ends with `response.completed` or `response.incomplete` (status, usage), or fails
//! with `response.failed` or an `error` event.
//!
//! Nothing is stored on the server (`store: false`), so every request carries the whole
//! conversation, no `previous_response_id`. A reasoning item comes back whole, as the server
//! sent it with its encrypted content, kept as the thinking block's signature (as Pi keeps it);
//! a message item's id as the text block's signature; a call's item id after its `call_id` in
//! the tool call id (`call_id|item_id`). All three go back only to the model that wrote them.
//!
//! Several servers speak it, each a [`Flavour`]: OpenAI's API, Azure's (the body names a
//! deployment), GitHub Copilot's (no reasoning field for thinking off), OpenAI's with a ChatGPT
//! sign-in (no output limit) and ChatGPT's Codex backend ([`super::openai_codex`]), whose requests carry a few
//! fields more (`text.verbosity`, `tool_choice`, `parallel_tool_calls`, the encrypted reasoning
//! always asked for) and whose stream may end with `response.done` and words errors its way.

use super::body::BodyEncoder;
use super::lines::SseDecoder;
use super::prepare::{self, Joined, Part, View};
use super::{ArgumentsText, ProviderError, ProviderEvent, Request, Tokens};
use crate::protocol::{AssistantMessage, ContentBlock, Model, StopReason, ThinkingLevel, ToolSpec};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::borrow::Cow;

/// `<base>/responses`, for a base like `https://api.openai.com/v1`.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/responses", base_url.trim_end_matches('/'))
}

/// The API rejects a smaller `max_output_tokens`.
const MIN_OUTPUT_TOKENS: u64 = 16;
/// What a request asks to get back beside the reply: the reasoning, encrypted, to send back.
const INCLUDE_REASONING: [&str; 1] = ["reasoning.encrypted_content"];
/// Pi's text for a tool result with nothing in it.
const EMPTY_RESULT: &str = "(no tool output)";
/// Separates the parts of a reasoning summary, as Pi joins them.
const SUMMARY_PART_SEPARATOR: &str = "\n\n";
/// Item and call ids the API accepts are at most this long.
const MAX_ID_CHARS: usize = 64;

/// The server a request goes to, where they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour<'a> {
    OpenAi,
    /// Azure names the deployment as the body's model.
    Azure {
        deployment: &'a str,
    },
    /// ChatGPT's Codex backend, as Pi 1.6 sends to it.
    Codex,
    /// GitHub Copilot, which is sent no reasoning field when thinking is off.
    Copilot,
    /// OpenAI's API with a "Sign in with ChatGPT" token, which refuses `max_output_tokens`.
    ChatGpt,
}

/// OpenAI's own address, where a token that is not an API key is a ChatGPT sign-in.
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Where a ChatGPT user sees the usage their subscription shares with other apps.
const CHATGPT_USAGE_URL: &str = "https://chatgpt.com/settings/usage";

/// Whether `key` is a "Sign in with ChatGPT" token sent to OpenAI's API, as Pi tells one: the
/// built-in `openai` provider at OpenAI's address with a key that is not an API key (`sk-…`).
pub fn is_chatgpt_sign_in(model: &Model, key: Option<&str>) -> bool {
    model.provider == "openai"
        && model.base_url == OPENAI_BASE_URL
        && key.is_some_and(|k| !k.starts_with("sk-"))
}

/// An error of a ChatGPT sign-in with Pi's hint when the subscription's shared limit is reached.
pub fn chatgpt_error_text(body: &str) -> String {
    if body.contains("subscription_sharing_workplace_individual_usage_limit_exceeded") {
        format!(
            "{body}\nYou've reached your ChatGPT workspace's usage limit. Ask your workspace admin \
             to increase it at admin.openai.com → Workspace → Usage limits."
        )
    } else if body.contains("subscription_sharing_usage_limit_exceeded") {
        format!("{body}\nCheck your ChatGPT usage: {CHATGPT_USAGE_URL}")
    } else {
        body.to_owned()
    }
}

/// The request body, serialised straight from the prepared view of the conversation.
pub fn build_body<E: BodyEncoder>(
    req: &Request,
    flavour: Flavour,
    out: E,
) -> serde_json::Result<E::Output> {
    let codex = flavour == Flavour::Codex;
    let model = match flavour {
        Flavour::Azure { deployment } => deployment,
        Flavour::OpenAi | Flavour::Codex | Flavour::Copilot | Flavour::ChatGpt => &req.model.id,
    };
    let prepared = prepare::request_messages(req.messages, req.model);
    let mut input: Vec<Item> = Vec::with_capacity(prepared.len() + 1);
    if !req.system_prompt.is_empty() {
        let developer = req
            .model
            .compat
            .as_ref()
            .and_then(|c| c.flags.supports_developer_role)
            .unwrap_or(true);
        input.push(Item::Instructions {
            role: if req.model.reasoning && developer {
                "developer"
            } else {
                "system"
            },
            content: req.system_prompt,
        });
    }
    let mut replies = 0;
    for view in &prepared {
        match view {
            View::User(parts) if parts.is_empty() => {}
            View::User(parts) => input.push(Item::User {
                role: "user",
                content: InputParts(parts),
            }),
            View::Assistant(a) => {
                assistant_items(a, req.model, replies, &mut input);
                replies += 1;
            }
            View::ToolResult {
                tool_call_id,
                content,
                ..
            } => input.push(Item::FunctionCallOutput {
                kind: "function_call_output",
                call_id: call_id(tool_call_id),
                output: ToolOutput(content),
            }),
        }
    }

    let (mut reasoning, mut include) = reasoning(req, codex);
    if flavour == Flavour::Copilot && req.thinking == Some(ThinkingLevel::Off) {
        reasoning = None;
    }
    let supports_strict = req
        .model
        .compat
        .as_ref()
        .and_then(|c| c.flags.supports_strict_mode);
    // Codex, as Pi sends to it, leaves strictness to the server (`null`) where it may be named.
    let strict = match (codex, supports_strict.unwrap_or(codex)) {
        (_, false) => None,
        (false, true) => Some(Some(false)),
        (true, true) => Some(None),
    };
    if codex {
        include = Some(INCLUDE_REASONING);
    }
    out.encode(
        &Body {
            model,
            input,
            stream: true,
            prompt_cache_key: super::prompt_cache_key(req),
            // Pi's Codex, Azure and ChatGPT sign-in requests never carry it.
            prompt_cache_retention: (matches!(flavour, Flavour::OpenAi | Flavour::Copilot)
                && super::long_retention(req))
            .then_some(super::LONG_CACHE_OPENAI),
            store: false,
            max_output_tokens: (flavour != Flavour::ChatGpt)
                .then(|| super::max_output_tokens(req).max(MIN_OUTPUT_TOKENS)),
            tools: (!req.tools.is_empty()).then_some(Tools {
                specs: req.tools,
                strict,
            }),
            reasoning,
            include,
            text: codex.then_some(Verbosity { verbosity: "low" }),
            tool_choice: codex.then_some("auto"),
            parallel_tool_calls: codex.then_some(true),
        },
        req,
        &prepared,
    )
}

/// The reasoning settings, as Pi sends them: an effort (the level, or the model's value for it)
/// with summaries and the encrypted reasoning back; `off` asks for no reasoning unless the model
/// cannot stop (with summaries still asked of Codex); no level (side requests) leaves the
/// server's default.
fn reasoning<'a>(
    req: &Request<'a>,
    codex: bool,
) -> (Option<Reasoning<'a>>, Option<[&'static str; 1]>) {
    let Some(level) = req.thinking.filter(|_| req.model.reasoning) else {
        return (None, None);
    };
    if level == ThinkingLevel::Off {
        if req.model.thinking_unsupported(ThinkingLevel::Off) {
            return (None, None);
        }
        let effort = req
            .model
            .thinking_value(ThinkingLevel::Off)
            .unwrap_or("none");
        return (
            Some(Reasoning {
                effort,
                summary: codex.then_some("auto"),
            }),
            None,
        );
    }
    let effort = req.model.thinking_value(level).unwrap_or(level.as_str());
    (
        Some(Reasoning {
            effort,
            summary: Some("auto"),
        }),
        Some(INCLUDE_REASONING),
    )
}

/// A reply as input items. Its reasoning items, message ids and call item ids go back only to
/// the model that wrote them: they are meaningless, or rejected, anywhere else.
fn assistant_items<'a>(a: &'a AssistantMessage, model: &Model, n: usize, out: &mut Vec<Item<'a>>) {
    let same_model =
        a.provider == model.provider && a.api == model.api.as_str() && a.model == model.id;
    let mut texts = 0;
    for block in &a.content {
        match block {
            ContentBlock::Thinking {
                thinking_signature: Some(signature),
                ..
            } if same_model => {
                // A signature that is not a reasoning item (another format's, edited by hand)
                // cannot go back; the reply stands without it.
                if let Ok(item) = serde_json::from_str::<Value>(signature)
                    && item.get("type").and_then(Value::as_str) == Some("reasoning")
                {
                    out.push(Item::Stored(item));
                }
            }
            ContentBlock::Thinking { .. } | ContentBlock::Image { .. } => {}
            ContentBlock::Text { text, .. } if text.is_empty() => {}
            ContentBlock::Text {
                text,
                text_signature,
            } => {
                let signed = text_signature
                    .as_deref()
                    .filter(|_| same_model)
                    .and_then(TextSignature::parse)
                    .filter(|s| s.id.chars().count() <= MAX_ID_CHARS);
                let fallback = match texts {
                    0 => format!("msg_pi_{n}"),
                    t => format!("msg_pi_{n}_{t}"),
                };
                texts += 1;
                let (id, phase) = match signed {
                    Some(s) => (Cow::Owned(s.id), s.phase),
                    None => (Cow::Owned(fallback), None),
                };
                out.push(Item::Message {
                    kind: "message",
                    role: "assistant",
                    content: [OutputText {
                        kind: "output_text",
                        text,
                        annotations: [],
                    }],
                    status: "completed",
                    id,
                    phase,
                });
            }
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                let item_id = id
                    .split_once('|')
                    .map(|(_, item)| item)
                    .filter(|item| same_model && item.starts_with("fc_"));
                out.push(Item::FunctionCall {
                    kind: "function_call",
                    id: item_id,
                    call_id: call_id(id),
                    name,
                    arguments: ArgumentsText(arguments),
                });
            }
        }
    }
}

/// The `call_id` part of a tool call id, cut to what the API accepts (`[A-Za-z0-9_-]`, at most
/// 64 chars, no trailing `_`), the same way for a call and its result so the pair still matches.
fn call_id(id: &str) -> Cow<'_, str> {
    let id = id.split_once('|').map_or(id, |(call, _)| call);
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.chars().count() <= MAX_ID_CHARS && id.chars().all(allowed) && !id.ends_with('_') {
        return Cow::Borrowed(id);
    }
    let cut: String = id
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(MAX_ID_CHARS)
        .collect();
    Cow::Owned(cut.trim_end_matches('_').to_string())
}

/// A message item's id and phase, as Pi keeps them on the text block (`{"v":1,"id":…}`; older
/// sessions hold the bare id).
#[derive(Deserialize)]
struct TextSignature {
    id: String,
    #[serde(default)]
    phase: Option<String>,
}

impl TextSignature {
    fn parse(signature: &str) -> Option<TextSignature> {
        if signature.starts_with('{') {
            #[derive(Deserialize)]
            struct V1 {
                v: u64,
                #[serde(flatten)]
                signature: TextSignature,
            }
            if let Ok(parsed) = serde_json::from_str::<V1>(signature)
                && parsed.v == 1
            {
                let phase = parsed
                    .signature
                    .phase
                    .filter(|p| p == "commentary" || p == "final_answer");
                return Some(TextSignature {
                    phase,
                    ..parsed.signature
                });
            }
        }
        (!signature.is_empty()).then(|| TextSignature {
            id: signature.to_string(),
            phase: None,
        })
    }

    fn encode(id: &str, phase: Option<&str>) -> String {
        let mut v = serde_json::json!({"v": 1, "id": id});
        if let Some(phase) = phase {
            v["phase"] = Value::String(phase.to_string());
        }
        v.to_string()
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    input: Vec<Item<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'static str>,
    store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: Option<[&'static str; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<Verbosity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
}

#[derive(Serialize)]
struct Verbosity {
    verbosity: &'static str,
}

#[derive(Serialize)]
struct Reasoning<'a> {
    effort: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Instructions {
        role: &'static str,
        content: &'a str,
    },
    User {
        role: &'static str,
        content: InputParts<'a>,
    },
    /// A reasoning item as the server sent it.
    Stored(Value),
    Message {
        #[serde(rename = "type")]
        kind: &'static str,
        role: &'static str,
        content: [OutputText<'a>; 1],
        status: &'static str,
        id: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        phase: Option<String>,
    },
    FunctionCall {
        #[serde(rename = "type")]
        kind: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a str>,
        call_id: Cow<'a, str>,
        name: &'a str,
        arguments: ArgumentsText<'a>,
    },
    FunctionCallOutput {
        #[serde(rename = "type")]
        kind: &'static str,
        call_id: Cow<'a, str>,
        output: ToolOutput<'a>,
    },
}

#[derive(Serialize)]
struct OutputText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    annotations: [(); 0],
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputPart<'a> {
    InputText {
        text: &'a str,
    },
    #[serde(rename = "input_text")]
    Joined {
        text: Joined<'a, Part<'a>>,
    },
    InputImage {
        detail: &'static str,
        image_url: DataUrl<'a>,
    },
}

impl<'a> InputPart<'a> {
    fn image(data: &'a str, mime_type: &'a str) -> Self {
        InputPart::InputImage {
            detail: "auto",
            image_url: DataUrl { data, mime_type },
        }
    }
}

/// User content: each text block and image its own part.
struct InputParts<'a>(&'a [Part<'a>]);

impl Serialize for InputParts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|p| match p {
            Part::Text(text) => InputPart::InputText { text },
            Part::Image { data, mime_type } => InputPart::image(data, mime_type),
        }))
    }
}

/// A tool result's output: its text joined, or, with images (which only a model that takes
/// them still has here), the text as one part and then each image.
struct ToolOutput<'a>(&'a [Part<'a>]);

impl Serialize for ToolOutput<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = Joined::parts(self.0);
        let has_text = self
            .0
            .iter()
            .any(|p| matches!(p, Part::Text(t) if !t.trim().is_empty()));
        let images = self.0.iter().filter_map(|p| match p {
            Part::Image { data, mime_type } => Some(InputPart::image(data, mime_type)),
            Part::Text(_) => None,
        });
        if !self.0.iter().any(Part::is_image) {
            return if has_text {
                text.serialize(serializer)
            } else {
                serializer.serialize_str(EMPTY_RESULT)
            };
        }
        let text = has_text.then_some(InputPart::Joined { text });
        serializer.collect_seq(text.into_iter().chain(images))
    }
}

/// `data:<mime type>;base64,<data>`, written into the body without building the URL first.
struct DataUrl<'a> {
    data: &'a str,
    mime_type: &'a str,
}

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!(
            "data:{};base64,{}",
            self.mime_type, self.data
        ))
    }
}

struct Tools<'a> {
    specs: &'a [ToolSpec],
    /// The `strict` each tool names, if any (`compat.supportsStrictMode`): `false`, or `null`.
    strict: Option<Option<bool>>,
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
            #[serde(skip_serializing_if = "Option::is_none")]
            strict: Option<Option<bool>>,
        }
        serializer.collect_seq(self.specs.iter().map(|t| Tool {
            kind: "function",
            name: &t.name,
            description: &t.description,
            parameters: &t.parameters,
            strict: self.strict,
        }))
    }
}

/// One SSE payload. Every event type's fields in one flat shape: the type decides which are
/// read. Fields whose type varies between servers stay JSON values, so an unexpected one costs
/// that field, not the frame.
#[derive(Deserialize)]
struct Frame {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    response: Option<ResponseState>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
    /// Codex's error events may carry their code and message in an object of their own.
    #[serde(default)]
    error: Option<Value>,
}

impl Frame {
    fn text(field: &Option<Value>) -> Option<&str> {
        field.as_ref().and_then(Value::as_str)
    }
}

/// The response object of `response.created`, `.completed`, `.incomplete` and `.failed`.
#[derive(Deserialize)]
struct ResponseState {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    incomplete_details: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// An output item still open, by the server's `output_index`.
#[derive(Debug)]
enum Open {
    /// `streamed`: some of its text arrived as deltas, so the text in its `done` is not sent
    /// again.
    Reasoning {
        streamed: bool,
    },
    Message {
        streamed: bool,
    },
    /// Tool call number `n` of the reply, and the argument text streamed so far (to tell what
    /// a `done` carrying the whole text adds).
    Call {
        n: usize,
        name: String,
        arguments: String,
    },
    /// An item kind nova does not use (web search calls, …).
    Inert,
}

/// Turns the SSE body into events; see the module docs for the format.
#[derive(Debug)]
pub struct Accumulator {
    sse: SseDecoder,
    model: Model,
    id_prefix: String,
    open: Vec<(u64, Open)>,
    calls: usize,
    facts: super::ReplyFacts,
    done: bool,
    /// Reads the stream as ChatGPT's Codex backend writes it.
    codex: bool,
}

impl Accumulator {
    /// What the server has said about the reply so far, beside its content.
    pub fn facts(&self) -> &super::ReplyFacts {
        &self.facts
    }

    pub fn new(model: &Model) -> Self {
        Self::with_id_prefix(model, super::fresh_call_id_prefix())
    }

    pub(crate) fn with_id_prefix(model: &Model, id_prefix: String) -> Self {
        Accumulator {
            sse: SseDecoder::default(),
            model: model.clone(),
            id_prefix,
            open: Vec::new(),
            calls: 0,
            facts: super::ReplyFacts::default(),
            done: false,
            codex: false,
        }
    }

    /// An accumulator for a stream of the `flavour`'s server.
    pub fn for_flavour(model: &Model, flavour: Flavour) -> Self {
        Accumulator {
            codex: flavour == Flavour::Codex,
            ..Self::new(model)
        }
    }

    /// Feeds body bytes, appending the events they complete to `out`. Events parsed before an
    /// error are still appended, so a reply cut by a server error keeps what arrived.
    pub fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        for event in self.sse.push(bytes)? {
            self.event(&event.data, out)?;
        }
        Ok(())
    }

    /// Ends the body: a reply without its terminal response event was cut.
    pub fn finish(mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let sse = std::mem::take(&mut self.sse);
        for event in sse.finish()? {
            self.event(&event.data, out)?;
        }
        if self.done {
            Ok(())
        } else {
            Err(ProviderError::EndedEarly)
        }
    }

    fn event(&mut self, data: &str, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let frame: Frame =
            serde_json::from_str(data).map_err(|e| ProviderError::invalid_json(data, &e))?;
        match frame.kind.as_str() {
            "response.created" | "response.in_progress" => {
                if let Some(id) = frame.response.and_then(|r| r.id)
                    && self.facts.response_id.as_ref() != Some(&id)
                {
                    self.facts.response_id = Some(id.clone());
                    // Announced at once, so a reply cut short still carries it.
                    out.push(ProviderEvent::Start {
                        response_id: Some(id),
                        usage: None,
                    });
                }
            }
            "response.output_item.added" => {
                if let (Some(index), Some(item)) = (frame.output_index, &frame.item) {
                    self.added(index, item, out);
                }
            }
            "response.reasoning_summary_part.added" => {
                // Parts after the first are set apart as Pi joins them.
                if frame.summary_index.is_some_and(|i| i > 0)
                    && let Some(Open::Reasoning { streamed }) = self.slot(frame.output_index)
                {
                    *streamed = true;
                    out.push(ProviderEvent::Thinking(SUMMARY_PART_SEPARATOR.to_string()));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(Open::Reasoning { streamed }) = self.slot(frame.output_index)
                    && let Some(delta) = Frame::text(&frame.delta).filter(|d| !d.is_empty())
                {
                    *streamed = true;
                    out.push(ProviderEvent::Thinking(delta.to_string()));
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(Open::Message { streamed }) = self.slot(frame.output_index)
                    && let Some(delta) = Frame::text(&frame.delta).filter(|d| !d.is_empty())
                {
                    *streamed = true;
                    out.push(ProviderEvent::Text(delta.to_string()));
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(Open::Call { n, arguments, .. }) = self.slot(frame.output_index)
                    && let Some(delta) = Frame::text(&frame.delta)
                {
                    arguments.push_str(delta);
                    out.push(call_fragment(*n, delta.to_string()));
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(Open::Call { n, arguments, .. }) = self.slot(frame.output_index)
                    && let Some(whole) = Frame::text(&frame.arguments)
                {
                    out.extend(rest_of_arguments(*n, arguments, whole));
                }
            }
            "response.output_item.done" => {
                if let Some(item) = &frame.item {
                    self.item_done(frame.output_index, item, out);
                }
            }
            "response.completed" | "response.incomplete" => {
                self.completed(frame.response, out)?;
            }
            // Codex's own name for the end of a reply.
            "response.done" if self.codex => self.completed(frame.response, out)?,
            "response.failed" if self.codex => {
                let error = frame.response.and_then(|r| r.error);
                let message = error.as_ref().and_then(|e| e.get("message"));
                return Err(ProviderError::Api(
                    message
                        .map(value_text)
                        .filter(|m| !m.is_empty())
                        .unwrap_or_else(|| "Codex response failed".to_owned()),
                ));
            }
            "response.failed" => return Err(failed(frame.response)),
            "error" if self.codex => {
                // The event's own field, else the one in its `error` object, as Pi reads them.
                let field = |own: &Option<Value>, key: &str| {
                    own.as_ref()
                        .and_then(Value::as_str)
                        .or_else(|| frame.error.as_ref()?.get(key)?.as_str())
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned)
                };
                let what = field(&frame.message, "message")
                    .or_else(|| field(&frame.code, "code"))
                    .unwrap_or_else(|| data.to_owned());
                return Err(ProviderError::Api(format!("Codex error: {what}")));
            }
            "error" => {
                let code = frame.code.as_ref().map_or_else(String::new, value_text);
                let message = frame.message.as_ref().map_or_else(String::new, value_text);
                return Err(ProviderError::Api(
                    match (code.is_empty(), message.is_empty()) {
                        (_, true) if code.is_empty() => "error event without details".to_string(),
                        (true, false) => message,
                        _ => format!("Error Code {code}: {message}"),
                    },
                ));
            }
            // Keep-alives, content part boundaries, and event types added after this was written.
            _ => {}
        }
        Ok(())
    }

    /// The open item at `index`; a server that leaves the index out means the latest one.
    fn slot(&mut self, index: Option<u64>) -> Option<&mut Open> {
        match index {
            Some(i) => self.open.iter_mut().find(|(k, _)| *k == i).map(|(_, o)| o),
            None => self.open.last_mut().map(|(_, o)| o),
        }
    }

    fn added(&mut self, index: u64, item: &Value, out: &mut Vec<ProviderEvent>) {
        let open = match item_type(item) {
            "reasoning" => {
                // Opens the block even when no summary follows: the encrypted item needs it.
                out.push(ProviderEvent::Thinking(String::new()));
                Open::Reasoning { streamed: false }
            }
            "message" => Open::Message { streamed: false },
            "function_call" => {
                let n = self.calls;
                self.calls += 1;
                let name = str_field(item, "name").unwrap_or_default().to_string();
                let id = match (str_field(item, "call_id"), str_field(item, "id")) {
                    (Some(call), Some(item_id)) => format!("{call}|{item_id}"),
                    (Some(call), None) => call.to_string(),
                    (None, _) => format!("call_{}_{n}", self.id_prefix),
                };
                let arguments = str_field(item, "arguments").unwrap_or_default().to_string();
                out.push(ProviderEvent::ToolCall {
                    index: n,
                    id: Some(id),
                    name: Some(name.clone()).filter(|n| !n.is_empty()),
                    arguments: arguments.clone(),
                });
                Open::Call { n, name, arguments }
            }
            _ => Open::Inert,
        };
        self.open.retain(|(k, _)| *k != index);
        self.open.push((index, open));
    }

    fn item_done(&mut self, index: Option<u64>, item: &Value, out: &mut Vec<ProviderEvent>) {
        let at = match index {
            Some(i) => self.open.iter().position(|(k, _)| *k == i),
            None => self.open.len().checked_sub(1),
        };
        let open = match at {
            Some(at) => self.open.remove(at).1,
            // Announced only now: opened and closed at once.
            None => {
                self.added(index.unwrap_or(u64::MAX), item, out);
                match self.open.pop() {
                    Some((_, open)) => open,
                    None => return,
                }
            }
        };
        match open {
            Open::Reasoning { streamed } => {
                if !streamed {
                    let text =
                        joined_texts(item, "summary").or_else(|| joined_texts(item, "content"));
                    if let Some(text) = text.filter(|t| !t.is_empty()) {
                        out.push(ProviderEvent::Thinking(text));
                    }
                }
                out.push(ProviderEvent::ThinkingSignature(item.to_string()));
            }
            Open::Message { streamed } => {
                if !streamed {
                    let text = message_text(item);
                    if !text.is_empty() {
                        out.push(ProviderEvent::Text(text));
                    }
                }
                if let Some(id) = str_field(item, "id") {
                    let phase = str_field(item, "phase");
                    out.push(ProviderEvent::TextSignature(TextSignature::encode(
                        id, phase,
                    )));
                }
            }
            Open::Call { n, arguments, .. } => {
                if let Some(whole) = str_field(item, "arguments") {
                    out.extend(rest_of_arguments(n, &arguments, whole));
                }
            }
            Open::Inert => {}
        }
    }

    fn completed(
        &mut self,
        response: Option<ResponseState>,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let response = response.unwrap_or(ResponseState {
            id: None,
            status: None,
            usage: None,
            incomplete_details: None,
            error: None,
        });
        if let Some(id) = &response.id {
            self.facts.response_id = Some(id.clone());
        }
        let reason = response
            .incomplete_details
            .as_ref()
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str);
        let status = response.status.as_deref();
        self.facts.raw_stop_reason = match (status, reason) {
            (Some(s), Some(r)) => Some(format!("{s}.{r}")),
            (s, _) => s.map(str::to_string),
        };
        let stop = match status {
            Some("incomplete") => match reason {
                Some("max_output_tokens") => StopReason::Length,
                Some("content_filter") => return Err(ProviderError::ContentFilter),
                Some(r) => return Err(ProviderError::Api(format!("Response incomplete: {r}"))),
                None => {
                    return Err(ProviderError::Api(
                        "Response incomplete without a provider reason".to_string(),
                    ));
                }
            },
            Some("failed" | "cancelled") => return Err(failed(Some(response))),
            _ if self.calls > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        // The agent runs every call of the reply: one whose arguments never closed may be cut.
        if stop == StopReason::ToolUse
            && let Some((_, Open::Call { name, .. })) = self
                .open
                .iter()
                .find(|(_, o)| matches!(o, Open::Call { .. }))
        {
            return Err(ProviderError::Api(format!(
                "the stream completed with an unfinished tool call: {name}"
            )));
        }
        if let Some(usage) = &response.usage {
            let details = usage.input_tokens_details.as_ref();
            let cached = details.and_then(|d| d.cached_tokens).unwrap_or(0);
            let written = details.and_then(|d| d.cache_write_tokens).unwrap_or(0);
            let mut priced = super::priced(
                &self.model,
                Tokens {
                    // Cached and written tokens are part of `input_tokens`.
                    input: usage
                        .input_tokens
                        .saturating_sub(cached)
                        .saturating_sub(written),
                    output: usage.output_tokens,
                    cache_read: cached,
                    cache_write: written,
                    cache_write_1h: None,
                },
            );
            // Already part of `output_tokens`, as Pi counts it.
            priced.reasoning = Some(
                usage
                    .output_tokens_details
                    .as_ref()
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
            );
            out.push(ProviderEvent::Usage(priced));
        }
        out.push(ProviderEvent::Finish(stop));
        self.done = true;
        Ok(())
    }
}

fn call_fragment(n: usize, arguments: String) -> ProviderEvent {
    ProviderEvent::ToolCall {
        index: n,
        id: None,
        name: None,
        arguments,
    }
}

/// What a call's whole argument text adds to what streamed. Text that contradicts the stream
/// cannot be taken back from the client; the streamed text stands.
fn rest_of_arguments(n: usize, streamed: &str, whole: &str) -> Option<ProviderEvent> {
    whole
        .strip_prefix(streamed)
        .filter(|rest| !rest.is_empty())
        .map(|rest| call_fragment(n, rest.to_string()))
}

fn item_type(item: &Value) -> &str {
    str_field(item, "type").unwrap_or_default()
}

fn str_field<'v>(item: &'v Value, key: &str) -> Option<&'v str> {
    item.get(key).and_then(Value::as_str)
}

/// The `text` of each entry of `item[key]`, joined as Pi joins summary parts.
fn joined_texts(item: &Value, key: &str) -> Option<String> {
    let parts = item.get(key)?.as_array()?;
    let texts: Vec<&str> = parts.iter().filter_map(|p| str_field(p, "text")).collect();
    (!texts.is_empty()).then(|| texts.join(SUMMARY_PART_SEPARATOR))
}

/// A message item's text: its output text and refusals, in order.
fn message_text(item: &Value) -> String {
    let parts = item.get("content").and_then(Value::as_array);
    parts
        .into_iter()
        .flatten()
        .filter_map(|p| str_field(p, "text").or_else(|| str_field(p, "refusal")))
        .collect()
}

/// The error of a failed response, in Pi's words (`code: message`).
fn failed(response: Option<ResponseState>) -> ProviderError {
    let response = response.as_ref();
    let error = response.and_then(|r| r.error.as_ref());
    let reason = response
        .and_then(|r| r.incomplete_details.as_ref())
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str);
    ProviderError::Api(match (error, reason) {
        (Some(e), _) => {
            let field = |key| e.get(key).map_or_else(String::new, value_text);
            let code = Some(field("code")).filter(|c| !c.is_empty());
            let message = Some(field("message")).filter(|m| !m.is_empty());
            format!(
                "{}: {}",
                code.as_deref().unwrap_or("unknown"),
                message.as_deref().unwrap_or("no message")
            )
        }
        (None, Some(reason)) => format!("incomplete: {reason}"),
        (None, None) => "Unknown error (no error details in response)".to_string(),
    })
}

/// A JSON value as text: strings as they are, anything else as JSON.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
