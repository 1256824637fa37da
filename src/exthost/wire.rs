//! The typed side of the host's protocol (exthost/host.mjs describes the framing): what nova
//! reads from the host, and the one notification it sends by the thousand (events). The rest
//! of what nova sends is built where it is sent, from the session's own wire types.

use crate::protocol::{
    AssistantMessageEvent, ContentBlock, CustomMessage, Event, Message, UiRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One line from the host: an answer to nova's request (`id` and `result` or `error`), a
/// notification (`method`, `params`), or a request of the host's (all three).
#[derive(Debug, Deserialize)]
pub struct Incoming {
    #[serde(default)]
    pub id: Option<Value>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Value,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
}

/// The `event` notification (a session event some extension handles) is the event's JSON
/// between these two: nova encodes an event once, for its own client and the host alike.
pub const EVENT_OPEN: &str = r#"{"method":"event","params":{"event":"#;
pub const EVENT_CLOSE: &str = "}}";

/// A `message_update` carrying a streamed delta, most of what crosses, goes as the line
/// `[type, contentIndex, delta]` (its `assistantMessageEvent`; host.mjs rebuilds the event
/// from it): parsing the full event, whose running usage extensions have no use for, was most
/// of the host's time in a streamed reply.
#[derive(Debug, Serialize)]
pub struct Delta<'a>(&'static str, usize, &'a str);

impl<'a> Delta<'a> {
    pub fn of(event: &'a Event) -> Option<Self> {
        let Event::MessageUpdate {
            assistant_message_event: update,
            ..
        } = event
        else {
            return None;
        };
        Some(match update {
            AssistantMessageEvent::TextDelta {
                content_index,
                delta,
            } => Delta("text_delta", *content_index, delta),
            AssistantMessageEvent::ThinkingDelta {
                content_index,
                delta,
            } => Delta("thinking_delta", *content_index, delta),
            AssistantMessageEvent::ToolcallDelta {
                content_index,
                delta,
            } => Delta("toolcall_delta", *content_index, delta),
            _ => return None,
        })
    }
}

/// The answer to `load` (and `enter`), as nova also keeps it ([`super::record`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Loaded {
    #[serde(default)]
    pub errors: Vec<LoadError>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub commands: Vec<Command>,
    /// Every event some extension has a handler for.
    #[serde(default)]
    pub events: Vec<String>,
    /// What is wrong with the command line's options for the extensions' flags.
    #[serde(default, rename = "flagErrors")]
    pub flag_errors: Vec<String>,
    /// What the load read, when nova asked (`watch`).
    #[serde(default, skip_serializing)]
    pub reads: Option<Reads>,
    /// What the `resources_discover` handlers named; `None` when none handles it.
    #[serde(default)]
    pub resources: Option<Discovered>,
}

/// The skills and prompt templates (files or directories) the extensions add.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Discovered {
    #[serde(default)]
    pub skill_paths: Vec<std::path::PathBuf>,
    #[serde(default)]
    pub prompt_paths: Vec<std::path::PathBuf>,
}

/// The files and directories, and the environment variables, a load read.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Reads {
    #[serde(default)]
    pub files: Vec<std::path::PathBuf>,
    #[serde(default)]
    pub env: Vec<String>,
}

/// The answer to `trust`: what the `project_trust` handlers decided (`None`: nothing).
#[derive(Debug, Deserialize)]
pub struct Voted {
    #[serde(default)]
    pub trusted: Option<bool>,
    #[serde(default)]
    pub remember: bool,
    /// What failed to load, and the handlers that threw, each naming its extension.
    #[serde(default)]
    pub errors: Vec<LoadError>,
    /// Whether some extension handles `project_trust` at all.
    #[serde(default)]
    pub handled: bool,
    /// What the load read, when nova asked (`watch`).
    #[serde(default)]
    pub reads: Option<Reads>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadError {
    pub path: String,
    pub error: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub parameters: Value,
}

/// The `tools` notification: the registered tools changed after load.
#[derive(Debug, Deserialize)]
pub struct Tools {
    pub tools: Vec<Tool>,
}

/// The `commands` notification: the registered commands changed after load.
#[derive(Debug, Deserialize)]
pub struct Commands {
    pub commands: Vec<Command>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub source_info: CommandSource,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandSource {
    pub path: String,
}

/// What the `input` hooks made of a prompt.
#[derive(Debug, Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum InputVerdict {
    Continue,
    Transform { text: String },
    Handled,
}

/// What the `tool_call` hooks decided.
#[derive(Debug, Deserialize)]
pub struct ToolCallVerdict {
    pub block: bool,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
}

/// A tool's result, final or partial.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub details: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
}

/// What the `tool_result` hooks changed; absent fields are kept.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultPatch {
    #[serde(default)]
    pub content: Option<Vec<ContentBlock>>,
    #[serde(default)]
    pub details: Option<Value>,
    #[serde(default)]
    pub is_error: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUpdate {
    pub tool_call_id: String,
    pub partial: ToolResult,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionError {
    pub extension_path: String,
    pub event: String,
    pub error: String,
}

/// The `ui` notification.
pub type Ui = UiRequest;

/// `pi.sendUserMessage(content, options)`.
#[derive(Debug, Deserialize)]
pub struct UserMessage {
    pub content: Value,
    #[serde(default)]
    pub options: Option<DeliverOptions>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliverOptions {
    #[serde(default)]
    pub deliver_as: Option<String>,
}

/// What the `before_agent_start` hooks made of a run about to start.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub messages: Vec<CustomMessage>,
}

/// What the `context` hooks made of the messages for a model call: absent when unchanged.
#[derive(Debug, Deserialize)]
pub struct Context {
    #[serde(default)]
    pub messages: Option<Vec<Message>>,
}

/// What the `message_end` hooks replaced the message with, if anything.
#[derive(Debug, Deserialize)]
pub struct MessageEnd {
    #[serde(default)]
    pub message: Option<Message>,
}

/// `pi.sendMessage(message, options)`; the host stamps the message's time.
#[derive(Debug, Deserialize)]
pub struct SentMessage {
    pub message: CustomMessage,
    #[serde(default)]
    pub options: Option<SendOptions>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendOptions {
    #[serde(default)]
    pub deliver_as: Option<String>,
    #[serde(default)]
    pub trigger_turn: Option<bool>,
}

/// `pi.appendEntry(customType, data)`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomEntry {
    pub custom_type: String,
    #[serde(default)]
    pub data: Option<Value>,
}

/// `pi.setLabel(entryId, label)`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Label {
    pub entry_id: String,
    #[serde(default)]
    pub label: Option<String>,
}

/// `pi.registerProvider(name, config)` (its models.json fields; the host refuses what is
/// code) and `pi.unregisterProvider(name)`, which has no config.
#[derive(Debug, Deserialize)]
pub struct Provider {
    pub name: String,
    #[serde(default)]
    pub config: Value,
}

/// What the `user_bash` hooks answered for a client's `bash` command: the result to record in
/// place of running it, or nothing (run it).
#[derive(Debug, Deserialize)]
pub struct UserBash {
    #[serde(default)]
    pub result: Option<crate::protocol::BashResult>,
}

/// `pi.exec(command, args, options)`, which Pi's loader runs through the host's replacement
/// of Pi's `execCommand`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exec {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Milliseconds; absent or 0: none.
    #[serde(default)]
    pub timeout: Option<f64>,
    #[serde(default)]
    pub max_buffer: Option<f64>,
}

/// `exec_abort`: the extension's abort signal for the `exec` request `id`.
#[derive(Debug, Deserialize)]
pub struct ExecAbort {
    pub id: String,
}

/// The answer to `leave`: whether a `session_before_*` hook cancelled the replacement.
#[derive(Debug, Deserialize)]
pub struct Left {
    #[serde(default)]
    pub cancelled: bool,
}

/// What the `session_before_compact` hooks answered: a cancel, or a compaction of their own
/// (read by the agent, which checks it).
#[derive(Debug, Deserialize)]
pub struct CompactVerdict {
    #[serde(default)]
    pub cancel: bool,
    #[serde(default)]
    pub compaction: Option<Value>,
}

/// `ctx.fork(entryId, {position})`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fork {
    pub entry_id: String,
    #[serde(default)]
    pub position: Option<String>,
}

/// What the `before_provider_request` hooks made of a payload: absent when unchanged.
#[derive(Debug, Deserialize)]
pub struct Payload {
    #[serde(default)]
    pub payload: Option<Value>,
}

/// The headers the `before_provider_headers` hooks left (`null` removes one).
#[derive(Debug, Deserialize)]
pub struct ProviderHeaders {
    pub headers: BTreeMap<String, Option<String>>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_framed_is_the_event_notification() {
        let event = Event::SessionError {
            error: "a \"quoted\" line\u{2028}".into(),
        };
        let framed = format!(
            "{EVENT_OPEN}{}{EVENT_CLOSE}",
            serde_json::to_string(&event).unwrap()
        );
        let read: Value = serde_json::from_str(&framed).unwrap();
        assert_eq!(read, json!({"method": "event", "params": {"event": event}}));
    }

    #[test]
    fn a_streamed_delta_crosses_as_its_three_parts_and_nothing_else_does() {
        let update = |assistant_message_event| Event::MessageUpdate {
            assistant_message_event,
            usage: Default::default(),
        };
        let delta = update(AssistantMessageEvent::ThinkingDelta {
            content_index: 2,
            delta: "a \"quoted\" line\n".into(),
        });
        let line = serde_json::to_string(&Delta::of(&delta).unwrap()).unwrap();
        let read: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(read, json!(["thinking_delta", 2, "a \"quoted\" line\n"]));
        let end = update(AssistantMessageEvent::TextEnd {
            content_index: 0,
            content: "done".into(),
        });
        assert!(Delta::of(&end).is_none());
        assert!(Delta::of(&Event::AgentStart).is_none());
    }
}
