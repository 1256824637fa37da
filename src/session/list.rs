//! `list_sessions`: a summary of each session file from one streaming pass over its lines.
//! Only the header, the first user message and `session_info` lines are parsed; every other
//! line is told apart by its prefix (Pi and nova both write `type` first), so listing thousands
//! of sessions never loads one into memory: at most [`MAX_PARSED_LINE`] bytes of a line are
//! held, the rest is skipped as it streams past.

use super::entry::Header;
use super::paths::{self, Scope};
use crate::protocol::SessionListing;
use serde::Deserialize;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// How much of the first user message a listing shows, in characters.
const FIRST_MESSAGE_CHARS: usize = 200;
/// A line longer than this is not parsed for the fields above (a pasted image): it still counts.
const MAX_PARSED_LINE: usize = 1 << 20;

const MESSAGE_PREFIX: &[u8] = br#"{"type":"message""#;
const INFO_PREFIX: &[u8] = br#"{"type":"session_info""#;

/// The sessions of the cwd's directory (or of every directory with `all`), newest first.
/// Files that are not sessions (no valid header) are left out.
pub fn list(scope: Scope<'_>, all: bool) -> Vec<SessionListing> {
    let mut dirs = paths::search_dirs(scope);
    if !all {
        dirs.truncate(1);
    }
    let mut out: Vec<SessionListing> = dirs
        .iter()
        .flat_map(|dir| paths::session_files(dir))
        .filter_map(|path| summarize(&path))
        .collect();
    out.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| a.path.cmp(&b.path))
    });
    out
}

#[derive(Deserialize)]
struct FirstMessage {
    message: Role,
}

#[derive(Deserialize)]
struct Role {
    role: String,
    #[serde(default)]
    content: serde_json::Value,
}

#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    name: Option<String>,
}

fn summarize(path: &Path) -> Option<SessionListing> {
    let file = File::open(path).ok()?;
    let modified = file.metadata().and_then(|m| m.modified()).ok()?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    if !next_line(&mut reader, &mut line)? {
        return None;
    }
    let header: Header = serde_json::from_slice(&line).ok()?;
    if !header.is_valid() {
        return None;
    }
    let mut message_count = 0;
    let mut first_message: Option<String> = None;
    let mut name = None;
    while let Some(parsable) = next_line(&mut reader, &mut line) {
        if line.starts_with(MESSAGE_PREFIX) {
            message_count += 1;
            if first_message.is_none()
                && parsable
                && let Ok(entry) = serde_json::from_slice::<FirstMessage>(&line)
                && entry.message.role == "user"
            {
                first_message = Some(preview(&entry.message.content));
            }
        } else if line.starts_with(INFO_PREFIX)
            && parsable
            && let Ok(info) = serde_json::from_slice::<Info>(&line)
        {
            // The last one names the session, as it does when the session is loaded.
            name = info.name.filter(|n| !n.trim().is_empty());
        }
    }
    Some(SessionListing {
        id: header.id,
        path: path.display().to_string(),
        name,
        cwd: header.cwd,
        created: header.timestamp,
        modified: humantime::format_rfc3339_millis(modified).to_string(),
        message_count,
        first_message: first_message.unwrap_or_default(),
        parent_session: header.parent_session,
    })
}

/// Reads the next line into `line`, keeping at most [`MAX_PARSED_LINE`] + 1 bytes of it and
/// skipping the rest. `Some(true)`: the whole line is in `line`; `Some(false)`: it was longer
/// (its start is still there, enough for the prefix checks); `None`: end of input, or a read
/// error, which ends the summary the same way.
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> Option<bool> {
    line.clear();
    let read = reader
        .by_ref()
        .take(MAX_PARSED_LINE as u64 + 1)
        .read_until(b'\n', line)
        .ok()?;
    if read == 0 {
        return None;
    }
    if line.ends_with(b"\n") || read <= MAX_PARSED_LINE {
        return Some(true);
    }
    reader.skip_until(b'\n').ok()?;
    Some(false)
}

/// The text of a user message's content (a string or text blocks), on one line, shortened.
fn preview(content: &serde_json::Value) -> String {
    let text = match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(serde_json::Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(FIRST_MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}
