//! The agent's session commands: where sessions are opened, started, switched, forked and
//! cloned, and the read-only views of the session file (stats, entries, tree, export).

use super::{Agent, CommandError, State, models};
use crate::config::{Config, Resume};
use crate::export::{ExportMeta, render_html};
use crate::files::{fs, safe_open};
use crate::protocol::{
    ContextUsage, Event, ForkMessage, Message, ResponseData, SessionListing, SessionStats,
    TokenTotals, Usage,
};
use crate::session::{Body, Session, SessionError, paths};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::MutexGuard;

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
/// or a new one. Warnings (skipped malformed lines, a damaged newest file) are returned for
/// stderr. An `Err` is a usage error (unknown id, ambiguous prefix, unreadable file).
pub fn startup_session(config: &Config) -> Result<(Session, Vec<String>), SessionError> {
    let dir = file_dir(config);
    let scope = paths::Scope {
        agent_dir: &config.agent_dir,
        cwd: &config.cwd,
        session_dir: config.session_dir.as_deref(),
    };
    let path = match &config.resume {
        Resume::New => None,
        Resume::Query(query) => Some(paths::resolve(query, scope)?),
        Resume::Id(id) => Some(paths::find_id(id, scope)?),
        Resume::Path(path) => {
            let path = config.cwd.join(path);
            if !path.is_file() {
                return Err(SessionError::FileNotFound(path.display().to_string()));
            }
            Some(path)
        }
        Resume::OwnId(id) => {
            if let Some(found) = dir.as_deref().and_then(|d| paths::find_in(d, id)) {
                return Session::open(&found);
            }
            let session = Session::create_with_id(dir, &config.cwd, None, id.clone());
            let note = format!("no session of this directory has the id {id}; starting it");
            return Ok((session, vec![note]));
        }
        Resume::Fork { query, id } => {
            if let Some(id) = id
                && let Some(taken) = dir.as_deref().and_then(|d| paths::find_in(d, id))
            {
                return Err(SessionError::IdTaken {
                    id: id.clone(),
                    path: taken.display().to_string(),
                });
            }
            let (source, warnings) = Session::open(&paths::resolve(query, scope)?)?;
            return Ok((source.fork_into(&config.cwd, dir, id.clone())?, warnings));
        }
        Resume::Newest => {
            if let Some(newest) = dir.as_deref().and_then(paths::newest) {
                return match Session::open(&newest) {
                    Err(SessionError::NotASession(_)) => {
                        Session::salvage(&newest, dir, &config.cwd)
                    }
                    opened => opened,
                };
            }
            None
        }
    };
    if let Some(path) = path {
        return Session::open(&path);
    }
    Ok((Session::create(dir, &config.cwd, None), Vec::new()))
}

impl Agent {
    /// A new session starts with the model and thinking level in force, as Pi's files do (the
    /// entries are written together with the first user message).
    pub(super) fn record_settings_if_new(&self) {
        let mut state = self.state();
        if !state.session.entries().is_empty() {
            return;
        }
        let level = state.thinking_level;
        let model = state.model.clone();
        let recorded = model
            .map(|m| state.session.append_model_change(&m.provider, &m.id))
            .transpose()
            .and_then(|_| state.session.append_thinking_level(level.as_str()));
        if let Err(e) = recorded {
            self.report_session_error(&e);
        }
        self.record_tools(&mut state);
    }

    /// Makes `session` the current one: its conversation, its model when still declared.
    fn adopt(&self, state: &mut State, session: Session) {
        let context = session.context();
        if let Some(model) = context.model.as_ref().and_then(|(provider, id)| {
            self.inner
                .registry
                .find_with(&state.providers, provider, id)
        }) {
            state.model = Some(model);
        }
        // Like the model, the tool set stays unless the session recorded one.
        let model = state.model.clone();
        match context.active_tools.clone() {
            Some(named) => state.tools = self.tools_for(Some(named.into()), model.as_ref()),
            None => self.retool(state, model.as_ref()),
        }
        state.thinking_level = models::startup_level(
            state.model.as_ref(),
            None,
            context.thinking_level.as_deref(),
            self.inner.default_thinking_level,
        );
        state.usage_from = super::usage_floor(&context.messages);
        state.messages = context.messages;
        state.session = session;
        if state.queue.clear() {
            self.emit(state.queue.update_event());
        }
    }

    /// `new_session`: `true` when an extension's `session_before_switch` hook cancelled it.
    pub async fn new_session(&self, parent_session: Option<String>) -> Result<bool, CommandError> {
        if self.state().run.is_some() {
            return Err(CommandError::Busy("start a new session"));
        }
        let session = Session::create(
            self.inner.session_files.clone(),
            &self.inner.cwd,
            parent_session,
        );
        let target = session.path().map(|p| p.to_string_lossy().into_owned());
        let before = json!({"type": "session_before_switch", "reason": "new"});
        let replaced = self
            .replace_session(Some(before), "new", target, |mut state| {
                // A new session goes on with the thinking level in force, as in Pi. The
                // conversation that named the commands' full-output files is left, so the
                // files go.
                let level = state.thinking_level;
                self.adopt(&mut state, session);
                self.inner.outputs.clear();
                state.thinking_level = level;
                drop(state);
                self.record_settings_if_new();
                Ok(())
            })
            .await?;
        Ok(replaced.is_none())
    }

    /// Where this session looks for other sessions.
    fn session_scope(&self) -> paths::Scope<'_> {
        paths::Scope {
            agent_dir: &self.inner.agent_dir,
            cwd: &self.inner.cwd,
            session_dir: self.inner.session_dir_flag.as_deref(),
        }
    }

    /// `list_sessions`: the sessions of this cwd's directory, or of all of them, read off the
    /// runtime thread from the returned future, which holds nothing of the session: thousands
    /// of files (or one huge one) take a while, and the caller's other commands must not wait.
    pub fn list_sessions(
        &self,
        all: bool,
    ) -> impl Future<Output = Result<Vec<SessionListing>, CommandError>> + Send + 'static {
        let agent = self.clone();
        async move {
            tokio::task::spawn_blocking(move || crate::session::list(agent.session_scope(), all))
                .await
                .map_err(|e| CommandError::Crashed {
                    what: "listing the sessions",
                    detail: Some(e.to_string()),
                })
        }
    }

    /// `switch_session {sessionId}` (or Pi's `sessionPath`): `true` when an extension's
    /// `session_before_switch` hook cancelled it.
    pub async fn switch_session(
        &self,
        session_id: Option<String>,
        session_path: Option<String>,
    ) -> Result<bool, CommandError> {
        if self.state().run.is_some() {
            return Err(CommandError::Busy("switch sessions"));
        }
        let query = session_id.or(session_path).ok_or_else(|| {
            CommandError::Invalid("switch_session needs \"sessionId\" (or \"sessionPath\")".into())
        })?;
        let path = paths::resolve(&query, self.session_scope())?;
        let target = path.to_string_lossy().into_owned();
        // Loading a large file takes a while: off the runtime thread, without the state.
        let (session, warnings) = tokio::task::spawn_blocking(move || Session::open(&path))
            .await
            .map_err(|e| CommandError::Crashed {
                what: "loading the session",
                detail: Some(e.to_string()),
            })??;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        let before = json!({
            "type": "session_before_switch",
            "reason": "resume",
            "targetSessionFile": target,
        });
        let replaced = self
            .replace_session(Some(before), "resume", Some(target), |mut state| {
                self.adopt(&mut state, session);
                Ok(())
            })
            .await?;
        Ok(replaced.is_none())
    }

    /// Pi's lifecycle around replacing the session, for its extensions: `before` (a
    /// `session_before_switch`/`session_before_fork` event) may cancel the replacement
    /// (`Ok(None)`); otherwise they get `session_shutdown`, a run a client started meanwhile is
    /// aborted (as Pi aborts it), `replace` makes the new session current, and they are loaded
    /// afresh for it and get `session_start` with `reason` and the previous session's file.
    pub(super) async fn replace_session<T>(
        &self,
        before: Option<Value>,
        reason: &'static str,
        target: Option<String>,
        replace: impl FnOnce(MutexGuard<'_, State>) -> Result<T, CommandError>,
    ) -> Result<Option<T>, CommandError> {
        let extensions = self.inner.extensions.get().cloned();
        let previous = self.session_file();
        if let Some(extensions) = &extensions {
            let shutdown = json!({
                "type": "session_shutdown",
                "reason": reason,
                "targetSessionFile": target,
            });
            if extensions.leave(before, shutdown).await {
                return Ok(None);
            }
        }
        let replaced = loop {
            {
                let state = self.state();
                if state.run.is_none() {
                    break replace(state);
                }
            }
            self.abort().await;
        };
        if let Some(extensions) = extensions {
            // The extensions have shut down: they come back even when the replacement failed,
            // then for the session that stayed, as after a reload.
            let start = match &replaced {
                Ok(_) => json!({
                    "type": "session_start",
                    "reason": reason,
                    "previousSessionFile": previous,
                }),
                Err(_) => json!({"type": "session_start", "reason": "reload"}),
            };
            extensions.enter(start).await;
        }
        replaced.map(Some)
    }

    fn session_file(&self) -> Option<String> {
        self.state()
            .session
            .path()
            .map(|p| p.to_string_lossy().into_owned())
    }

    pub fn set_session_name(&self, name: &str) -> Result<(), CommandError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(CommandError::Invalid("Session name cannot be empty".into()));
        }
        let mut state = self.state();
        state.session.append_session_info(name)?;
        self.emit(Event::SessionInfoChanged {
            name: state.session.name().map(str::to_owned),
        });
        Ok(())
    }

    /// An extension's own entry (`pi.appendEntry`): recorded in the session, never shown to
    /// the model; answers with the entry's id.
    pub fn append_custom_entry(
        &self,
        custom_type: &str,
        data: Option<serde_json::Value>,
    ) -> Result<String, CommandError> {
        if custom_type.trim().is_empty() {
            return Err(CommandError::Invalid(
                "an entry's customType cannot be empty".into(),
            ));
        }
        Ok(self.state().session.append_custom(custom_type, data)?)
    }

    /// An extension's `pi.setLabel`: a Pi `label` entry on `target_id` (`None` clears it).
    pub fn set_label(&self, target_id: &str, label: Option<&str>) -> Result<String, CommandError> {
        Ok(self.state().session.append_label(target_id, label)?)
    }

    /// Pi's totals: every message of the session file, on every branch and from before any
    /// compaction, and the summaries' own cost.
    pub fn session_stats(&self) -> SessionStats {
        let state = self.state();
        let (mut users, mut assistants, mut calls, mut results, mut total) = (0, 0, 0, 0, 0);
        let mut tokens = TokenTotals::default();
        let mut cost = 0.0;
        let mut add = |usage: &Usage| {
            tokens.input += usage.input;
            tokens.output += usage.output;
            tokens.cache_read += usage.cache_read;
            tokens.cache_write += usage.cache_write;
            cost += usage.cost.total;
        };
        for entry in state.session.entries() {
            let message = match &entry.body {
                Body::Message(m) => m,
                Body::Compaction {
                    usage: Some(usage), ..
                } => {
                    add(usage);
                    continue;
                }
                _ => continue,
            };
            total += 1;
            match &**message {
                Message::User(_) => users += 1,
                Message::Assistant(a) => {
                    assistants += 1;
                    calls += a.tool_calls().count();
                    add(&a.usage);
                }
                Message::ToolResult(_) => results += 1,
                Message::CompactionSummary(_) | Message::BashExecution(_) | Message::Custom(_) => {}
            }
        }
        tokens.total = tokens.input + tokens.output + tokens.cache_read + tokens.cache_write;
        let context_usage = state.model.as_ref().map(|model| {
            // After a compaction only a reply since then measured the context: until one comes,
            // the size is unknown, as Pi reports it.
            let estimate = super::compaction::context_tokens(&state.messages, state.usage_from);
            let compacted = matches!(
                state.messages.first().map(|m| &**m),
                Some(Message::CompactionSummary(_))
            );
            let tokens = (!compacted || estimate.usage_tokens > 0).then_some(estimate.tokens);
            ContextUsage {
                tokens,
                context_window: model.context_window,
                // Pi's order of operations, so the float is the same to the last bit.
                percent: tokens
                    .filter(|_| model.context_window > 0)
                    .map(|t| t as f64 / model.context_window as f64 * 100.0),
            }
        });
        SessionStats {
            session_file: state
                .session
                .path()
                .map(|p| p.to_string_lossy().into_owned()),
            session_id: state.session.id().to_owned(),
            user_messages: users,
            assistant_messages: assistants,
            tool_calls: calls,
            tool_results: results,
            total_messages: total,
            tokens,
            cost,
            context_usage,
        }
    }

    pub fn fork_messages(&self) -> Vec<ForkMessage> {
        self.state().session.fork_messages()
    }

    /// Continues in a new session holding the conversation up to (not including) user message
    /// `entry_id`; answers with that message's text for the client's editor, or `None` when an
    /// extension's `session_before_fork` hook cancelled it.
    pub async fn fork(&self, entry_id: &str) -> Result<Option<String>, CommandError> {
        if self.state().run.is_some() {
            return Err(CommandError::Busy("fork"));
        }
        // Checked before the hooks, which must not be asked about a fork that cannot happen.
        let known = self
            .state()
            .session
            .fork_messages()
            .iter()
            .any(|m| m.entry_id == entry_id);
        if !known {
            return Err(SessionError::InvalidForkEntry(entry_id.to_owned()).into());
        }
        self.fork_at(entry_id, "before").await
    }

    /// Continues in a new session holding the whole current conversation (`at`: Pi's fork
    /// `position: "at"`, the path through that entry); `true` when an extension's
    /// `session_before_fork` hook cancelled it.
    pub async fn clone_session(&self, at: Option<&str>) -> Result<bool, CommandError> {
        let leaf = {
            let state = self.state();
            if state.run.is_some() {
                return Err(CommandError::Busy("clone the session"));
            }
            if let Some(id) = at
                && !state.session.has_entry(id)
            {
                return Err(SessionError::EntryNotFound(id.to_owned()).into());
            }
            at.map(str::to_owned)
                .or_else(|| state.session.leaf_id().map(str::to_owned))
        };
        let Some(leaf) = leaf else {
            // Nothing to clone through: Pi's hooks get no entry id to ask about.
            let mut state = self.state();
            let session = state
                .session
                .clone_session(self.inner.session_files.clone())?;
            self.adopt(&mut state, session);
            return Ok(false);
        };
        Ok(self.fork_at(&leaf, "at").await?.is_none())
    }

    /// A fork (`before` user message `entry_id`) or clone (`at` entry `entry_id`) through the
    /// extensions' lifecycle; the forked message's text (empty for a clone).
    async fn fork_at(
        &self,
        entry_id: &str,
        position: &str,
    ) -> Result<Option<String>, CommandError> {
        let before = json!({
            "type": "session_before_fork",
            "entryId": entry_id,
            "position": position,
        });
        let dir = self.inner.session_files.clone();
        self.replace_session(Some(before), "fork", None, |mut state| {
            let (session, text) = if position == "at" {
                (state.session.clone_at(entry_id, dir)?, String::new())
            } else {
                state.session.fork(entry_id, dir)?
            };
            self.adopt(&mut state, session);
            Ok(text)
        })
        .await
    }

    /// The session file's first line (what Pi's `getHeader` reads).
    pub fn session_header(&self) -> crate::session::Header {
        self.state().session.header().clone()
    }

    pub fn entries(&self, since: Option<&str>) -> Result<ResponseData, CommandError> {
        let state = self.state();
        let entries = state.session.entries_since(since)?;
        encode(&entries)
    }

    /// The session tree. It nests once per entry along a branch, so it is encoded on a thread
    /// whose stack grows with the session rather than on the runtime's.
    pub fn tree(&self) -> Result<ResponseData, CommandError> {
        let state = self.state();
        let depth = state.session.entries().len();
        let tree = state.session.tree();
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .stack_size(8 * 1024 * 1024 + depth * 2048)
                .spawn_scoped(scope, || encode(&tree))
                .map_err(|source| CommandError::Thread {
                    what: "tree encoder",
                    source,
                })?
                .join()
                .map_err(|_| CommandError::Crashed {
                    what: "encoding the session tree",
                    detail: None,
                })?
        })
    }

    /// Writes the conversation as one self-contained HTML file; answers with its path. The
    /// conversation is taken now; rendering and writing run off the runtime thread, within
    /// [`fs::EXPORT_TIME`], from the returned future (so a slow disk never holds up the caller).
    pub fn export_html(
        &self,
        output_path: Option<String>,
    ) -> impl Future<Output = Result<String, CommandError>> + Send + 'static {
        let (meta, messages, default_name) = {
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
                meta,
                state.messages.clone(),
                format!("nova-session-{stem}.html"),
            )
        };
        let requested = PathBuf::from(output_path.unwrap_or(default_name));
        // A relative path (and the default name) is the model's to influence, so it must stay
        // inside the workspace; an absolute one is the client's own choice.
        let workspace = requested.is_relative().then(|| self.inner.cwd.clone());
        let path = self.inner.cwd.join(requested);
        async move {
            let never = tokio_util::sync::CancellationToken::new();
            fs::bounded(
                fs::Threads::Client,
                &never,
                fs::EXPORT_TIME,
                move |commit| {
                    let page = render_html(&meta, &messages);
                    write_export(&path, workspace.as_deref(), &page, commit)?;
                    Ok(path.to_string_lossy().into_owned())
                },
            )
            .await
            .map_err(CommandError::Export)
        }
    }
}

/// `--export <file> [output]`: the conversation of a session file (its current branch) as an
/// HTML page at `output`, else at `nova-session-<file stem>.html` in the current directory.
/// Both paths are the operator's own, so neither is confined to a workspace.
pub async fn export_file(file: PathBuf, output: Option<PathBuf>) -> Result<PathBuf, String> {
    let never = tokio_util::sync::CancellationToken::new();
    fs::bounded(
        fs::Threads::Client,
        &never,
        fs::EXPORT_TIME,
        move |commit| {
            let (session, _) = Session::open(&file).map_err(|e| format!("Cannot export: {e}"))?;
            let context = session.context();
            let meta = ExportMeta {
                session_id: session.id().to_owned(),
                session_name: session.name().map(str::to_owned),
                cwd: session.cwd().to_owned(),
                created: session.created().to_owned(),
                model: context.model.as_ref().map(|(p, id)| format!("{p}/{id}")),
            };
            let path = output.unwrap_or_else(|| {
                let stem = file.file_stem().unwrap_or_default().to_string_lossy();
                PathBuf::from(format!("nova-session-{stem}.html"))
            });
            let cwd = std::env::current_dir().map_err(|e| format!("Cannot export: {e}"))?;
            let path = cwd.join(path);
            let page = render_html(&meta, &context.messages);
            write_export(&path, None, &page, commit)?;
            Ok(path)
        },
    )
    .await
}

/// Writes an export page at `path`: never through a symbolic link, never over anything but a
/// regular file, and (with `workspace`) only inside it. Links in the directory part are
/// resolved once; the file is then made beside its target and renamed over it through that one
/// directory handle ([`safe_open::Target`]).
fn write_export(
    path: &Path,
    workspace: Option<&Path>,
    page: &str,
    commit: &safe_open::Commit,
) -> Result<(), String> {
    let fail = |e: std::io::Error, op| format!("Cannot export: {}", fs::error_text(&e, op, path));
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(format!(
            "Cannot export: {} does not name a file",
            path.display()
        ));
    };
    let dir = std::fs::canonicalize(parent).map_err(|e| fail(e, "open"))?;
    if let Some(workspace) = workspace {
        let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.into());
        if !dir.starts_with(&workspace) {
            return Err(format!(
                "Cannot export: a relative outputPath must stay inside the workspace ({}), but {} \
                 lies in {}; give an absolute path to export elsewhere",
                workspace.display(),
                path.display(),
                dir.display()
            ));
        }
    }
    safe_open::Target::open(&dir.join(name), false)
        .and_then(|target| target.replace(page.as_bytes(), commit))
        .map_err(|e| fail(e, "write"))
}

/// A session-file view as a pre-encoded payload.
fn encode(view: &impl Serialize) -> Result<ResponseData, CommandError> {
    serde_json::value::to_raw_value(view)
        .map(ResponseData::Encoded)
        .map_err(CommandError::from)
}
