//! The extension host: Pi's extensions run in a Node child process (`exthost/host.mjs`, against
//! Pi's real published packages), started only for a session that has extensions. nova is the
//! host's peer over a small JSON-lines protocol on its stdio (see [`wire`]), and the host is a
//! client of the session like any front end:
//!
//! - it subscribes to the session's events ([`crate::agent::Fanout`]), and only the events some
//!   extension handles cross the boundary (plus `agent_start`/`agent_settled`, which keep its
//!   idle flag current); an event that changes the session's entries or state and that no
//!   extension handles crosses by name only (`changed`), so the host refreshes its mirror;
//! - what an extension asks of the session (`sendUserMessage`, `setSessionName`, `abort`,
//!   `setActiveTools`, `setThinkingLevel`, `setModel`, `compact`, `newSession`, `fork`,
//!   `switchSession`) runs through the session port
//!   ([`crate::agent::port`]), as a client's command would, and so do the queries that keep the
//!   host's mirror of the session's state and entries current (`get_entries` since the last
//!   entry it has); `appendEntry`, `setLabel`, `sendMessage`, `getSystemPrompt`, the session
//!   file's header and `registerProvider`/`unregisterProvider`, which no client command
//!   expresses, go to the session directly;
//! - the agent reaches its commands, tools and hooks (`tool_call`, `before_agent_start`,
//!   `context`, `user_bash`…) through [`crate::agent::Extensions`], which [`Host`]
//!   implements; each hook crosses only when some extension subscribed to it;
//! - its `ctx.ui` calls become `extension_ui_request` events and its handlers' failures
//!   `extension_error` events, which every subscriber sees;
//! - a model change, which no client event announces, reaches it through
//!   [`Extensions::model_selected`](crate::agent::Extensions::model_selected);
//! - a `tool_call`, `tool_result`, `message_end` (whose handlers then get no event for that
//!   message), `input`, `before_agent_start`, `context`, `user_bash` or provider or session
//!   hook (`session_before_switch`/`fork`/`compact`, `session_shutdown`) holds up its
//!   call for at most the `extensionHookTimeoutSeconds` setting: the host bounds its handlers
//!   and answers as Pi does for a handler that throws (a `tool_call` is blocked, fail closed; a
//!   user's `bash` command fails; the others go on without that handler, so a session hook
//!   does not cancel), naming the extension in an
//!   `extension_error`; nova bounds the host's answer a little later, for a host whose event
//!   loop a handler holds;
//! - around a session replacement (and for `ctx.reload()`) the host retires its extensions
//!   (`leave`) and loads them afresh for the new session (`enter`), whose answer replaces what
//!   nova knows of their tools, commands and events.
//!
//! Pi's code inside the host (an extension using Pi's SDK, as `pi-subagents` does for its
//! children) finds nova's agent dir as Pi's (`PI_CODING_AGENT_DIR`), and a `pi` it spawns is
//! this nova (a shim first on the host's `PATH`).
//!
//! The host runs under nova's keeper in a process group of its own: it never outlives nova, and
//! stopping it stops whatever its extensions started.

mod node;
mod record;
mod serve;
mod side;
mod vote;
mod wire;

use serve::{HostReply, serve};
use side::{HostEvents, Side};
pub use vote::{Vote, vote};

pub use node::{MIN_NODE, NodeError, PI_VERSION, npm};

use crate::agent::port::{self, Reply};
use crate::agent::{
    Agent, BeforeCompact, Deliver, EventJson, EventSink, ExtensionExec, Extensions, Hooked, Input,
    Live, ModelSource, Reviewed, Starting, Subscription, WeakAgent, message_end_hooked,
};
use crate::config::extensions::Extension;
use crate::protocol::{
    BashResult, Command, CommandSource, ContentBlock, Event, Message, Model, Response,
    SlashCommand, SourceInfo, SourceOrigin, StreamingBehavior, ToolDetails, ToolResultPayload,
    ToolSpec,
};
use crate::provider::hooks::{self, Hook, Hooks};
use crate::tools::{ToolOutput, UpdateFn};
use futures_util::future::BoxFuture;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The host's code, written into the agent dir so node can run it.
const HOST_SCRIPT: &str = include_str!("../../exthost/host.mjs");
/// Lines queued for the host's stdin. An event that finds the queue full is dropped with a
/// warning: the agent never waits for the host.
const QUEUE: usize = 4096;
/// How many bytes of queued lines go to the host in one write, at most (about).
const WRITE_BATCH: usize = 64 * 1024;
/// How long an event waits for more before the writer writes what it has (see `write_lines`).
const COALESCE: Duration = Duration::from_millis(4);
/// How long loading may take: a first load compiles every extension's TypeScript.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a cancelled extension tool has to return before it is answered for.
const CANCEL_GRACE: Duration = Duration::from_secs(3);
/// How much longer than the hook timeout nova waits for the host's answer to a hook call: the
/// host answers at the timeout itself, unless its event loop is held.
const HOOK_GRACE: Duration = Duration::from_secs(2);
/// The requests whose answer is what the extensions registered (`wire::Loaded`), which the
/// reader applies itself.
const LOADS: [&str; 2] = ["load", "enter"];
/// Events the host always gets, for the state it mirrors.
const MIRRORED: [&str; 2] = ["agent_start", "agent_settled"];
/// Events that change the session's entries or state: when no extension handles one, the host
/// still hears of it, by name only (`changed`), and refreshes its mirror. None of them comes
/// per streamed token.
const CHANGES: [&str; 6] = [
    "message_end",
    "turn_end",
    "entry_appended",
    "compaction_end",
    "thinking_level_changed",
    "session_info_changed",
];

/// Why a session's extensions could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("cannot write the extension host's script into {}: {source}", path.display())]
    Script {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the extension host ({}): {source}", node.display())]
    Spawn {
        node: PathBuf,
        source: std::io::Error,
    },
    #[error("the extension host did not load the extensions: {0}")]
    Load(String),
    /// The command line's options for the extensions do not fit what they registered: a
    /// usage error.
    #[error("{0}")]
    Flags(String),
}

/// What the session is run as, which `ctx.mode` and `ctx.hasUI` report.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    Rpc,
    Print,
    Json,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Rpc => "rpc",
            Mode::Print => "print",
            Mode::Json => "json",
        }
    }
}

/// What a session's extensions need to start.
pub struct Spec {
    pub agent_dir: PathBuf,
    pub cwd: PathBuf,
    pub project_trusted: bool,
    pub extensions: Vec<Extension>,
    /// How long a hook call may take (`extensionHookTimeoutSeconds`).
    pub hook_timeout: Duration,
    pub mode: Mode,
    /// The command line's options nova does not have, for the flags the extensions register.
    pub flags: Vec<crate::config::cli::ExtensionFlag>,
}

/// A running host, attached to its session until dropped (which stops it).
pub struct Host {
    shared: Arc<Shared>,
    _events: Subscription,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // SIGTERM, not SIGKILL: the keeper must live to kill what left the group.
        let _ = killpg(
            Pid::from_raw(self.shared.pgid.load(Ordering::SeqCst)),
            Signal::SIGTERM,
        );
    }
}

impl Host {
    /// Changes whenever the extensions' commands do after the start ([`Agent::commands`] has
    /// the new list); closed once the host has stopped.
    pub fn commands_changed(&self) -> tokio::sync::watch::Receiver<()> {
        self.shared.commands_changed.subscribe()
    }
}

/// How to start the host again after a crash.
struct Launch {
    runner: node::Runner,
    script: PathBuf,
    /// The directory of the `pi` shim, first on the host's `PATH`.
    shim: PathBuf,
    spec: Spec,
}

/// Starts the host for `live`'s extensions and attaches it; the `Vec` holds what failed to
/// load (each naming its file), which the front end reports as Pi does.
pub async fn start(
    spec: Spec,
    live: &Live,
    say: impl Fn(&str) + Send + Sync + 'static,
) -> Result<(Host, Vec<String>), HostError> {
    let agent_dir = spec.agent_dir.clone();
    let runner = tokio::task::spawn_blocking(move || node::prepare(&agent_dir, &say))
        .await
        .map_err(|e| HostError::Load(e.to_string()))??;
    let script = spec.agent_dir.join("exthost").join("host.mjs");
    write_script(&script)?;
    let shim = write_pi_shim(&spec.agent_dir.join("exthost").join("bin"))?;
    let recalled = record::recall(&spec.agent_dir, &record::Key::session(&spec, &runner));
    let shared = Arc::new(Shared {
        lines: Mutex::new(closed_queue()),
        pending: Mutex::default(),
        next: AtomicU64::new(1),
        registry: Mutex::default(),
        updates: Mutex::default(),
        execs: Mutex::default(),
        extensions: spec.extensions.clone(),
        pgid: AtomicI32::new(0),
        stopping: AtomicBool::new(false),
        restarted: AtomicBool::new(false),
        ready: tokio::sync::watch::Sender::new(false),
        commands_changed: tokio::sync::watch::Sender::new(()),
        agent: live.agent().downgrade(),
        launch: Launch {
            runner,
            script,
            shim,
            spec,
        },
    });
    let failures = match recalled {
        // The session goes on with what the extensions registered last time while the host
        // loads them; requests wait for the load.
        Some(loaded) => {
            discovered(live.agent(), &loaded, false);
            shared.lock_registry().replace(loaded);
            let (shared, agent) = (shared.clone(), live.agent().clone());
            tokio::spawn(async move {
                let failures = match launch(&shared, &agent).await {
                    Ok(failures) => failures,
                    Err(e) => vec![e.to_string()],
                };
                for error in failures {
                    agent.extension_event(Event::ExtensionError {
                        extension_path: "<extension host>".into(),
                        event: "load".into(),
                        error,
                    });
                }
            });
            Vec::new()
        }
        None => launch(&shared, live.agent()).await?,
    };
    let host = Host {
        shared: shared.clone(),
        _events: live.subscribe(Arc::new(HostEvents(shared.clone()))),
    };
    live.agent().attach_extensions(Arc::new(Side(shared)));
    Ok((host, failures))
}

/// Spawns the host, connects it and loads the extensions; returns what failed to load. Boxed:
/// the reader it spawns launches the host again after a crash. Requests wait meanwhile.
fn launch<'a>(
    shared: &'a Arc<Shared>,
    agent: &'a Agent,
) -> BoxFuture<'a, Result<Vec<String>, HostError>> {
    Box::pin(async move {
        shared.ready.send_replace(false);
        let loaded = load(shared, agent).await;
        shared.ready.send_replace(true);
        loaded
    })
}

/// [`launch`]'s work; a load without failures is also [`record::remember`]ed.
async fn load(shared: &Arc<Shared>, agent: &Agent) -> Result<Vec<String>, HostError> {
    let Launch {
        runner,
        script,
        shim,
        spec,
    } = &shared.launch;
    let (pid, stdin, stdout) = spawn(runner, script, shim, &spec.cwd, &spec.agent_dir)?;
    shared.pgid.store(pid as i32, Ordering::SeqCst);
    let (lines, queue) = mpsc::channel(QUEUE);
    *lock(&shared.lines) = lines;
    tokio::spawn(write_lines(stdin, queue));
    tokio::spawn(read_lines(stdout, shared.clone(), agent.clone()));
    let paths: Vec<String> = spec
        .extensions
        .iter()
        .map(|e| e.path.display().to_string())
        .collect();
    let params = json!({
        "cwd": spec.cwd,
        "paths": paths,
        "trusted": spec.project_trusted,
        "mode": spec.mode.name(),
        "hasUI": matches!(spec.mode, Mode::Rpc),
        "hookTimeoutMs": spec.hook_timeout.as_millis() as u64,
        "flags": spec.flags.iter().map(|f| json!({"name": f.name, "value": f.value})).collect::<Vec<_>>(),
        "watch": true,
    });
    let loaded = tokio::time::timeout(LOAD_TIMEOUT, shared.request("load", params))
        .await
        .map_err(|_| HostError::Load(format!("no answer in {}s", LOAD_TIMEOUT.as_secs())))?
        .map_err(HostError::Load)?;
    let loaded: wire::Loaded =
        serde_json::from_value(loaded).map_err(|e| HostError::Load(e.to_string()))?;
    if !loaded.flag_errors.is_empty() {
        return Err(HostError::Flags(loaded.flag_errors.join("; ")));
    }
    let failures = loaded
        .errors
        .iter()
        .map(|e| format!("extension {}: {}", e.path, e.error))
        .collect();
    if let Some(reads) = &loaded.reads {
        let key = record::Key::session(spec, runner);
        record::remember(&spec.agent_dir, &key, &loaded, reads);
    }
    discovered(agent, &loaded, false);
    Ok(failures)
}

/// Hands the skills and templates the extensions' `resources_discover` handlers named to the
/// session; with `replacing` (a fresh load for a new session or a reload), also when they
/// named none, so that an earlier load's go.
fn discovered(agent: &Agent, loaded: &wire::Loaded, replacing: bool) {
    if loaded.resources.is_none() && !replacing {
        return;
    }
    let found = loaded.resources.clone().unwrap_or_default();
    for warning in agent.discovered(&found.skill_paths, &found.prompt_paths) {
        tracing::warn!("a resource an extension named: {warning}");
    }
}

/// nova's `PATH` with the `pi` shim's directory first: the host's, and the one an extension's
/// `pi.exec` finds its program in (so `pi.exec("pi", …)` runs nova, as in the host).
fn host_path(shim: &Path) -> Result<std::ffi::OsString, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(shim.to_owned()).chain(std::env::split_paths(&path)))
        .map_err(|e| format!("the host's PATH: {e}"))
}

/// Starts a host process in a process group of its own, under nova's keeper; its pid (the
/// group's) and its pipes.
fn spawn(
    runner: &node::Runner,
    script: &Path,
    shim: &Path,
    cwd: &Path,
    agent_dir: &Path,
) -> Result<(u32, tokio::process::ChildStdin, tokio::process::ChildStdout), HostError> {
    let path = host_path(shim).map_err(HostError::Load)?;
    let mut command = tokio::process::Command::from(crate::sandbox::kept(
        &runner.node,
        [script.as_os_str(), runner.modules.as_os_str()],
    ));
    let mut child = command
        .current_dir(cwd)
        .env("PATH", path)
        // Pi's SDK inside the host (pi-subagents' in-process children) reads Pi's agent
        // dir: nova's holds the same files (models.json, auth.json, settings.json).
        .env("PI_CODING_AGENT_DIR", agent_dir)
        // pi-subagents' own override of the `pi` it would spawn.
        .env("PI_SUBAGENT_PI_BINARY", shim.join("pi"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .map_err(|source| HostError::Spawn {
            node: runner.node.clone(),
            source,
        })?;
    let (Some(pid), Some(stdin), Some(stdout)) =
        (child.id(), child.stdin.take(), child.stdout.take())
    else {
        return Err(HostError::Load("the host's pipes did not open".into()));
    };
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok((pid, stdin, stdout))
}

/// A `pi` on the host's `PATH` that is this nova (which takes every Pi 1.6 flag), so that
/// packages spawning `pi` children (`pi-subagents`) get nova instead of a missing program.
fn write_pi_shim(dir: &std::path::Path) -> Result<PathBuf, HostError> {
    let nova = std::env::current_exe().map_err(|source| HostError::Script {
        path: dir.join("pi"),
        source,
    })?;
    // Single-quoted for sh: a quote in the path closes, escapes and reopens.
    let quoted = nova.display().to_string().replace('\'', r"'\''");
    let path = dir.join("pi");
    write_file(
        &path,
        &format!("#!/bin/sh\nexec '{quoted}' \"$@\"\n"),
        0o755,
    )?;
    Ok(dir.to_owned())
}

fn write_script(path: &std::path::Path) -> Result<(), HostError> {
    write_file(path, HOST_SCRIPT, 0o644)
}

fn write_file(path: &std::path::Path, contents: &str, mode: u32) -> Result<(), HostError> {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::read_to_string(path).is_ok_and(|s| s == contents) {
        return Ok(());
    }
    let fail = |source| HostError::Script {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    // Written beside and renamed, so a second nova starting meanwhile never runs half a file.
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, contents).map_err(fail)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

type Answer = Result<Value, String>;

/// What the host's side of the session shares between the agent, the reader and the writer.
struct Shared {
    /// The current host's stdin queue (a restarted host has a new one).
    lines: Mutex<mpsc::Sender<Outgoing>>,
    /// The requests waiting for their answers, each marked when its answer is a load's
    /// ([`LOADS`]).
    pending: Mutex<HashMap<u64, (oneshot::Sender<Answer>, bool)>>,
    next: AtomicU64,
    /// What the extensions registered; `None` until they load.
    registry: Mutex<Option<wire::Loaded>>,
    /// Where each running extension tool's partial results go, by tool call id.
    updates: Mutex<HashMap<String, UpdateFn>>,
    /// The running `pi.exec` calls, by the host's request id, for its abort signal.
    execs: Mutex<HashMap<String, CancellationToken>>,
    extensions: Vec<Extension>,
    /// The current host's process group.
    pgid: AtomicI32,
    /// Set when nova stops the host, which is then not restarted.
    stopping: AtomicBool,
    /// A crashed host is started again once; a second crash is final.
    restarted: AtomicBool,
    /// False while the host loads (a session may begin meanwhile, its registrations
    /// [`record::recall`]ed): requests wait for it, and a hook's time counts from then.
    ready: tokio::sync::watch::Sender<bool>,
    /// Told whenever the extensions' commands change after the start (a load's answer that
    /// differs from the record's, a command registered later): ACP re-announces them.
    commands_changed: tokio::sync::watch::Sender<()>,
    /// The session, for the failures nova itself reports.
    agent: WeakAgent,
    launch: Launch,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn lock_registry(&self) -> MutexGuard<'_, Option<wire::Loaded>> {
        lock(&self.registry)
    }

    /// Changes what nova knows the extensions registered, telling [`Host::commands_changed`]
    /// when their commands differ from before.
    fn register(&self, change: impl FnOnce(&mut Option<wire::Loaded>)) {
        let mut registry = self.lock_registry();
        let before = registry.as_ref().map(|r| r.commands.clone());
        change(&mut registry);
        if registry.as_ref().map(|r| &r.commands) != before.as_ref() {
            self.commands_changed.send_replace(());
        }
    }

    /// Sends a request and waits for its answer; an `Err` is the host's error, or says that
    /// the host is gone.
    async fn request(&self, method: &str, params: Value) -> Answer {
        if method != "load" {
            self.loaded().await;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, (tx, LOADS.contains(&method)));
        let line = json!({"id": id, "method": method, "params": params}).to_string();
        let lines = lock(&self.lines).clone();
        if lines.send(Outgoing::Line(line)).await.is_err() {
            lock(&self.pending).remove(&id);
            return Err(GONE.into());
        }
        rx.await.unwrap_or_else(|_| Err(GONE.into()))
    }

    /// Returns once the host has loaded the extensions (or failed to).
    async fn loaded(&self) {
        // The sender lives in `self`: the wait ends only with the load.
        let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
    }

    /// Sends a notification without waiting; `false` when the queue is full (a host that is
    /// gone has been reported already).
    fn notify(&self, method: &str, params: Value) -> bool {
        self.send_line(json!({"method": method, "params": params}).to_string())
    }

    /// Queues a line without waiting; `false` when the queue is full.
    fn send_line(&self, line: String) -> bool {
        self.send(Outgoing::Line(line))
    }

    /// Queues a streamed delta's line ([`wire::Delta`]); `false` when the queue is full.
    fn send_delta(&self, line: String) -> bool {
        self.send(Outgoing::Delta(line))
    }

    /// Queues the `event` notification of an event encoded as its JSON; `false` when the queue
    /// is full.
    fn send_event(&self, json: EventJson) -> bool {
        self.send(Outgoing::Event(json))
    }

    fn send(&self, outgoing: Outgoing) -> bool {
        !matches!(
            lock(&self.lines).try_send(outgoing),
            Err(mpsc::error::TrySendError::Full(_))
        )
    }

    /// A hook call (`event` names both the method and the hooks' event). The host answers at the
    /// hook timeout itself; when it has not shortly after, its event loop is held (a handler
    /// that never yields), and the call fails here, reported as the host's.
    async fn hook(&self, event: &'static str, params: Value) -> Answer {
        self.loaded().await;
        let bound = self.launch.spec.hook_timeout + HOOK_GRACE;
        match tokio::time::timeout(bound, self.request(event, params)).await {
            Ok(answer) => answer,
            Err(_) => {
                let error = format!(
                    "the extension host did not answer its {event} hooks in {} s",
                    bound.as_secs_f64()
                );
                if let Some(agent) = self.agent.upgrade() {
                    agent.extension_event(Event::ExtensionError {
                        extension_path: "<extension host>".into(),
                        event: event.into(),
                        error: error.clone(),
                    });
                }
                Err(error)
            }
        }
    }

    /// [`Self::hook`]'s answer read as `T`; an answer that is not one is an error like a failed
    /// hook's.
    async fn hook_as<T: serde::de::DeserializeOwned>(
        &self,
        event: &'static str,
        params: Value,
    ) -> Result<T, String> {
        let answer = self.hook(event, params).await?;
        serde_json::from_value(answer).map_err(|e| e.to_string())
    }

    /// `event`'s hooks, when some extension has one: their answer read as `T` and `pick`ed. A
    /// failed hook (already the host's `extension_error`) answers `Ok(None)`; an answer that
    /// is not a `T` is an error beginning with `what`.
    fn read_hook<T, R>(
        self: &Arc<Self>,
        event: &'static str,
        params: impl FnOnce() -> Value,
        pick: fn(T) -> Option<R>,
        what: &'static str,
    ) -> Option<BoxFuture<'static, Result<Option<R>, String>>>
    where
        T: serde::de::DeserializeOwned + 'static,
        R: Send + 'static,
    {
        if !self.subscribed(event) {
            return None;
        }
        let (shared, params) = (self.clone(), params());
        Some(Box::pin(async move {
            let Ok(answer) = shared.hook(event, params).await else {
                return Ok(None);
            };
            serde_json::from_value::<T>(answer)
                .map(pick)
                .map_err(|e| format!("{what}: {e}"))
        }))
    }

    fn subscribed(&self, event: &str) -> bool {
        self.lock_registry()
            .as_ref()
            .is_some_and(|r| r.events.iter().any(|e| e == event))
    }

    fn source_info(&self, path: &str) -> SourceInfo {
        let found = self.extensions.iter().find(|e| e.path.as_os_str() == path);
        SourceInfo {
            path: path.to_owned(),
            source: found.map_or(crate::protocol::DiscoveredBy::Cli, |e| e.source),
            scope: found.map_or(crate::protocol::SourceScope::Temporary, |e| e.scope),
            origin: SourceOrigin::TopLevel,
            base_dir: found
                .and_then(|e| e.base_dir.as_ref())
                .map(|d| d.display().to_string()),
        }
    }
}

const GONE: &str = "the extension host has exited";

/// A queue nothing reads: sending on it fails at once, which `request` reports as [`GONE`].
fn closed_queue() -> mpsc::Sender<Outgoing> {
    mpsc::channel(1).0
}

/// What goes to the host's stdin, a line each.
enum Outgoing {
    /// A request, an answer or a notification: written at once, after what is queued before it.
    Line(String),
    /// A streamed delta's line ([`wire::Delta`]), which may wait a moment for the rest of its
    /// burst, as events do.
    Delta(String),
    /// A session event as the `event` notification: its JSON (often the very one stdout
    /// gets), framed as it is written.
    Event(EventJson),
}

impl Outgoing {
    fn append_to(&self, batch: &mut String) {
        match self {
            Outgoing::Line(line) | Outgoing::Delta(line) => batch.push_str(line),
            Outgoing::Event(json) => {
                batch.push_str(wire::EVENT_OPEN);
                batch.push_str(json);
                batch.push_str(wire::EVENT_CLOSE);
            }
        }
        batch.push('\n');
    }

    fn waits(&self) -> bool {
        !matches!(self, Outgoing::Line(_))
    }
}

/// Writes what is queued in as few writes as it can: events gather for up to [`COALESCE`]
/// (a streamed reply's tokens arrive a read apart, and every write wakes the host, about
/// 0.1 ms of its time each), taken off the queue as they come so that it never fills
/// meanwhile; a request, an answer or a notification goes at once, with what came before it.
async fn write_lines(mut stdin: tokio::process::ChildStdin, mut queue: mpsc::Receiver<Outgoing>) {
    let mut batch = String::new();
    while let Some(first) = queue.recv().await {
        batch.clear();
        let mut waits = first.waits();
        first.append_to(&mut batch);
        let gathered = tokio::time::sleep(COALESCE);
        tokio::pin!(gathered);
        while waits && batch.len() < WRITE_BATCH {
            let next = match queue.try_recv() {
                Ok(line) => Some(line),
                Err(_) => tokio::select! {
                    next = queue.recv() => next,
                    () = &mut gathered => None,
                },
            };
            let Some(line) = next else { break };
            waits = line.waits();
            line.append_to(&mut batch);
        }
        if stdin.write_all(batch.as_bytes()).await.is_err() {
            break;
        }
    }
}

/// Reads the host's lines until it exits; then every request still waiting fails, and the
/// session is told.
async fn read_lines(stdout: tokio::process::ChildStdout, shared: Arc<Shared>, agent: Agent) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match serde_json::from_str::<wire::Incoming>(&line) {
            Ok(incoming) => dispatch(incoming, &shared, &agent),
            Err(e) => tracing::warn!("the extension host wrote an unreadable line ({e}): {line}"),
        }
    }
    // The queue is closed before the waiting requests are failed: a request registers itself
    // before it takes the queue, so each one is either failed here or finds the queue closed.
    // The old writer task may still hold its receiver, and a line sent there is never answered.
    *lock(&shared.lines) = closed_queue();
    let waiting: Vec<_> = lock(&shared.pending).drain().collect();
    for (_, (tx, _)) in waiting {
        let _ = tx.send(Err(GONE.into()));
    }
    // Nobody is left to read what the extensions' commands print.
    for (_, cancel) in lock(&shared.execs).drain() {
        cancel.cancel();
    }
    if shared.stopping.load(Ordering::SeqCst) {
        return;
    }
    let error = |error: String| {
        agent.extension_event(Event::ExtensionError {
            extension_path: "<extension host>".into(),
            event: "exit".into(),
            error,
        })
    };
    if shared.restarted.swap(true, Ordering::SeqCst) {
        return error(format!("{GONE} again; it is not restarted a second time"));
    }
    // What the extensions kept in memory is lost; their registrations come back with the load.
    match launch(&shared, &agent).await {
        Ok(_) => error(format!("{GONE}; it was restarted once")),
        Err(e) => error(format!("{GONE}, and restarting it failed: {e}")),
    }
}

fn dispatch(incoming: wire::Incoming, shared: &Arc<Shared>, agent: &Agent) {
    let wire::Incoming {
        id,
        method,
        params,
        result,
        error,
    } = incoming;
    let Some(method) = method else {
        // An answer to one of nova's requests.
        let waiting = id
            .as_ref()
            .and_then(Value::as_u64)
            .and_then(|id| lock(&shared.pending).remove(&id));
        if let Some((tx, loads)) = waiting {
            // What a load registered replaces what nova knew here, in the order of the host's
            // lines: a `commands` notification written after the answer is newer.
            if loads
                && error.is_none()
                && let Some(loaded) = result
                    .as_ref()
                    .and_then(|r| serde_json::from_value::<wire::Loaded>(r.clone()).ok())
            {
                shared.register(|registry| *registry = Some(loaded));
            }
            let _ = tx.send(match error {
                Some(error) => Err(error),
                None => Ok(result.unwrap_or(Value::Null)),
            });
        }
        return;
    };
    if let Some(id) = id {
        // A request of the host's: answered from a task, since it may wait for the agent.
        let reply = HostReply {
            shared: shared.clone(),
            id: id.clone(),
        };
        tokio::spawn(serve(method, params, reply, agent.clone()));
        return;
    }
    let decoded = match method.as_str() {
        "ready" => Ok(()),
        "ui" => serde_json::from_value::<wire::Ui>(params).map(|request| {
            agent.extension_event(Event::ExtensionUiRequest { request });
        }),
        "error" => serde_json::from_value::<wire::ExtensionError>(params).map(|e| {
            agent.extension_event(Event::ExtensionError {
                extension_path: e.extension_path,
                event: e.event,
                error: e.error,
            });
        }),
        "tool_update" => serde_json::from_value::<wire::ToolUpdate>(params).map(|update| {
            let sink = lock(&shared.updates).get(&update.tool_call_id).cloned();
            if let Some(sink) = sink {
                sink(payload(update.partial));
            }
        }),
        "exec_abort" => serde_json::from_value::<wire::ExecAbort>(params).map(|abort| {
            if let Some(cancel) = lock(&shared.execs).get(&abort.id) {
                cancel.cancel();
            }
        }),
        "tools" => serde_json::from_value::<wire::Tools>(params).map(|t| {
            shared.register(|registry| {
                if let Some(registry) = registry {
                    registry.tools = t.tools;
                }
            })
        }),
        "commands" => serde_json::from_value::<wire::Commands>(params).map(|c| {
            shared.register(|registry| {
                if let Some(registry) = registry {
                    registry.commands = c.commands;
                }
            })
        }),
        other => {
            tracing::warn!("the extension host sent an unknown notification: {other}");
            Ok(())
        }
    };
    if let Err(e) = decoded {
        tracing::warn!("the extension host sent a malformed {method}: {e}");
    }
}

fn payload(result: wire::ToolResult) -> ToolResultPayload {
    ToolResultPayload {
        content: result.content,
        details: result.details.map(ToolDetails::Other),
        structured_content: None,
    }
}
