//! Anthropic Messages (`POST /v1/messages` with `stream: true`): SSE events typed by their
//! `type` field — `message_start` (input usage), `content_block_start`/`_delta`/`_stop` per block
//! (text, thinking and its signature, redacted thinking, `tool_use` whose input streams as JSON
//! text), `message_delta` (stop reason, final usage), `message_stop`, `ping` keep-alives and
//! `error`.
//!
//! A request puts the system prompt in `system`, each run of tool results in one user message,
//! and prompt-cache markers on the system prompt, the last tool and the last user message, so a
//! long session is billed mostly as cache reads. Thinking blocks go back with their signatures,
//! but only to the model that wrote them: a signature is valid for that model alone.
//!
//! A Claude Pro/Max subscription's OAuth token (Pi tells one by its `sk-ant-oat` form) is
//! let in only as Claude Code: a bearer token with Claude Code's headers and betas, Claude
//! Code's identity before the system prompt, and the tools Claude Code has under its names
//! (`Read`, `Bash`, …), mapped back to nova's as the reply streams. See [`Identity`].

use super::body::BodyEncoder;
use super::lines::SseDecoder;
use super::prepare::{self, Joined, Part, View};
use super::{ProviderError, ProviderEvent, Request, Tokens};
use crate::protocol::{AssistantMessage, ContentBlock, Model, StopReason, ThinkingLevel, ToolSpec};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::borrow::Cow;

/// The `anthropic-version` header every request carries.
pub const VERSION: &str = "2023-06-01";

/// `<base>/v1/messages`, for a base like `https://api.anthropic.com`.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/v1/messages", base_url.trim_end_matches('/'))
}

/// Text of a tool result that carried only images: the API wants text beside them.
const IMAGE_ONLY_RESULT: &str = "(see attached image)";
/// Stands in an error result for its images, which the API refuses there; they follow the
/// results instead.
const ERROR_IMAGE_NOTE: &str = "(image attached after the tool results)";
/// Pi's thinking budgets per level; `xhigh` and `max` think as `high` does.
const BUDGETS: [(ThinkingLevel, u64); 4] = [
    (ThinkingLevel::Minimal, 1024),
    (ThinkingLevel::Low, 2048),
    (ThinkingLevel::Medium, 8192),
    (ThinkingLevel::High, 16_384),
];
/// Output always left for the answer when a thinking budget shares `max_tokens`.
const MIN_ANSWER_TOKENS: u64 = 1024;
/// Ask for readable summaries of the reasoning, which newer models otherwise omit.
const THINKING_DISPLAY: &str = "summarized";

/// Who a request presents itself as: the key decides, as in Pi.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// An API key (`x-api-key`), or no key at all (a gateway that needs none).
    ApiKey,
    /// A Claude Pro/Max OAuth token, accepted only from Claude Code.
    ClaudeCode,
    /// A bearer token for a server that serves Claude as a browser would ask it (GitHub
    /// Copilot).
    Bearer,
}

impl Identity {
    /// The identity for `key`, on a provider that takes bearer tokens (`bearer`) or not.
    pub fn of(key: Option<&str>, bearer: bool) -> Identity {
        match key {
            _ if bearer => Identity::Bearer,
            Some(key) if key.contains(OAUTH_TOKEN_MARK) => Identity::ClaudeCode,
            _ => Identity::ApiKey,
        }
    }
}

/// What every Claude Pro/Max OAuth access token contains (`sk-ant-oat01-…`).
const OAUTH_TOKEN_MARK: &str = "sk-ant-oat";
/// The Claude Code release Pi 1.6 presents itself as.
const CLAUDE_CODE_VERSION: &str = "2.1.322";
/// The sentence the API expects first in the system prompt of a subscription's request.
const CLAUDE_CODE_IDENTITY: &str = "You are Claude Code, Anthropic's official CLI for Claude.";
/// Claude Code's tools, under the names (and casing) it gives them; a tool of nova's with one
/// of these names, in any case, goes out under Claude Code's name.
const CLAUDE_CODE_TOOLS: [&str; 17] = [
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// `name` as Claude Code spells it, when it is one of Claude Code's tools.
fn claude_code_name(name: &str) -> &str {
    CLAUDE_CODE_TOOLS
        .iter()
        .find(|t| t.eq_ignore_ascii_case(name))
        .map_or(name, |t| t)
}

/// The headers a request sends beside its key, as Pi sends them: none for an API key; a
/// browser's `accept` and direct-access headers for a bearer token; for a subscription's token
/// those, Claude Code's, and its betas (`anthropic-beta`). `configured`, the provider's own
/// headers, replace any of the same name.
pub fn identity_headers(
    req: &Request,
    identity: Identity,
    configured: &[(String, String)],
) -> Vec<(&'static str, String)> {
    if identity == Identity::ApiKey {
        return Vec::new();
    }
    let mut headers = vec![
        ("accept", "application/json".to_owned()),
        (
            "anthropic-dangerous-direct-browser-access",
            "true".to_owned(),
        ),
    ];
    if identity == Identity::ClaudeCode {
        headers.push(("user-agent", format!("claude-cli/{CLAUDE_CODE_VERSION}")));
        headers.push(("x-app", "cli".to_owned()));
        let mut betas = vec!["claude-code-20250219", "oauth-2025-04-20"];
        if matches!(thinking(req).0, Some(Thinking::Enabled { .. })) {
            betas.push(INTERLEAVED_THINKING_BETA);
        }
        headers.push(("anthropic-beta", betas.join(",")));
    }
    headers.retain(|(name, _)| !configured.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
    headers
}

/// The request body, serialised straight from the prepared view of the conversation.
pub fn build_body<E: BodyEncoder>(
    req: &Request,
    identity: Identity,
    out: E,
) -> serde_json::Result<E::Output> {
    let prepared = prepare::request_messages(req.messages, req.model);
    // A one-off summary caches nothing, as in Pi: no breakpoint at all.
    let cache = (super::retention(req) != super::Retention::None).then(|| Ephemeral {
        kind: "ephemeral",
        ttl: super::long_retention(req).then_some(super::LONG_CACHE_BREAKPOINT),
    });
    let mut messages: Vec<Msg> = Vec::with_capacity(prepared.len());
    let mut i = 0;
    while i < prepared.len() {
        let (role, content, next) = match &prepared[i] {
            View::User(parts) => ("user", user_blocks(parts), i + 1),
            View::Assistant(a) => ("assistant", assistant_blocks(a, req.model, identity), i + 1),
            View::ToolResult { .. } => {
                let end = prepared[i..]
                    .iter()
                    .position(|v| !matches!(v, View::ToolResult { .. }))
                    .map_or(prepared.len(), |n| i + n);
                ("user", tool_results(&prepared[i..end]), end)
            }
        };
        // The API rejects a message without content; dropping it loses nothing.
        if !content.is_empty() {
            messages.push(Msg { role, content });
        }
        i = next;
    }
    if let Some(last) = messages.last_mut().filter(|m| m.role == "user")
        && let Some(block) = last.content.last_mut()
    {
        block.mark_cached(cache);
    }

    let (thinking, output_config, max_tokens) = thinking(req);
    let identity_line = (identity == Identity::ClaudeCode).then_some(CLAUDE_CODE_IDENTITY);
    let system: Vec<SystemText> = identity_line
        .into_iter()
        .chain((!req.system_prompt.is_empty()).then_some(req.system_prompt))
        .map(|text| SystemText {
            kind: "text",
            text,
            cache_control: cache,
        })
        .collect();
    out.encode(
        &Body {
            model: &req.model.id,
            max_tokens,
            stream: true,
            system: (!system.is_empty()).then_some(system),
            messages,
            tools: (!req.tools.is_empty()).then_some(Tools(req.tools, identity, cache)),
            thinking,
            output_config,
        },
        req,
        &prepared,
    )
}

/// The thinking settings and the output budget they need, as Pi chooses them: adaptive models
/// get an effort, the others a token budget inside `max_tokens`; `off` disables thinking unless
/// the model cannot stop; no level (side requests) leaves the server's default.
fn thinking<'a>(req: &Request<'a>) -> (Option<Thinking>, Option<OutputConfig<'a>>, u64) {
    let max_tokens = super::max_output_tokens(req);
    let Some(level) = req.thinking.filter(|_| req.model.reasoning) else {
        return (None, None, max_tokens);
    };
    if level == ThinkingLevel::Off {
        let can_stop = !req.model.thinking_unsupported(ThinkingLevel::Off);
        return (can_stop.then_some(Thinking::Disabled), None, max_tokens);
    }
    if req.model.adaptive_thinking() {
        let effort = req.model.thinking_value(level).unwrap_or(match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        });
        let thinking = Thinking::Adaptive {
            display: THINKING_DISPLAY,
        };
        return (Some(thinking), Some(OutputConfig { effort }), max_tokens);
    }
    let wanted = BUDGETS
        .iter()
        .rev()
        .find(|(l, _)| *l <= level)
        .map_or(MIN_ANSWER_TOKENS, |(_, b)| *b);
    let max_tokens = super::fit_to_context(
        req,
        max_tokens.saturating_add(wanted).min(req.model.max_tokens),
    );
    // The API's smallest budget, when the model leaves no room for more.
    let budget = wanted
        .min(max_tokens.saturating_sub(MIN_ANSWER_TOKENS))
        .max(1024);
    let thinking = Thinking::Enabled {
        budget_tokens: budget,
        display: THINKING_DISPLAY,
    };
    (Some(thinking), None, max_tokens)
}

/// A user message's text (blank pieces left out: the API rejects empty text) and images.
fn user_blocks<'b>(parts: &'b [Part<'b>]) -> Vec<Block<'b>> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) if t.trim().is_empty() => None,
            Part::Text(t) => Some(Block::text(Cow::Borrowed(t))),
            Part::Image { data, mime_type } => Some(Block::image(data, mime_type)),
        })
        .collect()
}

/// A reply as the API takes it back. Thinking is only returned to the model that wrote it:
/// with its signature, as `redacted_thinking` when encrypted, and as plain text when it has no
/// signature (an aborted stream), which the API would reject as thinking.
fn assistant_blocks<'b>(
    a: &'b AssistantMessage,
    model: &Model,
    identity: Identity,
) -> Vec<Block<'b>> {
    let same_model =
        a.provider == model.provider && a.api == model.api.as_str() && a.model == model.id;
    a.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } if text.trim().is_empty() => None,
            ContentBlock::Text { text, .. } => Some(Block::text(Cow::Borrowed(text))),
            ContentBlock::Thinking { .. } if !same_model => None,
            ContentBlock::Thinking {
                thinking_signature,
                redacted: Some(true),
                ..
            } => thinking_signature
                .as_deref()
                .map(|data| Block::RedactedThinking { data }),
            ContentBlock::Thinking {
                thinking,
                thinking_signature: Some(signature),
                ..
            } if !signature.trim().is_empty() => Some(Block::Thinking {
                thinking,
                signature,
            }),
            ContentBlock::Thinking { thinking, .. } if thinking.trim().is_empty() => None,
            ContentBlock::Thinking { thinking, .. } => Some(Block::text(Cow::Borrowed(thinking))),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => Some(Block::ToolUse {
                id: ToolId(id),
                name: match identity {
                    Identity::ClaudeCode => claude_code_name(name),
                    Identity::ApiKey | Identity::Bearer => name,
                },
                input: Input(arguments),
            }),
            ContentBlock::Image { .. } => None,
        })
        .collect()
}

/// A run of tool results as one user message: a `tool_result` per call, then the images of
/// error results, which the API accepts only outside them.
fn tool_results<'b>(run: &'b [View<'b>]) -> Vec<Block<'b>> {
    let mut blocks = Vec::with_capacity(run.len());
    let mut error_images = Vec::new();
    for view in run {
        let View::ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
        } = view
        else {
            continue;
        };
        let has_images = content.iter().any(Part::is_image);
        let body = if !has_images {
            ResultContent::Text(Joined::parts(content))
        } else if *is_error {
            error_images.push(Block::text(Cow::Owned(format!(
                "Images from the error result of tool call {tool_call_id} ({tool_name}):"
            ))));
            error_images.extend(content.iter().filter_map(|p| match p {
                Part::Image { data, mime_type } => Some(Block::image(data, mime_type)),
                Part::Text(_) => None,
            }));
            ResultContent::Blocks(error_result_text(content))
        } else {
            let mut parts: Vec<Block> = Vec::with_capacity(content.len() + 1);
            if !content
                .iter()
                .any(|p| matches!(p, Part::Text(t) if !t.is_empty()))
            {
                parts.push(Block::text(Cow::Borrowed(IMAGE_ONLY_RESULT)));
            }
            parts.extend(content.iter().filter_map(|p| match p {
                Part::Text(t) if t.is_empty() => None,
                Part::Text(t) => Some(Block::text(Cow::Borrowed(t))),
                Part::Image { data, mime_type } => Some(Block::image(data, mime_type)),
            }));
            ResultContent::Blocks(parts)
        };
        blocks.push(Block::ToolResult {
            tool_use_id: ToolId(tool_call_id),
            content: body,
            is_error: *is_error,
            cache_control: None,
        });
    }
    blocks.extend(error_images);
    blocks
}

/// An error result's text with each run of images replaced by one note.
fn error_result_text<'b>(content: &'b [Part<'b>]) -> Vec<Block<'b>> {
    let mut out: Vec<Block> = Vec::with_capacity(content.len());
    let mut after_image = false;
    for part in content {
        match part {
            Part::Image { .. } if after_image => {}
            Part::Image { .. } => out.push(Block::text(Cow::Borrowed(ERROR_IMAGE_NOTE))),
            Part::Text(t) if t.is_empty() => {}
            Part::Text(t) => out.push(Block::text(Cow::Borrowed(t))),
        }
        after_image = part.is_image();
    }
    out
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u64,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Vec<SystemText<'a>>>,
    messages: Vec<Msg<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
}

#[derive(Serialize)]
struct SystemText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

/// A prompt-cache breakpoint: everything up to the marked block is cached for a few minutes,
/// or for `ttl`.
#[derive(Serialize, Clone, Copy)]
struct Ephemeral {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Thinking {
    Enabled {
        budget_tokens: u64,
        display: &'static str,
    },
    Adaptive {
        display: &'static str,
    },
    Disabled,
}

#[derive(Serialize)]
struct OutputConfig<'a> {
    effort: &'a str,
}

#[derive(Serialize)]
struct Msg<'b> {
    role: &'static str,
    content: Vec<Block<'b>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'b> {
    Text {
        text: Cow<'b, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Ephemeral>,
    },
    Image {
        source: Base64<'b>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Ephemeral>,
    },
    Thinking {
        thinking: &'b str,
        signature: &'b str,
    },
    RedactedThinking {
        data: &'b str,
    },
    ToolUse {
        id: ToolId<'b>,
        name: &'b str,
        input: Input<'b>,
    },
    ToolResult {
        tool_use_id: ToolId<'b>,
        content: ResultContent<'b>,
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Ephemeral>,
    },
}

impl<'b> Block<'b> {
    fn text(text: Cow<'b, str>) -> Self {
        Block::Text {
            text,
            cache_control: None,
        }
    }

    fn image(data: &'b str, media_type: &'b str) -> Self {
        Block::Image {
            source: Base64 {
                kind: "base64",
                media_type,
                data,
            },
            cache_control: None,
        }
    }

    /// Places a cache breakpoint here, where the API allows one.
    fn mark_cached(&mut self, cache: Option<Ephemeral>) {
        match self {
            Block::Text { cache_control, .. }
            | Block::Image { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => *cache_control = cache,
            Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::ToolUse { .. } => {}
        }
    }
}

#[derive(Serialize)]
struct Base64<'b> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'b str,
    data: &'b str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ResultContent<'b> {
    Text(Joined<'b, Part<'b>>),
    Blocks(Vec<Block<'b>>),
}

/// A tool call id as the API requires it (`[A-Za-z0-9_-]`, at most 64 chars): ids written by
/// other providers are rewritten the same way in calls and results, so pairs still match.
struct ToolId<'b>(&'b str);

impl Serialize for ToolId<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if self.0.len() <= 64 && self.0.chars().all(allowed) {
            return serializer.serialize_str(self.0);
        }
        let id: String = self
            .0
            .chars()
            .take(64)
            .map(|c| if allowed(c) { c } else { '_' })
            .collect();
        serializer.serialize_str(&id)
    }
}

/// A call's arguments as the object the API requires. Arguments that never parsed (kept as the
/// model's raw text) go back as an empty object: a string would make every later request fail.
struct Input<'b>(&'b Value);

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => map.serialize(serializer),
            _ => serde_json::Map::new().serialize(serializer),
        }
    }
}

/// Tool definitions, named as the identity needs; the last carries a cache breakpoint so the
/// tools stay cached with the system prompt.
struct Tools<'a>(&'a [ToolSpec], Identity, Option<Ephemeral>);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            name: &'a str,
            description: &'a str,
            input_schema: &'a Value,
            #[serde(skip_serializing_if = "Option::is_none")]
            cache_control: Option<Ephemeral>,
        }
        let last = self.0.len().saturating_sub(1);
        serializer.collect_seq(self.0.iter().enumerate().map(|(i, t)| Tool {
            name: match self.1 {
                Identity::ClaudeCode => claude_code_name(&t.name),
                Identity::ApiKey | Identity::Bearer => &t.name,
            },
            description: &t.description,
            input_schema: &t.parameters,
            cache_control: if i == last { self.2 } else { None },
        }))
    }
}

/// One SSE payload. Every event type's fields in one flat shape: the type decides which are
/// read, and a field an event lacks is simply absent.
#[derive(Deserialize)]
struct Frame {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    message: Option<StartMessage>,
    #[serde(default)]
    content_block: Option<StartBlock>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct StartBlock {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    stop_details: Option<Value>,
}

/// Counts as sent; `null` or absent means "unchanged" in `message_delta`.
#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation: Option<CacheCreation>,
}

/// How a cache write splits between the two retentions.
#[derive(Deserialize)]
struct CacheCreation {
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<u64>,
}

/// What an open content block (keyed by the server's `index`) is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Open {
    Text,
    Thinking,
    /// Tool call number `n` of the reply.
    Tool(usize),
    /// Redacted thinking (complete at its start) or a block kind nova does not use.
    Inert,
}

/// Turns the SSE body into events; see the module docs for the format.
#[derive(Debug)]
pub struct Accumulator {
    sse: SseDecoder,
    model: Model,
    /// Blocks started and not yet stopped, by the server's index: only a few at a time.
    open: Vec<(u64, Open)>,
    calls: usize,
    tokens: Option<Tokens>,
    stop: Option<StopReason>,
    facts: super::ReplyFacts,
    done: bool,
    /// The request's tool names, when the request renamed them for Claude Code: a call names
    /// its tool as Claude Code does and is given back nova's name.
    renamed: Vec<String>,
}

impl Accumulator {
    /// What the server has said about the reply so far, beside its content.
    pub fn facts(&self) -> &super::ReplyFacts {
        &self.facts
    }

    pub fn new(model: &Model) -> Self {
        Accumulator {
            sse: SseDecoder::default(),
            model: model.clone(),
            open: Vec::new(),
            calls: 0,
            tokens: None,
            stop: None,
            facts: super::ReplyFacts::default(),
            done: false,
            renamed: Vec::new(),
        }
    }

    /// An accumulator for a request sent as `identity` with `tools`.
    pub fn for_request(model: &Model, identity: Identity, tools: &[ToolSpec]) -> Self {
        let mut accumulator = Accumulator::new(model);
        if identity == Identity::ClaudeCode {
            accumulator.renamed = tools.iter().map(|t| t.name.to_string()).collect();
        }
        accumulator
    }

    /// Feeds body bytes, appending the events they complete to `out`. Events parsed before an
    /// error are still appended, so a reply cut by a server error keeps what arrived.
    pub fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        for event in self.sse.push(bytes)? {
            self.event(&event.event, &event.data, out)?;
        }
        Ok(())
    }

    /// Ends the body. A stream that stopped after its stop reason but before `message_stop`
    /// is complete; one that stopped before it was cut.
    pub fn finish(mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let sse = std::mem::take(&mut self.sse);
        for event in sse.finish()? {
            self.event(&event.event, &event.data, out)?;
        }
        if self.done {
            return Ok(());
        }
        self.end(out)
    }

    fn event(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(());
        }
        let frame: Frame = match serde_json::from_str(data) {
            Ok(frame) => frame,
            // A proxy's error event may be plain text.
            Err(_) if name == "error" => return Err(ProviderError::Api(data.to_string())),
            Err(e) => return Err(ProviderError::invalid_json(data, &e)),
        };
        let kind = if frame.kind.is_empty() {
            name
        } else {
            &frame.kind
        };
        match kind {
            "message_start" => {
                if let Some(message) = frame.message {
                    self.facts.response_id.clone_from(&message.id);
                    if let Some(usage) = message.usage {
                        self.count(usage);
                    }
                    out.push(ProviderEvent::Start {
                        response_id: message.id,
                        usage: self.tokens.map(|t| super::priced(&self.model, t)),
                    });
                }
            }
            "content_block_start" => {
                if let (Some(index), Some(block)) = (frame.index, frame.content_block) {
                    self.start(index, block, out);
                }
            }
            "content_block_delta" => {
                let open = frame
                    .index
                    .and_then(|i| self.open.iter().find(|(k, _)| *k == i))
                    .map(|(_, o)| *o);
                if let (Some(open), Some(delta)) = (open, frame.delta) {
                    self.delta(open, delta, out);
                }
            }
            "content_block_stop" => {
                self.open.retain(|(k, _)| Some(*k) != frame.index);
            }
            "message_delta" => {
                if let Some(usage) = frame.usage {
                    self.count(usage);
                }
                if let Some(delta) = frame.delta
                    && let Some(reason) = delta.stop_reason
                {
                    self.stop = Some(stop_reason(&reason, delta.stop_details.as_ref())?);
                    self.facts.raw_stop_reason = Some(reason);
                }
            }
            "message_stop" => self.end(out)?,
            "error" => return Err(ProviderError::Api(error_message(frame.error.as_ref()))),
            // `ping`, and event types added after this was written.
            _ => {}
        }
        Ok(())
    }

    fn start(&mut self, index: u64, block: StartBlock, out: &mut Vec<ProviderEvent>) {
        let open = match block.kind.as_str() {
            "text" => {
                if let Some(text) = block.text.filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::Text(text));
                }
                Open::Text
            }
            "thinking" => {
                // Even empty, so that a block whose text the server omits still holds its
                // signature.
                out.push(ProviderEvent::Thinking(block.thinking.unwrap_or_default()));
                if let Some(signature) = block.signature.filter(|s| !s.is_empty()) {
                    out.push(ProviderEvent::ThinkingSignature(signature));
                }
                Open::Thinking
            }
            "redacted_thinking" => {
                out.push(ProviderEvent::RedactedThinking(
                    block.data.unwrap_or_default(),
                ));
                Open::Inert
            }
            "tool_use" => {
                let n = self.calls;
                self.calls += 1;
                let arguments = match block.input {
                    Some(Value::Object(map)) if !map.is_empty() => Value::Object(map).to_string(),
                    _ => String::new(),
                };
                let name = block.name.map(|name| {
                    self.renamed
                        .iter()
                        .find(|t| t.eq_ignore_ascii_case(&name))
                        .cloned()
                        .unwrap_or(name)
                });
                out.push(ProviderEvent::ToolCall {
                    index: n,
                    id: block.id.filter(|id| !id.is_empty()),
                    name,
                    arguments,
                });
                Open::Tool(n)
            }
            _ => Open::Inert,
        };
        self.open.retain(|(k, _)| *k != index);
        self.open.push((index, open));
    }

    fn delta(&mut self, open: Open, delta: Delta, out: &mut Vec<ProviderEvent>) {
        let event = match (delta.kind.as_deref(), open) {
            (Some("text_delta"), Open::Text) => delta.text.map(ProviderEvent::Text),
            (Some("thinking_delta"), Open::Thinking) => delta.thinking.map(ProviderEvent::Thinking),
            (Some("signature_delta"), Open::Thinking) => {
                delta.signature.map(ProviderEvent::ThinkingSignature)
            }
            // Even an empty fragment: Pi passes each one on as a `toolcall_delta`.
            (Some("input_json_delta"), Open::Tool(index)) => {
                delta.partial_json.map(|arguments| ProviderEvent::ToolCall {
                    index,
                    id: None,
                    name: None,
                    arguments,
                })
            }
            _ => None,
        };
        out.extend(event.filter(|e| !matches!(e, ProviderEvent::Text(t) if t.is_empty())));
    }

    /// Takes the counts the event carries; the others keep their earlier value.
    fn count(&mut self, usage: RawUsage) {
        let t = self.tokens.get_or_insert_default();
        t.input = usage.input_tokens.unwrap_or(t.input);
        t.output = usage.output_tokens.unwrap_or(t.output);
        t.cache_read = usage.cache_read_input_tokens.unwrap_or(t.cache_read);
        t.cache_write = usage.cache_creation_input_tokens.unwrap_or(t.cache_write);
        let long = usage
            .cache_creation
            .and_then(|c| c.ephemeral_1h_input_tokens);
        t.cache_write_1h = Some(long.or(t.cache_write_1h).unwrap_or(0));
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let Some(stop) = self.stop else {
            return Err(ProviderError::EndedEarly);
        };
        if let Some(tokens) = self.tokens {
            out.push(ProviderEvent::Usage(super::priced(&self.model, tokens)));
        }
        out.push(ProviderEvent::Finish(stop));
        self.done = true;
        Ok(())
    }
}

/// Pi's reading of a stop reason. A refusal or a safety stop ends the reply as an error.
fn stop_reason(reason: &str, details: Option<&Value>) -> Result<StopReason, ProviderError> {
    match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => Ok(StopReason::Stop),
        "max_tokens" => Ok(StopReason::Length),
        "tool_use" => Ok(StopReason::ToolUse),
        "refusal" => Err(ProviderError::Api(
            details
                .and_then(|d| d.get("explanation"))
                .and_then(Value::as_str)
                .unwrap_or("the model refused to complete the request")
                .to_string(),
        )),
        "sensitive" => Err(ProviderError::ContentFilter),
        other => Err(ProviderError::Api(format!("unknown stop reason {other:?}"))),
    }
}

/// `{"type":"overloaded_error","message":"Overloaded"}` as `Overloaded (overloaded_error)`: the
/// type is what tells a transient failure from a fatal one.
fn error_message(error: Option<&Value>) -> String {
    let Some(error) = error else {
        return "error event without details".to_string();
    };
    let message = error.get("message").and_then(Value::as_str);
    match (message, error.get("type").and_then(Value::as_str)) {
        (Some(m), Some(t)) => format!("{m} ({t})"),
        (Some(m), None) => m.to_string(),
        (None, _) => error.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
