//! The configured servers, their status and their tools, shared by the agent's turns and the
//! background tasks that start, watch and stop them.
//!
//! One `Mutex<State>` holds every server's phase, its last known tools and its connection; it
//! is held only for plain bookkeeping (never across an await), and status events are emitted
//! under it so that a client sees them in the order they happened. Every (re)start bumps the
//! server's generation, so news from an older connection (a late exit, a tool list change) is
//! recognised and dropped.

use super::config::ServerConfig;
use super::connection::{self, Connection, Handler};
use super::names;
use super::result;
use super::rules::{Rules, Verdict};
use crate::protocol::ToolSpec;
use crate::protocol::{McpServer, McpServerStatus};
use crate::provider::http::SharedClient;
use crate::tools::ToolOutput;
use crate::tools::truncate::Limits;
use crate::warnings::Warnings;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, Tool};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Receives every status change, in order.
pub type StatusFn = Arc<dyn Fn(McpServer) + Send + Sync>;

/// What `config` hands over: the merged servers, the permission rules, and how long the first
/// prompt waits for servers still starting.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    pub servers: Vec<ServerConfig>,
    pub rules: Rules,
    pub startup_wait: Duration,
}

/// A handle on the running servers; clones share them.
#[derive(Clone)]
pub struct Servers {
    shared: Arc<Shared>,
}

struct Shared {
    configs: Vec<ServerConfig>,
    rules: Rules,
    startup_wait: Duration,
    client: SharedClient,
    on_status: StatusFn,
    /// The session's warnings, where what a person may want to know goes.
    warnings: Warnings,
    state: Mutex<State>,
    /// Bumped after every phase change, for whoever waits for one.
    changed: watch::Sender<u64>,
    /// The first prompt has waited for the servers that were starting.
    waited: AtomicBool,
    /// The rules were checked against the tools once every server had started (or failed).
    rules_checked: AtomicBool,
    closing: CancellationToken,
}

#[derive(Default)]
struct State {
    servers: Vec<Slot>,
    /// The tools of ready servers, as the model is offered them.
    specs: Arc<[ToolSpec]>,
    /// Model-facing name → (server, the server's own tool name); servers that crashed keep
    /// theirs, so the next call can restart them.
    routes: HashMap<String, (usize, String)>,
}

struct Slot {
    phase: Phase,
    tools: Vec<Tool>,
    connection: Option<Connection>,
    generation: u64,
    /// The one restart a crashed server gets per session is used.
    restarted: bool,
    /// The server announced a new tool list that is being fetched.
    stale: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Starting,
    Ready,
    Failed { reason: String, crashed: bool },
    Disabled(String),
}

impl Servers {
    /// Starts every enabled server in the background and returns at once; `None` when nothing
    /// is configured, so that nova without MCP does no MCP work at all.
    pub fn start(
        config: McpConfig,
        client: SharedClient,
        on_status: StatusFn,
        warnings: Warnings,
    ) -> Option<Self> {
        if config.servers.is_empty() {
            return None;
        }
        let servers = config
            .servers
            .iter()
            .map(|c| Slot {
                phase: match &c.disabled {
                    Some(reason) => Phase::Disabled(reason.clone()),
                    None => Phase::Starting,
                },
                tools: Vec::new(),
                connection: None,
                generation: 0,
                restarted: false,
                stale: false,
            })
            .collect();
        let shared = Arc::new(Shared {
            configs: config.servers,
            rules: config.rules,
            startup_wait: config.startup_wait,
            client,
            on_status,
            warnings,
            state: Mutex::new(State {
                servers,
                ..State::default()
            }),
            changed: watch::Sender::new(0),
            waited: AtomicBool::new(false),
            rules_checked: AtomicBool::new(false),
            closing: CancellationToken::new(),
        });
        for (i, config) in shared.configs.iter().enumerate() {
            if config.disabled.is_none() {
                let generation = shared.begin_start(&mut shared.lock(), i);
                tokio::spawn(shared.clone().connect(i, generation));
            }
        }
        // When every server is disabled, no phase changes: the rules are checked now.
        shared.check_rules(&shared.lock());
        Some(Servers { shared })
    }

    /// Every configured server and its status.
    pub fn statuses(&self) -> Vec<McpServer> {
        let state = self.shared.lock();
        (0..state.servers.len())
            .map(|i| self.shared.status(&state, i))
            .collect()
    }

    /// The tools of the servers that are ready, for the next request.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.shared.lock().specs.clone()
    }

    /// Whether `name` is an MCP tool nova knows (declared now, or of a crashed server).
    pub fn knows(&self, name: &str) -> bool {
        self.shared.lock().routes.contains_key(name)
    }

    /// What `permissions.mcp` says about calling `name`, in the model's spelling or the
    /// server's own.
    pub fn verdict(&self, name: &str) -> Verdict {
        let route = self.shared.lock().routes.get(name).cloned();
        let own = route
            .as_ref()
            .map(|(index, tool)| (self.shared.configs[*index].name.as_str(), tool.as_str()));
        self.shared.rules.verdict(name, own)
    }

    /// The first prompt waits (up to the configured limit) for servers still starting, then
    /// says which it did not wait for. Later prompts never wait.
    pub async fn wait_for_startup(&self) {
        if self.shared.waited.swap(true, Ordering::SeqCst) {
            return;
        }
        let shared = &self.shared;
        let mut changed = shared.changed.subscribe();
        let all_started = async {
            while !shared.starting().is_empty() {
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(shared.startup_wait, all_started)
            .await
            .is_err()
        {
            shared.report(&format!(
                "not waiting for {} (still starting after {:?}); going on with the tools that \
                 are ready",
                shared.starting().join(", "),
                shared.startup_wait
            ));
        }
    }

    /// Calls the tool behind `name`. Every failure, the server's own included, comes back as an
    /// error output naming the server; `cancel` abandons the call (the server is told).
    pub async fn call(&self, name: &str, args: Value, cancel: &CancellationToken) -> ToolOutput {
        let Some((index, tool)) = self.shared.lock().routes.get(name).cloned() else {
            return ToolOutput::error(format!("Tool {name} not found"));
        };
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => {
                return ToolOutput::error(format!(
                    "Invalid arguments for {name}: expected a JSON object, got {other}"
                ));
            }
        };
        let server = &self.shared.configs[index];
        let (peer, generation) = tokio::select! {
            ready = self.shared.ready(index) => match ready {
                Ok(ready) => ready,
                Err(reason) => {
                    return ToolOutput::error(format!(
                        "MCP server {} is not available: {reason}",
                        server.name
                    ));
                }
            },
            () = cancel.cancelled() => return ToolOutput::error(ABORTED),
        };
        let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments);
        // Dropping the call (abort, timeout) sends the server `notifications/cancelled`.
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(server.timeout, peer.call_tool(params)) => outcome,
            () = cancel.cancelled() => return ToolOutput::error(ABORTED),
        };
        match outcome {
            Ok(Ok(done)) => {
                // A tool that changed the tool list announced it before answering: the next
                // request should offer the new list.
                self.shared.tools_settled(index).await;
                result::to_output(&server.name, &tool, done, Limits::DEFAULT)
            }
            Err(_) => ToolOutput::error(format!(
                "MCP server {} did not answer {tool} within {:?}; the call was cancelled",
                server.name, server.timeout
            )),
            Ok(Err(ServiceError::McpError(e))) => ToolOutput::error(format!(
                "MCP server {} returned an error for {tool}: {}",
                server.name, e.message
            )),
            Ok(Err(_)) if peer.is_transport_closed() => {
                let reason = self.shared.connection_lost(index, generation).await;
                ToolOutput::error(format!(
                    "MCP server {} went away during the call to {tool} ({reason})",
                    server.name
                ))
            }
            Ok(Err(e)) => ToolOutput::error(format!(
                "MCP server {}: calling {tool} failed: {e}",
                server.name
            )),
        }
    }

    /// Stops every server: stdin closed, then SIGTERM, then SIGKILL to its process group.
    pub async fn shutdown(&self) {
        self.shared.closing.cancel();
        let connections: Vec<Connection> = {
            let mut state = self.shared.lock();
            state
                .servers
                .iter_mut()
                .filter_map(|s| s.connection.take())
                .collect()
        };
        let mut stopping = tokio::task::JoinSet::new();
        for connection in connections {
            stopping.spawn(connection.stop());
        }
        while stopping.join_next().await.is_some() {}
    }
}

/// The result of a call that `abort` ended.
pub const ABORTED: &str = "MCP call aborted";

impl Shared {
    /// What a person may want to know about the servers, among the session's warnings.
    fn report(&self, message: &str) {
        self.warnings.warn(&format!("mcp: {message}"));
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section is plain bookkeeping; a panic inside one leaves it usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn status(&self, state: &State, index: usize) -> McpServer {
        let config = &self.configs[index];
        let slot = &state.servers[index];
        let (status, tool_count, reason) = match &slot.phase {
            Phase::Starting => (McpServerStatus::Starting, None, None),
            Phase::Ready => (McpServerStatus::Ready, Some(slot.tools.len()), None),
            Phase::Failed { reason, .. } => (McpServerStatus::Failed, None, Some(reason.clone())),
            Phase::Disabled(reason) => (McpServerStatus::Disabled, None, Some(reason.clone())),
        };
        McpServer {
            name: config.name.clone(),
            status,
            tool_count,
            reason,
            transport: config.transport.kind(),
            source: config.source,
            description: config.description.clone(),
        }
    }

    fn starting(&self) -> Vec<String> {
        let state = self.lock();
        state
            .servers
            .iter()
            .zip(&self.configs)
            .filter(|(s, _)| s.phase == Phase::Starting)
            .map(|(_, c)| c.name.clone())
            .collect()
    }

    /// Sets a server's phase, rebuilds the tool table and announces the change; all under the
    /// lock the caller holds, so announcements keep their order.
    fn set_phase(&self, state: &mut State, index: usize, phase: Phase) {
        state.servers[index].phase = phase;
        rebuild(state, &self.configs);
        (self.on_status)(self.status(state, index));
        self.changed.send_modify(|n| *n += 1);
        self.check_rules(state);
    }

    /// Once no server is starting any more (the first time only), says which
    /// `permissions.mcp` rules match no tool: a rule with a typo in it would otherwise let
    /// every call it was meant to stop run unasked.
    fn check_rules(&self, state: &State) {
        if state.servers.iter().any(|s| s.phase == Phase::Starting)
            || self.rules_checked.swap(true, Ordering::SeqCst)
        {
            return;
        }
        let mut known: Vec<(&str, Vec<(&str, &str)>)> = Vec::new();
        let mut unknown = Vec::new();
        for (index, (slot, config)) in state.servers.iter().zip(&self.configs).enumerate() {
            if slot.phase != Phase::Ready {
                unknown.push(config.name.as_str());
                continue;
            }
            let tools = state
                .routes
                .iter()
                .filter(|(_, (i, _))| *i == index)
                .map(|(name, (_, tool))| (name.as_str(), tool.as_str()))
                .collect();
            known.push((config.name.as_str(), tools));
        }
        for line in self.rules.unmatched(&known, &unknown) {
            self.report(&format!("warning: {line}"));
        }
    }

    /// A new connection's generation, the server marked as starting; [`Shared::connect`] (in a
    /// task of its own, so that no abandoned call leaves a server starting forever) finishes it.
    fn begin_start(&self, state: &mut State, index: usize) -> u64 {
        let slot = &mut state.servers[index];
        slot.generation += 1;
        slot.stale = false;
        let generation = slot.generation;
        self.set_phase(state, index, Phase::Starting);
        generation
    }

    /// Connects and records the outcome.
    async fn connect(self: Arc<Self>, index: usize, generation: u64) {
        let config = &self.configs[index];
        let handler = Handler {
            on_tools_changed: tools_changed(Arc::downgrade(&self), index, generation),
        };
        let connecting = tokio::time::timeout(
            config.timeout,
            connection::connect(config, &self.client, handler),
        );
        let outcome = tokio::select! {
            outcome = connecting => outcome,
            () = self.closing.cancelled() => return,
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(_) => Err(super::McpError::Timeout(config.timeout)),
        };
        let (connection, tools) = match outcome {
            Ok(connected) => connected,
            Err(reason) => {
                self.report(&format!("server {} failed to start: {reason}", config.name));
                let mut state = self.lock();
                let phase = Phase::Failed {
                    reason: reason.to_string(),
                    crashed: false,
                };
                self.set_phase(&mut state, index, phase);
                return;
            }
        };
        let exited = connection.exited();
        {
            let mut state = self.lock();
            if self.closing.is_cancelled() {
                drop(state);
                connection.stop().await;
                return;
            }
            let slot = &mut state.servers[index];
            slot.tools = tools;
            slot.connection = Some(connection);
            self.set_phase(&mut state, index, Phase::Ready);
        }
        if let Some(exited) = exited {
            tokio::spawn(watch_exit(Arc::downgrade(&self), index, generation, exited));
        }
    }

    /// Waits until the server can take a call, restarting it once if it crashed.
    async fn ready(
        self: &Arc<Self>,
        index: usize,
    ) -> Result<(rmcp::service::Peer<rmcp::service::RoleClient>, u64), String> {
        let mut changed = self.changed.subscribe();
        loop {
            {
                let mut state = self.lock();
                let slot = &mut state.servers[index];
                match &slot.phase {
                    Phase::Ready => match &slot.connection {
                        Some(c) => return Ok((c.peer(), slot.generation)),
                        None => return Err("it is stopping".into()),
                    },
                    Phase::Starting => {}
                    Phase::Failed { crashed: true, .. } if !slot.restarted => {
                        slot.restarted = true;
                        self.report(&format!("restarting server {}", self.configs[index].name));
                        let generation = self.begin_start(&mut state, index);
                        tokio::spawn(self.clone().connect(index, generation));
                    }
                    Phase::Failed { reason, .. } => return Err(reason.clone()),
                    Phase::Disabled(reason) => return Err(reason.clone()),
                }
            }
            if changed.changed().await.is_err() {
                return Err("nova is shutting down".into());
            }
        }
    }

    /// The connection of `generation` broke: the server is failed until a call restarts it.
    /// Returns why, as far as it is known.
    async fn connection_lost(&self, index: usize, generation: u64) -> String {
        let exited = {
            let state = self.lock();
            let slot = &state.servers[index];
            if slot.generation != generation {
                return "it was restarted meanwhile".into();
            }
            slot.connection.as_ref().and_then(Connection::exited)
        };
        // A stdio server's exit says more than the broken pipe; it is known within moments.
        let reason = match exited {
            Some(mut exited) => {
                let said =
                    tokio::time::timeout(Duration::from_secs(1), exited.wait_for(Option::is_some))
                        .await;
                match said {
                    Ok(Ok(said)) => said.clone().unwrap_or_default(),
                    _ => "the connection closed".into(),
                }
            }
            None => "the connection closed".into(),
        };
        self.fail_crashed(index, generation, &reason);
        reason
    }

    /// Marks a ready server of `generation` as crashed (once) and stops what is left of it.
    fn fail_crashed(&self, index: usize, generation: u64, reason: &str) {
        let connection = {
            let mut state = self.lock();
            let slot = &mut state.servers[index];
            if slot.generation != generation || slot.phase != Phase::Ready {
                return;
            }
            let connection = slot.connection.take();
            self.report(&format!(
                "server {} crashed: {reason}",
                self.configs[index].name
            ));
            let phase = Phase::Failed {
                reason: format!("crashed: {reason}"),
                crashed: true,
            };
            self.set_phase(&mut state, index, phase);
            connection
        };
        if let Some(connection) = connection {
            tokio::spawn(connection.stop());
        }
    }

    /// Lists the tools again after the server said they changed.
    async fn refresh_tools(&self, index: usize, generation: u64) {
        let peer = {
            let mut state = self.lock();
            let slot = &mut state.servers[index];
            match (&slot.phase, &slot.connection) {
                (Phase::Ready, Some(c)) if slot.generation == generation => c.peer(),
                _ => {
                    slot.stale = false;
                    return;
                }
            }
        };
        let listed = tokio::time::timeout(self.configs[index].timeout, peer.list_all_tools()).await;
        let mut state = self.lock();
        let slot = &mut state.servers[index];
        if slot.generation != generation {
            return;
        }
        slot.stale = false;
        match listed {
            Ok(Ok(tools)) if slot.phase == Phase::Ready => {
                slot.tools = tools;
                self.set_phase(&mut state, index, Phase::Ready);
            }
            Ok(Err(e)) => tracing::warn!("MCP server {}: {e}", self.configs[index].name),
            _ => {}
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// Waits (briefly) for a tool list the server announced to be fetched.
    async fn tools_settled(&self, index: usize) {
        let mut changed = self.changed.subscribe();
        let settled = async {
            while self.lock().servers[index].stale {
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), settled).await;
    }
}

/// Marks the server's tools stale at once (a call that caused the change then waits for the
/// new list) and fetches them in the background.
fn tools_changed(
    shared: Weak<Shared>,
    index: usize,
    generation: u64,
) -> Arc<dyn Fn() + Send + Sync> {
    Arc::new(move || {
        if let Some(shared) = shared.upgrade() {
            shared.lock().servers[index].stale = true;
            tokio::spawn(async move { shared.refresh_tools(index, generation).await });
        }
    })
}

/// Reports a stdio server whose process ended while nova still needed it.
async fn watch_exit(
    shared: Weak<Shared>,
    index: usize,
    generation: u64,
    mut exited: watch::Receiver<Option<String>>,
) {
    let said = match exited.wait_for(Option::is_some).await {
        Ok(said) => said.clone().unwrap_or_default(),
        Err(_) => return,
    };
    if let Some(shared) = shared.upgrade()
        && !shared.closing.is_cancelled()
    {
        shared.fail_crashed(index, generation, &said);
    }
}

/// Names every known tool and declares those of ready servers.
fn rebuild(state: &mut State, configs: &[ServerConfig]) {
    let known: Vec<(&str, Vec<&str>)> = state
        .servers
        .iter()
        .zip(configs)
        .map(|(slot, config)| {
            let routable = matches!(
                slot.phase,
                Phase::Ready | Phase::Failed { crashed: true, .. }
            );
            let tools = if routable {
                slot.tools.iter().map(|t| t.name.as_ref()).collect()
            } else {
                Vec::new()
            };
            (config.name.as_str(), tools)
        })
        .collect();
    let names = names::assign(&known);
    let mut routes = HashMap::new();
    let mut specs = Vec::new();
    for (index, (slot, names)) in state.servers.iter().zip(names).enumerate() {
        let ready = slot.phase == Phase::Ready;
        for (tool, name) in slot.tools.iter().zip(names) {
            if ready {
                specs.push(spec(&name, tool));
            }
            routes.insert(name, (index, tool.name.to_string()));
        }
    }
    state.routes = routes;
    state.specs = specs.into();
}

fn spec(name: &str, tool: &Tool) -> ToolSpec {
    let mut parameters = (*tool.input_schema).clone();
    parameters
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    ToolSpec {
        name: name.to_owned().into(),
        description: tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned()
            .into(),
        parameters: Value::Object(parameters),
    }
}
