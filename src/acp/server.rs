//! The sessions one editor has open, by ACP session id (the session file's id, so a listed
//! session can be loaded by it), and the requests that act on them. The sessions themselves
//! are the runtime's live sessions; what is kept here is this connection's attachment to each
//! (its sink, its follow-up task, whether its prompt was cancelled). Requests that wait — a
//! prompt's run, a permission question — do so in tasks of their own, so the connection keeps
//! reading (a `session/cancel` must reach a running prompt).

use super::Outbox;
use super::convert;
use super::sink::{AcpSink, FollowUp};
use crate::agent::{Agent, CommandError, Input, Live, Prepared, Prompted, Runtime, Subscription};
use crate::config::{Resume, SessionSpec};
use crate::gate::Approval;
use crate::mcp::{ClientServer, ClientTransport};
use crate::protocol::{ContentBlock, Message, ThinkingLevel};
use crate::sandbox::Handoff;
use crate::tools::{EditorFiles, EditorTerminal, TerminalExit};
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

const MODEL: &str = "model";
const THOUGHT_LEVEL: &str = "thought_level";
const MODE: &str = "mode";

/// What a process that serves ACP connections beside other clients (`nova serve`) asks of
/// each connection: where sessions may be opened, and to hear which sessions it holds.
pub trait Host: Send + Sync {
    /// The directory a session may be opened in (canonical), or why not.
    fn admit(&self, cwd: &Path) -> Result<PathBuf, String>;
    /// Whether a stored session in `cwd` may be listed.
    fn lists(&self, cwd: &Path) -> bool;
    /// The connection opened (or loaded) the live session `id`.
    fn opened(&self, id: &str);
    /// The connection let go of the live session `id` (closed it, or it was replaced).
    fn closed(&self, id: &str);
}

pub struct Server {
    runtime: Arc<Runtime>,
    /// `None` on stdio, where the connection is the process's only client.
    host: Option<Arc<dyn Host>>,
    out: Outbox,
    /// Whether the client offered to read files for nova (`initialize`).
    client_files: AtomicBool,
    /// Whether the client offered terminals to run bash in (`initialize`).
    client_terminal: AtomicBool,
    /// Whether the client offered forms (`elicitation/create`), for extensions' text dialogs.
    client_forms: AtomicBool,
    attached: Mutex<HashMap<acp::SessionId, Arc<Open>>>,
}

/// This connection's attachment to one live session.
struct Open {
    live: Arc<Live>,
    agent: Agent,
    /// The sink's place among the session's subscribers.
    _subscription: Subscription,
    sink: Arc<AcpSink>,
    /// Set by `session/cancel` while a prompt runs: its answer is `cancelled`.
    cancelled: AtomicBool,
    /// The running extension command's cancellation, which `session/cancel` triggers.
    command: Mutex<Option<CancellationToken>>,
    /// The task that asks permission questions and reports usage.
    follow: tokio::task::JoinHandle<()>,
    /// The session's extension host, once started; dropping it (with the attachment) stops it.
    extensions: Mutex<Option<crate::exthost::Host>>,
}

impl Open {
    fn running_command(&self) -> std::sync::MutexGuard<'_, Option<CancellationToken>> {
        self.command.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A session just opened, and what its extension host needs when it has extensions.
struct Launched {
    id: acp::SessionId,
    open: Arc<Open>,
    extensions: Option<crate::exthost::Spec>,
}

impl Server {
    pub fn new(runtime: Arc<Runtime>, host: Option<Arc<dyn Host>>, out: Outbox) -> Server {
        Server {
            runtime,
            host,
            out,
            client_files: AtomicBool::new(false),
            client_terminal: AtomicBool::new(false),
            client_forms: AtomicBool::new(false),
            attached: Mutex::default(),
        }
    }

    fn attached(&self) -> std::sync::MutexGuard<'_, HashMap<acp::SessionId, Arc<Open>>> {
        self.attached.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn open(&self, id: &acp::SessionId) -> Result<Arc<Open>, Error> {
        self.attached()
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_session(id))
    }

    pub fn initialize(&self, req: acp::InitializeRequest) -> acp::InitializeResponse {
        tracing::debug!("initialize from {:?}", req.client_info);
        let fs = &req.client_capabilities.fs;
        self.client_files.store(fs.read_text_file, Ordering::SeqCst);
        self.client_terminal
            .store(req.client_capabilities.terminal, Ordering::SeqCst);
        let forms = (req.client_capabilities.elicitation.as_ref())
            .is_some_and(acp::ElicitationCapabilities::supports_form);
        self.client_forms.store(forms, Ordering::SeqCst);
        // Version 1 is the one nova speaks; a client asking for a later one gets 1 and decides.
        let version = agent_client_protocol::schema::ProtocolVersion::V1;
        let capabilities = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                acp::PromptCapabilities::new()
                    .image(true)
                    .embedded_context(true),
            )
            .mcp_capabilities(acp::McpCapabilities::new().http(true))
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .fork(acp::SessionForkCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new()),
            );
        // No auth methods: local models need none, and keys come from the environment,
        // auth.json and models.json, as in every mode.
        acp::InitializeResponse::new(version)
            .agent_capabilities(capabilities)
            .agent_info(acp::Implementation::new("nova", env!("CARGO_PKG_VERSION")))
    }

    pub fn authenticate(
        &self,
        _req: acp::AuthenticateRequest,
    ) -> Result<acp::AuthenticateResponse, Error> {
        Err(Error::invalid_params().data(json!(
            "nova offers no authentication methods: keys come from the environment, auth.json or models.json"
        )))
    }

    /// Opens a session and starts it with an ACP sink. Runs in the dispatch loop: preparing
    /// reads only small files, and the answer must precede the session's first notification.
    fn start(&self, spec: SessionSpec, cx: &ConnectionTo<Client>) -> Result<Launched, Error> {
        // Loading a session replaces its live agent (a file has one writer): another client's
        // session is not this connection's to take over.
        if let Resume::Id(id) = &spec.resume
            && self.runtime.live().find(id).is_some()
            && !self
                .attached()
                .contains_key(&acp::SessionId::new(id.as_str()))
        {
            return Err(Error::invalid_request().data(json!(format!(
                "session {id} is open in another client of this server; close it there first"
            ))));
        }
        self.launch(self.prepare(spec)?, cx)
    }

    /// Opens a session for `spec` with `launch` and answers the request with `response`
    /// ([`Self::answer_opened`]), once the user's extensions have voted on the project's trust
    /// (`project_trust`) when a vote is due: from a task then, since their host takes a while
    /// to load, and the dispatch loop must not wait for it. The vote runs in the directory the
    /// session will (a served one admitted first).
    fn open_voted<R>(
        self: &Arc<Self>,
        mut spec: SessionSpec,
        responder: Responder<R>,
        cx: ConnectionTo<Client>,
        launch: impl FnOnce(&Self, SessionSpec, &ConnectionTo<Client>) -> Result<Launched, Error>
        + Send
        + 'static,
        response: impl FnOnce(&acp::SessionId, &Open) -> R + Send + 'static,
    ) -> Result<(), Error>
    where
        R: agent_client_protocol::JsonRpcResponse + Send + 'static,
    {
        let opened = move |server: &Arc<Self>, spec, cx: ConnectionTo<Client>| match launch(
            server, spec, &cx,
        ) {
            Ok(launched) => server.answer_opened(launched, responder, &cx, response),
            Err(e) => responder.respond_with_error(e),
        };
        let admitted = match &self.host {
            Some(host) => host.admit(&spec.cwd).ok(),
            None => Some(spec.cwd.clone()),
        };
        // A directory the server does not admit gets no vote: `prepare` refuses it.
        let Some(cwd) = admitted else {
            return opened(self, spec, cx);
        };
        spec.cwd = cwd;
        if self.runtime.trust_voters(&spec).is_empty() {
            return opened(self, spec, cx);
        }
        let server = self.clone();
        cx.clone().spawn(async move {
            let runtime = &server.runtime;
            crate::frontend::vote_on_trust(
                runtime,
                &mut spec,
                crate::exthost::Mode::Rpc,
                crate::frontend::note,
            )
            .await;
            opened(&server, spec, cx)
        })
    }

    fn prepare(&self, mut spec: SessionSpec) -> Result<Prepared, Error> {
        if let Some(host) = &self.host {
            spec.cwd = host
                .admit(&spec.cwd)
                .map_err(|e| Error::invalid_params().data(json!(e)))?;
        }
        self.runtime
            .prepare(&spec)
            .map_err(|e| Error::invalid_params().data(json!(e.to_string())))
    }

    fn launch(&self, prepared: Prepared, cx: &ConnectionTo<Client>) -> Result<Launched, Error> {
        for warning in &prepared.warnings {
            crate::frontend::note(&format!("warning: {warning}"));
        }
        // ctx.mode is Pi's "rpc": dialogs reach a client, the terminal's UI does not.
        let extensions = crate::frontend::extension_spec(&prepared, crate::exthost::Mode::Rpc);
        let id = acp::SessionId::new(prepared.header().id.clone());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Arc::new(AcpSink::new(
            id.clone(),
            cx.clone(),
            prepared.cwd().to_path_buf(),
            self.out.clone(),
            tx,
        ));
        let (live, subscription) = self.runtime.live().open(prepared, sink.clone());
        if let Some(host) = &self.host {
            host.opened(live.id());
        }
        let agent = live.agent().clone();
        if self.client_files.load(Ordering::SeqCst) {
            agent.set_editor_files(Arc::new(ClientFiles {
                cx: cx.clone(),
                session_id: id.clone(),
            }));
        }
        if self.client_terminal.load(Ordering::SeqCst) {
            agent.set_editor_terminal(Arc::new(ClientTerminal {
                cx: cx.clone(),
                session_id: id.clone(),
                sink: sink.clone(),
            }));
        }
        let follow = tokio::spawn(follow_up(
            agent.clone(),
            sink.clone(),
            cx.clone(),
            id.clone(),
            rx,
            self.client_forms.load(Ordering::SeqCst),
        ));
        let open = Arc::new(Open {
            live,
            agent,
            _subscription: subscription,
            sink,
            cancelled: AtomicBool::new(false),
            command: Mutex::default(),
            follow,
            extensions: Mutex::default(),
        });
        // The runtime has stopped the session this one replaced; its follow-up task ends here.
        if let Some(old) = self.attached().insert(id.clone(), open.clone()) {
            old.follow.abort();
            if let Some(host) = &self.host {
                host.closed(&id.0);
            }
        }
        Ok(Launched {
            id,
            open,
            extensions,
        })
    }

    /// Answers the request that opened `launched` with what `response` makes of it, then
    /// announces its commands. A session with extensions is answered once they have loaded
    /// (from a task: loading takes a while), so that its commands are announced and a first
    /// `/command` finds them; a host that cannot start fails the request and closes the
    /// session.
    fn answer_opened<R>(
        self: &Arc<Self>,
        launched: Launched,
        responder: Responder<R>,
        cx: &ConnectionTo<Client>,
        response: impl FnOnce(&acp::SessionId, &Open) -> R + Send + 'static,
    ) -> Result<(), Error>
    where
        R: agent_client_protocol::JsonRpcResponse + Send + 'static,
    {
        let Launched {
            id,
            open,
            extensions,
        } = launched;
        let Some(spec) = extensions else {
            responder.respond(response(&id, &open))?;
            announce_commands(&open);
            return Ok(());
        };
        let server = self.clone();
        cx.spawn(async move {
            match crate::frontend::start_host(spec, &open.live).await {
                Ok(host) => {
                    let changed = host.commands_changed();
                    *open.extensions.lock().unwrap_or_else(|p| p.into_inner()) = Some(host);
                    responder.respond(response(&id, &open))?;
                    announce_commands(&open);
                    tokio::spawn(reannounce_commands(changed, Arc::downgrade(&open)));
                    Ok(())
                }
                Err(e) => {
                    crate::frontend::note(&e.to_string());
                    let ours = {
                        let mut attached = server.attached();
                        let ours = attached.get(&id).is_some_and(|o| Arc::ptr_eq(o, &open));
                        if ours {
                            attached.remove(&id);
                        }
                        ours
                    };
                    if ours {
                        open.follow.abort();
                        server.let_go(&open).await;
                    }
                    responder.respond_with_error(Error::internal_error().data(json!(e.to_string())))
                }
            }
        })
    }

    pub fn new_session(
        self: &Arc<Self>,
        req: acp::NewSessionRequest,
        responder: Responder<acp::NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let spec = match spec(&req.cwd, Resume::New, &req.mcp_servers) {
            Ok(s) => s,
            Err(e) => return responder.respond_with_error(e),
        };
        self.open_voted(spec, responder, cx, Self::start, |id, open| {
            acp::NewSessionResponse::new(id.clone())
                .modes(modes(&open.agent))
                .config_options(config_options(&open.agent))
        })
    }

    pub fn load_session(
        self: &Arc<Self>,
        req: acp::LoadSessionRequest,
        responder: Responder<acp::LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let resume = Resume::Id(req.session_id.0.to_string());
        let spec = match spec(&req.cwd, resume, &req.mcp_servers) {
            Ok(s) => s,
            Err(e) => return responder.respond_with_error(e),
        };
        self.open_voted(spec, responder, cx, Self::start, |_, open| {
            replay(open);
            acp::LoadSessionResponse::new()
                .modes(modes(&open.agent))
                .config_options(config_options(&open.agent))
        })
    }

    /// A new session holding a stored one's whole conversation, in a file of its own; the
    /// stored one stays as it was.
    pub fn fork_session(
        self: &Arc<Self>,
        req: acp::ForkSessionRequest,
        responder: Responder<acp::ForkSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let resume = Resume::Id(req.session_id.0.to_string());
        let spec = match spec(&req.cwd, resume, &req.mcp_servers) {
            Ok(s) => s,
            Err(e) => return responder.respond_with_error(e),
        };
        let fork = |server: &Self, spec, cx: &_| {
            let mut prepared = server.prepare(spec)?;
            prepared
                .clone_session()
                .map_err(|e| Error::internal_error().data(json!(e.to_string())))?;
            server.launch(prepared, cx)
        };
        self.open_voted(spec, responder, cx, fork, |id, open| {
            acp::ForkSessionResponse::new(id.clone())
                .modes(modes(&open.agent))
                .config_options(config_options(&open.agent))
        })
    }

    pub fn resume_session(
        self: &Arc<Self>,
        req: acp::ResumeSessionRequest,
        responder: Responder<acp::ResumeSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let resume = Resume::Id(req.session_id.0.to_string());
        let spec = match spec(&req.cwd, resume, &req.mcp_servers) {
            Ok(s) => s,
            Err(e) => return responder.respond_with_error(e),
        };
        self.open_voted(spec, responder, cx, Self::start, |_, open| {
            acp::ResumeSessionResponse::new()
                .modes(modes(&open.agent))
                .config_options(config_options(&open.agent))
        })
    }

    pub fn list_sessions(
        self: &Arc<Self>,
        req: acp::ListSessionsRequest,
        responder: Responder<acp::ListSessionsResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let after = match req.cursor.as_deref().map(Cursor::decode) {
            None => None,
            Some(Some(cursor)) => Some(cursor),
            Some(None) => {
                return responder.respond_with_error(Error::invalid_params().data(json!(
                    "cursor: not one nova gave (pass a nextCursor from session/list as it came)"
                )));
            }
        };
        let server = self.clone();
        cx.spawn(async move {
            let mut listed = server.runtime.list_sessions(req.cwd).await;
            if let Some(host) = &server.host {
                listed.retain(|s| host.lists(Path::new(&s.cwd)));
            }
            // The listing is newest first, then by path: a page starts after the cursor's
            // session in that order, so sessions written meanwhile move to the front instead
            // of shifting the pages.
            let rest: Vec<_> = listed
                .into_iter()
                .filter(|s| after.as_ref().is_none_or(|c| c.precedes(s)))
                .collect();
            let next = (rest.len() > PAGE).then(|| Cursor::of(&rest[PAGE - 1]).encode());
            let sessions = rest
                .into_iter()
                .take(PAGE)
                .map(|s| {
                    let title = s.name.clone().unwrap_or(s.first_message.clone());
                    acp::SessionInfo::new(s.id, s.cwd)
                        .title(Some(title).filter(|t| !t.is_empty()))
                        .updated_at(s.modified)
                })
                .collect();
            responder.respond(acp::ListSessionsResponse::new(sessions).next_cursor(next))
        })
    }

    pub fn close_session(
        self: &Arc<Self>,
        req: acp::CloseSessionRequest,
        responder: Responder<acp::CloseSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let Some(open) = self.attached().remove(&req.session_id) else {
            return responder.respond_with_error(unknown_session(&req.session_id));
        };
        open.follow.abort();
        let server = self.clone();
        cx.spawn(async move {
            server.let_go(&open).await;
            // Attached until the aborted run's last events have gone out.
            drop(open);
            responder.respond(acp::CloseSessionResponse::new())
        })
    }

    pub fn prompt(
        &self,
        req: acp::PromptRequest,
        responder: Responder<acp::PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let open = match self.open(&req.session_id) {
            Ok(o) => o,
            Err(e) => return responder.respond_with_error(e),
        };
        cx.spawn(async move {
            // Images are decoded and shrunk off the runtime thread.
            let input = tokio::task::spawn_blocking(move || convert::input(req.prompt))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r);
            let input = match input {
                Ok(i) => i,
                Err(e) => {
                    return responder.respond_with_error(Error::invalid_params().data(json!(e)));
                }
            };
            // As in RPC mode: an extension command runs to its end instead of a run, and the
            // extensions' input hooks see what is prompted.
            let cancel = CancellationToken::new();
            if let Some(handler) = open.agent.extension_command(&input.text, cancel.clone()) {
                *open.running_command() = Some(cancel.clone());
                handler.await;
                open.running_command().take();
                let stop = match cancel.is_cancelled() {
                    true => acp::StopReason::Cancelled,
                    false => acp::StopReason::EndTurn,
                };
                return responder.respond(acp::PromptResponse::new(stop));
            }
            let text = match open.agent.review_input(&input.text, None) {
                None => input.text,
                Some(review) => match review.await {
                    Input::Handled => {
                        return responder
                            .respond(acp::PromptResponse::new(acp::StopReason::EndTurn));
                    }
                    Input::Transform(text) => text,
                    Input::Continue => input.text,
                },
            };
            let run = match open.agent.prompt(text, input.images, None) {
                Ok(Prompted::Started(run)) => run,
                Ok(Prompted::Queued) | Err(CommandError::NeedsStreamingBehavior) => {
                    return responder.respond_with_error(Error::invalid_request().data(json!(
                        "this session is still answering a prompt; cancel it or wait for its answer"
                    )));
                }
                Err(e) => {
                    return responder
                        .respond_with_error(Error::invalid_request().data(json!(e.to_string())));
                }
            };
            open.cancelled.store(false, Ordering::SeqCst);
            run.run().await;
            let messages = open.agent.messages();
            let last = messages.iter().rev().find_map(|m| match &**m {
                Message::Assistant(a) => Some(a),
                _ => None,
            });
            let cancelled = open.cancelled.swap(false, Ordering::SeqCst);
            match convert::stop_reason(last, cancelled) {
                Ok(stop) => responder.respond(acp::PromptResponse::new(stop)),
                Err(message) => {
                    responder.respond_with_error(Error::internal_error().data(json!(message)))
                }
            }
        })
    }

    /// `session/cancel`: the run ends as RPC `abort` ends it, and its prompt answers
    /// `cancelled`; a permission question still open is answered with a denial. A running
    /// extension command's `ctx.signal` is aborted and its open dialogs get their defaults.
    pub fn cancel(&self, id: &acp::SessionId) {
        let Ok(open) = self.open(id) else {
            tracing::debug!("session/cancel for unknown session {id}");
            return;
        };
        if let Some(command) = open.running_command().as_ref() {
            command.cancel();
        }
        open.cancelled.store(true, Ordering::SeqCst);
        tokio::spawn(open.agent.abort());
    }

    pub fn set_config_option(
        &self,
        req: acp::SetSessionConfigOptionRequest,
    ) -> Result<acp::SetSessionConfigOptionResponse, Error> {
        let open = self.open(&req.session_id)?;
        let value = match &req.value {
            acp::SessionConfigOptionValue::ValueId { value } => value.0.to_string(),
            other => {
                return Err(Error::invalid_params().data(json!(format!(
                    "{}: expected one of the option's values, got {other:?}",
                    req.config_id
                ))));
            }
        };
        match &*req.config_id.0 {
            MODEL => {
                let (provider, id) = value.split_once('/').ok_or_else(|| {
                    Error::invalid_params()
                        .data(json!(format!("model: {value:?} is not provider/id")))
                })?;
                open.agent
                    .set_model(provider, id)
                    .map_err(|e| Error::invalid_params().data(json!(e.to_string())))?;
            }
            THOUGHT_LEVEL => {
                let level = ThinkingLevel::parse(&value).ok_or_else(|| {
                    Error::invalid_params()
                        .data(json!(format!("thought_level: unknown level {value:?}")))
                })?;
                open.agent.set_thinking_level(level);
            }
            MODE => set_approval(&open, &value)?,
            other => {
                return Err(Error::invalid_params().data(json!(format!(
                    "unknown config option {other:?} (nova has {MODEL}, {THOUGHT_LEVEL} and {MODE})"
                ))));
            }
        }
        Ok(acp::SetSessionConfigOptionResponse::new(config_options(
            &open.agent,
        )))
    }

    /// `session/set_mode`, for clients that still use modes: the approval mode, as the `mode`
    /// config option sets it.
    pub fn set_mode(
        &self,
        req: acp::SetSessionModeRequest,
    ) -> Result<acp::SetSessionModeResponse, Error> {
        let open = self.open(&req.session_id)?;
        set_approval(&open, &req.mode_id.0)?;
        open.sink.update(acp::SessionUpdate::ConfigOptionUpdate(
            acp::ConfigOptionUpdate::new(config_options(&open.agent)),
        ));
        Ok(acp::SetSessionModeResponse::new())
    }

    /// Closes every session this connection holds: aborts its run and stops its MCP servers.
    /// Their files stay, to be loaded again.
    pub async fn shutdown(&self) {
        let attached: Vec<Arc<Open>> = self.attached().drain().map(|(_, o)| o).collect();
        for open in &attached {
            open.follow.abort();
        }
        // Attached until the aborted runs' last events have gone out.
        for open in &attached {
            self.let_go(open).await;
        }
        drop(attached);
    }

    /// Closes the session `open` holds, unless another connection has since replaced it.
    async fn let_go(&self, open: &Open) {
        self.runtime.live().close_exactly(&open.live).await;
        if let Some(host) = &self.host {
            host.closed(open.live.id());
        }
    }
}

/// The editor's files (`fs/read_text_file`), for `read` and `edit`; nova writes files itself
/// (see [`EditorFiles`]).
struct ClientFiles {
    cx: ConnectionTo<Client>,
    session_id: acp::SessionId,
}

impl EditorFiles for ClientFiles {
    fn read(&self, path: &Path) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send>> {
        let asked = self
            .cx
            .send_request(acp::ReadTextFileRequest::new(self.session_id.clone(), path))
            .block_task();
        Box::pin(async move { asked.await.map(|r| r.content).map_err(|e| e.to_string()) })
    }
}

/// Sessions per `session/list` answer.
const PAGE: usize = 50;

/// Where a `session/list` page ends: its last session's place in the listing's order.
/// Opaque to the client (base64 of the modification time and the file's path).
struct Cursor {
    modified: String,
    path: String,
}

impl Cursor {
    fn of(s: &crate::protocol::SessionListing) -> Cursor {
        Cursor {
            modified: s.modified.clone(),
            path: s.path.clone(),
        }
    }

    fn encode(&self) -> String {
        use base64::Engine as _;
        let raw = format!("{}\n{}", self.modified, self.path);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    fn decode(text: &str) -> Option<Cursor> {
        use base64::Engine as _;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .ok()?;
        let raw = String::from_utf8(raw).ok()?;
        let (modified, path) = raw.split_once('\n')?;
        Some(Cursor {
            modified: modified.to_owned(),
            path: path.to_owned(),
        })
    }

    /// Whether `s` comes after this cursor (newest first, then by path).
    fn precedes(&self, s: &crate::protocol::SessionListing) -> bool {
        (s.modified.as_str(), &self.path) < (self.modified.as_str(), &s.path)
    }
}

/// The editor's terminals (`terminal/*`), for `bash` (see [`crate::tools::terminal`]).
struct ClientTerminal {
    cx: ConnectionTo<Client>,
    session_id: acp::SessionId,
    sink: Arc<AcpSink>,
}

type Answer<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send>>;

impl ClientTerminal {
    fn ask<Req, T>(
        &self,
        req: Req,
        then: impl FnOnce(Req::Response) -> T + Send + 'static,
    ) -> Answer<T>
    where
        Req: agent_client_protocol::JsonRpcRequest<Response: Send> + Send + 'static,
    {
        let asked = self.cx.send_request(req).block_task();
        Box::pin(async move { asked.await.map(then).map_err(|e| e.to_string()) })
    }

    fn id(&self, terminal: &str) -> (acp::SessionId, acp::TerminalId) {
        (self.session_id.clone(), acp::TerminalId::new(terminal))
    }
}

impl EditorTerminal for ClientTerminal {
    fn create(
        &self,
        call_id: &str,
        command: Handoff,
        cwd: &Path,
        output_limit: u64,
    ) -> Answer<String> {
        let env = command
            .env
            .into_iter()
            .map(|(name, value)| acp::EnvVariable::new(name, value))
            .collect();
        let req = acp::CreateTerminalRequest::new(self.session_id.clone(), command.program)
            .args(command.args)
            .env(env)
            .cwd(cwd.to_path_buf())
            .output_byte_limit(output_limit);
        let sink = self.sink.clone();
        let call_id = call_id.to_owned();
        self.ask(req, move |created| {
            let id = created.terminal_id.0.to_string();
            sink.terminal_started(&call_id, created.terminal_id);
            id
        })
    }

    fn wait_for_exit(&self, terminal: &str) -> Answer<TerminalExit> {
        let (session, id) = self.id(terminal);
        self.ask(acp::WaitForTerminalExitRequest::new(session, id), |r| {
            TerminalExit {
                code: r.exit_status.exit_code,
                signal: r.exit_status.signal,
            }
        })
    }

    fn output(&self, terminal: &str) -> Answer<String> {
        let (session, id) = self.id(terminal);
        self.ask(acp::TerminalOutputRequest::new(session, id), |r| r.output)
    }

    fn kill(&self, terminal: &str) -> Answer<()> {
        let (session, id) = self.id(terminal);
        self.ask(acp::KillTerminalRequest::new(session, id), |_| ())
    }

    fn release(&self, terminal: &str) -> Answer<()> {
        let (session, id) = self.id(terminal);
        self.ask(acp::ReleaseTerminalRequest::new(session, id), |_| ())
    }
}

/// Sets the approval mode and tells the client through `current_mode_update`.
fn set_approval(open: &Open, value: &str) -> Result<(), Error> {
    let approval = Approval::parse(value).ok_or_else(|| {
        Error::invalid_params().data(json!(format!(
            "mode: unknown approval mode {value:?} (ask, auto or read-only)"
        )))
    })?;
    open.agent.set_approval(approval);
    open.sink.update(acp::SessionUpdate::CurrentModeUpdate(
        acp::CurrentModeUpdate::new(approval.as_str()),
    ));
    Ok(())
}

/// What each approval mode means, as an editor shows it.
fn approval_description(approval: Approval) -> &'static str {
    match approval {
        Approval::Ask => "Ask before every command and every file change",
        Approval::Auto => "Run within the sandbox; ask for flagged commands and writes outside it",
        Approval::ReadOnly => "Read and search only: no commands, no file changes",
    }
}

fn approval_name(approval: Approval) -> &'static str {
    match approval {
        Approval::Ask => "Ask",
        Approval::Auto => "Auto",
        Approval::ReadOnly => "Read-only",
    }
}

/// The approval modes as ACP session modes.
fn modes(agent: &Agent) -> acp::SessionModeState {
    let available = Approval::ALL
        .into_iter()
        .map(|a| {
            acp::SessionMode::new(a.as_str(), approval_name(a))
                .description(approval_description(a).to_owned())
        })
        .collect();
    acp::SessionModeState::new(agent.approval().as_str(), available)
}

fn unknown_session(id: &acp::SessionId) -> Error {
    Error::new(
        acp::ErrorCode::ResourceNotFound,
        format!("unknown session {id}: open it with session/new or session/load first"),
    )
    .data(json!({ "sessionId": id }))
}

/// The session a request describes; its cwd must be absolute, as ACP requires.
fn spec(cwd: &Path, resume: Resume, servers: &[acp::McpServer]) -> Result<SessionSpec, Error> {
    if !cwd.is_absolute() {
        return Err(Error::invalid_params().data(json!(format!(
            "cwd must be an absolute path, got {}",
            cwd.display()
        ))));
    }
    let mcp_servers = servers
        .iter()
        .map(client_server)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SessionSpec {
        cwd: PathBuf::from(cwd),
        resume,
        model: None,
        mcp_servers,
        name: None,
        trust_vote: None,
    })
}

fn client_server(server: &acp::McpServer) -> Result<ClientServer, Error> {
    match server {
        acp::McpServer::Stdio(s) => Ok(ClientServer {
            name: s.name.clone(),
            transport: ClientTransport::Stdio {
                command: s.command.to_string_lossy().into_owned(),
                args: s.args.clone(),
                env: s
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect(),
            },
        }),
        acp::McpServer::Http(s) => Ok(ClientServer {
            name: s.name.clone(),
            transport: ClientTransport::Http {
                url: s.url.clone(),
                headers: s
                    .headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            },
        }),
        acp::McpServer::Sse(s) => Err(Error::invalid_params().data(json!(format!(
            "MCP server {:?}: nova speaks stdio and streamable HTTP, not SSE",
            s.name
        )))),
        _ => Err(Error::invalid_params().data(json!("an MCP server of an unknown transport"))),
    }
}

/// The model (category `model`, which editors build their model picker from) and the thinking
/// level, as they stand.
fn config_options(agent: &Agent) -> Vec<acp::SessionConfigOption> {
    let state = agent.wire_state();
    let mut options = Vec::new();
    let models: Vec<acp::SessionConfigSelectOption> = agent
        .available_models()
        .into_iter()
        .map(|m| acp::SessionConfigSelectOption::new(format!("{}/{}", m.provider, m.id), m.name))
        .collect();
    if let Some(model) = &state.model {
        let current = format!("{}/{}", model.provider, model.id);
        options.push(
            acp::SessionConfigOption::select(MODEL, "Model", current, models)
                .category(acp::SessionConfigOptionCategory::Model),
        );
    }
    let levels: Vec<acp::SessionConfigSelectOption> = agent
        .available_thinking_levels()
        .into_iter()
        .map(|l| acp::SessionConfigSelectOption::new(l.as_str(), l.as_str()))
        .collect();
    options.push(
        acp::SessionConfigOption::select(
            THOUGHT_LEVEL,
            "Thinking",
            state.thinking_level.as_str(),
            levels,
        )
        .category(acp::SessionConfigOptionCategory::ThoughtLevel),
    );
    let approvals: Vec<acp::SessionConfigSelectOption> = Approval::ALL
        .into_iter()
        .map(|a| {
            acp::SessionConfigSelectOption::new(a.as_str(), approval_name(a))
                .description(approval_description(a).to_owned())
        })
        .collect();
    options.push(
        acp::SessionConfigOption::select(MODE, "Approval", agent.approval().as_str(), approvals)
            .category(acp::SessionConfigOptionCategory::Mode),
    );
    options
}

/// The extensions' commands, skills and prompt templates a `/` message can name.
fn announce_commands(open: &Open) {
    let commands = open
        .agent
        .commands()
        .into_iter()
        .map(|c| {
            let description = c.description.unwrap_or_default();
            acp::AvailableCommand::new(c.name, description)
        })
        .collect();
    open.sink
        .update(acp::SessionUpdate::AvailableCommandsUpdate(
            acp::AvailableCommandsUpdate::new(commands),
        ));
}

/// Announces the commands again whenever the extensions' change (a list answered from the
/// last load's record, then loaded afresh; a command registered later), while the session is
/// open: the task holds it only weakly, since it holds the host that tells.
async fn reannounce_commands(
    mut changed: tokio::sync::watch::Receiver<()>,
    open: std::sync::Weak<Open>,
) {
    while changed.changed().await.is_ok() {
        let Some(open) = open.upgrade() else { return };
        announce_commands(&open);
    }
}

/// The stored conversation as the updates that would have shown it: the user's messages,
/// replies and thoughts, and each call with its result.
fn replay(open: &Open) {
    let sink = &open.sink;
    for message in open.agent.messages() {
        match &*message {
            Message::User(user) => {
                for block in user.content.blocks() {
                    if let Some(block) = user_block(block) {
                        sink.update(acp::SessionUpdate::UserMessageChunk(
                            acp::ContentChunk::new(block),
                        ));
                    }
                }
            }
            Message::Assistant(reply) => {
                for block in &reply.content {
                    match block {
                        ContentBlock::Text { text, .. } => {
                            sink.update(acp::SessionUpdate::AgentMessageChunk(
                                acp::ContentChunk::new(text.clone().into()),
                            ))
                        }
                        ContentBlock::Thinking { thinking, .. } => {
                            sink.update(acp::SessionUpdate::AgentThoughtChunk(
                                acp::ContentChunk::new(thinking.clone().into()),
                            ))
                        }
                        ContentBlock::ToolCall {
                            id,
                            name,
                            arguments,
                            ..
                        } => sink.call_started(id, name, arguments, acp::ToolCallStatus::Pending),
                        ContentBlock::Image { .. } => {}
                    }
                }
            }
            Message::ToolResult(result) => {
                let payload = crate::protocol::ToolResultPayload {
                    content: result.content.clone(),
                    details: None,
                    structured_content: None,
                };
                sink.call_ended(
                    &result.tool_call_id,
                    &result.tool_name,
                    &payload,
                    result.is_error,
                );
            }
            Message::CompactionSummary(_) | Message::BashExecution(_) | Message::Custom(_) => {}
        }
    }
}

fn user_block(block: ContentBlock) -> Option<acp::ContentBlock> {
    match block {
        ContentBlock::Text { text, .. } => Some(text.into()),
        ContentBlock::Image { data, mime_type } => Some(acp::ContentBlock::Image(
            acp::ImageContent::new(data, mime_type),
        )),
        _ => None,
    }
}

/// Asks the client the permission questions and reports usage, for one session, until it is
/// closed.
async fn follow_up(
    agent: Agent,
    sink: Arc<AcpSink>,
    cx: ConnectionTo<Client>,
    id: acp::SessionId,
    mut rx: UnboundedReceiver<FollowUp>,
    forms: bool,
) {
    while let Some(next) = rx.recv().await {
        match next {
            FollowUp::Usage => {
                let stats = agent.session_stats();
                // The size is unknown right after a compaction; the next reply reports it.
                if let Some(usage) = stats.context_usage
                    && let Some(tokens) = usage.tokens
                {
                    sink.update(acp::SessionUpdate::UsageUpdate(
                        acp::UsageUpdate::new(tokens, usage.context_window)
                            .cost(acp::Cost::new(stats.cost, "USD")),
                    ));
                }
            }
            FollowUp::Permission {
                request_id,
                tool_call_id,
                tool_name,
                command,
                reason,
            } => {
                let question = Question {
                    request_id,
                    tool_call_id,
                    tool_name,
                    command,
                    reason,
                };
                tokio::spawn(ask(agent.clone(), cx.clone(), id.clone(), question));
            }
            FollowUp::Dialog(request) => {
                let asked =
                    super::dialog::ask(agent.clone(), cx.clone(), id.clone(), *request, forms);
                tokio::spawn(asked);
            }
        }
    }
}

struct Question {
    request_id: u64,
    tool_call_id: String,
    tool_name: String,
    command: String,
    reason: String,
}

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const REJECT_ALWAYS: &str = "reject_always";

/// One `session/request_permission`; the answer resolves the gate's question. No answer (the
/// client cancelled it, or the connection failed) is a denial. "Always" is offered only when the
/// gate can keep the answer for a class of calls, which the option names; an escalation (leaving
/// the sandbox, writing outside it) is asked about every time.
async fn ask(agent: Agent, cx: ConnectionTo<Client>, session_id: acp::SessionId, q: Question) {
    let tool = &q.tool_name;
    let scope = agent.permission_scope(q.request_id);
    let mut options = vec![acp::PermissionOption::new(
        ALLOW_ONCE,
        "Allow once",
        acp::PermissionOptionKind::AllowOnce,
    )];
    if let Some(scope) = &scope {
        options.push(acp::PermissionOption::new(
            ALLOW_ALWAYS,
            format!("Always allow {scope} in this session"),
            acp::PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(acp::PermissionOption::new(
        REJECT_ONCE,
        "Reject",
        acp::PermissionOptionKind::RejectOnce,
    ));
    if let Some(scope) = &scope {
        options.push(acp::PermissionOption::new(
            REJECT_ALWAYS,
            format!("Always reject {scope} in this session"),
            acp::PermissionOptionKind::RejectAlways,
        ));
    }
    let call = acp::ToolCallUpdate::new(
        q.tool_call_id,
        acp::ToolCallUpdateFields::new()
            .title(format!("{tool}: {}", q.command))
            .content(vec![acp::ToolCallContent::Content(acp::Content::new(
                acp::ContentBlock::from(format!("nova asks because: {}", q.reason)),
            ))]),
    );
    let answer = cx
        .send_request(acp::RequestPermissionRequest::new(
            session_id, call, options,
        ))
        .block_task()
        .await;
    let chosen = match answer {
        Ok(response) => match response.outcome {
            acp::RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
            _ => None,
        },
        Err(e) => {
            tracing::debug!("session/request_permission failed: {e}");
            None
        }
    };
    let approved = matches!(chosen.as_deref(), Some(ALLOW_ONCE | ALLOW_ALWAYS));
    // An abort may have answered it already. An "always" the gate did not offer (a client
    // choosing an option it was not given) counts once.
    let _ = match chosen.as_deref() {
        Some(ALLOW_ALWAYS | REJECT_ALWAYS) if scope.is_some() => {
            agent.resolve_permission_always(q.request_id, approved)
        }
        _ => agent.resolve_permission(q.request_id, approved),
    };
}
