//! What can go wrong with a session file, as data: the agent tells a failed write (the client
//! must hear of it) from a missing session or entry (the command's own mistake).

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("Cannot open session {path}: {source}")]
    Open { path: String, source: io::Error },
    #[error("Cannot read session {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("Not a session file (no valid header): {0}")]
    NotASession(String),
    #[error("Cannot open session {path} for writing: {source}")]
    OpenForWriting { path: String, source: io::Error },
    #[error("Cannot write session {path}: {source}")]
    Write { path: String, source: io::Error },
    #[error("Cannot encode a session entry: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("Invalid entry ID for forking: {0}")]
    InvalidForkEntry(String),
    #[error("Entry not found: {0}")]
    EntryNotFound(String),
    #[error("Session file not found: {0}")]
    FileNotFound(String),
    #[error("Session id is empty")]
    EmptyId,
    #[error("Session id prefix '{query}' is ambiguous: {candidates}")]
    Ambiguous { query: String, candidates: String },
    #[error("No session found with id '{0}'")]
    NoSuchId(String),
    #[error("Session already exists with id '{id}': {path}")]
    IdTaken { id: String, path: String },
}

impl SessionError {
    /// Whether the file could not be written: the conversation in memory is ahead of the file.
    pub fn is_write_failure(&self) -> bool {
        matches!(
            self,
            SessionError::Write { .. }
                | SessionError::OpenForWriting { .. }
                | SessionError::Encode(_)
        )
    }
}
