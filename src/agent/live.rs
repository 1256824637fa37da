//! The live sessions of the process: started, known by id, until a front end closes them.
//! Every front end that opens sessions for its clients opens them here (ACP, and a server of
//! many sessions beside it), so one process has one list of what runs, whatever brought it.

use super::{Agent, Fanout, Prepared, Sink, Subscription};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long closing a session waits for its run to end after the abort.
const ABORT_GRACE: Duration = Duration::from_secs(5);

/// A running session and its subscribers.
pub struct Live {
    id: String,
    cwd: PathBuf,
    agent: Agent,
    fanout: Arc<Fanout>,
}

impl Live {
    /// The id of the session file it opened with (`new_session` and `switch_session` move the
    /// agent to other files; the live session keeps this name).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Adds a subscriber to the session's events (see [`Fanout`]).
    pub fn subscribe(&self, sink: Sink) -> Subscription {
        self.fanout.subscribe(sink)
    }

    /// How many subscribers the session has now.
    pub fn subscribers(&self) -> usize {
        self.fanout.count()
    }

    /// Aborts the run (waiting a bounded time for its last events), tells the extensions the
    /// session is over (`session_shutdown` with reason `quit`, as Pi does at exit; bounded like
    /// every hook) and stops the MCP servers.
    async fn stop(&self) {
        let _ = tokio::time::timeout(ABORT_GRACE, self.agent.abort()).await;
        if let Some(extensions) = self.agent.extensions() {
            let quit = serde_json::json!({"type": "session_shutdown", "reason": "quit"});
            extensions.leave(None, quit).await;
        }
        self.agent.shutdown().await;
    }
}

/// The table of live sessions, by id.
#[derive(Default)]
pub struct LiveSessions {
    sessions: Mutex<HashMap<String, Arc<Live>>>,
}

impl LiveSessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `prepared` with `first` already subscribed (so it misses nothing, not even a
    /// warning said while the session starts). A live session of the same id is replaced and
    /// stopped: two agents must never write one session file.
    pub fn open(&self, prepared: Prepared, first: Sink) -> (Arc<Live>, Subscription) {
        let id = prepared.header().id.clone();
        let cwd = prepared.cwd().to_path_buf();
        let fanout = Arc::new(Fanout::default());
        let subscription = fanout.subscribe(first);
        let agent = prepared.start(fanout.clone());
        let live = Arc::new(Live {
            id: id.clone(),
            cwd,
            agent,
            fanout,
        });
        if let Some(old) = self.lock().insert(id, live.clone()) {
            tokio::spawn(async move { old.stop().await });
        }
        (live, subscription)
    }

    pub fn find(&self, id: &str) -> Option<Arc<Live>> {
        self.lock().get(id).cloned()
    }

    /// Every live session, in no particular order.
    pub fn list(&self) -> Vec<Arc<Live>> {
        self.lock().values().cloned().collect()
    }

    /// Removes the session and stops it; `false` when no session has that id. Its file stays,
    /// so it can be resumed.
    pub async fn close(&self, id: &str) -> bool {
        let Some(live) = self.lock().remove(id) else {
            return false;
        };
        live.stop().await;
        true
    }

    /// [`Self::close`] for `live` itself: `false`, and nothing closed, when the table holds
    /// another session of its id (one that replaced it) or none.
    pub async fn close_exactly(&self, live: &Arc<Live>) -> bool {
        {
            let mut sessions = self.lock();
            match sessions.get(live.id()) {
                Some(held) if Arc::ptr_eq(held, live) => sessions.remove(live.id()),
                _ => return false,
            };
        }
        live.stop().await;
        true
    }

    /// Stops every live session (at shutdown).
    pub async fn close_all(&self) {
        let all: Vec<Arc<Live>> = self.lock().drain().map(|(_, live)| live).collect();
        for live in all {
            live.stop().await;
        }
    }
}
