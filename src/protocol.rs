//! Every type that crosses the wire: commands in, responses and events out, and the messages,
//! content blocks and models they carry. Shapes mirror Pi's RPC mode (see `shared/spec`), so a
//! client written for `pi --mode rpc` decodes them unchanged. This module imports nothing else
//! from nova.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;

mod compat;
mod details;
#[cfg(feature = "schema")]
pub mod schema;
pub mod weigh;
pub use compat::{
    CompatFlags, MaxTokensField, ModelCompat, PromptCacheKeyMode, SessionAffinityFormat,
    ThinkingFormat,
};
pub use details::{
    COMMAND_OUTPUT_MAX_BYTES, CommandOutcome, EditDetails, ImageTag, McpDetails, OutputDetails,
    ReadImage, StructuredContent, ToolDetails, TruncatedBy, TruncationDetails,
};

// ---------------------------------------------------------------------------------------------
// Content blocks and messages
// ---------------------------------------------------------------------------------------------

/// One block of message content, tagged by `type` as Pi does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ContentBlock {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text_signature: Option<String>,
    },
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking_signature: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        redacted: Option<bool>,
    },
    Image {
        data: String,
        mime_type: String,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thought_signature: Option<String>,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            text_signature: None,
        }
    }

    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ContentBlock::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }
}

/// A user message's content: Pi accepts a bare string or a block list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl UserContent {
    /// The content as blocks, whichever form it was written in.
    pub fn blocks(&self) -> Vec<ContentBlock> {
        match self {
            UserContent::Text(t) => vec![ContentBlock::text(t.clone())],
            UserContent::Blocks(b) => b.clone(),
        }
    }

    /// All text blocks joined, images ignored.
    pub fn joined_text(&self) -> String {
        match self {
            UserContent::Text(t) => t.clone(),
            UserContent::Blocks(b) => joined_text(b),
        }
    }
}

/// The text blocks of a content list, joined with newlines.
pub fn joined_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The reply is still streaming (`message_start`); a stored message never says this.
    Pending,
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
    /// Whether the provider reported the cost itself; known once the reply has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_from_provider: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// The part of `cache_write` written to Anthropic's one-hour cache.
    #[serde(
        default,
        rename = "cacheWrite1h",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_1h: Option<u64>,
    /// The part of `output` spent reasoning; known once the reply has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    pub total_tokens: u64,
    pub cost: Cost,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    pub content: UserContent,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    pub content: Vec<ContentBlock>,
    pub api: String,
    pub provider: String,
    pub model: String,
    /// The provider's id of the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The thinking level the reply was asked with; text, since Pi's files may name levels
    /// nova does not have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The provider's own word for why the reply ended (`stop`, `tool_calls`, `end_turn`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_stop_reason: Option<String>,
    /// From sending the request to the reply's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    pub timestamp: i64,
}

impl AssistantMessage {
    /// A reply of `model` that has not begun: no content, no usage, still pending.
    pub fn pending(api: &str, provider: &str, model: &str, timestamp: i64) -> AssistantMessage {
        AssistantMessage {
            content: Vec::new(),
            api: api.to_owned(),
            provider: provider.to_owned(),
            model: model.to_owned(),
            response_id: None,
            thinking_level: None,
            usage: Usage::default(),
            stop_reason: StopReason::Pending,
            error_message: None,
            raw_stop_reason: None,
            duration_ms: None,
            timestamp,
        }
    }

    /// The tool calls in this message, in order: `(id, name, arguments)`.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => Some((id.as_str(), name.as_str(), arguments)),
            _ => None,
        })
    }

    /// Whether this reply failed or was cut short; such replies stay in the conversation but are
    /// never sent to the model again.
    pub fn is_failed(&self) -> bool {
        matches!(self.stop_reason, StopReason::Error | StopReason::Aborted)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<ToolDetails>,
    pub is_error: bool,
    /// How long the tool ran; absent when it did not run (refused, skipped, unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    pub timestamp: i64,
}

/// What a compaction left of the conversation before its kept tail. It stands first in the
/// rebuilt context and reaches the model as a user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage {
    pub summary: String,
    pub tokens_before: u64,
    pub timestamp: i64,
}

/// A shell command the user ran with the `bash` command (not the model's tool). Unless it is
/// excluded, the next request shows it to the model as a user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BashExecutionMessage {
    pub command: String,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// Kept in the session, never sent to the model (absent unless the command said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
    pub timestamp: i64,
}

/// An extension's message (Pi's `pi.sendMessage`, or a `before_agent_start` hook's): part of
/// the conversation, sent to the model as a user message, and recorded as Pi's
/// `custom_message` entry rather than a `message` one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CustomMessage {
    pub custom_type: String,
    pub content: UserContent,
    /// Whether a front end shows it; absent when the extension did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<bool>,
    /// The extension's own data, never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub timestamp: i64,
}

/// A conversation message, tagged by `role`. Conversations are held as `Arc<Message>` (shared
/// by the session, the agent and each request); functions that only read take any
/// `AsRef<Message>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "role", rename_all = "camelCase")]
#[allow(
    clippy::large_enum_variant,
    reason = "conversations hold messages behind an Arc; boxing the reply would only add a hop"
)]
pub enum Message {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
    CompactionSummary(CompactionSummaryMessage),
    BashExecution(BashExecutionMessage),
    Custom(CustomMessage),
}

impl From<UserMessage> for Message {
    fn from(message: UserMessage) -> Self {
        Message::User(message)
    }
}

impl From<CustomMessage> for Message {
    fn from(message: CustomMessage) -> Self {
        Message::Custom(message)
    }
}

impl AsRef<Message> for Message {
    fn as_ref(&self) -> &Message {
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

/// The wire format a model is reached through (`api` in models.json and on [`Model`]), parsed
/// once when the configuration is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::EnumIter)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Api {
    #[serde(rename = "ollama")]
    Ollama,
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    #[serde(rename = "google-generative-ai")]
    GoogleGenerativeAi,
    #[serde(rename = "bedrock-converse-stream")]
    BedrockConverseStream,
    #[serde(rename = "azure-openai-responses")]
    AzureOpenAiResponses,
    #[serde(rename = "openai-codex-responses")]
    OpenAiCodexResponses,
    #[serde(rename = "pi-messages")]
    PiMessages,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Ollama => "ollama",
            Api::OpenAiCompletions => "openai-completions",
            Api::OpenAiResponses => "openai-responses",
            Api::AnthropicMessages => "anthropic-messages",
            Api::GoogleGenerativeAi => "google-generative-ai",
            Api::BedrockConverseStream => "bedrock-converse-stream",
            Api::AzureOpenAiResponses => "azure-openai-responses",
            Api::OpenAiCodexResponses => "openai-codex-responses",
            Api::PiMessages => "pi-messages",
        }
    }

    pub fn parse(s: &str) -> Option<Api> {
        <Api as strum::IntoEnumIterator>::iter().find(|api| api.as_str() == s)
    }
}

#[cfg(test)]
#[test]
fn api_names_are_the_same_on_the_wire_and_in_models_json() {
    for api in <Api as strum::IntoEnumIterator>::iter() {
        let wire = serde_json::to_value(api).ok();
        assert_eq!(wire.as_ref().and_then(|w| w.as_str()), Some(api.as_str()));
        assert_eq!(Api::parse(api.as_str()), Some(api));
    }
}

/// A model as Pi describes it on the wire (`get_state.model`, `set_model`,
/// `get_available_models`). Configured headers are deliberately not echoed: they may hold keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub id: String,
    pub name: String,
    pub api: Api,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    pub input: Vec<String>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    /// The provider's value for each thinking level (models.json `thinkingLevelMap`); `null`
    /// marks a level the model does not support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<std::collections::BTreeMap<String, Option<String>>>")
    )]
    pub thinking_level_map: Option<ThinkingLevelMap>,
    /// models.json `compat` (the provider's object with the model's fields over it), read once
    /// when the registry is built; echoed as written, as Pi echoes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<Value>"))]
    pub compat: Option<ModelCompat>,
    /// How an Ollama server should hold the model. Not on the wire.
    #[serde(skip)]
    pub load: LoadOptions,
}

/// What nova asks an Ollama server about loading a model; `None` leaves it to the server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOptions {
    /// The context length (`options.num_ctx`): the declared `contextWindow`, or the discovered
    /// one. Without it Ollama cuts a longer prompt to its default length.
    pub num_ctx: Option<u64>,
    /// `keep_alive` from settings: how long the model stays loaded after a request.
    pub keep_alive: Option<Value>,
}

impl Model {
    pub fn accepts_images(&self) -> bool {
        self.input.iter().any(|i| i == "image")
    }

    /// The levels this model offers, as Pi computes them: only `off` without reasoning; `xhigh`
    /// and `max` only when the level map names a value for them; a level mapped to `null` never.
    pub fn thinking_levels(&self) -> Vec<ThinkingLevel> {
        if !self.reasoning {
            return vec![ThinkingLevel::Off];
        }
        let mapped = |level| {
            self.thinking_level_map
                .as_ref()
                .and_then(|map| map.get(&level))
        };
        ThinkingLevel::ALL
            .into_iter()
            .filter(|&level| match mapped(level) {
                Some(None) => false,
                Some(Some(_)) => true,
                None => !matches!(level, ThinkingLevel::Xhigh | ThinkingLevel::Max),
            })
            .collect()
    }

    /// `level` if this model offers it, else the nearest offered level above it, else below it
    /// (Pi's clamp: asking for more than a model has gives its most, not `off`).
    pub fn clamp_thinking(&self, level: ThinkingLevel) -> ThinkingLevel {
        let offered = self.thinking_levels();
        let above = ThinkingLevel::ALL.into_iter().filter(|l| *l >= level);
        let below = ThinkingLevel::ALL.into_iter().rev().filter(|l| *l < level);
        above
            .chain(below)
            .find(|l| offered.contains(l))
            .unwrap_or(ThinkingLevel::Off)
    }

    /// The provider value the level map names for `level`, if any.
    pub fn thinking_value(&self, level: ThinkingLevel) -> Option<&str> {
        self.thinking_level_map.as_ref()?.get(&level)?.as_deref()
    }

    /// Whether the level map marks `level` unsupported (`null`), as opposed to leaving it out.
    pub fn thinking_unsupported(&self, level: ThinkingLevel) -> bool {
        self.thinking_level_map
            .as_ref()
            .and_then(|map| map.get(&level))
            .is_some_and(Option::is_none)
    }

    /// `compat.forceAdaptiveThinking` (Anthropic): think adaptively, with an effort, instead of
    /// with a token budget, as Claude models from Opus 4.6 on require.
    pub fn adaptive_thinking(&self) -> bool {
        self.compat
            .as_ref()
            .and_then(|c| c.flags.force_adaptive_thinking)
            .unwrap_or(false)
    }
}

/// How hard a reasoning model thinks, with Pi's names, from least to most.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    Off,
    Minimal,
    Low,
    #[default]
    Medium,
    High,
    Xhigh,
    Max,
}

impl ThinkingLevel {
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }

    pub fn parse(name: &str) -> Option<ThinkingLevel> {
        ThinkingLevel::ALL.into_iter().find(|l| l.as_str() == name)
    }
}

/// models.json `thinkingLevelMap`: a provider value per level, `None` for an unsupported one.
pub type ThinkingLevelMap = std::collections::BTreeMap<ThinkingLevel, Option<String>>;

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/// An image attached to `prompt`, `steer` or `follow_up`, before validation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ImageInput {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    pub data: String,
    #[serde(alias = "mime_type")]
    pub mime_type: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum StreamingBehavior {
    #[serde(rename = "steer")]
    Steer,
    #[serde(rename = "followUp")]
    FollowUp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum QueueMode {
    #[serde(rename = "all")]
    All,
    #[default]
    #[serde(rename = "one-at-a-time")]
    OneAtATime,
}

/// A command from the client. Unknown fields are ignored, as Pi does; wrong types are errors.
///
/// On the wire the tag is the `type` field; the RPC reader re-tags `{"type":"x",…}` as
/// `{"x":{…}}` before decoding, because serde only tracks the path of a bad field (which the
/// error must name) through externally tagged enums. Hence every variant is a struct variant.
#[derive(Debug, Clone, PartialEq, Deserialize, strum::VariantNames)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", rename_all_fields = "camelCase")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "schema", schemars(tag = "type"))]
pub enum Command {
    Prompt {
        message: String,
        #[serde(default)]
        images: Option<Vec<ImageInput>>,
        #[serde(default)]
        streaming_behavior: Option<StreamingBehavior>,
    },
    Steer {
        message: String,
        #[serde(default)]
        images: Option<Vec<ImageInput>>,
    },
    FollowUp {
        message: String,
        #[serde(default)]
        images: Option<Vec<ImageInput>>,
    },
    Abort {},
    GetState {},
    GetMessages {},
    GetLastAssistantText {},
    NewSession {
        #[serde(default)]
        parent_session: Option<String>,
    },
    SwitchSession {
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        session_path: Option<String>,
    },
    SetModel {
        provider: String,
        model_id: String,
    },
    GetAvailableModels {},
    GetCommands {},
    SetSteeringMode {
        mode: QueueMode,
    },
    SetFollowUpMode {
        mode: QueueMode,
    },
    PermissionResponse {
        request_id: u64,
        approved: bool,
    },
    GetSessionStats {},
    SetSessionName {
        name: String,
    },
    GetForkMessages {},
    Fork {
        entry_id: String,
    },
    Clone {},
    GetEntries {
        #[serde(default)]
        since: Option<String>,
    },
    GetTree {},
    ExportHtml {
        #[serde(default)]
        output_path: Option<String>,
    },
    Compact {
        #[serde(default)]
        custom_instructions: Option<String>,
    },
    SetAutoCompaction {
        enabled: bool,
    },
    ClearQueue {},
    SetThinkingLevel {
        level: ThinkingLevel,
    },
    CycleThinkingLevel {},
    GetAvailableThinkingLevels {},
    CycleModel {},
    Bash {
        command: String,
        #[serde(default)]
        exclude_from_context: bool,
    },
    AbortBash {},
    SetAutoRetry {
        enabled: bool,
    },
    AbortRetry {},
    /// The client's answer to an extension's dialog (`extension_ui_request`); the command's
    /// `id` is the dialog's. It gets no response, as in Pi.
    ExtensionUiResponse {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confirmed: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cancelled: Option<bool>,
    },
    /// Every configured MCP server and its status (nova's addition).
    GetMcpServers {},
    /// What this nova speaks and can do (nova's addition; Pi #6345).
    GetCapabilities {},
    /// Every tool nova could offer now, with its schema and whether it is active (nova's
    /// addition; Pi #7432).
    GetTools {},
    /// The exact set of tools the next request offers, recorded in the session.
    SetActiveTools {
        tools: Vec<String>,
    },
    /// The sessions of the cwd's session directory, or of every one with `all` (nova's
    /// addition; Pi #7712).
    ListSessions {
        #[serde(default)]
        all: bool,
    },
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// What `get_capabilities` reports: nova's version, the Pi protocol it matches, the commands
/// and events it speaks (read off [`Command`] and [`Event`], so the list cannot drift) and its
/// optional features.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub version: &'static str,
    /// The Pi release whose RPC mode nova answers as.
    pub protocol: &'static str,
    pub commands: &'static [&'static str],
    pub events: &'static [&'static str],
    pub features: Features,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// The sandbox in force and whether this kernel enforces it, as `get_state` reports it.
    pub sandbox: SandboxState,
    pub mcp: bool,
    pub extensions: bool,
    /// Whether `--mode acp` exists in this build.
    pub acp: bool,
}

impl Capabilities {
    pub fn of(sandbox: SandboxState) -> Capabilities {
        use strum::VariantNames;
        Capabilities {
            version: env!("CARGO_PKG_VERSION"),
            protocol: "pi-1.6",
            commands: Command::VARIANTS,
            events: Event::VARIANTS,
            features: Features {
                sandbox,
                mcp: true,
                extensions: true,
                acp: false,
            },
        }
    }
}

/// The answer to one command. `id` is echoed when the request had one.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Response {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "schema::request_id"))]
    pub id: Option<Value>,
    #[serde(rename = "type")]
    pub kind: ResponseKind,
    pub command: String,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<ResponseData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The `type` of every response line, which sets responses apart from events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ResponseKind {
    Response,
}

/// One session in `list_sessions`: what its header, its `session_info` and its first user
/// message say, without loading it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionListing {
    pub id: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub cwd: String,
    /// The header's timestamp.
    pub created: String,
    /// The file's modification time.
    pub modified: String,
    /// Every message entry in the file, on every branch.
    pub message_count: usize,
    /// The first user message on one line, cut at 200 characters ("" before the first).
    pub first_message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

/// A response's `data`: one type per command that answers with any. The conversation stays as
/// shared messages until the stdout writer encodes it, so answering `get_messages` on a long
/// session never builds a second copy of it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ResponseData {
    Messages {
        messages: Vec<Arc<Message>>,
    },
    Prompt {
        disposition: Disposition,
    },
    State(Box<State>),
    LastAssistantText {
        text: Option<String>,
    },
    /// `new_session`, `switch_session`, `clone`: cancelled by an extension's
    /// `session_before_switch`/`session_before_fork` hook.
    Cancelled {
        cancelled: bool,
    },
    /// `fork`: the forked message's text, none when an extension cancelled the fork (as Pi).
    Forked {
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        cancelled: bool,
    },
    Model(Box<Model>),
    Models {
        models: Vec<Model>,
    },
    Commands {
        commands: Vec<SlashCommand>,
    },
    Sessions {
        sessions: Vec<SessionListing>,
    },
    SessionStats(Box<SessionStats>),
    ForkMessages {
        messages: Vec<ForkMessage>,
    },
    Exported {
        path: String,
    },
    Compaction(Box<CompactionResult>),
    /// `clear_queue`: the texts it removed.
    ClearedQueue {
        steering: Vec<Arc<str>>,
        #[serde(rename = "followUp")]
        follow_up: Vec<Arc<str>>,
    },
    ThinkingLevel {
        level: ThinkingLevel,
    },
    ThinkingLevels {
        levels: Vec<ThinkingLevel>,
    },
    CycledModel(Box<CycledModel>),
    Bash(Box<BashResult>),
    /// `cycle_model` and `cycle_thinking_level` when there was nothing to cycle to.
    Null,
    Capabilities(Box<Capabilities>),
    McpServers {
        servers: Vec<McpServer>,
    },
    Tools {
        tools: Vec<ToolInfo>,
    },
    /// Views of the session file (`get_entries`, `get_tree`) in the file's own entry shapes,
    /// which the session store defines; it encodes them once, off the runtime thread.
    Encoded(
        #[cfg_attr(feature = "schema", schemars(schema_with = "schema::session_view"))]
        Box<RawValue>,
    ),
}

/// `cycle_model`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CycledModel {
    pub model: Model,
    pub thinking_level: ThinkingLevel,
    /// Whether the model came from the scope (`--models`, `enabledModels`).
    pub is_scoped: bool,
}

/// What a user's `bash` command produced (Pi's `BashResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BashResult {
    /// The output, tail-truncated like the bash tool's.
    pub output: String,
    /// Absent when the command was cancelled or killed by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    /// The whole output, when `output` is only its tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
}

/// How `prompt`, `steer` and `follow_up` took their message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Disposition {
    Started,
    Queued,
    /// An extension command ran; no run started.
    Handled,
}

/// An entry of `get_commands`: a prompt template (`name`) or a skill (`skill:<name>`), run by
/// sending `/name …` as a prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SlashCommand {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub source: CommandSource,
    pub source_info: SourceInfo,
}

/// What kind of resource a command comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum CommandSource {
    Extension,
    Prompt,
    Skill,
}

/// Where a command's file was found, in Pi's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SourceInfo {
    /// The file, absolute.
    pub path: String,
    pub source: DiscoveredBy,
    pub scope: SourceScope,
    pub origin: SourceOrigin,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DiscoveredBy {
    /// Found in one of the conventional directories.
    Auto,
    /// Named by a path in settings or on the command line.
    Local,
    /// An extension named by `-e`/`--extension`.
    Cli,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SourceScope {
    User,
    Project,
    /// Named on the command line, for this process only.
    Temporary,
}

/// Pi's packages are `package`; nova loads every resource directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum SourceOrigin {
    #[serde(rename = "top-level")]
    TopLevel,
}

/// `get_session_stats`, as Pi reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    pub session_id: String,
    pub user_messages: usize,
    pub assistant_messages: usize,
    pub tool_calls: usize,
    pub tool_results: usize,
    pub total_messages: usize,
    pub tokens: TokenTotals,
    pub cost: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_usage: Option<ContextUsage>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContextUsage {
    /// `null` after a compaction until a reply has measured the smaller context.
    pub tokens: Option<u64>,
    pub context_window: u64,
    pub percent: Option<f64>,
}

/// A user message a session can be forked at (`get_fork_messages`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForkMessage {
    pub entry_id: String,
    pub text: String,
}

impl Response {
    pub fn ok(id: Option<Value>, command: impl Into<String>, data: Option<ResponseData>) -> Self {
        Response {
            id,
            kind: ResponseKind::Response,
            command: command.into(),
            success: true,
            data,
            error: None,
        }
    }

    pub fn error(id: Option<Value>, command: impl Into<String>, error: impl Into<String>) -> Self {
        Response {
            id,
            kind: ResponseKind::Response,
            command: command.into(),
            success: false,
            data: None,
            error: Some(error.into()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// `null` when no model is selected: RPC.md lists the field (Pi 1.6 leaves it out).
    pub model: Option<Model>,
    pub thinking_level: ThinkingLevel,
    pub is_streaming: bool,
    pub is_compacting: bool,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    pub auto_compaction_enabled: bool,
    pub message_count: usize,
    pub pending_message_count: usize,
    /// Bash commands waiting for `permission_response` (nova's addition).
    pub pending_permission_requests: usize,
    /// The sandbox around the agent's commands (nova's addition).
    pub sandbox: SandboxState,
    /// Every configured MCP server and its status, as `get_mcp_servers` reports them (nova's
    /// addition).
    pub mcp_servers: Vec<McpServer>,
}

/// `get_state.sandbox`: the mode, whether commands really run sandboxed, whether TCP is allowed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SandboxState {
    pub mode: &'static str,
    pub enforced: bool,
    pub network: bool,
    /// Why the sandbox cannot be enforced here (then every bash command asks first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// A configured MCP server as `get_mcp_servers`, `get_state` and `mcp_server_status` show it
/// (nova's addition; Pi shows the same facts only in its TUI).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    pub name: String,
    pub status: McpServerStatus,
    /// How many tools the model is offered from it; only while `ready`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<usize>,
    /// Why it is `failed` or `disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub transport: McpTransport,
    /// The file that defines it.
    pub source: McpSource,
    /// What it offers, as configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum McpServerStatus {
    Starting,
    Ready,
    Failed,
    Disabled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum McpTransport {
    Stdio,
    Http,
}

/// `user`: `<agent dir>/mcp.json`; `project`: `.nova/mcp.json`; `claude`: Claude's `.mcp.json`;
/// `client`: given by the front end's client for this session (ACP's `session/new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum McpSource {
    User,
    Claude,
    Project,
    Client,
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum CompactionReason {
    /// The `compact` command.
    Manual,
    /// The context passed `contextWindow - reserveTokens`.
    Threshold,
    /// The provider refused the request as too long; the turn is retried afterwards.
    Overflow,
}

/// What a retried summary request was for (Pi also summarises abandoned branches, which nova
/// does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum SummarySource {
    Compaction,
}

/// What a successful compaction did (`compaction_end.result`, the `compact` response's data).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub estimated_tokens_after: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// The streaming detail inside `message_update`, with block boundaries made explicit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum AssistantMessageEvent {
    TextStart {
        content_index: usize,
    },
    TextDelta {
        content_index: usize,
        delta: String,
    },
    TextEnd {
        content_index: usize,
        content: String,
    },
    ThinkingStart {
        content_index: usize,
    },
    ThinkingDelta {
        content_index: usize,
        delta: String,
    },
    ThinkingEnd {
        content_index: usize,
        content: String,
    },
    ToolcallStart {
        content_index: usize,
        id: String,
        tool_name: String,
    },
    ToolcallDelta {
        content_index: usize,
        delta: String,
    },
    ToolcallEnd {
        content_index: usize,
        tool_call: ContentBlock,
    },
}

/// What a tool returned (or has produced so far), as carried by tool execution events.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolResultPayload {
    pub content: Vec<ContentBlock>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<ToolDetails>,
    /// Only on a finished call's result, and only from tools that report one (`bash`, `read`).
    #[serde(rename = "structuredContent", skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Box<StructuredContent>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, strum::VariantNames, strum::IntoStaticStr)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[strum(serialize_all = "snake_case")]
pub enum Event {
    AgentStart,
    AgentEnd {
        messages: Vec<Arc<Message>>,
        will_retry: bool,
    },
    /// An entry nova appended to the session on its own (the `context_edit` that takes a
    /// retried reply out of the context), as written to the file: entries are the session
    /// format's, kept as JSON here so the protocol does not depend on the session module.
    EntryAppended {
        #[cfg_attr(feature = "schema", schemars(schema_with = "schema::session_entry"))]
        entry: Value,
    },
    AgentSettled {
        aborted: bool,
    },
    TurnStart,
    TurnEnd {
        turn_index: usize,
        message: Message,
        tool_results: Vec<Message>,
    },
    MessageStart {
        message: Message,
    },
    MessageUpdate {
        assistant_message_event: AssistantMessageEvent,
        /// The reply's usage as far as it is known.
        usage: Usage,
    },
    MessageEnd {
        message: Message,
    },
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        args: Value,
    },
    ToolExecutionUpdate {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        partial_result: ToolResultPayload,
    },
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        result: ToolResultPayload,
        is_error: bool,
        /// How long the tool ran; absent when it did not run.
        #[serde(skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// The texts are shared with the queue: an event per queued message must not copy them all.
    QueueUpdate {
        steering: Vec<Arc<str>>,
        follow_up: Vec<Arc<str>>,
        pending_message_count: usize,
    },
    CompactionStart {
        reason: CompactionReason,
    },
    /// `result` is left out when the compaction failed or was aborted, as Pi leaves it out.
    CompactionEnd {
        reason: CompactionReason,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<CompactionResult>,
        aborted: bool,
        will_retry: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    /// A compaction's summary request failed transiently; it is sent again after `delayMs`.
    SummarizationRetryScheduled {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    /// The wait is over and the summary request is sent again.
    SummarizationRetryAttemptStart {
        source: SummarySource,
        reason: CompactionReason,
    },
    /// The retries of a summary request are over, whether it then succeeded or not.
    SummarizationRetryFinished,
    /// A reply failed transiently; the turn is sent again after `delayMs`.
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    /// The retries that began with `auto_retry_start` are over: a reply came, they ran out, or
    /// they were cancelled (`abort`, `abort_retry`).
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    ThinkingLevelChanged {
        level: ThinkingLevel,
    },
    /// The session's display name changed (`set_session_name`).
    SessionInfoChanged {
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A chunk of a user `bash` command's output; `id` is that command's.
    BashExecutionUpdate {
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "schema", schemars(schema_with = "schema::request_id"))]
        id: Option<Value>,
        delta: String,
    },
    /// The session file could not be written (nova's addition): the conversation goes on in
    /// memory, but what was shown since may not survive a restart.
    SessionError {
        error: String,
    },
    /// A flagged bash command, or an MCP call `permissions.mcp` asks about, waits for
    /// `permission_response` (nova's addition, RPC.md).
    PermissionRequest {
        request_id: u64,
        /// The call that asks, for a front end that shows calls by id (ACP); Pi's clients have
        /// no use for it, so RPC mode leaves it out.
        #[serde(skip)]
        tool_call_id: String,
        tool_name: String,
        command: String,
        /// Why the command was flagged (nova's addition, for the person deciding).
        reason: String,
    },
    /// An MCP server changed status: starting, ready (or its tool list changed), failed,
    /// disabled (nova's addition).
    McpServerStatus {
        server: McpServer,
    },
    /// An extension's dialog or fire-and-forget UI call, in Pi's shape: `id`, `method` and
    /// the method's fields, kept as the extension host wrote them. A dialog waits for an
    /// `extension_ui_response` with the same `id`.
    ExtensionUiRequest {
        #[serde(flatten)]
        request: UiRequest,
    },
    /// An extension's handler threw (or its host failed).
    ExtensionError {
        extension_path: String,
        event: String,
        error: String,
    },
}

/// An extension's UI call in Pi's RPC shape: which `method`, and that method's fields (the
/// others absent). `select`, `confirm`, `input` and `editor` wait for an answer; `notify`,
/// `setStatus`, `setWidget`, `setTitle` and `set_editor_text` do not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UiRequest {
    pub id: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<String>,
    /// A dialog's timeout in milliseconds, after which the extension gets its default answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widget_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widget_lines: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widget_placement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

/// A tool as the model sees it: declared by the tools (static text) or by an MCP server (known
/// only at run time), sent by every wire format.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolSpec {
    pub name: std::borrow::Cow<'static, str>,
    pub description: std::borrow::Cow<'static, str>,
    pub parameters: Value,
}

/// One tool in `get_tools`: its spec, where it comes from, and whether the next request
/// offers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ToolInfo {
    #[serde(flatten)]
    pub spec: ToolSpec,
    pub source: ToolSource,
    pub active: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ToolSource {
    Builtin,
    Mcp,
    Extension,
}
