//! `nova serve`: many sessions in one process, for web UIs, orchestrators and remote editors.
//! Sessions are opened, listed and closed over HTTP, and each speaks nova's RPC over a
//! WebSocket (one record per text frame), to any number of clients at once; a session
//! outlives its connections, and a client that reconnects with the last `seq` it saw gets
//! exactly what it missed ([`journal`]).
//!
//! Built on axum (hyper's server, with tungstenite's WebSockets behind its `ws` feature):
//! the well-kept, tokio-native choice, already sharing hyper and tower with the HTTP client,
//! and one that serves a Unix socket and TCP alike.
//!
//! Access: a Unix socket is created 0600 (its mode is the access control); every TCP request
//! carries the bearer token ([`auth`]); a request from a web page (an `Origin` not on the
//! allowlist) is refused; sessions open only in a cwd under the `--root` directories.

mod auth;
pub mod bridge;
mod connection;
mod editor;
mod frame;
mod journal;
mod metrics;
mod routes;

use crate::agent::{Runtime, Subscription};
use crate::config::ServeArgs;
use crate::frontend::{self, Second, Signals};
use auth::Token;
use journal::Journal;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What the server shares between its requests.
struct Server {
    runtime: Arc<Runtime>,
    /// Canonical directories sessions may be opened under.
    roots: Vec<PathBuf>,
    origins: Vec<String>,
    /// Required of every TCP request.
    token: Token,
    /// Each served live session's journal (the sessions themselves are the runtime's).
    journals: Mutex<HashMap<String, Served>>,
    /// How many ACP connections hold each live session they opened ([`editor`]).
    editors: Mutex<HashMap<String, usize>>,
    /// `GET /metrics`' figures, and each live session's meter counting into them.
    metrics: Arc<metrics::Metrics>,
    meters: Mutex<HashMap<String, Subscription>>,
    /// Set on SIGTERM/SIGINT: no session is opened any more, and `/health` says so.
    draining: AtomicBool,
    /// Cancelled once the server stops: the ACP connections end.
    stopped: CancellationToken,
}

/// A live session's numbered stream, subscribed to it for as long as the session is served,
/// and its extension host, which lives as long (a DELETE, the idle timeout or the server's
/// shutdown stops it). Its dialogs are events of the session, so every attached client gets
/// them, and any client's `extension_ui_response` answers.
struct Served {
    journal: Arc<Journal>,
    _subscription: Subscription,
    _extensions: Option<crate::exthost::Host>,
}

impl Server {
    fn journals(&self) -> MutexGuard<'_, HashMap<String, Served>> {
        self.journals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends the session's connections and closes it (its file stays); `false` when it is not
    /// live.
    async fn close_session(&self, id: &str) -> bool {
        let served = self.journals().remove(id);
        if let Some(served) = &served {
            served.journal.close();
        }
        self.unmeter(id);
        // The extensions hear of the end (session_shutdown) before their host stops.
        let closed = self.runtime.live().close(id).await;
        drop(served);
        closed
    }

    fn meters(&self) -> MutexGuard<'_, HashMap<String, Subscription>> {
        self.meters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts the live session's tokens and errors into the metrics, once however often asked.
    fn meter(&self, live: &crate::agent::Live) {
        self.meters()
            .entry(live.id().to_owned())
            .or_insert_with(|| live.subscribe(Arc::new(metrics::Meter(self.metrics.clone()))));
    }

    fn unmeter(&self, id: &str) {
        self.meters().remove(id);
    }

    /// The figures `GET /metrics` shows.
    fn metrics(&self) -> String {
        let live = self.runtime.live().list();
        let now = metrics::Now {
            sessions: live.len(),
            runs: live
                .iter()
                .filter(|l| l.agent().wire_state().is_streaming)
                .count(),
            clients: live.iter().map(|l| self.clients(l.id())).sum(),
        };
        self.metrics.render(&now)
    }

    fn editors(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.editors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The clients attached to a live session now: RPC WebSockets and ACP connections.
    fn clients(&self, id: &str) -> usize {
        let rpc = self.journals().get(id).map_or(0, |s| s.journal.clients());
        rpc + self.editors().get(id).copied().unwrap_or(0)
    }

    fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Whether any live session has a run in flight.
    fn running(&self) -> bool {
        self.runtime
            .live()
            .list()
            .iter()
            .any(|live| live.agent().wire_state().is_streaming)
    }
}

/// Closes the sessions that have had no client for `after` and no run in flight, checking a few
/// times per period.
async fn close_idle(server: Arc<Server>, after: Duration) {
    let mut tick = tokio::time::interval(
        (after / 4).clamp(Duration::from_millis(100), Duration::from_secs(30)),
    );
    loop {
        tick.tick().await;
        let idle: Vec<String> = server
            .journals()
            .iter()
            .filter(|(_, served)| {
                served
                    .journal
                    .unattended_for()
                    .is_some_and(|idle| idle >= after)
            })
            .map(|(id, _)| id.clone())
            .collect();
        // An ACP connection's sessions last as long as it does.
        let idle: Vec<String> = {
            let editors = server.editors();
            idle.into_iter()
                .filter(|id| !editors.contains_key(id))
                .collect()
        };
        for id in idle {
            let busy = server
                .runtime
                .live()
                .find(&id)
                .is_some_and(|live| live.agent().wire_state().is_streaming);
            if !busy {
                tracing::info!("closing session {id}: no client for {after:?}");
                server.close_session(&id).await;
            }
        }
    }
}

/// Listens where `args` says and serves until SIGTERM or SIGINT, then closes every session.
pub async fn run(runtime: Runtime, args: ServeArgs) -> ExitCode {
    for warning in runtime.warnings() {
        frontend::note(&format!("warning: {warning}"));
    }
    if args.socket.is_none() && args.listen.is_none() {
        return frontend::usage_error(
            "nova serve needs somewhere to listen: --socket PATH and/or --listen 127.0.0.1:PORT",
        );
    }
    if let Some(addr) = args.listen
        && !addr.ip().is_loopback()
        && !args.unsafe_listen_anywhere
    {
        return frontend::usage_error(&format!(
            "--listen {addr} is not a loopback address: the token and every record would \
             cross the network in clear; put TLS in front and pass --unsafe-listen-anywhere"
        ));
    }
    let roots = match roots(&args.roots) {
        Ok(r) => r,
        Err(e) => return frontend::usage_error(&e),
    };
    let token = if args.listen.is_some() {
        let file = args
            .token_file
            .clone()
            .unwrap_or_else(|| crate::config::agent_dir().join("serve-token"));
        match Token::from_env_or_file(&file) {
            Ok((token, written)) => {
                if let Some(path) = written {
                    frontend::note(&format!("token written to {}", path.display()));
                }
                token
            }
            Err(e) => return frontend::fatal(&e),
        }
    } else {
        Token::none()
    };
    let mut signals = match Signals::install(Arc::default(), Second::Exits) {
        Ok(s) => s,
        Err(e) => return frontend::fatal(&format!("cannot install signal handlers: {e}")),
    };
    let server = Arc::new(Server {
        runtime: Arc::new(runtime),
        roots,
        origins: args.allow_origins.clone(),
        token,
        journals: Mutex::default(),
        editors: Mutex::default(),
        metrics: Arc::default(),
        meters: Mutex::default(),
        draining: AtomicBool::new(false),
        stopped: CancellationToken::new(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(path) = &args.socket {
        let listener = match auth::bind_private_socket(path) {
            Ok(l) => l,
            Err(e) => return frontend::fatal(&e),
        };
        frontend::note(&format!("listening on {}", path.display()));
        let app = routes::router(server.clone(), false);
        tasks.spawn(async move { axum::serve(listener, app).await });
    }
    if let Some(addr) = args.listen {
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => return frontend::fatal(&format!("cannot listen on {addr}: {e}")),
        };
        let bound = listener.local_addr().map_or(addr, |a| a);
        frontend::note(&format!("listening on http://{bound}"));
        let app = routes::router(server.clone(), true);
        tasks.spawn(async move { axum::serve(listener, app).await });
    }
    if let Some(seconds) = args.idle_timeout {
        let server = server.clone();
        tasks.spawn(async move {
            close_idle(server, Duration::from_secs(seconds)).await;
            Ok(())
        });
    }
    let code = tokio::select! {
        () = signals.recv() => {
            drain(&server, Duration::from_secs(args.grace)).await;
            ExitCode::SUCCESS
        }
        Some(ended) = tasks.join_next() => {
            let reason = match ended {
                Ok(Ok(())) => "ended".to_owned(),
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            frontend::fatal(&format!("a listener stopped: {reason}"))
        }
    };
    tasks.abort_all();
    server.stopped.cancel();
    // Every session's connections end and its run (if any is left) is aborted, so the last
    // records are written before the process goes.
    let served: Vec<Served> = server.journals().drain().map(|(_, s)| s).collect();
    for served in &served {
        served.journal.close();
    }
    server.runtime.live().close_all().await;
    // Only now: the extensions heard of the end (session_shutdown) while their hosts ran.
    drop(served);
    server.meters().clear();
    if let Some(path) = &args.socket {
        let _ = std::fs::remove_file(path);
    }
    code
}

/// Stops opening sessions and lets the runs in flight end, for at most `grace`; the listeners
/// keep serving meanwhile, so clients see their runs finish.
async fn drain(server: &Server, grace: Duration) {
    server.draining.store(true, Ordering::Relaxed);
    frontend::note(&format!(
        "shutting down: waiting up to {}s for runs in flight",
        grace.as_secs()
    ));
    let deadline = Instant::now() + grace;
    while server.running() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `--root` directories, canonical (the current directory when none is given).
fn roots(given: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let given = if given.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        given.to_vec()
    };
    given
        .iter()
        .map(|dir| {
            std::fs::canonicalize(dir)
                .map_err(|e| format!("--root {}: {e}", dir.display()))
                .and_then(|d| {
                    if d.is_dir() {
                        Ok(d)
                    } else {
                        Err(format!("--root {}: not a directory", dir.display()))
                    }
                })
        })
        .collect()
}
