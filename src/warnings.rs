//! A session's warnings: what a person should hear about that stops nothing (a sandbox the
//! kernel cannot apply, an MCP server that crashed, a prompt the server cut). The core says
//! them here and never decides where they go: the session's front end routes them (the
//! command-line front ends to stderr). Some are known before the front end has attached, from
//! threads of their own; those wait, in order, until it does.
//!
//! A warning is phrased as it reads after the program's name (`warning: sandbox: …`,
//! `mcp: server x crashed: …`), so a front end adds only its own prefix.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

type Route = Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
struct State {
    route: Option<Route>,
    /// Said before there was a route.
    held: Vec<String>,
    /// The keys of the warnings said once per session.
    said: HashSet<&'static str>,
}

/// One session's warnings; clones share them.
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<State>>);

impl std::fmt::Debug for Warnings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Warnings")
    }
}

impl Warnings {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn warn(&self, line: &str) {
        let mut state = self.lock();
        match &state.route {
            // Said with the lock held, so warnings from several threads keep one order.
            Some(route) => route(line),
            None => state.held.push(line.to_owned()),
        }
    }

    /// Says `line` unless a warning with the same `key` was said in this session.
    pub fn warn_once(&self, key: &'static str, line: &str) {
        if self.lock().said.insert(key) {
            self.warn(line);
        }
    }

    /// Sends every warning, those held so far first, to `route`.
    pub fn route(&self, route: impl Fn(&str) + Send + Sync + 'static) {
        let mut state = self.lock();
        for line in std::mem::take(&mut state.held) {
            route(&line);
        }
        state.route = Some(Arc::new(route));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn warnings_wait_for_their_route_and_once_means_once_per_session() {
        let warnings = Warnings::default();
        warnings.warn("early");
        warnings.warn_once("cut", "cut once");
        let heard = Arc::new(Mutex::new(Vec::new()));
        let into = heard.clone();
        warnings.route(move |line| into.lock().unwrap().push(line.to_owned()));
        warnings.warn_once("cut", "cut again");
        warnings.warn("late");
        Warnings::default().warn_once("cut", "another session's");
        assert_eq!(*heard.lock().unwrap(), ["early", "cut once", "late"]);
    }
}
