//! Sessions as Pi stores them: one JSONL file per session, a header line then entries that form
//! a tree through `parentId` (pi-reference §6).
//!
//! [`Session`] is the file's one writer. The file appears, header first, with the first user
//! message; after that every `append_*` writes its whole line with a single `write_all` on an
//! `O_APPEND` handle before returning, so an entry the caller has announced survives a kill.
//! [`Session::open`] is tolerant: torn or malformed lines are skipped and reported once, and
//! entries nova does not model are kept and written back unchanged, but left out of the
//! conversation.

mod entry;
mod error;
mod list;
mod load;
pub mod paths;
mod tree;

pub use entry::{Body, Entry, Header};
pub use error::SessionError;
pub use list::list;
pub use tree::{Context, EntriesSince, Tree, TreeNode};

use crate::protocol::{Message, Usage, UserContent};
use entry::VERSION;
use serde_json::Value;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// A session: its entries in file order, the current leaf, and the file it is written to.
#[derive(Debug)]
pub struct Session {
    header: Header,
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    leaf: Option<usize>,
    /// `None` in memory: nothing is ever written.
    path: Option<PathBuf>,
    /// Open once the header is on disk.
    file: Option<File>,
    /// The file does not end with a newline (a torn last line, or a failed write): the next
    /// line must start with one so it is not glued onto the fragment.
    newline_owed: bool,
}

impl Session {
    /// A new, empty session with a fresh UUIDv7 id. With `file_dir`, its file will be
    /// `<file_dir>/<timestamp>_<id>.jsonl`, written from the first user message on.
    pub fn create(file_dir: Option<PathBuf>, cwd: &Path, parent_session: Option<String>) -> Self {
        Session::create_with_id(
            file_dir,
            cwd,
            parent_session,
            uuid::Uuid::now_v7().to_string(),
        )
    }

    /// [`Session::create`] with an id the caller chose (Pi's `--session-id`).
    pub fn create_with_id(
        file_dir: Option<PathBuf>,
        cwd: &Path,
        parent_session: Option<String>,
        id: String,
    ) -> Self {
        let timestamp = now_iso();
        let path = file_dir.map(|d| d.join(paths::file_name(&timestamp, &id)));
        Session {
            header: Header {
                kind: "session".into(),
                version: Some(VERSION),
                id,
                timestamp,
                cwd: cwd.to_string_lossy().into_owned(),
                parent_session,
            },
            entries: Vec::new(),
            index: HashMap::new(),
            leaf: None,
            path,
            file: None,
            newline_owed: false,
        }
    }

    /// Loads a session file. The leaf is the last entry in file order. Pi's v1 and v2 files are
    /// migrated and rewritten as v3, as Pi does.
    pub fn open(path: &Path) -> Result<(Session, Vec<String>), SessionError> {
        let shown = path.display();
        let file = File::open(path).map_err(|source| SessionError::Open {
            path: shown.to_string(),
            source,
        })?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut line = Vec::new();
        let read_err = |source| SessionError::Read {
            path: shown.to_string(),
            source,
        };
        reader.read_until(b'\n', &mut line).map_err(read_err)?;
        let header = serde_json::from_slice::<Header>(&line)
            .ok()
            .filter(Header::is_valid)
            .ok_or_else(|| SessionError::NotASession(shown.to_string()))?;
        let mut ends_with_newline = line.ends_with(b"\n");

        let mut warnings = Vec::new();
        let mut malformed = 0usize;
        let old_version = header.version.unwrap_or(1);
        let mut entries = if old_version >= VERSION {
            let lines = load::read_entries(path, line.len() as u64).map_err(read_err)?;
            malformed = lines.malformed;
            ends_with_newline = lines.ends_with_newline.unwrap_or(ends_with_newline);
            lines.entries
        } else {
            let mut rest = Vec::new();
            reader.read_to_end(&mut rest).map_err(read_err)?;
            let mut raw = Vec::new();
            for l in rest.split(|b| *b == b'\n') {
                if l.trim_ascii().is_empty() {
                    continue;
                }
                match serde_json::from_slice::<Value>(l) {
                    Ok(v) => raw.push(v),
                    Err(_) => malformed += 1,
                }
            }
            migrate(old_version, &mut raw);
            raw.into_iter().filter_map(entry::from_value).collect()
        };
        entries.shrink_to_fit();
        if malformed > 0 {
            warnings.push(format!("skipped {malformed} malformed line(s) in {shown}"));
        }

        let mut session = Session {
            header,
            index: HashMap::with_capacity(entries.len()),
            leaf: entries.len().checked_sub(1),
            entries,
            path: Some(path.to_path_buf()),
            file: None,
            newline_owed: !ends_with_newline,
        };
        for (i, e) in session.entries.iter().enumerate() {
            session.index.insert(e.id.clone(), i);
        }
        if old_version < VERSION {
            session.header.version = Some(VERSION);
            session.rewrite()?;
            warnings.push(format!(
                "migrated {shown} from session format v{old_version} to v{VERSION}"
            ));
        }
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|source| SessionError::OpenForWriting {
                path: shown.to_string(),
                source,
            })?;
        session.file = Some(file);
        Ok((session, warnings))
    }

    /// `--continue` on a file whose header line is damaged: its readable entries go into a new
    /// session (in `file_dir`, `parentSession` naming the damaged file, which is left as it
    /// was), so nothing it held is lost and nothing is written into a file no reader accepts.
    /// The warnings name the file and say what was kept, or why the new session starts empty.
    pub fn salvage(
        path: &Path,
        file_dir: Option<PathBuf>,
        cwd: &Path,
    ) -> Result<(Session, Vec<String>), SessionError> {
        let shown = path.display();
        let lines = load::read_entries(path, 0).map_err(|source| SessionError::Read {
            path: shown.to_string(),
            source,
        })?;
        if lines.entries.is_empty() {
            let session = Session::create(file_dir, cwd, None);
            let warning = format!(
                "{shown} has no valid session header and no readable entries ({} malformed \
                 line(s)), so a new session starts; the file is left as it was",
                lines.malformed
            );
            return Ok((session, vec![warning]));
        }
        let mut session = Session::create(file_dir, cwd, Some(path.to_string_lossy().into()));
        session.entries = lines.entries;
        for (i, e) in session.entries.iter().enumerate() {
            session.index.insert(e.id.clone(), i);
        }
        session.leaf = session.entries.len().checked_sub(1);
        session.materialize_if_due()?;
        let new_file = session
            .path()
            .map_or_else(|| "memory".to_owned(), |p| p.display().to_string());
        let warning = format!(
            "{shown} has no valid session header; resumed its {} readable entries in a new \
             session file {new_file} (skipped {} malformed line(s); the damaged file is left as \
             it was)",
            session.entries.len(),
            lines.malformed
        );
        Ok((session, vec![warning]))
    }

    /// The file's first line, as Pi's JSON mode shows it before the events.
    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// The file this session has or will have; `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn cwd(&self) -> &str {
        &self.header.cwd
    }

    /// When the session began (the header's ISO timestamp).
    pub fn created(&self) -> &str {
        &self.header.timestamp
    }

    pub fn parent_session(&self) -> Option<&str> {
        self.header.parent_session.as_deref()
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.map(|i| self.entries[i].id.as_str())
    }

    /// All entries in file order, every branch included.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The latest `session_info` name in file order; an empty name clears it, as in Pi.
    pub fn name(&self) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find_map(|e| match &e.body {
                Body::SessionInfo { name } => Some(name.as_deref().map(str::trim).unwrap_or("")),
                _ => None,
            })
            .filter(|n| !n.is_empty())
    }

    pub fn append_message(&mut self, message: &Arc<Message>) -> Result<String, SessionError> {
        self.append(Body::Message(Arc::clone(message)))
    }

    pub fn append_model_change(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> Result<String, SessionError> {
        self.append(Body::ModelChange {
            provider: provider.into(),
            model_id: model_id.into(),
        })
    }

    pub fn append_thinking_level(&mut self, level: &str) -> Result<String, SessionError> {
        self.append(Body::ThinkingLevelChange {
            thinking_level: level.into(),
        })
    }

    pub fn append_active_tools(&mut self, tools: &[String]) -> Result<String, SessionError> {
        self.append(Body::ActiveTools {
            tools: tools.to_vec(),
        })
    }

    pub fn append_custom(
        &mut self,
        custom_type: &str,
        data: Option<Value>,
    ) -> Result<String, SessionError> {
        self.append(Body::Custom {
            custom_type: custom_type.to_owned(),
            data,
        })
    }

    /// Pi's `label` entry: labels `target_id` (or clears its label), which must be an entry
    /// of this session.
    pub fn append_label(
        &mut self,
        target_id: &str,
        label: Option<&str>,
    ) -> Result<String, SessionError> {
        if !self.index.contains_key(target_id) {
            return Err(SessionError::EntryNotFound(target_id.to_owned()));
        }
        self.append(Body::Label {
            target_id: target_id.to_owned(),
            label: label.map(str::to_owned),
        })
    }

    pub fn append_session_info(&mut self, name: &str) -> Result<String, SessionError> {
        self.append(Body::SessionInfo {
            name: Some(name.trim().into()),
        })
    }

    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: &str,
        tokens_before: u64,
        details: Option<Value>,
        usage: Option<Usage>,
        from_extension: bool,
    ) -> Result<String, SessionError> {
        self.append(Body::Compaction {
            summary: summary.into(),
            first_kept_entry_id: first_kept_entry_id.into(),
            tokens_before,
            details,
            from_hook: from_extension.then_some(true),
            usage,
        })
    }

    /// Takes `message`, when it is the newest entry, out of the conversation (a failed reply
    /// that is being retried) while keeping it in the file, as Pi 1.6 does with a
    /// `context_edit`.
    /// Returns the `context_edit` entry appended, as written, for `entry_appended`.
    pub fn omit_last_message(
        &mut self,
        message: &Arc<Message>,
    ) -> Result<Option<Value>, SessionError> {
        let target = match self.leaf.map(|i| &self.entries[i]) {
            Some(Entry {
                id,
                body: Body::Message(m),
                ..
            }) if Arc::ptr_eq(m, message) => id.clone(),
            _ => return Ok(None),
        };
        self.append(Body::ContextOmit { target_id: target })?;
        Ok(self
            .entries
            .last()
            .and_then(|e| serde_json::to_value(e).ok()))
    }

    /// Adds `body` as a child of the leaf and moves the leaf to it. The entry is on disk (when
    /// the session has a file) before this returns; if writing fails it is not added at all, so
    /// memory and file never disagree about the tree.
    fn append(&mut self, body: Body) -> Result<String, SessionError> {
        // A custom message takes its time from its entry when read back (as in Pi), so its
        // entry carries the message's own time and it reads back unchanged.
        let timestamp = match &body {
            Body::Message(m) if let Message::Custom(c) = &**m => ms_to_iso(c.timestamp),
            _ => now_iso(),
        };
        let entry = Entry {
            id: self.fresh_id(),
            parent_id: self.leaf_id().map(str::to_owned),
            timestamp,
            body,
        };
        let id = entry.id.clone();
        self.entries.push(entry);
        let written = if self.file.is_some() {
            self.write_last()
        } else {
            self.materialize_if_due()
        };
        match written {
            Ok(()) => {
                self.index.insert(id.clone(), self.entries.len() - 1);
                self.leaf = Some(self.entries.len() - 1);
                Ok(id)
            }
            Err(e) => {
                self.entries.pop();
                Err(e)
            }
        }
    }

    /// 8 hex digits from a random UUID, as Pi makes them, unique within this session.
    fn fresh_id(&self) -> String {
        loop {
            let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
            if !self.index.contains_key(&id) {
                return id;
            }
        }
    }

    fn write_last(&mut self) -> Result<(), SessionError> {
        let Some(entry) = self.entries.last() else {
            return Ok(());
        };
        let mut line = Vec::with_capacity(512);
        if self.newline_owed {
            line.push(b'\n');
        }
        serde_json::to_writer(&mut line, entry)?;
        line.push(b'\n');
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        // One write_all on an O_APPEND handle: a kill never leaves half of one entry followed
        // by another.
        match file.write_all(&line).and_then(|()| file.flush()) {
            Ok(()) => {
                self.newline_owed = false;
                Ok(())
            }
            Err(e) => {
                self.newline_owed = true;
                Err(self.write_error(e))
            }
        }
    }

    /// Writes the header and every entry so far once a user message exists (no empty files).
    fn materialize_if_due(&mut self) -> Result<(), SessionError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let has_user = self
            .entries
            .iter()
            .any(|e| matches!(&e.body, Body::Message(m) if matches!(**m, Message::User(_))));
        if !has_user {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| self.write_error(e))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| self.write_error(e))?;
        let blob = self.serialize_all()?;
        // The name is ours (a fresh uuid); a leftover from an earlier failed attempt is
        // replaced.
        file.set_len(0)
            .and_then(|()| file.write_all(&blob))
            .and_then(|()| file.flush())
            .map_err(|e| self.write_error(e))?;
        self.file = Some(file);
        self.newline_owed = false;
        Ok(())
    }

    fn serialize_all(&self) -> Result<Vec<u8>, SessionError> {
        let mut blob = Vec::new();
        push_line(&mut blob, &self.header)?;
        for e in &self.entries {
            push_line(&mut blob, e)?;
        }
        Ok(blob)
    }

    /// Replaces the file with the current contents, atomically (migration only).
    fn rewrite(&mut self) -> Result<(), SessionError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let blob = self.serialize_all()?;
        let tmp = path.with_extension("jsonl.tmp");
        fs::write(&tmp, &blob)
            .and_then(|()| fs::rename(&tmp, &path))
            .map_err(|e| self.write_error(e))?;
        self.newline_owed = false;
        Ok(())
    }

    fn write_error(&self, source: std::io::Error) -> SessionError {
        let path = self.path.as_deref().unwrap_or(Path::new(""));
        SessionError::Write {
            path: path.display().to_string(),
            source,
        }
    }

    /// A new session holding the path from the root to `leaf` (inclusive), with
    /// `parentSession` set to this file.
    fn branch(
        &self,
        leaf: Option<usize>,
        file_dir: Option<PathBuf>,
    ) -> Result<Session, SessionError> {
        let parent = self.path.as_ref().map(|p| p.to_string_lossy().into_owned());
        let cwd = PathBuf::from(&self.header.cwd);
        let mut s = Session::create(file_dir, &cwd, parent);
        s.entries = self
            .path_to(leaf)
            .into_iter()
            .map(|i| self.entries[i].clone())
            .collect();
        for (i, e) in s.entries.iter().enumerate() {
            s.index.insert(e.id.clone(), i);
        }
        s.leaf = s.entries.len().checked_sub(1);
        s.materialize_if_due()?;
        Ok(s)
    }

    /// A new session with the path up to the parent of user message `entry_id`, and that
    /// message's text (for the client's editor).
    pub fn fork(
        &self,
        entry_id: &str,
        new_file_dir: Option<PathBuf>,
    ) -> Result<(Session, String), SessionError> {
        let Some(&i) = self.index.get(entry_id) else {
            return Err(SessionError::InvalidForkEntry(entry_id.to_owned()));
        };
        let Body::Message(message) = &self.entries[i].body else {
            return Err(SessionError::InvalidForkEntry(entry_id.to_owned()));
        };
        let Message::User(user) = &**message else {
            return Err(SessionError::InvalidForkEntry(entry_id.to_owned()));
        };
        let parent = self.entries[i]
            .parent_id
            .as_ref()
            .and_then(|p| self.index.get(p).copied());
        let session = self.branch(parent, new_file_dir)?;
        Ok((session, user_text(&user.content)))
    }

    /// The current path in a new session of `cwd` (Pi's `--fork`), with `id` when given.
    pub fn fork_into(
        &self,
        cwd: &Path,
        file_dir: Option<PathBuf>,
        id: Option<String>,
    ) -> Result<Session, SessionError> {
        let mut s = self.branch(self.leaf, None)?;
        let id = id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let fresh = Session::create_with_id(file_dir, cwd, s.header.parent_session.take(), id);
        s.header = fresh.header;
        s.path = fresh.path;
        s.materialize_if_due()?;
        Ok(s)
    }

    /// The current path in a new session.
    pub fn clone_session(&self, new_file_dir: Option<PathBuf>) -> Result<Session, SessionError> {
        self.branch(self.leaf, new_file_dir)
    }

    /// The path through `entry_id` in a new session (Pi's fork `position: "at"`).
    pub fn clone_at(
        &self,
        entry_id: &str,
        new_file_dir: Option<PathBuf>,
    ) -> Result<Session, SessionError> {
        let &i = self
            .index
            .get(entry_id)
            .ok_or_else(|| SessionError::EntryNotFound(entry_id.to_owned()))?;
        self.branch(Some(i), new_file_dir)
    }

    pub fn has_entry(&self, entry_id: &str) -> bool {
        self.index.contains_key(entry_id)
    }
}

/// Text of a user message as Pi extracts it for forking: text blocks joined with nothing.
fn user_text(content: &UserContent) -> String {
    match content {
        UserContent::Text(t) => t.clone(),
        UserContent::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                crate::protocol::ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect(),
    }
}

/// Pi's v1 → v2 (ids and a parent chain) and v2 → v3 (`hookMessage` → `custom`) migrations.
fn migrate(version: u64, raw: &mut [Value]) {
    if version < 2 {
        let ids: Vec<String> = (0..raw.len())
            .map(|i| format!("{:08x}", i as u64 + 1))
            .collect();
        for (i, v) in raw.iter_mut().enumerate() {
            let Some(obj) = v.as_object_mut() else {
                continue;
            };
            obj.insert("id".into(), ids[i].clone().into());
            let parent = i.checked_sub(1).map(|p| Value::from(ids[p].clone()));
            obj.insert("parentId".into(), parent.unwrap_or(Value::Null));
            // The index counted the header as line 0.
            if let Some(k) = obj.remove("firstKeptEntryIndex").and_then(|k| k.as_u64())
                && let Some(id) = (k as usize).checked_sub(1).and_then(|k| ids.get(k))
            {
                obj.insert("firstKeptEntryId".into(), id.clone().into());
            }
        }
    }
    for v in raw.iter_mut() {
        if let Some(role) = v.pointer_mut("/message/role")
            && role == "hookMessage"
        {
            *role = "custom".into();
        }
    }
}

fn now_iso() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn ms_to_iso(ms: i64) -> String {
    let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0).unsigned_abs());
    humantime::format_rfc3339_millis(at).to_string()
}

/// Milliseconds since the epoch of an entry's ISO timestamp (0 when unreadable).
fn iso_to_ms(iso: &str) -> i64 {
    humantime::parse_rfc3339_weak(iso)
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

fn push_line(out: &mut Vec<u8>, value: &impl serde::Serialize) -> Result<(), SessionError> {
    serde_json::to_writer(&mut *out, value)?;
    out.push(b'\n');
    Ok(())
}

#[cfg(test)]
mod tests;
