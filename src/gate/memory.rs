//! The answers a person chose to keep for the rest of a session ("always allow", "always
//! reject"), one memory per session whichever front end asked. An answer is kept for the class of
//! calls the question was asked for, never by tool name: "always allow" for `rm -rf build` says
//! nothing of `rm -rf ~`, and "always allow" for a file change in the workspace says nothing of
//! `~/.profile`.

use super::classify::Exact;
use std::path::PathBuf;

/// What an "always" answer covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// These simple commands, each exactly as written and as it will run, each asking for the
    /// same reasons. A later command is covered when every simple command in it that asks is.
    Commands(Vec<Exact>),
    /// File changes inside this writable root, outside every protected path (which always
    /// ask, as do paths outside the roots).
    WritesUnder(PathBuf),
    /// This MCP or extension tool, asking for this reason (its `permissions.mcp` rule or the
    /// approval mode).
    Tool { name: String, reason: String },
}

impl Class {
    /// How a person is shown it: "Always allow {label} in this session".
    pub fn label(&self) -> String {
        match self {
            Class::Commands(commands) => {
                let named: Vec<String> = commands
                    .iter()
                    .map(|c| format!("`{}`", shorten(&c.command)))
                    .collect();
                named.join(", ")
            }
            Class::WritesUnder(root) => format!("file changes under {}", root.display()),
            Class::Tool { name, .. } => format!("`{name}`"),
        }
    }
}

/// One remembered answer's scope; a [`Class`] of several commands is kept as one per command.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Command(Exact),
    WritesUnder(PathBuf),
    Tool { name: String, reason: String },
}

/// Answers kept at once. A person answers a handful per session; the bound only keeps a client
/// that answers "always" in a loop from growing the session without end (the oldest go first).
const MAX_KEPT: usize = 1024;

#[derive(Debug, Clone, Default)]
pub struct Memory {
    answers: Vec<(Key, bool)>,
}

impl Memory {
    /// Keeps `approved` for `class` (a later answer for the same scope replaces an earlier one).
    pub fn remember(&mut self, class: &Class, approved: bool) {
        for key in keys(class) {
            self.answers.retain(|(k, _)| *k != key);
            self.answers.push((key, approved));
        }
        let over = self.answers.len().saturating_sub(MAX_KEPT);
        self.answers.drain(..over);
    }

    /// `Some(false)` when any part of `class` was rejected for good, `Some(true)` when every part
    /// was allowed, `None` when a person must be asked.
    pub fn recall(&self, class: &Class) -> Option<bool> {
        let mut all = true;
        for key in keys(class) {
            match self.answers.iter().find(|(k, _)| *k == key) {
                Some((_, false)) => return Some(false),
                Some((_, true)) => {}
                None => all = false,
            }
        }
        all.then_some(true)
    }
}

fn keys(class: &Class) -> Vec<Key> {
    match class {
        Class::Commands(commands) => commands.iter().cloned().map(Key::Command).collect(),
        Class::WritesUnder(root) => vec![Key::WritesUnder(root.clone())],
        Class::Tool { name, reason } => vec![Key::Tool {
            name: name.clone(),
            reason: reason.clone(),
        }],
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
