//! The agent's session commands: where sessions are opened, started, switched, forked and
//! cloned, and the read-only views of the session file (stats, entries, tree, export).

use super::{Agent, State, Tools};
use crate::config::Config;
use crate::export::{ExportMeta, render_html};
use crate::protocol::{Message, Model};
use crate::session::{Session, paths};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Where new session files go: `--session-dir`, else the cwd's directory under the agent dir;
/// nowhere with `--no-session`.
pub(super) fn file_dir(config: &Config) -> Option<PathBuf> {
    if config.no_session {
        return None;
    }
    Some(
        config
            .session_dir
            .clone()
            .unwrap_or_else(|| paths::default_dir(&config.agent_dir, &config.cwd)),
    )
}

/// The session nova starts with: `--session`, `--continue` (a new one when there is none yet),
/// or a new one. Warnings (skipped malformed lines) are returned for stderr. An `Err` is a usage
/// error (unknown id, ambiguous prefix, unreadable file).
pub fn startup_session(config: &Config) -> Result<(Session, Vec<String>), String> {
    let dir = file_dir(config);
    let scope = paths::Scope {
        agent_dir: &config.agent_dir,
        cwd: &config.cwd,
        session_dir: config.session_dir.as_deref(),
    };
    if let Some(query) = &config.resume {
        return Session::open(&paths::resolve(query, scope)?);
    }
    if config.continue_newest {
        if let Some(newest) = dir.as_deref().and_then(paths::newest) {
            return Session::open(&newest);
        }
    }
    Ok((Session::create(dir, &config.cwd, None), Vec::new()))
}

fn busy(what: &str) -> String {
    format!("Cannot {what} while the agent is streaming; abort first.")
}

impl Agent {
    /// A new session starts with the model and thinking level in force, as Pi's files do (the
    /// entries are written together with the first user message).
    pub(super) fn record_settings_if_new(&self) {
        let mut state = self.state();
        if !state.session.entries().is_empty() {
            return;
        }
        let level = state.thinking_level.clone();
        let model = state.model.clone();
        let recorded = model
            .map(|m| state.session.append_model_change(&m.provider, &m.id))
            .transpose()
            .and_then(|_| state.session.append_thinking_level(&level));
        if let Err(e) = recorded {
            tracing::error!("{e}");
        }
    }

    /// Makes `session` the current one: its conversation, its model when still declared.
    fn adopt(&self, state: &mut State, session: Session) {
        let context = session.context();
        if let Some(model) = context
            .model
            .as_ref()
            .and_then(|(provider, id)| self.inner.registry.find(provider, id))
        {
            state.tools = Tools::for_model(
                &self.inner.tool_selection,
                &self.inner.prompt_source,
                Some(model),
            );
            state.model = Some(model.clone());
        }
        state.thinking_level = thinking_level(state.model.as_ref(), context.thinking_level);
        state.usage_from = super::usage_floor(&context.messages);
        state.messages = context.messages;
        state.session = session;
        if state.queue.clear() {
            self.emit(state.queue.update_event());
        }
    }

    pub fn new_session(&self, parent_session: Option<String>) -> Result<Value, String> {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(busy("start a new session"));
        }
        let session = Session::create(
            self.inner.session_files.clone(),
            &self.inner.cwd,
            parent_session,
        );
        // A new session goes on with the thinking level in force, as in Pi.
        let level = state.thinking_level.clone();
        self.adopt(&mut state, session);
        state.thinking_level = level;
        drop(state);
        self.record_settings_if_new();
        Ok(json!({"cancelled": false}))
    }

    /// `switch_session {sessionId}` (or Pi's `sessionPath`).
    pub fn switch_session(
        &self,
        session_id: Option<String>,
        session_path: Option<String>,
    ) -> Result<Value, String> {
        if self.state().run.is_some() {
            return Err(busy("switch sessions"));
        }
        let query = session_id
            .or(session_path)
            .ok_or("switch_session needs \"sessionId\" (or \"sessionPath\")")?;
        let path = paths::resolve(
            &query,
            paths::Scope {
                agent_dir: &self.inner.agent_dir,
                cwd: &self.inner.cwd,
                session_dir: self.inner.session_dir_flag.as_deref(),
            },
        )?;
        // Loading a large file takes a while: do it without holding the state.
        let (session, warnings) = Session::open(&path)?;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        let mut state = self.state();
        if state.run.is_some() {
            return Err(busy("switch sessions"));
        }
        self.adopt(&mut state, session);
        Ok(json!({"cancelled": false}))
    }

    pub fn set_session_name(&self, name: &str) -> Result<(), String> {
        let name = name.trim();
        if name.is_empty() {
            return Err("Session name cannot be empty".into());
        }
        self.state().session.append_session_info(name).map(|_| ())
    }

    pub fn session_stats(&self) -> Value {
        let state = self.state();
        let (mut users, mut assistants, mut calls, mut results) = (0, 0, 0, 0);
        let (mut input, mut output, mut cache_read, mut cache_write, mut cost) = (0, 0, 0, 0, 0.0);
        for message in &state.messages {
            match &**message {
                Message::User(_) => users += 1,
                Message::Assistant(a) => {
                    assistants += 1;
                    calls += a.tool_calls().count();
                    input += a.usage.input;
                    output += a.usage.output;
                    cache_read += a.usage.cache_read;
                    cache_write += a.usage.cache_write;
                    cost += a.usage.cost.total;
                }
                Message::ToolResult(_) => results += 1,
                Message::CompactionSummary(_) => {}
            }
        }
        let mut stats = json!({
            "sessionId": state.session.id(),
            "userMessages": users,
            "assistantMessages": assistants,
            "toolCalls": calls,
            "toolResults": results,
            "totalMessages": state.messages.len(),
            "tokens": {
                "input": input,
                "output": output,
                "cacheRead": cache_read,
                "cacheWrite": cache_write,
                "total": input + output + cache_read + cache_write,
            },
            "cost": cost,
        });
        if let Some(path) = state.session.path() {
            stats["sessionFile"] = json!(path.to_string_lossy());
        }
        if let Some(model) = &state.model {
            let tokens = state.context_tokens();
            let percent = (model.context_window > 0)
                .then(|| tokens as f64 * 100.0 / model.context_window as f64);
            stats["contextUsage"] = json!({
                "tokens": tokens,
                "contextWindow": model.context_window,
                "percent": percent,
            });
        }
        stats
    }

    pub fn fork_messages(&self) -> Result<Value, String> {
        serde_json::to_value(self.state().session.fork_messages()).map_err(|e| e.to_string())
    }

    /// Continues in a new session holding the conversation up to (not including) user message
    /// `entry_id`; answers with that message's text for the client's editor.
    pub fn fork(&self, entry_id: &str) -> Result<Value, String> {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(busy("fork"));
        }
        let (session, text) = state
            .session
            .fork(entry_id, self.inner.session_files.clone())?;
        self.adopt(&mut state, session);
        Ok(json!({"text": text, "cancelled": false}))
    }

    /// Continues in a new session holding the whole current conversation.
    pub fn clone_session(&self) -> Result<Value, String> {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(busy("clone the session"));
        }
        let session = state
            .session
            .clone_session(self.inner.session_files.clone())?;
        self.adopt(&mut state, session);
        Ok(json!({"cancelled": false}))
    }

    pub fn entries(&self, since: Option<&str>) -> Result<Value, String> {
        let state = self.state();
        let entries = state.session.entries_since(since)?;
        serde_json::to_value(entries).map_err(|e| e.to_string())
    }

    /// The session tree. It nests once per entry along a branch, so it is encoded on a thread
    /// whose stack grows with the session rather than on the runtime's.
    pub fn tree(&self) -> Result<Value, String> {
        let state = self.state();
        let depth = state.session.entries().len();
        let tree = state.session.tree();
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .stack_size(8 * 1024 * 1024 + depth * 2048)
                .spawn_scoped(scope, || serde_json::to_value(&tree))
                .map_err(|e| format!("cannot start the tree encoder: {e}"))?
                .join()
                .map_err(|_| "encoding the session tree failed".to_owned())?
                .map_err(|e| e.to_string())
        })
    }

    /// Writes the conversation as one self-contained HTML file; answers with its path.
    pub fn export_html(&self, output_path: Option<&str>) -> Result<Value, String> {
        let (html, default_name) = {
            let state = self.state();
            let session = &state.session;
            let meta = ExportMeta {
                session_id: session.id().to_owned(),
                session_name: session.name().map(str::to_owned),
                cwd: session.cwd().to_owned(),
                created: session.created().to_owned(),
                model: state
                    .model
                    .as_ref()
                    .map(|m| format!("{}/{}", m.provider, m.id)),
            };
            let stem = session
                .path()
                .and_then(Path::file_stem)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| session.id().to_owned());
            (
                render_html(&meta, &state.messages),
                format!("nova-session-{stem}.html"),
            )
        };
        let path = self
            .inner
            .cwd
            .join(output_path.unwrap_or(default_name.as_str()));
        std::fs::write(&path, html).map_err(|e| format!("Cannot write {}: {e}", path.display()))?;
        Ok(json!({"path": path.to_string_lossy()}))
    }
}

/// The thinking level for `model`: the recorded one when there is one (Pi's levels are `off`,
/// `minimal`, `low`, `medium`, `high`, `xhigh`), else Pi's default `medium`; always `off` for a
/// model that does not reason.
pub(super) fn thinking_level(model: Option<&Model>, recorded: Option<String>) -> String {
    match model {
        Some(m) if m.reasoning => recorded.unwrap_or_else(|| "medium".to_owned()),
        _ => "off".to_owned(),
    }
}
