//! The agent's side of Pi's extensions: the seam an extension host plugs into once the session
//! runs ([`Agent::attach_extensions`]). The agent knows nothing of Node or of the host's
//! protocol; it asks this trait for the extensions' commands and tools, runs their `tool_call`
//! hooks before a call reaches the permission gate, and routes a client's dialog answers to it.
//! Events reach the host as they reach every other subscriber of the session.
//!
//! The run-shaping hooks (`before_agent_start`, `context`) are asked only when an extension
//! subscribed to them, so a session whose extensions do not shape runs pays nothing per turn.

use super::Agent;
use crate::protocol::{
    BashResult, ContentBlock, CustomMessage, Message, Model, SlashCommand, StreamingBehavior,
    ToolSpec,
};
use crate::tools::{ToolOutput, UpdateFn};
use futures_util::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A tool call: its id, the tool's name and the arguments.
pub type Call = (String, String, Value);

/// What the extensions' `tool_call` hooks made of a call.
pub enum Hooked {
    /// Run it with these arguments (rewritten in place by a hook, or as the model wrote them).
    Run(Value),
    /// A hook blocked it; the text is the call's error result.
    Block(String),
}

/// What the extensions' `input` hooks made of a prompt.
pub enum Input {
    Continue,
    /// Prompt this text instead.
    Transform(String),
    /// An extension took care of it: no run.
    Handled,
}

/// What the extensions' `tool_result` hooks changed of a result; `None` fields are kept.
#[derive(Debug, Default)]
pub struct Reviewed {
    pub content: Option<Vec<ContentBlock>>,
    pub details: Option<Value>,
    pub is_error: Option<bool>,
}

impl Reviewed {
    /// Applies the changes to `output`; new content drops the old structured content, which
    /// may no longer match it (as in Pi).
    pub fn apply(self, output: &mut ToolOutput) {
        if let Some(content) = self.content {
            output.content = content;
            output.structured = None;
        }
        if let Some(details) = self.details {
            output.details = Some(crate::protocol::ToolDetails::Other(details));
        }
        if let Some(is_error) = self.is_error {
            output.is_error = is_error;
        }
    }
}

/// What the extensions' `before_agent_start` hooks made of a run about to start.
#[derive(Debug, Default)]
pub struct Starting {
    /// The system prompt for this run, chained across the hooks as Pi chains it.
    pub system_prompt: Option<String>,
    /// Messages that join the run's starting message.
    pub messages: Vec<CustomMessage>,
}

/// How a model was chosen (Pi's `model_select` `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ModelSource {
    Set,
    Cycle,
}

/// What the extensions' `session_before_compact` hooks made of a compaction.
#[derive(Debug, Default)]
pub enum BeforeCompact {
    /// Summarise as nova does.
    #[default]
    Summarize,
    Cancel,
    /// Record this compaction instead of asking the model for one.
    Replace(Box<ExtensionCompaction>),
}

/// A compaction an extension wrote (Pi's `CompactionResult`).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionCompaction {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    #[serde(default)]
    pub details: Option<Value>,
    #[serde(default)]
    pub usage: Option<crate::protocol::Usage>,
}

/// Whether `message`'s `message_end` reaches the extensions as a hook, before it is stored
/// ([`Extensions::message_end`]: a user, assistant or tool-result message), rather than as an
/// event once it is (a custom message, which is stored as it is delivered).
pub fn message_end_hooked(message: &Message) -> bool {
    matches!(
        message,
        Message::User(_) | Message::Assistant(_) | Message::ToolResult(_)
    )
}

/// The extensions of one session, as the agent sees them.
pub trait Extensions: Send + Sync {
    /// Their slash commands, in load order (`get_commands` lists them first, as Pi does).
    fn commands(&self) -> Vec<SlashCommand>;

    /// Runs the command `name` to its end; `None` when no extension registered it. `cancel`
    /// aborts its `ctx.signal` and answers its open dialogs with their defaults.
    fn run_command(
        &self,
        name: &str,
        args: &str,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, ()>>;

    /// The tools they registered, offered to the model after the built-in and MCP tools.
    fn tool_specs(&self) -> Vec<ToolSpec>;

    fn has_tool(&self, name: &str) -> bool;

    /// The `input` hooks for a client's prompt; `None` when no extension has one.
    fn review_input(
        &self,
        text: &str,
        behavior: Option<StreamingBehavior>,
    ) -> Option<BoxFuture<'static, Input>>;

    /// The `tool_call` hooks for `call`; `None` when no extension has one, so a call costs
    /// nothing across the boundary.
    fn before_tool_call(&self, call: &Call) -> Option<BoxFuture<'static, Hooked>>;

    /// The `tool_result` hooks for a call that ran; `None` when no extension has one.
    fn after_tool_call(
        &self,
        call: &Call,
        output: &ToolOutput,
    ) -> Option<BoxFuture<'static, Reviewed>>;

    /// The `before_agent_start` hooks for a run that starts with `starting` under
    /// `system_prompt`; `None` when no extension has one.
    fn before_agent_start(
        &self,
        starting: &Message,
        system_prompt: &str,
    ) -> Option<BoxFuture<'static, Starting>>;

    /// The `message_end` hooks for a user, assistant or tool-result message before it is
    /// stored and announced: the message to keep instead (of the same role), `Ok(None)` to keep
    /// it, an error when what they returned is no message. The outer `None`: no extension has
    /// one.
    fn message_end(
        &self,
        message: &Message,
    ) -> Option<BoxFuture<'static, Result<Option<Message>, String>>>;

    /// The `context` hooks before a model call: the messages to send instead of `messages`
    /// (the stored conversation is unchanged), `Ok(None)` to send them as they are, an error
    /// when what the hooks returned cannot be sent. The outer `None`: no extension has one.
    fn context(
        &self,
        messages: &[Arc<Message>],
    ) -> Option<BoxFuture<'static, Result<Option<Vec<Message>>, String>>>;

    /// Pi's provider hooks around each model request of a run.
    fn provider_hooks(&self) -> Option<&dyn crate::provider::hooks::Hooks>;

    /// Runs an extension tool; `updates` takes its streamed partial results, `cancel` stops it.
    fn call_tool(
        &self,
        call: Call,
        updates: UpdateFn,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ToolOutput>;

    /// The `user_bash` hooks for a client's `bash` command that nova's gate let through: the
    /// result a hook gave in place of running it, `Ok(None)` to run it, an error to fail it
    /// (a hook threw). The outer `None`: no extension has one.
    fn user_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        cwd: &std::path::Path,
    ) -> Option<BoxFuture<'static, Result<Option<BashResult>, String>>>;

    /// A client or an extension made `model` the session's model in place of `previous`; never
    /// waits for the extensions.
    fn model_selected(&self, model: &Model, previous: Option<&Model>, source: ModelSource);

    /// A client's `extension_ui_response` (its `id` names the dialog).
    fn answer_dialog(&self, answer: Value);

    /// Before the session is replaced: `before` (Pi's `session_before_switch` or
    /// `session_before_fork` event) goes to its hooks, and `true` means one cancelled the
    /// replacement; otherwise the extensions get `shutdown` (`session_shutdown`) and are done
    /// with this session.
    fn leave(&self, before: Option<Value>, shutdown: Value) -> BoxFuture<'static, bool>;

    /// After a replacement or a reload: the extensions loaded afresh, for the session now
    /// current, which `start` (`session_start`) announces to them.
    fn enter(&self, start: Value) -> BoxFuture<'static, ()>;

    /// The `session_before_compact` hooks for the event `event` builds (only when some
    /// extension has one: it holds the conversation); `None` when none has.
    fn before_compact(
        &self,
        event: &dyn Fn() -> Value,
    ) -> Option<BoxFuture<'static, BeforeCompact>>;

    /// A session event no client is sent (`session_compact`), for the extensions handling it.
    fn session_event(&self, event: Value);
}

/// Whether the extensions' tools (`specs`) include one named `name`: it replaces a built-in of
/// that name, as in Pi, wherever tools are listed or offered.
pub(super) fn has_tool_named(specs: Option<&[ToolSpec]>, name: &str) -> bool {
    specs.is_some_and(|specs| specs.iter().any(|s| s.name == name))
}

/// An [`Agent`] that does not keep its session alive, for what the session itself holds (its
/// extensions), which would otherwise make a cycle.
#[derive(Clone)]
pub struct WeakAgent(std::sync::Weak<super::Inner>);

impl WeakAgent {
    pub fn upgrade(&self) -> Option<Agent> {
        self.0.upgrade().map(|inner| Agent { inner })
    }
}

impl Agent {
    pub fn downgrade(&self) -> WeakAgent {
        WeakAgent(std::sync::Arc::downgrade(&self.inner))
    }

    /// Plugs in the session's extensions; a second call is ignored (one host per session).
    pub fn attach_extensions(&self, extensions: std::sync::Arc<dyn Extensions>) {
        let _ = self.inner.extensions.set(extensions);
    }

    pub(super) fn extensions(&self) -> Option<&dyn Extensions> {
        self.inner.extensions.get().map(|e| &**e)
    }

    /// An extension's UI request or failure, to every subscriber of the session.
    pub fn extension_event(&self, event: crate::protocol::Event) {
        self.emit(event);
    }

    /// The extension command a prompt names (`/name args`), run to its end; `None` when the
    /// prompt is not one. `cancel` aborts the handler's `ctx.signal` and its open dialogs.
    pub fn extension_command(
        &self,
        text: &str,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, ()>> {
        let invocation = text.strip_prefix('/')?;
        let (name, args) = invocation.split_once(' ').unwrap_or((invocation, ""));
        self.extensions()?.run_command(name, args, cancel)
    }

    /// The extensions' `input` hooks for a prompt, when some extension has one.
    pub fn review_input(
        &self,
        text: &str,
        behavior: Option<StreamingBehavior>,
    ) -> Option<BoxFuture<'static, Input>> {
        self.extensions()?.review_input(text, behavior)
    }

    /// The run's first messages in Pi's order: its starting message, the extensions' messages
    /// held for the next prompt, then what the `before_agent_start` hooks add; a system prompt
    /// a hook chose holds until the run ends.
    pub(super) async fn starting_messages(&self, starting: Message) -> Vec<Message> {
        let mut messages = vec![starting];
        messages.append(&mut self.state().next_turn);
        let system_prompt = self.system_prompt();
        let Some(hooks) = self
            .extensions()
            .and_then(|e| e.before_agent_start(&messages[0], &system_prompt))
        else {
            return messages;
        };
        let started = hooks.await;
        if let Some(prompt) = started.system_prompt {
            self.state().run_system_prompt = Some(prompt.into());
        }
        messages.extend(started.messages.into_iter().map(Message::Custom));
        messages
    }

    /// What `message`'s `message_end` `hooks` replace it with, if anything (a replacement
    /// keeps the role, as in Pi).
    pub(super) async fn message_end_from(
        &self,
        message: &Message,
        hooks: BoxFuture<'static, Result<Option<Message>, String>>,
    ) -> Option<Message> {
        match hooks.await {
            Ok(replaced) => {
                replaced.filter(|r| std::mem::discriminant(r) == std::mem::discriminant(message))
            }
            Err(error) => {
                self.emit(crate::protocol::Event::ExtensionError {
                    extension_path: "<message_end>".into(),
                    event: "message_end".into(),
                    error,
                });
                None
            }
        }
    }

    /// What the model is sent for this call: the conversation, or what the `context` hooks
    /// made of it.
    pub(super) async fn context_for_call(&self, messages: Vec<Arc<Message>>) -> Vec<Arc<Message>> {
        let Some(hooks) = self.extensions().and_then(|e| e.context(&messages)) else {
            return messages;
        };
        match hooks.await {
            Ok(Some(replaced)) => replaced.into_iter().map(Arc::new).collect(),
            Ok(None) => messages,
            Err(error) => {
                self.emit(crate::protocol::Event::ExtensionError {
                    extension_path: "<context>".into(),
                    event: "context".into(),
                    error,
                });
                messages
            }
        }
    }

    /// The system prompt now: the one a `before_agent_start` hook chose for the current run,
    /// else the session's.
    pub fn system_prompt(&self) -> Arc<str> {
        self.state().system_prompt()
    }

    /// `ctx.reload()`: the extensions shut down and load afresh for the same session
    /// (`session_start` with reason `reload`). Extensions only: skills, prompt templates and
    /// context files are read once per session.
    pub async fn reload_extensions(&self) -> Result<(), super::CommandError> {
        if self.state().run.is_some() {
            return Err(super::CommandError::Busy("reload the extensions"));
        }
        let Some(extensions) = self.inner.extensions.get().cloned() else {
            return Err(super::CommandError::Unsupported(
                "reload: no extension is loaded",
            ));
        };
        let shutdown = serde_json::json!({"type": "session_shutdown", "reason": "reload"});
        extensions.leave(None, shutdown).await;
        extensions
            .enter(serde_json::json!({"type": "session_start", "reason": "reload"}))
            .await;
        Ok(())
    }

    /// Resolves once no run is going: Pi's `ctx.waitForIdle()`, past retries, compactions and
    /// queued messages, which the same run carries.
    pub fn idle(&self) -> impl Future<Output = ()> + Send + 'static {
        let agent = self.clone();
        async move {
            loop {
                let done = agent.state().run.as_ref().map(|run| run.done.clone());
                let Some(mut done) = done else {
                    return;
                };
                let _ = done.wait_for(|finished| *finished).await;
            }
        }
    }

    /// Routes a client's dialog answer to the extensions; an error when none are loaded.
    pub fn answer_dialog(&self, answer: Value) -> Result<(), super::CommandError> {
        match self.extensions() {
            Some(extensions) => {
                extensions.answer_dialog(answer);
                Ok(())
            }
            None => Err(super::CommandError::Unsupported(
                "extension_ui_response: no extension is loaded, so there is no dialog to answer",
            )),
        }
    }
}
