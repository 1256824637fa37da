//! The agent: the conversation, the current model, the message queues and the run in progress.
//!
//! One `Mutex<State>` guards everything mutable; it is only held for short, synchronous steps
//! (never across an await), so commands that read state answer at once even mid-run. A run is a
//! spawned task ([`run`]) with its own cancellation token; `abort` cancels it and waits for its
//! final events.

mod assemble;
mod compact;
pub mod compaction;
mod custom;
mod error;
mod exec;
mod extension_exec;
mod extensions;
mod live;
mod mcp;
mod models;
mod permission;
pub mod port;
mod queue;
mod retry;
mod run;
pub mod runtime;
mod sessions;
mod sink;
mod toolset;
mod user_bash;

pub use custom::Deliver;
pub use error::CommandError;
pub use extension_exec::ExtensionExec;
pub use extensions::{
    BeforeCompact, ExtensionCompaction, Extensions, Hooked, Input, ModelSource, Reviewed, Starting,
    WeakAgent, message_end_hooked,
};
pub use live::{Live, LiveSessions};
pub use permission::{FlaggedCommand, Unattended};
pub use queue::QueueFull;
pub use runtime::{OpenError, Prepared, Runtime};
pub use sessions::{export_file, startup_session};
pub use sink::{EventJson, EventSink, Fanout, Sink, Subscription};

use crate::config::{Config, Registry, RetrySettings, ScopedModel, ToolSelection};
use crate::context::PromptSource;
use crate::gate::Approval;
use crate::gate::classify::Gate;
use crate::protocol::{
    CompactionReason, CompactionResult, ContentBlock, Event, Message, Model, QueueMode,
    SlashCommand, State as WireState, StreamingBehavior, ThinkingLevel, UserContent, UserMessage,
};
use crate::provider::http::SharedClient;
use crate::session::{Session, SessionError};
use crate::warnings::Warnings;
use compaction::CompactionSettings;
use queue::Queue;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolset::Tools;

/// How `prompt` was taken: a new run (not yet started, so the caller can answer the command
/// before the run's first event), or a message queued for the current run.
pub enum Prompted {
    Started(PendingRun),
    Queued,
}

/// A run the agent has committed to (it already counts as streaming) but not yet spawned.
pub struct PendingRun {
    agent: Agent,
    cancel: CancellationToken,
    done: watch::Sender<bool>,
    /// The run's starting message: the user's prompt, or an extension's message (boxed: a
    /// reply-sized message would make every `Prompted` that large).
    prompt: Box<Message>,
}

impl PendingRun {
    pub fn start(self) {
        tokio::spawn(self.run());
    }

    /// Runs in the caller's task, to `agent_settled`.
    pub async fn run(self) {
        run::run(&self.agent, self.cancel, *self.prompt).await;
        let _ = self.done.send(true);
    }
}

#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    sink: Sink,
    /// This session's warnings, routed to the sink.
    warnings: Warnings,
    /// Shared with every session of the process.
    registry: Arc<Registry>,
    tool_selection: ToolSelection,
    /// The configured system prompt's parts, skills and templates.
    prompt_base: PromptSource,
    /// [`Self::prompt_base`] with what the extensions' `resources_discover` handlers named
    /// (see [`Agent::discovered`]).
    prompt_source: std::sync::RwLock<Arc<PromptSource>>,
    permission_rules: Gate,
    compaction: CompactionSettings,
    retry: RetrySettings,
    sandbox: Arc<crate::sandbox::Sandbox>,
    /// What `cycle_model` goes through; every declared model when empty.
    scope: Vec<ScopedModel>,
    /// `defaultThinkingLevel`: where a model switch puts the level.
    default_thinking_level: Option<ThinkingLevel>,
    cwd: PathBuf,
    agent_dir: PathBuf,
    /// `--session-dir`, which confines session lookups to itself.
    session_dir_flag: Option<PathBuf>,
    /// Where new session files go; `None` with `--no-session`.
    session_files: Option<PathBuf>,
    idle_timeout: Duration,
    /// `--max-turns` / `maxTurns`: the most good replies one prompt's run may take.
    max_turns: Option<u32>,
    client: SharedClient,
    /// How many user `bash` commands are running.
    bash_running: user_bash::Running,
    /// The MCP servers; `None` when no `mcp.json` declares any.
    mcp: Option<crate::mcp::Servers>,
    /// Full-output files of commands this session ran: removed by `new_session` and on exit.
    outputs: Arc<crate::tools::output::OutputFiles>,
    /// The extension host's side of the session, once one is attached.
    extensions: std::sync::OnceLock<Arc<dyn Extensions>>,
    state: Mutex<State>,
}

struct State {
    /// Shared with the session's entries: one copy of each message, however long the session.
    messages: Vec<Arc<Message>>,
    model: Option<Model>,
    /// What the model is offered; follows the model (see [`ToolSelection`]).
    tools: Tools,
    /// Pi's thinking level, clamped to the model and recorded in the session.
    thinking_level: ThinkingLevel,
    queue: Queue,
    run: Option<RunHandle>,
    permissions: permission::Pending,
    /// Set when no client can answer permission requests.
    unattended: Option<Unattended>,
    /// How much the session asks, on top of the settings' rules.
    approval: Approval,
    /// The answers the person chose to keep for the rest of the session.
    memory: crate::gate::Memory,
    /// The client's files, which `read` and `edit` read through when it offers them.
    editor: Option<Arc<dyn crate::tools::EditorFiles>>,
    /// The client's terminals, which `bash` runs in when it offers them.
    terminal: Option<Arc<dyn crate::tools::EditorTerminal>>,
    session: Session,
    /// A compaction is running (inside a run, or for the `compact` command).
    compacting: bool,
    /// `set_auto_compaction`; starts from `compaction.enabled`.
    auto_compaction: bool,
    /// `set_auto_retry`; starts from `retry.enabled`.
    auto_retry: bool,
    /// The wait before a retry, while one is pending.
    retry_wait: Option<RetryWait>,
    /// Index of the first message whose reported usage describes the current context: replies
    /// kept through a compaction measured the longer context before it.
    usage_from: usize,
    /// Parent of every running user `bash` command's token; `abort_bash` cancels and replaces it.
    bash_cancel: CancellationToken,
    /// User `bash` commands that finished while a run streamed, recorded when it ends.
    pending_bash: Vec<Message>,
    /// The system prompt an extension's `before_agent_start` hook chose for the current run.
    run_system_prompt: Option<Arc<str>>,
    /// Extensions' messages that go out with the next prompt (`deliverAs: "nextTurn"`).
    next_turn: Vec<Message>,
    /// Extensions' messages sent mid-run without a turn of their own: recorded when the turn
    /// ends, never between a tool call and its result.
    held_custom: Vec<Message>,
    /// The providers the session's extensions registered, laid over the registry.
    providers: Vec<crate::config::models::Registered>,
}

impl State {
    /// The context size as Pi counts it: the last usable reported usage plus estimates.
    fn context_tokens(&self) -> u64 {
        compaction::context_tokens(&self.messages, self.usage_from).tokens
    }

    /// The system prompt now: the one a `before_agent_start` hook chose for the current run,
    /// else the session's.
    fn system_prompt(&self) -> Arc<str> {
        self.run_system_prompt
            .clone()
            .unwrap_or_else(|| self.tools.system_prompt.clone())
    }
}

/// A pending retry's wait: `abort_retry` cancels it and waits for `done` to close, which
/// happens once the run has reported the cancellation.
struct RetryWait {
    cancel: CancellationToken,
    done: watch::Receiver<()>,
}

struct RunHandle {
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
    /// The `compact` command, not a prompt's run: nothing would deliver queued messages.
    manual_compaction: bool,
}

impl Agent {
    /// `session` comes from [`startup_session`]: a resumed session brings its conversation and,
    /// unless the command line named a model, its model.
    pub fn new(
        config: Config,
        session: Session,
        prompt_source: PromptSource,
        client: SharedClient,
        sink: Sink,
    ) -> Self {
        let session_files = sessions::file_dir(&config);
        let context = session.context();
        let restored = context
            .model
            .as_ref()
            .filter(|_| !config.model_explicit)
            .and_then(|(provider, id)| config.registry.find(provider, id).cloned());
        let model = restored.or(config.model);
        let named = context.active_tools.clone().map(Arc::from);
        let tools = Tools::new(&config.tools, named, &prompt_source, model.as_ref());
        let usage_from = usage_floor(&context.messages);
        let thinking_level = models::startup_level(
            model.as_ref(),
            config.thinking_level,
            context.thinking_level.as_deref(),
            config.settings.default_thinking_level,
        );
        // `--thinking` on a resumed session is a change the file must show (Pi compares after
        // clamping, so a level the model merely cannot reach is not recorded over).
        let recorded = context
            .thinking_level
            .as_deref()
            .and_then(ThinkingLevel::parse);
        let flag_changed = config.thinking_level.is_some()
            && recorded.is_some_and(|r| {
                models::startup_level(model.as_ref(), Some(r), None, None) != thinking_level
            });
        let state = State {
            thinking_level,
            messages: context.messages,
            model,
            tools,
            queue: Queue::new(
                config.settings.steering_mode,
                config.settings.follow_up_mode,
            ),
            run: None,
            permissions: permission::Pending::default(),
            unattended: None,
            approval: Approval::default(),
            memory: crate::gate::Memory::default(),
            editor: None,
            terminal: None,
            session,
            compacting: false,
            auto_compaction: config.compaction.enabled,
            auto_retry: config.settings.retry.enabled,
            retry_wait: None,
            usage_from,
            bash_cancel: CancellationToken::new(),
            pending_bash: Vec::new(),
            run_system_prompt: None,
            next_turn: Vec::new(),
            providers: Vec::new(),
            held_custom: Vec::new(),
        };
        let warnings = config.later;
        let route = sink.clone();
        warnings.route(move |line| route.warn(line));
        let mcp = mcp::start(config.mcp, &client, &sink, &warnings);
        let agent = Agent {
            inner: Arc::new(Inner {
                mcp,
                sink,
                warnings,
                tool_selection: config.tools,
                prompt_source: std::sync::RwLock::new(Arc::new(prompt_source.clone())),
                prompt_base: prompt_source,
                permission_rules: config.permissions,
                compaction: config.compaction,
                retry: config.settings.retry,
                sandbox: Arc::new(config.sandbox),
                scope: config.scope,
                default_thinking_level: config.settings.default_thinking_level,
                registry: config.registry,
                session_files,
                session_dir_flag: config.session_dir,
                agent_dir: config.agent_dir,
                cwd: config.cwd,
                idle_timeout: config.settings.stream_idle_timeout,
                max_turns: config.max_turns,
                client,
                bash_running: watch::Sender::new(0),
                outputs: Arc::default(),
                extensions: std::sync::OnceLock::new(),
                state: Mutex::new(state),
            }),
        };
        agent.record_settings_if_new();
        if flag_changed {
            let mut state = agent.state();
            if let Err(e) = state.session.append_thinking_level(thinking_level.as_str()) {
                agent.report_session_error(&e);
            }
        }
        agent
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug elsewhere; the state itself stays
        // consistent because every critical section is a few plain assignments.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit(&self, event: Event) {
        self.inner.sink.emit(event);
    }

    pub fn prompt(
        &self,
        text: String,
        images: Vec<ContentBlock>,
        behavior: Option<StreamingBehavior>,
    ) -> Result<Prompted, CommandError> {
        let message = user_message(self.prompt_source().expand(text), images);
        let mut state = self.state();
        self.start_or_queue(&mut state, message.into(), behavior)
    }

    /// Starts a run with `message`, or queues it for the current one as `behavior` says.
    fn start_or_queue(
        &self,
        state: &mut State,
        message: Message,
        behavior: Option<StreamingBehavior>,
    ) -> Result<Prompted, CommandError> {
        if let Some(run) = &state.run {
            if run.manual_compaction {
                return Err(CommandError::CompactionInProgress);
            }
            // An automatic compaction looks idle to the client (isStreaming is false), so a
            // plain prompt is taken as a follow-up and starts as soon as the compaction ends.
            let pushed = match (state.compacting, behavior) {
                (true, _) | (false, Some(StreamingBehavior::FollowUp)) => {
                    state.queue.push_follow_up(message)
                }
                (false, Some(StreamingBehavior::Steer)) => state.queue.push_steer(message),
                (false, None) => return Err(CommandError::NeedsStreamingBehavior),
            };
            pushed?;
            self.emit(state.queue.update_event());
            return Ok(Prompted::Queued);
        }
        if state.model.is_none() {
            return Err(CommandError::NoModel);
        }
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        state.run = Some(RunHandle {
            cancel: cancel.clone(),
            done: done_rx,
            manual_compaction: false,
        });
        Ok(Prompted::Started(PendingRun {
            agent: self.clone(),
            cancel,
            done: done_tx,
            prompt: Box::new(message),
        }))
    }

    pub fn steer(&self, text: String, images: Vec<ContentBlock>) -> Result<(), CommandError> {
        let message = user_message(self.prompt_source().expand(text), images);
        let mut state = self.state();
        state.queue.push_steer(message)?;
        self.emit(state.queue.update_event());
        Ok(())
    }

    pub fn follow_up(&self, text: String, images: Vec<ContentBlock>) -> Result<(), CommandError> {
        let message = user_message(self.prompt_source().expand(text), images);
        let mut state = self.state();
        state.queue.push_follow_up(message)?;
        self.emit(state.queue.update_event());
        Ok(())
    }

    /// Cancels the run (if any) and the user's `bash` commands, and clears the queues. The
    /// returned future resolves once the agent is idle: the run has emitted its final events
    /// and every user command has answered.
    pub fn abort(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut state = self.state();
        if state.queue.clear() {
            self.emit(state.queue.update_event());
        }
        let done = state.run.as_ref().map(|run| {
            run.cancel.cancel();
            run.done.clone()
        });
        // After the cancel, so a waiting bash call reports the abort rather than a denial.
        state.permissions.deny_all();
        drop(state);
        self.abort_bash();
        let bash_idle = self.bash_idle();
        async move {
            if let Some(mut done) = done {
                let _ = done.wait_for(|finished| *finished).await;
            }
            bash_idle.await;
        }
    }

    /// Empties both queues; answers with the texts removed, steering first.
    pub fn clear_queue(&self) -> (Vec<Arc<str>>, Vec<Arc<str>>) {
        let mut state = self.state();
        let removed = state.queue.texts();
        state.queue.clear();
        self.emit(state.queue.update_event());
        removed
    }

    /// What a shell command run now learns about the session (see
    /// [`crate::tools::bash::SessionEnv`]).
    pub(crate) fn session_env(&self) -> crate::tools::bash::SessionEnv {
        let state = self.state();
        crate::tools::bash::SessionEnv {
            session_id: state.session.id().to_owned(),
            session_file: state
                .session
                .path()
                .map(|p| p.to_string_lossy().into_owned()),
            model: state
                .model
                .as_ref()
                .map(|m| (m.provider.clone(), m.id.clone())),
            thinking_level: Some(state.thinking_level.as_str().to_owned()),
        }
    }

    pub fn wire_state(&self) -> WireState {
        let state = self.state();
        WireState {
            thinking_level: state.thinking_level,
            model: state.model.clone(),
            is_streaming: state.run.is_some() && !state.compacting,
            is_compacting: state.compacting,
            steering_mode: state.queue.steering_mode,
            follow_up_mode: state.queue.follow_up_mode,
            session_file: state
                .session
                .path()
                .map(|p| p.to_string_lossy().into_owned()),
            session_id: state.session.id().to_owned(),
            session_name: state.session.name().map(str::to_owned),
            auto_compaction_enabled: state.auto_compaction,
            message_count: state.messages.len(),
            pending_message_count: state.queue.pending(),
            pending_permission_requests: state.permissions.len(),
            sandbox: self.inner.sandbox.wire_state(),
            mcp_servers: self.mcp_servers(),
        }
    }

    pub fn messages(&self) -> Vec<Arc<Message>> {
        self.state().messages.clone()
    }

    /// The text of the most recent assistant reply that has any.
    pub fn last_assistant_text(&self) -> Option<String> {
        self.state().messages.iter().rev().find_map(|m| match &**m {
            Message::Assistant(a) => {
                let text = crate::protocol::joined_text(&a.content);
                let text = text.trim();
                (!text.is_empty()).then(|| text.to_owned())
            }
            _ => None,
        })
    }

    /// The `compact` command: summarises the older conversation now. The future resolves with
    /// the result once `compaction_end` is out; `abort` cancels it.
    pub fn compact(
        &self,
        custom_instructions: Option<String>,
    ) -> Result<
        impl Future<Output = Result<CompactionResult, CommandError>> + Send + 'static,
        CommandError,
    > {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(CommandError::Busy("compact"));
        }
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        state.run = Some(RunHandle {
            cancel: cancel.clone(),
            done: done_rx,
            manual_compaction: true,
        });
        drop(state);
        let agent = self.clone();
        Ok(async move {
            let result = compact::compact(
                &agent,
                &cancel,
                CompactionReason::Manual,
                custom_instructions.as_deref(),
                false,
            )
            .await;
            agent.end_run(&mut agent.state());
            let _ = done_tx.send(true);
            result.map_err(CommandError::from)
        })
    }

    pub fn set_auto_compaction(&self, enabled: bool) {
        self.state().auto_compaction = enabled;
    }

    /// `set_auto_retry`: applies from the next failure; a retry already waiting still happens.
    pub fn set_auto_retry(&self, enabled: bool) {
        self.state().auto_retry = enabled;
    }

    /// `abort_retry`: ends the wait before a retry, if one is pending, and resolves once that is
    /// reported. The run then settles (or goes on with queued messages); the failed reply stays
    /// out of the context, as in Pi.
    pub fn abort_retry(&self) -> impl Future<Output = ()> + Send + 'static {
        let done = self.state().retry_wait.as_ref().map(|wait| {
            wait.cancel.cancel();
            wait.done.clone()
        });
        async move {
            if let Some(mut done) = done {
                // Resolves with an error once the waiting run drops its sender.
                let _ = done.changed().await;
            }
        }
    }

    /// From now on flagged commands are decided by `policy` instead of a `permission_request`.
    pub fn set_unattended(&self, policy: Unattended) {
        self.state().unattended = Some(policy);
    }

    pub fn approval(&self) -> Approval {
        self.state().approval
    }

    /// Applies from the next call the gate sees.
    pub fn set_approval(&self, approval: Approval) {
        self.state().approval = approval;
    }

    /// From the next call on, `read` and `edit` read text through `editor`.
    pub fn set_editor_files(&self, editor: Arc<dyn crate::tools::EditorFiles>) {
        self.state().editor = Some(editor);
    }

    /// From the next call on, `bash` runs its command in the client's terminal.
    pub fn set_editor_terminal(&self, terminal: Arc<dyn crate::tools::EditorTerminal>) {
        self.state().terminal = Some(terminal);
    }

    pub fn resolve_permission(&self, request_id: u64, approved: bool) -> Result<(), CommandError> {
        self.state()
            .permissions
            .resolve(request_id, approved)
            .map(drop)
            .map_err(CommandError::Invalid)
    }

    /// Answers a request and keeps the answer for the rest of the session, for the calls the
    /// question's class covers ([`Agent::permission_scope`]); a question without one is
    /// answered once.
    pub fn resolve_permission_always(
        &self,
        request_id: u64,
        approved: bool,
    ) -> Result<(), CommandError> {
        let mut state = self.state();
        let class = state
            .permissions
            .resolve(request_id, approved)
            .map_err(CommandError::Invalid)?;
        if let Some(class) = class {
            state.memory.remember(&class, approved);
        }
        Ok(())
    }

    /// What an "always" answer to a waiting request would cover, as a person is shown it
    /// ("`rm -rf build`", "file changes under /work"); `None` when it can only be answered once
    /// (an escalation, such as leaving the sandbox) or is not waiting.
    pub fn permission_scope(&self, request_id: u64) -> Option<String> {
        self.state()
            .permissions
            .class(request_id)
            .map(crate::gate::Class::label)
    }

    /// The system prompt's parts, skills and templates now.
    fn prompt_source(&self) -> Arc<PromptSource> {
        self.inner
            .prompt_source
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Adds the skills and templates at the paths the extensions' `resources_discover`
    /// handlers named to the configured ones (in place of what an earlier answer added); the
    /// system prompt lists the skills from the next request on. Returns what was skipped,
    /// each naming its file.
    pub fn discovered(&self, skill_paths: &[PathBuf], prompt_paths: &[PathBuf]) -> Vec<String> {
        let (source, warnings) = self
            .inner
            .prompt_base
            .with_discovered(skill_paths, prompt_paths);
        *self
            .inner
            .prompt_source
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(source);
        let mut state = self.state();
        let model = state.model.clone();
        self.retool(&mut state, model.as_ref());
        warnings
    }

    /// `get_commands`: the prompt templates and skills a `/` message can name.
    /// The extensions' commands, then the prompt templates and skills, as Pi lists them.
    pub fn commands(&self) -> Vec<SlashCommand> {
        let mut commands = self.extensions().map(|e| e.commands()).unwrap_or_default();
        commands.extend(self.prompt_source().commands());
        commands
    }

    pub fn available_models(&self) -> Vec<Model> {
        self.inner.registry.models_with(&self.state().providers)
    }

    pub fn set_steering_mode(&self, mode: QueueMode) {
        self.state().queue.steering_mode = mode;
    }

    pub fn set_follow_up_mode(&self, mode: QueueMode) {
        self.state().queue.follow_up_mode = mode;
    }
}

/// For a conversation just rebuilt from a session: when it begins with a compaction summary,
/// none of its replies measured the compacted context, so sizes are estimated until the next
/// reply reports one.
fn usage_floor(messages: &[Arc<Message>]) -> usize {
    match messages.first().map(|m| &**m) {
        Some(Message::CompactionSummary(_)) => messages.len(),
        _ => 0,
    }
}

fn user_message(text: String, images: Vec<ContentBlock>) -> UserMessage {
    let mut content = Vec::with_capacity(1 + images.len());
    content.push(ContentBlock::text(text));
    content.extend(images);
    UserMessage {
        content: UserContent::Blocks(content),
        timestamp: now_ms(),
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Agent {
    /// Adds a message to the conversation and announces it. User and tool-result messages get
    /// both `message_start` and `message_end` here; an assistant message's start was emitted
    /// when its stream began. When an extension has `message_end` hooks, they get it after
    /// `message_start` and before it is stored, and may replace it, as in Pi. Returns their
    /// replacement, which is what was stored and announced.
    async fn append(&self, message: Message) -> Option<Message> {
        let mut announce_start = !matches!(message, Message::Assistant(_));
        let mut replaced = None;
        let hooks = self
            .extensions()
            .filter(|_| message_end_hooked(&message))
            .and_then(|e| e.message_end(&message));
        let message = match hooks {
            None => message,
            Some(hooks) => {
                if announce_start {
                    self.emit(Event::MessageStart {
                        message: message.clone(),
                    });
                    announce_start = false;
                }
                match self.message_end_from(&message, hooks).await {
                    Some(replacement) => {
                        replaced = Some(replacement.clone());
                        replacement
                    }
                    None => message,
                }
            }
        };
        let mut state = self.state();
        self.store(&mut state, message.clone());
        if announce_start {
            self.emit(Event::MessageStart {
                message: message.clone(),
            });
        }
        self.emit(Event::MessageEnd { message });
        replaced
    }

    /// Adds a message to the session file and the conversation, without announcing it.
    fn store(&self, state: &mut State, message: Message) {
        let shared = Arc::new(message);
        // On disk before any event announces it: a client that saw it can rely on it. A failed
        // write is announced first, and the conversation goes on in memory.
        if let Err(e) = state.session.append_message(&shared) {
            self.report_session_error(&e);
        }
        state.messages.push(shared);
    }

    /// Marks the agent idle and records the user commands that finished meanwhile.
    fn end_run(&self, state: &mut State) {
        state.run = None;
        state.run_system_prompt = None;
        for message in std::mem::take(&mut state.pending_bash) {
            self.store(state, message);
        }
        self.flush_held_custom(state);
    }

    /// Tells the client that the session file no longer holds everything it was shown.
    fn report_session_error(&self, error: &SessionError) {
        tracing::error!("{error}");
        self.emit(Event::SessionError {
            error: error.to_string(),
        });
    }

    /// Takes queued messages with `take`; the turn that delivers them reports the queue change
    /// ([`Agent::report_queue`]), after its `turn_start`, as Pi does.
    fn take_queued(&self, take: impl FnOnce(&mut Queue) -> Vec<Message>) -> Vec<Message> {
        take(&mut self.state().queue)
    }

    fn report_queue(&self) {
        let state = self.state();
        self.emit(state.queue.update_event());
    }

    /// Ends the run. Clearing `run` and emitting the last two events under one lock means a
    /// client that reacts to `agent_end` with a new `prompt` finds the agent idle, and that
    /// prompt's events can only follow this run's `agent_settled`.
    /// `retry_end` (the `auto_retry_end` of retries that failed) goes between the two, as in Pi.
    fn finish_run(&self, aborted: bool, retry_end: Option<Event>) {
        let mut state = self.state();
        self.end_run(&mut state);
        self.emit(Event::AgentEnd {
            messages: state.messages.clone(),
            will_retry: false,
        });
        if let Some(event) = retry_end {
            self.emit(event);
        }
        self.emit(Event::AgentSettled { aborted });
    }

    /// `agent_end` for a run that goes on to compact or retry before it settles.
    fn emit_agent_end(&self, will_retry: bool) {
        let state = self.state();
        self.emit(Event::AgentEnd {
            messages: state.messages.clone(),
            will_retry,
        });
    }

    /// Ends a run whose `agent_end` was already emitted.
    fn settle(&self, aborted: bool) {
        let mut state = self.state();
        self.end_run(&mut state);
        self.emit(Event::AgentSettled { aborted });
    }

    fn auto_compaction_enabled(&self) -> bool {
        self.state().auto_compaction && self.inner.compaction.enabled
    }

    /// Whether the context (the last reported usage plus estimates after it) has passed
    /// `contextWindow - reserveTokens` and a compaction would have something to cut.
    fn needs_compaction(&self) -> bool {
        let state = self.state();
        let Some(model) = &state.model else {
            return false;
        };
        state.auto_compaction
            && compaction::should_compact(
                state.context_tokens(),
                model.context_window,
                &self.inner.compaction,
            )
            && compact::cut_point(
                state.session.context_entries(),
                &self.inner.compaction,
                model.context_window,
            )
            .is_some()
    }
}

#[cfg(test)]
mod tests;
