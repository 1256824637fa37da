//! Where session files live and how a user's `--session` value finds one.
//!
//! Layout (Pi's): `<agent dir>/sessions/--<cwd slug>--/<timestamp>_<uuid>.jsonl`.

use super::SessionError;
use super::entry::Header;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The directory name for a cwd: the leading separator dropped, `/`, `\` and `:` turned into
/// `-`, wrapped in `--`.
pub fn cwd_slug(cwd: &Path) -> String {
    let s = cwd.to_string_lossy();
    let s = s.strip_prefix(['/', '\\']).unwrap_or(&s);
    format!("--{}--", s.replace(['/', '\\', ':'], "-"))
}

/// The sessions directory of `cwd` under the agent dir.
pub fn default_dir(agent_dir: &Path, cwd: &Path) -> PathBuf {
    agent_dir.join("sessions").join(cwd_slug(cwd))
}

/// `<ISO timestamp with : and . turned into ->_<id>.jsonl`.
pub fn file_name(timestamp: &str, id: &str) -> String {
    format!("{}_{id}.jsonl", timestamp.replace([':', '.'], "-"))
}

/// Where [`resolve`] looks for a session id.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub agent_dir: &'a Path,
    pub cwd: &'a Path,
    /// `--session-dir`: when given, the only place searched.
    pub session_dir: Option<&'a Path>,
}

/// Finds a session file from a path (anything with `/` or ending in `.jsonl`) or from a header
/// id or unique id prefix. Ids are searched in the session dir when one is given, else in the
/// cwd's directory and then in every directory under `<agent dir>/sessions`; the first place
/// with a match decides.
pub fn resolve(query: &str, scope: Scope<'_>) -> Result<PathBuf, SessionError> {
    if query.contains('/') || query.ends_with(".jsonl") {
        let path = scope.cwd.join(query);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(SessionError::FileNotFound(path.display().to_string()))
        };
    }
    by_id(query, true, scope)
}

/// The session whose header id is exactly `id` (a client that names a session it listed), in
/// the same places as [`resolve`].
pub fn find_id(id: &str, scope: Scope<'_>) -> Result<PathBuf, SessionError> {
    by_id(id, false, scope)
}

/// The session in `dir` (only there) whose header id is exactly `id`: Pi's `--session-id`,
/// which names a session of the current directory.
pub fn find_in(dir: &Path, id: &str) -> Option<PathBuf> {
    session_files(dir)
        .into_iter()
        .find(|p| header_id(p).as_deref() == Some(id))
}

fn by_id(query: &str, prefix: bool, scope: Scope<'_>) -> Result<PathBuf, SessionError> {
    let wanted = query.trim().to_ascii_lowercase();
    if wanted.is_empty() {
        return Err(SessionError::EmptyId);
    }
    for dir in search_dirs(scope) {
        let mut found: Vec<(String, PathBuf)> = session_files(&dir)
            .into_iter()
            .filter_map(|p| Some((header_id(&p)?, p)))
            .filter(|(id, _)| {
                let id = id.to_ascii_lowercase();
                if prefix {
                    id.starts_with(&wanted)
                } else {
                    id == wanted
                }
            })
            .collect();
        if let Some(i) = found
            .iter()
            .position(|(id, _)| id.eq_ignore_ascii_case(&wanted))
        {
            return Ok(found.swap_remove(i).1);
        }
        match found.len() {
            0 => continue,
            1 => return Ok(found.swap_remove(0).1),
            _ => {
                found.sort();
                let list: Vec<String> = found
                    .iter()
                    .map(|(id, p)| format!("{id} ({})", p.display()))
                    .collect();
                return Err(SessionError::Ambiguous {
                    query: query.to_owned(),
                    candidates: list.join(", "),
                });
            }
        }
    }
    Err(SessionError::NoSuchId(query.to_owned()))
}

/// The session dir when one is given; else the cwd's directory first, then every other one.
pub(super) fn search_dirs(scope: Scope<'_>) -> Vec<PathBuf> {
    if let Some(dir) = scope.session_dir {
        return vec![dir.to_path_buf()];
    }
    let own = default_dir(scope.agent_dir, scope.cwd);
    let mut dirs = vec![own.clone()];
    if let Ok(read) = fs::read_dir(scope.agent_dir.join("sessions")) {
        let mut others: Vec<PathBuf> = read
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && *p != own)
            .collect();
        others.sort();
        dirs.extend(others);
    }
    dirs
}

pub(super) fn session_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    read.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl") && p.is_file())
        .collect()
}

/// The header id, reading no more than the first line (bounded, in case it is not a session
/// file at all).
fn header_id(path: &Path) -> Option<String> {
    let file = fs::File::open(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(file.take(64 * 1024))
        .read_until(b'\n', &mut line)
        .ok()?;
    let header: Header = serde_json::from_slice(&line).ok()?;
    header.is_valid().then_some(header.id)
}

/// The most recently modified session file in `dir` (for `--continue`), whether or not its
/// header is intact: a damaged newest file must be salvaged, not passed over for an older one.
pub fn newest(dir: &Path) -> Option<PathBuf> {
    session_files(dir)
        .into_iter()
        .filter_map(|p| {
            let modified = fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            Some((modified, p))
        })
        .max_by_key(|(m, _): &(SystemTime, PathBuf)| *m)
        .map(|(_, p)| p)
}
