//! One session's events as `session/update` notifications. `emit` runs with the agent's state
//! locked, so it only maps and queues (the crate's outgoing queue never waits); what needs the
//! agent or an answer from the client — a permission question, the context's fill after a
//! reply — goes to the session's follow-up task ([`super::server`]).

use super::Outbox;
use super::convert;
use crate::agent::EventSink;
use crate::frontend;
use crate::protocol::{AssistantMessageEvent, Event, Message, ToolResultPayload, UiRequest};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

/// What the sink hands to the session's follow-up task.
pub enum FollowUp {
    /// The permission gate asks about a call.
    Permission {
        request_id: u64,
        tool_call_id: String,
        tool_name: String,
        command: String,
        reason: String,
    },
    /// A reply ended: report the context's fill and the cost so far.
    Usage,
    /// An extension's dialog ([`super::dialog`]).
    Dialog(Box<UiRequest>),
}

pub struct AcpSink {
    session_id: acp::SessionId,
    cx: ConnectionTo<Client>,
    cwd: PathBuf,
    out: Outbox,
    follow: UnboundedSender<FollowUp>,
    /// Calls already shown, with their arguments once known (for the diff at their end).
    calls: Mutex<HashMap<String, Value>>,
    /// The editor's terminal a call runs in, which its content keeps showing.
    terminals: Mutex<HashMap<String, acp::TerminalId>>,
}

impl AcpSink {
    pub fn new(
        session_id: acp::SessionId,
        cx: ConnectionTo<Client>,
        cwd: PathBuf,
        out: Outbox,
        follow: UnboundedSender<FollowUp>,
    ) -> AcpSink {
        AcpSink {
            session_id,
            cx,
            cwd,
            out,
            follow,
            calls: Mutex::default(),
            terminals: Mutex::default(),
        }
    }

    pub fn update(&self, update: acp::SessionUpdate) {
        let note = acp::SessionNotification::new(self.session_id.clone(), update);
        // Fails only once the connection is gone, when nobody is left to tell.
        let _ = self.cx.send_notification(note);
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, Value>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A call the model has begun to write: shown as pending.
    fn call_announced(&self, id: &str, name: &str) {
        if self.calls().insert(id.to_owned(), Value::Null).is_some() {
            return;
        }
        let kind = convert::shown(name, &Value::Null, &self.cwd).kind;
        self.update(acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(id.to_owned(), name.to_owned())
                .kind(kind)
                .status(acp::ToolCallStatus::Pending),
        ));
    }

    /// A call with its arguments, at `status`: a new call, or an update of one announced.
    pub fn call_started(&self, id: &str, name: &str, args: &Value, status: acp::ToolCallStatus) {
        let shown = convert::shown(name, args, &self.cwd);
        let known = self.calls().insert(id.to_owned(), args.clone()).is_some();
        if known {
            let fields = acp::ToolCallUpdateFields::new()
                .title(shown.title)
                .kind(shown.kind)
                .status(status)
                .locations(shown.locations)
                .raw_input(args.clone());
            self.update(acp::SessionUpdate::ToolCallUpdate(
                acp::ToolCallUpdate::new(id.to_owned(), fields),
            ));
        } else {
            self.update(acp::SessionUpdate::ToolCall(
                acp::ToolCall::new(id.to_owned(), shown.title)
                    .kind(shown.kind)
                    .status(status)
                    .locations(shown.locations)
                    .raw_input(args.clone()),
            ));
        }
    }

    /// A call's command runs in the editor's terminal `terminal`: the call shows it live.
    pub fn terminal_started(&self, call_id: &str, terminal: acp::TerminalId) {
        self.terminals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(call_id.to_owned(), terminal.clone());
        let fields = acp::ToolCallUpdateFields::new().content(vec![terminal_content(terminal)]);
        self.update(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(call_id.to_owned(), fields),
        ));
    }

    /// A call's result: completed or failed, with its output (and a diff for a write or edit
    /// that succeeded); then the plan, when the call keeps a todo list.
    pub fn call_ended(&self, id: &str, name: &str, result: &ToolResultPayload, failed: bool) {
        self.call_result(id, name, result, failed);
        if !failed && let Some(plan) = convert::plan(result.details.as_ref()) {
            self.update(acp::SessionUpdate::Plan(plan));
        }
    }

    fn call_result(&self, id: &str, name: &str, result: &ToolResultPayload, failed: bool) {
        let args = self.calls().remove(id).unwrap_or(Value::Null);
        let mut content = if failed {
            Vec::new()
        } else {
            convert::diffs(name, &args, &self.cwd)
        };
        if content.is_empty() {
            content = convert::content(&result.content);
        }
        let terminal = self
            .terminals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        // The editor keeps showing a released terminal that a call embeds; the text after it
        // is what the model was told (exit code, cut output).
        if let Some(terminal) = terminal {
            content.insert(0, terminal_content(terminal));
        }
        let status = if failed {
            acp::ToolCallStatus::Failed
        } else {
            acp::ToolCallStatus::Completed
        };
        let mut fields = acp::ToolCallUpdateFields::new()
            .status(status)
            .content(content);
        // Where an edit landed is known only once it has: the editor can then jump to it.
        if !failed && let Some(location) = convert::edited_at(name, &args, result, &self.cwd) {
            fields = fields.locations(vec![location]);
        }
        self.update(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(id.to_owned(), fields),
        ));
    }

    /// A dialog waits for the client, from the follow-up task; a notification is a line of the
    /// agent's message, which is where an extension command's output shows in an editor. The
    /// status line, widgets, title and editor text have no place in ACP and are dropped.
    fn extension_ui(&self, request: UiRequest) {
        if super::dialog::is_dialog(&request.method) {
            return self.follow_up(FollowUp::Dialog(Box::new(request)));
        }
        if request.method == "notify" {
            let message = request.message.unwrap_or_default();
            let text = match request.notify_type.as_deref() {
                Some(kind @ ("warning" | "error")) => format!("{kind}: {message}\n"),
                _ => format!("{message}\n"),
            };
            self.update(acp::SessionUpdate::AgentMessageChunk(
                acp::ContentChunk::new(text.into()),
            ));
        }
    }

    fn follow_up(&self, f: FollowUp) {
        // The task is gone only once the session is closed.
        let _ = self.follow.send(f);
    }
}

fn terminal_content(terminal: acp::TerminalId) -> acp::ToolCallContent {
    acp::ToolCallContent::Terminal(acp::Terminal::new(terminal))
}

impl EventSink for AcpSink {
    fn emit(&self, event: Event) {
        match event {
            Event::MessageUpdate {
                assistant_message_event,
                ..
            } => match assistant_message_event {
                AssistantMessageEvent::TextDelta { delta, .. } => self.update(
                    acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(delta.into())),
                ),
                AssistantMessageEvent::ThinkingDelta { delta, .. } => self.update(
                    acp::SessionUpdate::AgentThoughtChunk(acp::ContentChunk::new(delta.into())),
                ),
                AssistantMessageEvent::ToolcallStart { id, tool_name, .. } => {
                    self.call_announced(&id, &tool_name);
                }
                _ => {}
            },
            Event::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => self.call_started(
                &tool_call_id,
                &tool_name,
                &args,
                acp::ToolCallStatus::InProgress,
            ),
            Event::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => {
                let fields = acp::ToolCallUpdateFields::new()
                    .content(convert::content(&partial_result.content));
                self.update(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(tool_call_id, fields),
                ));
            }
            Event::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                ..
            } => self.call_ended(&tool_call_id, &tool_name, &result, is_error),
            Event::MessageEnd {
                message: Message::Assistant(_),
            } => self.follow_up(FollowUp::Usage),
            Event::PermissionRequest {
                request_id,
                tool_call_id,
                tool_name,
                command,
                reason,
            } => self.follow_up(FollowUp::Permission {
                request_id,
                tool_call_id,
                tool_name,
                command,
                reason,
            }),
            Event::ExtensionUiRequest { request } => self.extension_ui(request),
            Event::ExtensionError {
                extension_path,
                event,
                error,
            } => {
                let text = format!("extension {extension_path} failed in {event}: {error}");
                frontend::note(&text);
                self.update(acp::SessionUpdate::AgentThoughtChunk(
                    acp::ContentChunk::new(format!("{text}\n").into()),
                ));
            }
            _ => {}
        }
    }

    /// On stderr, where an editor keeps the agent's log.
    fn warn(&self, line: &str) {
        frontend::note(line);
    }

    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.out.ready())
    }
}
