//! Mirror types for everything nova writes to stdout, written independently of
//! `src/protocol.rs` and marked `deny_unknown_fields`, so any drift between nova's output and the
//! expected shape (a renamed, extra or missing field, a `null` where Pi omits the field) fails
//! loudly. [`decode_line`] is applied to every line the test driver reads, and also checks it
//! against the published JSON Schema (`schema/`, see [`super::schema`]).
//!
//! Sources: `src/protocol.rs`, `shared/spec/RPC.md` and `pi-reference.md` §§0, 4, 5 and 13.
//! Events nova does not emit yet but the spec defines (`auto_retry_*`)
//! are mirrored from the spec.

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An optional field that must be omitted rather than `null` when absent (Pi never writes
/// `null` for an undefined field).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

// ---------------------------------------------------------------------------------------------
// Content blocks and messages
// ---------------------------------------------------------------------------------------------

/// A block in an assistant message: text, thinking or a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum AssistantBlock {
    Text {
        text: String,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        text_signature: Option<String>,
    },
    Thinking {
        thinking: String,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        thinking_signature: Option<String>,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        redacted: Option<bool>,
    },
    ToolCall(ToolCall),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub thought_signature: Option<String>,
}

/// A block in user or tool-result content: text or an image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum MediaBlock {
    Text {
        text: String,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        text_signature: Option<String>,
    },
    Image {
        data: String,
        mime_type: String,
    },
}

impl MediaBlock {
    pub fn text(&self) -> Option<&str> {
        match self {
            MediaBlock::Text { text, .. } => Some(text),
            MediaBlock::Image { .. } => None,
        }
    }
}

/// A user message's content: a bare string or a block list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<MediaBlock>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Pending,
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_from_provider: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    #[serde(
        default,
        rename = "cacheWrite1h",
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_1h: Option<u64>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning: Option<u64>,
    pub total_tokens: u64,
    pub cost: Cost,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserMessage {
    pub content: UserContent,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssistantMessage {
    pub content: Vec<AssistantBlock>,
    pub api: String,
    pub provider: String,
    pub model: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub response_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_level: Option<String>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub error_message: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub raw_stop_reason: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    pub timestamp: i64,
}

impl AssistantMessage {
    /// All text blocks concatenated.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                AssistantBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn thinking(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                AssistantBlock::Thinking { thinking, .. } => Some(thinking.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.content
            .iter()
            .filter_map(|b| match b {
                AssistantBlock::ToolCall(c) => Some(c),
                _ => None,
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<MediaBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub is_error: bool,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    pub timestamp: i64,
}

/// A conversation message, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
#[allow(
    clippy::large_enum_variant,
    reason = "a test mirror: size does not matter"
)]
pub enum Message {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
    CompactionSummary(CompactionSummaryMessage),
    BashExecution(BashExecutionMessage),
    Custom(CustomMessage),
}

/// An extension's message (Pi's `custom` role, from `pi.sendMessage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomMessage {
    pub custom_type: String,
    pub content: UserContent,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub display: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub timestamp: i64,
}

/// A command the user ran with `bash` (Pi's `bashExecution` role).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BashExecutionMessage {
    pub command: String,
    pub output: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub full_output_path: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub exclude_from_context: Option<bool>,
    pub timestamp: i64,
}

/// The summary that stands for compacted conversation (Pi's `compactionSummary` role).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionSummaryMessage {
    pub summary: String,
    pub tokens_before: u64,
    pub timestamp: i64,
}

impl Message {
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Message::Assistant(a) => Some(a),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Models and state
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Model {
    pub id: String,
    pub name: String,
    pub api: String,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    pub input: Vec<String>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    /// Pi's `thinkingLevelMap`, echoed when models.json sets it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_level_map: Option<std::collections::BTreeMap<String, Option<String>>>,
    /// Pi's `compat` object, echoed when models.json or the built-in model sets it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub compat: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueMode {
    #[serde(rename = "all")]
    All,
    #[serde(rename = "one-at-a-time")]
    OneAtATime,
}

/// `get_state` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct State {
    /// `null` when no model is selected (RPC.md; Pi 1.6 leaves it out).
    pub model: Option<Model>,
    pub thinking_level: String,
    pub is_streaming: bool,
    pub is_compacting: bool,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_file: Option<String>,
    pub session_id: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_name: Option<String>,
    pub pending_permission_requests: usize,
    pub auto_compaction_enabled: bool,
    pub message_count: usize,
    pub pending_message_count: usize,
    pub sandbox: SandboxState,
    /// nova's addition: every configured MCP server (empty without `mcp.json`).
    pub mcp_servers: Vec<McpServer>,
}

/// `get_state.sandbox` (nova's extension).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxState {
    pub mode: String,
    pub enforced: bool,
    pub network: bool,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub unavailable: Option<String>,
}

/// A configured MCP server (`get_mcp_servers`, `get_state.mcpServers`, `mcp_server_status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServer {
    pub name: String,
    pub status: McpServerStatus,
    /// Only while `ready`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_count: Option<usize>,
    /// Only when `failed` or `disabled`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub reason: Option<String>,
    pub transport: McpTransport,
    pub source: McpSource,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum McpServerStatus {
    Starting,
    Ready,
    Failed,
    Disabled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum McpTransport {
    Stdio,
    Http,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum McpSource {
    User,
    Claude,
    Project,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServersData {
    pub servers: Vec<McpServer>,
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// The envelope of every response. `data` stays a `Value` here; [`ResponseData`] decodes it for
/// the commands whose data shape is fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub id: Option<Value>,
    #[serde(rename = "type")]
    pub kind: String,
    pub command: String,
    pub success: bool,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Disposition {
    Started,
    Queued,
    Handled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptData {
    pub disposition: Disposition,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessagesData {
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastTextData {
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandsData {
    pub commands: Vec<SlashCommand>,
}

/// Pi 1.6's `RpcSlashCommand`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SlashCommand {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// `prompt` or `skill` (Pi also has `extension`).
    pub source: String,
    pub source_info: SourceInfo,
}

/// Pi 1.6's `SourceInfo`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceInfo {
    pub path: String,
    pub source: String,
    pub scope: String,
    pub origin: String,
    #[serde(default)]
    pub base_dir: Option<String>,
}

/// `clear_queue`: the texts it removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClearedQueue {
    pub steering: Vec<String>,
    pub follow_up: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelData {
    pub level: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelsData {
    pub levels: Vec<String>,
}

/// `cycle_model`: Pi's `{model, thinkingLevel, isScoped}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CycledModel {
    pub model: Model,
    pub thinking_level: String,
    pub is_scoped: bool,
}

/// `bash`: Pi's `BashResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BashResult {
    pub output: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub full_output_path: Option<String>,
}

/// A successful response's data, decoded for the commands whose shape the spec fixes.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseData {
    /// `prompt`, `steer` and `follow_up`: Pi 1.6's `{disposition}`.
    Prompt(PromptData),
    ClearedQueue(ClearedQueue),
    /// `cycle_thinking_level`: `{level}`.
    Level(LevelData),
    /// `get_available_thinking_levels`.
    Levels(LevelsData),
    CycledModel(Box<CycledModel>),
    Bash(BashResult),
    /// `data: null` (`cycle_model`, `cycle_thinking_level` with nothing to cycle to).
    Null,
    State(Box<State>),
    /// `get_messages`: Pi's `{messages}`.
    Messages(MessagesData),
    /// `get_last_assistant_text`: Pi's `{text}`.
    LastText(LastTextData),
    /// `set_model`: the full Model, as Pi.
    Model(Box<Model>),
    /// `get_commands`: `{commands: [...]}`.
    Commands(CommandsData),
    /// `get_mcp_servers` (nova's addition): `{servers}`.
    McpServers(McpServersData),
    /// No data.
    None,
    /// A command whose data shape is not pinned down (yet): kept as JSON.
    Other(Value),
}

impl Response {
    /// Decode `data` according to `command`; `Err` names the problem.
    pub fn decoded_data(&self) -> Result<ResponseData, String> {
        let Some(data) = &self.data else {
            return Ok(ResponseData::None);
        };
        fn de<T: DeserializeOwned>(v: &Value) -> Result<T, String> {
            serde_json::from_value(v.clone()).map_err(|e| e.to_string())
        }
        if data.is_null() {
            return match self.command.as_str() {
                "cycle_model" | "cycle_thinking_level" => Ok(ResponseData::Null),
                other => Err(format!("{other} answered data: null")),
            };
        }
        Ok(match self.command.as_str() {
            "prompt" | "steer" | "follow_up" => ResponseData::Prompt(de(data)?),
            "clear_queue" => ResponseData::ClearedQueue(de(data)?),
            "cycle_thinking_level" => ResponseData::Level(de(data)?),
            "get_available_thinking_levels" => ResponseData::Levels(de(data)?),
            "cycle_model" => ResponseData::CycledModel(Box::new(de(data)?)),
            "bash" => ResponseData::Bash(de(data)?),
            "get_state" => ResponseData::State(Box::new(de(data)?)),
            "get_messages" => ResponseData::Messages(de(data)?),
            "get_last_assistant_text" => ResponseData::LastText(de(data)?),
            "set_model" => ResponseData::Model(Box::new(de(data)?)),
            "get_commands" => ResponseData::Commands(de(data)?),
            "get_mcp_servers" => ResponseData::McpServers(de(data)?),
            _ => ResponseData::Other(data.clone()),
        })
    }

    /// The envelope rules: `type` is `response`; success carries no `error`; failure carries an
    /// `error` and no `data`.
    fn check(&self) -> Result<(), String> {
        if self.kind != "response" {
            return Err(format!("type is {:?}", self.kind));
        }
        match (self.success, &self.error, &self.data) {
            (true, Some(_), _) => Err("success with an error".into()),
            (false, None, _) => Err("failure without an error".into()),
            (false, _, Some(_)) => Err("failure with data".into()),
            _ => self.decoded_data().map(|_| ()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

/// The streaming detail inside `message_update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
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
        tool_call: ToolCallBlock,
    },
}

/// `toolcall_end.toolCall`: a `{"type":"toolCall", …}` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum ToolCallBlock {
    ToolCall(ToolCall),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultPayload {
    pub content: Vec<MediaBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(
        default,
        rename = "structuredContent",
        skip_serializing_if = "Option::is_none"
    )]
    pub structured_content: Option<StructuredContent>,
}

/// Pi 1.6's `structuredContent` of a finished call: `bash`'s outcome, or what `read` read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StructuredContent {
    Command(CommandOutcome),
    Text(String),
    Image(ReadImage),
}

/// `read` of an image: the image and the note beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadImage {
    #[serde(rename = "type")]
    pub kind: ImageKind,
    pub data: String,
    pub mime_type: String,
    pub note: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    Image,
}

/// Pi 1.6's `structuredContent` of a finished `bash` call (snake_case, as Pi names it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandOutcome {
    pub output: String,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    pub exit_code: i32,
    pub wall_time_seconds: f64,
}

impl ToolResultPayload {
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(MediaBlock::text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Every event nova emits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Event {
    /// Written `{}` rather than as a unit variant so extra fields are rejected too.
    AgentStart {},
    AgentEnd {
        messages: Vec<Message>,
        will_retry: bool,
    },
    AgentSettled {
        aborted: bool,
    },
    /// An entry nova appended on its own (a retry's `context_edit`), as Pi 1.6 reports it.
    EntryAppended {
        entry: Value,
    },
    TurnStart {},
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
        usage: Usage,
    },
    MessageEnd {
        message: Message,
    },
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        /// An object when the arguments parse, else the raw string.
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
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        duration_ms: Option<u64>,
    },
    QueueUpdate {
        steering: Vec<String>,
        follow_up: Vec<String>,
        pending_message_count: usize,
    },
    CompactionStart {
        reason: CompactionReason,
    },
    CompactionEnd {
        reason: CompactionReason,
        /// Always present: `null` when the compaction failed or was aborted.
        result: Option<CompactionResult>,
        aborted: bool,
        will_retry: bool,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        error_message: Option<String>,
    },
    ThinkingLevelChanged {
        level: String,
    },
    SessionInfoChanged {
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        name: Option<String>,
    },
    /// Output of a user `bash` command; `id` is that command's.
    BashExecutionUpdate {
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        id: Option<Value>,
        delta: String,
    },
    /// From RPC.md.
    PermissionRequest {
        request_id: u64,
        tool_name: String,
        command: String,
        reason: String,
    },
    /// nova's addition: an MCP server changed status.
    McpServerStatus {
        server: McpServer,
    },
    /// Pi 1.6's RPC extension UI: a dialog (answered with `extension_ui_response`) or a
    /// fire-and-forget call; each method sets only its own fields.
    ExtensionUiRequest {
        id: String,
        method: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        options: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        placeholder: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefill: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notify_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status_key: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status_text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        widget_key: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        widget_lines: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        widget_placement: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// Pi 1.6: an extension's handler threw.
    ExtensionError {
        extension_path: String,
        event: String,
        error: String,
    },
    /// Pi 1.6's retries of a compaction's summary request.
    SummarizationRetryScheduled {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    SummarizationRetryAttemptStart {
        source: SummarySource,
        reason: CompactionReason,
    },
    SummarizationRetryFinished,
    /// From pi-reference §4/§11 (not yet in protocol.rs).
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    /// From pi-reference §4/§11 (not yet in protocol.rs).
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        final_error: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SummarySource {
    Compaction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CompactionReason {
    Manual,
    Threshold,
    Overflow,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionResult {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub estimated_tokens_after: u64,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage: Option<Usage>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
}

// ---------------------------------------------------------------------------------------------
// Lines
// ---------------------------------------------------------------------------------------------

/// One stdout line, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Response(Box<Response>),
    Event(Box<Event>),
}

impl Out {
    pub fn response(&self) -> Option<&Response> {
        match self {
            Out::Response(r) => Some(r),
            Out::Event(_) => None,
        }
    }

    pub fn event(&self) -> Option<&Event> {
        match self {
            Out::Event(e) => Some(e),
            Out::Response(_) => None,
        }
    }
}

/// Decode one stdout line; `Err` says why it does not match the mirror types.
pub fn try_decode_line(v: &Value) -> Result<Out, String> {
    let Some(kind) = v.get("type").and_then(Value::as_str) else {
        return Err("no string `type` field".into());
    };
    if kind == "response" {
        let r: Response = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        r.check()?;
        Ok(Out::Response(Box::new(r)))
    } else {
        let e: Event = serde_json::from_value(v.clone()).map_err(|e| {
            format!("{e} (a new event type needs a mirror in tests/support/wire.rs)")
        })?;
        Ok(Out::Event(Box::new(e)))
    }
}

/// Decode one stdout line into the mirror types, and check it against the published schema;
/// panics with the line when it does not match either.
pub fn decode_line(v: &Value) -> Out {
    let out = decode_mirror(v);
    if let Some(e) = schema_rejection(v) {
        panic!("{e}");
    }
    out
}

/// Decode one stdout line into the mirror types; panics with the line when it does not match.
pub fn decode_mirror(v: &Value) -> Out {
    match try_decode_line(v) {
        Ok(out) => out,
        Err(e) => {
            panic!("nova wrote a line that does not match the wire mirror types: {e}\n  line: {v}")
        }
    }
}

/// Why the published schema rejects a stdout line, with the line (cut to 4,000 bytes).
pub fn schema_rejection(v: &Value) -> Option<String> {
    let e = super::schema::check_line(v).err()?;
    let mut line = v.to_string();
    if line.len() > 4000 {
        let mut cut = 4000;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push_str(" …");
    }
    Some(format!(
        "nova wrote a line that the published schema rejects: {e}\n  line: {line}"
    ))
}
