//! One line of a session file, in Pi's v3 shape: the header, then entries linked by `parentId`.

use crate::protocol::{
    AssistantMessage, BashExecutionMessage, CompactionSummaryMessage, ContentBlock, CustomMessage,
    Message, StopReason, ToolDetails, ToolResultMessage, Usage, UserContent, UserMessage,
};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

pub(crate) const VERSION: u64 = 3;

/// The first line of every session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    #[serde(rename = "type")]
    pub kind: String,
    // Pi's v1 files have no version field.
    #[serde(default)]
    pub version: Option<u64>,
    pub id: String,
    #[serde(default)]
    pub timestamp: String,
    #[serde(default)]
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

impl Header {
    pub fn is_valid(&self) -> bool {
        self.kind == "session"
    }
}

/// The `customType` of nova's [`Body::ActiveTools`] entries.
pub const ACTIVE_TOOLS: &str = "nova.active_tools";

#[derive(Serialize, Deserialize)]
struct ActiveToolsData<T> {
    tools: T,
}

/// One node of the session tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: String,
    pub parent_id: Option<String>,
    /// ISO 8601, as Pi writes it.
    pub timestamp: String,
    pub body: Body,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Message(Arc<Message>),
    ModelChange {
        provider: String,
        model_id: String,
    },
    ThinkingLevelChange {
        thinking_level: String,
    },
    Compaction {
        summary: String,
        first_kept_entry_id: String,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
        /// What writing the summary cost, counted in the session's totals as Pi counts it.
        usage: Option<Usage>,
    },
    SessionInfo {
        name: Option<String>,
    },
    /// Pi 1.6's `context_edit` with `replacement: null`: the message entry `target_id` stays in
    /// the file but leaves the conversation (a failed reply that was retried). An edit that
    /// replaces content is kept as [`Body::Other`] and not applied.
    ContextOmit {
        target_id: String,
    },
    /// The tools a client chose with `set_active_tools`, as a Pi `custom` entry (which Pi keeps
    /// out of the model's context) of type [`ACTIVE_TOOLS`].
    ActiveTools {
        tools: Vec<String>,
    },
    /// An extension's own state (Pi's `pi.appendEntry`), a `custom` entry kept out of the
    /// model's context. Read back it is an [`Body::Other`], kept whole.
    Custom {
        custom_type: String,
        data: Option<Value>,
    },
    /// Pi's `label` entry (an extension's `pi.setLabel`): `target_id`'s label in the tree,
    /// cleared when `label` is `None`. Read back it is an [`Body::Other`], kept whole.
    Label {
        target_id: String,
        label: Option<String>,
    },
    /// An entry nova does not model (Pi's `custom`, `label`, `branch_summary`, a message with a
    /// role nova lacks…), kept whole so that it is written back unchanged.
    Other(Value),
}

impl Body {
    fn type_name(&self) -> &'static str {
        match self {
            Body::Message(m) if matches!(**m, Message::Custom(_)) => "custom_message",
            Body::Message(_) => "message",
            Body::ModelChange { .. } => "model_change",
            Body::ThinkingLevelChange { .. } => "thinking_level_change",
            Body::Compaction { .. } => "compaction",
            Body::SessionInfo { .. } => "session_info",
            Body::ContextOmit { .. } => "context_edit",
            Body::ActiveTools { .. } | Body::Custom { .. } => "custom",
            Body::Label { .. } => "label",
            Body::Other(_) => "",
        }
    }
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Body::Other(raw) = &self.body {
            return raw.serialize(s);
        }
        if let Body::Message(message) = &self.body
            && let Message::Custom(custom) = &**message
        {
            return self.serialize_custom_message(custom, s);
        }
        // Pi's field order: type, id, parentId, timestamp, then the type's own fields.
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.body.type_name())?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("parentId", &self.parent_id)?;
        m.serialize_entry("timestamp", &self.timestamp)?;
        match &self.body {
            Body::Message(message) => m.serialize_entry("message", message)?,
            Body::ModelChange { provider, model_id } => {
                m.serialize_entry("provider", provider)?;
                m.serialize_entry("modelId", model_id)?;
            }
            Body::ThinkingLevelChange { thinking_level } => {
                m.serialize_entry("thinkingLevel", thinking_level)?
            }
            Body::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
                details,
                from_hook,
                usage,
            } => {
                m.serialize_entry("summary", summary)?;
                m.serialize_entry("firstKeptEntryId", first_kept_entry_id)?;
                m.serialize_entry("tokensBefore", tokens_before)?;
                if let Some(d) = details {
                    m.serialize_entry("details", d)?;
                }
                if let Some(h) = from_hook {
                    m.serialize_entry("fromHook", h)?;
                }
                if let Some(u) = usage {
                    m.serialize_entry("usage", u)?;
                }
            }
            Body::SessionInfo { name } => {
                if let Some(n) = name {
                    m.serialize_entry("name", n)?;
                }
            }
            Body::ContextOmit { target_id } => {
                m.serialize_entry("targetId", target_id)?;
                m.serialize_entry("replacement", &Value::Null)?;
            }
            Body::ActiveTools { tools } => {
                m.serialize_entry("customType", ACTIVE_TOOLS)?;
                m.serialize_entry("data", &ActiveToolsData { tools })?;
            }
            Body::Custom { custom_type, data } => {
                m.serialize_entry("customType", custom_type)?;
                if let Some(data) = data {
                    m.serialize_entry("data", data)?;
                }
            }
            Body::Label { target_id, label } => {
                m.serialize_entry("targetId", target_id)?;
                if let Some(label) = label {
                    m.serialize_entry("label", label)?;
                }
            }
            Body::Other(_) => {}
        }
        m.end()
    }
}

impl Entry {
    /// Pi's `custom_message` entry: the message's own fields first, then the tree's, in Pi's
    /// order; its timestamp is the entry's.
    fn serialize_custom_message<S: Serializer>(
        &self,
        custom: &CustomMessage,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", "custom_message")?;
        m.serialize_entry("customType", &custom.custom_type)?;
        m.serialize_entry("content", &custom.content)?;
        if let Some(display) = custom.display {
            m.serialize_entry("display", &display)?;
        }
        if let Some(details) = &custom.details {
            m.serialize_entry("details", details)?;
        }
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("parentId", &self.parent_id)?;
        m.serialize_entry("timestamp", &self.timestamp)?;
        m.end()
    }
}

/// The lines [`Entry`]'s `Serialize` writes: one shape per modelled type, and an entry nova
/// does not model as it was read.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Entry {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        crate::protocol::schema::SESSION_ENTRY.into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        use schemars::json_schema;
        use serde_json::json;
        let shape = |kind: &str, required: &[&str], properties: Value| {
            let mut required = required.to_vec();
            required.extend(["type", "id", "parentId", "timestamp"]);
            let mut properties = properties;
            properties["type"] = json!({ "const": kind });
            properties["parentId"] = json!({ "type": ["string", "null"] });
            properties["timestamp"] = json!({ "description": "ISO 8601", "type": "string" });
            json!({ "type": "object", "required": required, "properties": properties })
        };
        let text = json!({ "type": "string" });
        let message = generator.subschema_for::<Message>();
        let usage = generator.subschema_for::<Usage>();
        json_schema!({
            "description": "A line of the session file (Pi's v3 format) after its header.",
            "type": "object",
            "required": ["type", "id"],
            "properties": { "type": text, "id": text },
            "anyOf": [
                shape("message", &["message"], json!({ "message": message })),
                shape("model_change", &["provider", "modelId"],
                    json!({ "provider": text, "modelId": text })),
                shape("thinking_level_change", &["thinkingLevel"],
                    json!({ "thinkingLevel": text })),
                shape("compaction", &["summary", "firstKeptEntryId", "tokensBefore"], json!({
                    "summary": text,
                    "firstKeptEntryId": text,
                    "tokensBefore": { "type": "integer", "minimum": 0 },
                    "details": {},
                    "fromHook": { "type": "boolean" },
                    "usage": usage
                })),
                shape("session_info", &[], json!({ "name": text })),
                shape("custom_message", &["customType", "content"], json!({
                    "customType": text,
                    "content": generator.subschema_for::<UserContent>(),
                    "display": { "type": "boolean" },
                    "details": {}
                })),
                shape("context_edit", &["targetId", "replacement"],
                    json!({ "targetId": text, "replacement": { "type": "null" } })),
                shape("custom", &["customType", "data"], json!({
                    "customType": { "const": ACTIVE_TOOLS },
                    "data": {
                        "type": "object",
                        "required": ["tools"],
                        "properties": { "tools": { "type": "array", "items": text } }
                    }
                })),
                shape("custom", &["customType"], json!({
                    "customType": text,
                    "data": {}
                })),
                shape("label", &["targetId"], json!({ "targetId": text, "label": text })),
                {
                    "description": "An entry nova does not model (another type, a message \
                        role nova lacks, a context edit that replaces content), kept as it \
                        was read."
                }
            ]
        })
    }
}

/// Every field any modelled entry type has, so a line parses in one pass without buffering it
/// as a tree first (an internally tagged enum would). Fields of other types are ignored here.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    parent_id: Option<String>,
    timestamp: Option<String>,
    message: Option<WireMessage>,
    provider: Option<String>,
    model_id: Option<String>,
    thinking_level: Option<String>,
    summary: Option<String>,
    first_kept_entry_id: Option<String>,
    tokens_before: Option<u64>,
    details: Option<Value>,
    from_hook: Option<bool>,
    usage: Option<Usage>,
    name: Option<String>,
    target_id: Option<String>,
    /// Absent and `null` both read as `None`: an omission either way.
    replacement: Option<Value>,
    custom_type: Option<String>,
    data: Option<Value>,
    content: Option<WireContent>,
    display: Option<bool>,
}

impl Line {
    fn into_entry(self) -> Option<Entry> {
        let body = match self.kind.as_str() {
            "message" => Body::Message(Arc::new(self.message?.into_message()?)),
            "model_change" => Body::ModelChange {
                provider: self.provider?,
                model_id: self.model_id?,
            },
            "thinking_level_change" => Body::ThinkingLevelChange {
                thinking_level: self.thinking_level?,
            },
            "compaction" => Body::Compaction {
                summary: self.summary?,
                first_kept_entry_id: self.first_kept_entry_id?,
                tokens_before: self.tokens_before.unwrap_or(0),
                details: self.details,
                from_hook: self.from_hook,
                usage: self.usage,
            },
            "session_info" => Body::SessionInfo { name: self.name },
            "context_edit" if self.replacement.is_none() => Body::ContextOmit {
                target_id: self.target_id?,
            },
            "custom" if self.custom_type.as_deref() == Some(ACTIVE_TOOLS) => Body::ActiveTools {
                tools: ActiveToolsData::<Vec<String>>::deserialize(self.data?)
                    .ok()?
                    .tools,
            },
            "custom_message" => Body::Message(Arc::new(Message::Custom(CustomMessage {
                custom_type: self.custom_type?,
                // Pi reads missing content as an empty list.
                content: match self.content {
                    None => UserContent::Blocks(Vec::new()),
                    Some(WireContent::Text(t)) => UserContent::Text(t),
                    Some(WireContent::Blocks(b)) => UserContent::Blocks(blocks(b)?),
                },
                display: self.display,
                details: self.details,
                timestamp: super::iso_to_ms(self.timestamp.as_deref().unwrap_or_default()),
            }))),
            _ => return None,
        };
        Some(Entry {
            id: self.id?,
            parent_id: self.parent_id,
            timestamp: self.timestamp.unwrap_or_default(),
            body,
        })
    }
}

/// An entry of any kind as raw JSON: kept when it has the fields the tree needs.
fn other(raw: Value) -> Option<Entry> {
    let id = raw.get("type").and(raw.get("id"))?.as_str()?.to_owned();
    let parent_id = raw
        .get("parentId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let timestamp = raw
        .get("timestamp")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some(Entry {
        id,
        parent_id,
        timestamp,
        body: Body::Other(raw),
    })
}

/// Parses one entry line; `None` means the line is torn or is not an entry at all.
pub(crate) fn parse(line: &[u8]) -> Option<Entry> {
    match serde_json::from_slice::<Line>(line) {
        Ok(l) if is_modelled(&l.kind) => match l.into_entry() {
            Some(e) => Some(e),
            None => other(serde_json::from_slice(line).ok()?),
        },
        // Unmodelled types and roles take the slow path; they are rare.
        _ => other(serde_json::from_slice(line).ok()?),
    }
}

/// The same as [`parse`] for a line already read as JSON (old-version files).
pub(crate) fn from_value(raw: Value) -> Option<Entry> {
    match Line::deserialize(&raw) {
        Ok(l) if is_modelled(&l.kind) => match l.into_entry() {
            Some(e) => Some(e),
            None => other(raw),
        },
        _ => other(raw),
    }
}

fn is_modelled(kind: &str) -> bool {
    matches!(
        kind,
        "message"
            | "model_change"
            | "thinking_level_change"
            | "compaction"
            | "session_info"
            | "context_edit"
            | "custom"
            | "custom_message"
    )
}

// The protocol types are tagged enums, which serde decodes by first buffering each message and
// each content block as a tree of owned values. Resuming a long session spends most of its time
// there, so message entries are read through flat mirrors of those types and converted; anything
// the mirrors cannot express falls back to the raw path and is kept as `Body::Other`.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMessage {
    role: String,
    content: Option<WireContent>,
    timestamp: Option<i64>,
    api: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    stop_reason: Option<StopReason>,
    error_message: Option<String>,
    response_id: Option<String>,
    thinking_level: Option<String>,
    raw_stop_reason: Option<String>,
    duration_ms: Option<u64>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    details: Option<ToolDetails>,
    is_error: Option<bool>,
    summary: Option<String>,
    tokens_before: Option<u64>,
    command: Option<String>,
    output: Option<String>,
    exit_code: Option<i32>,
    cancelled: Option<bool>,
    truncated: Option<bool>,
    full_output_path: Option<String>,
    exclude_from_context: Option<bool>,
}

impl WireMessage {
    fn into_message(self) -> Option<Message> {
        let timestamp = self.timestamp?;
        Some(match self.role.as_str() {
            "user" => Message::User(UserMessage {
                content: match self.content? {
                    WireContent::Text(t) => UserContent::Text(t),
                    WireContent::Blocks(b) => UserContent::Blocks(blocks(b)?),
                },
                timestamp,
            }),
            "assistant" => Message::Assistant(AssistantMessage {
                content: self.content?.into_blocks()?,
                api: self.api?,
                provider: self.provider?,
                model: self.model?,
                response_id: self.response_id,
                thinking_level: self.thinking_level,
                usage: self.usage?,
                stop_reason: self.stop_reason?,
                error_message: self.error_message,
                raw_stop_reason: self.raw_stop_reason,
                duration_ms: self.duration_ms,
                timestamp,
            }),
            "toolResult" => Message::ToolResult(ToolResultMessage {
                tool_call_id: self.tool_call_id?,
                tool_name: self.tool_name?,
                content: self.content?.into_blocks()?,
                details: self.details,
                is_error: self.is_error?,
                duration_ms: self.duration_ms,
                timestamp,
            }),
            "compactionSummary" => Message::CompactionSummary(CompactionSummaryMessage {
                summary: self.summary?,
                tokens_before: self.tokens_before?,
                timestamp,
            }),
            "bashExecution" => Message::BashExecution(BashExecutionMessage {
                command: self.command?,
                output: self.output?,
                exit_code: self.exit_code,
                cancelled: self.cancelled?,
                truncated: self.truncated?,
                full_output_path: self.full_output_path,
                exclude_from_context: self.exclude_from_context,
                timestamp,
            }),
            _ => return None,
        })
    }
}

enum WireContent {
    Text(String),
    Blocks(Vec<WireBlock>),
}

impl WireContent {
    fn into_blocks(self) -> Option<Vec<ContentBlock>> {
        match self {
            WireContent::Text(_) => None,
            WireContent::Blocks(b) => blocks(b),
        }
    }
}

impl<'de> Deserialize<'de> for WireContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WireContent;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<WireContent, E> {
                Ok(WireContent::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<WireContent, E> {
                Ok(WireContent::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireContent, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(2));
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(WireContent::Blocks(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    text_signature: Option<String>,
    thinking: Option<String>,
    thinking_signature: Option<String>,
    redacted: Option<bool>,
    data: Option<String>,
    mime_type: Option<String>,
    id: Option<String>,
    name: Option<String>,
    arguments: Option<Value>,
    thought_signature: Option<String>,
}

fn blocks(wire: Vec<WireBlock>) -> Option<Vec<ContentBlock>> {
    // Not `collect`: it would reuse the larger mirror allocation for the result, and these
    // vectors live as long as the session.
    let mut out = Vec::with_capacity(wire.len());
    for b in wire {
        out.push(b.into_block()?);
    }
    Some(out)
}

impl WireBlock {
    fn into_block(self) -> Option<ContentBlock> {
        Some(match self.kind.as_str() {
            "text" => ContentBlock::Text {
                text: self.text?,
                text_signature: self.text_signature,
            },
            "thinking" => ContentBlock::Thinking {
                thinking: self.thinking?,
                thinking_signature: self.thinking_signature,
                redacted: self.redacted,
            },
            "image" => ContentBlock::Image {
                data: self.data?,
                mime_type: self.mime_type?,
            },
            "toolCall" => ContentBlock::ToolCall {
                id: self.id?,
                name: self.name?,
                arguments: self.arguments?,
                thought_signature: self.thought_signature,
            },
            _ => return None,
        })
    }
}
