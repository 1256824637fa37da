//! What a session's extensions registered at their last load, kept with what that load read,
//! so that the next session with the same extensions can list their commands (and know their
//! tools, events and flags) before the host has loaded them again: a package's own top-level
//! work takes a second or more, and a client asks `get_commands` first.
//!
//! The host notes every path the extensions' load reads through Node's `fs` (their own files,
//! which jiti reads that way, and what they list or read to decide what to register, such as
//! a directory of prompt files) and every environment variable it reads. A record is used only
//! when the session is the same (nova, the host's script, Pi, Node, the project, its trust,
//! the mode and the flags, the extensions' paths) and every such file and directory has the
//! length and modification time it had, and every variable the value it had (kept as a
//! SHA-256, never in clear: variables hold keys). Anything else a load depends on (the
//! network, the clock) is not seen: the host still loads, the answers from then on are its
//! own, and a record that turned out stale is written afresh. Only a load without failures is
//! recorded.
//!
//! A `project_trust` vote keeps a record too, but only to know that none of the user's
//! extensions handles the event (so the vote, a load of its own, can be skipped): what a
//! handler decided is never kept, it is asked each time.

use super::node::{PI_VERSION, Runner};
use super::{HOST_SCRIPT, Mode, Spec, wire};
use crate::config::extensions::Extension;
use ring::digest::{SHA256, digest};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

/// One record per session shape, in `<agent dir>/exthost/records/`.
#[derive(Serialize, Deserialize)]
struct Record {
    /// The session it was made for, in full (the file's name is its digest).
    key: String,
    files: Vec<(PathBuf, Option<Stamp>)>,
    env: Vec<(String, Option<String>)>,
    loaded: wire::Loaded,
}

/// What a file or directory looked like; a change of either field means it changed.
#[derive(Serialize, Deserialize, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified_ns: u128,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    let modified_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Some(Stamp {
        len: meta.len(),
        modified_ns,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(text: &str) -> String {
    hex(digest(&SHA256, text.as_bytes()).as_ref())
}

/// The variable as the host sees it: nova's own (the host's differ only by what the agent dir,
/// part of the key, decides).
fn variable(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| sha256(&v.to_string_lossy()))
}

/// What a record is for, in full: the session's shape, or a `project_trust` vote's.
pub(super) struct Key(String);

impl Key {
    fn new(runner: &Runner, what: serde_json::Value) -> Key {
        Key(serde_json::json!({
            "nova": env!("CARGO_PKG_VERSION"),
            "host": sha256(HOST_SCRIPT),
            "pi": PI_VERSION,
            "node": runner.node,
            "modules": runner.modules,
            "what": what,
        })
        .to_string())
    }

    /// A session's extensions, as `spec` starts them.
    pub(super) fn session(spec: &Spec, runner: &Runner) -> Key {
        Key::new(
            runner,
            serde_json::json!({
                "session": {
                    "cwd": spec.cwd,
                    "trusted": spec.project_trusted,
                    "mode": spec.mode.name(),
                    "paths": spec.extensions.iter().map(|e| &e.path).collect::<Vec<_>>(),
                    "flags": spec.flags.iter().map(|f| (&f.name, &f.value)).collect::<Vec<_>>(),
                }
            }),
        )
    }

    /// The user's extensions `voters`, loaded to vote on `cwd`'s trust.
    pub(super) fn vote(runner: &Runner, cwd: &Path, voters: &[Extension], mode: Mode) -> Key {
        Key::new(
            runner,
            serde_json::json!({
                "vote": {
                    "cwd": cwd,
                    "mode": mode.name(),
                    "paths": voters.iter().map(|e| &e.path).collect::<Vec<_>>(),
                }
            }),
        )
    }

    fn file(&self, agent_dir: &Path) -> PathBuf {
        agent_dir
            .join("exthost")
            .join("records")
            .join(format!("{}.json", &sha256(&self.0)[..32]))
    }
}

/// The registrations of the last load `key` describes, when nothing that load read has
/// changed since.
pub(super) fn recall(agent_dir: &Path, key: &Key) -> Option<wire::Loaded> {
    let text = std::fs::read(key.file(agent_dir)).ok()?;
    let record: Record = serde_json::from_slice(&text).ok()?;
    let unchanged = record.key == key.0
        && record.files.iter().all(|(path, was)| stamp(path) == *was)
        && record.env.iter().all(|(name, was)| variable(name) == *was);
    unchanged.then_some(record.loaded)
}

/// Keeps `loaded` (a load without failures) with the state of what it read, for [`recall`]; a
/// record that cannot be written is only a slower next start.
pub(super) fn remember(agent_dir: &Path, key: &Key, loaded: &wire::Loaded, reads: &wire::Reads) {
    if !loaded.errors.is_empty() || !loaded.flag_errors.is_empty() {
        return;
    }
    let path = key.file(agent_dir);
    let record = Record {
        files: reads.files.iter().map(|f| (f.clone(), stamp(f))).collect(),
        env: reads.env.iter().map(|n| (n.clone(), variable(n))).collect(),
        key: key.0.clone(),
        loaded: loaded.clone(),
    };
    let written = serde_json::to_string(&record)
        .map_err(|e| e.to_string())
        .and_then(|text| super::write_file(&path, &text, 0o600).map_err(|e| e.to_string()));
    if let Err(e) = written {
        tracing::warn!("cannot keep the extensions' registrations: {e}");
    }
    if let Some(dir) = path.parent() {
        forget_old(dir, KEPT);
    }
}

/// How long a record not written again is kept: one per project and set of extensions would
/// otherwise pile up (a few hundred KiB each with large packages).
const KEPT: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Deletes the records in `dir` last written longer than `kept` ago; a record still in use is
/// only written again by a start that could not use it.
fn forget_old(dir: &Path, kept: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > kept));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_changes_with_the_file_and_is_none_for_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prompt.md");
        assert!(stamp(&file).is_none());
        std::fs::write(&file, "one").unwrap();
        let first = stamp(&file).unwrap();
        std::fs::write(&file, "three").unwrap();
        assert!(stamp(&file).unwrap() != first);
    }

    #[test]
    fn records_not_written_for_long_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (dir.path().join("old.json"), dir.path().join("new.json"));
        std::fs::write(&old, "{}").unwrap();
        std::fs::write(&new, "{}").unwrap();
        let long_ago = std::time::SystemTime::now() - Duration::from_secs(40 * 24 * 60 * 60);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        forget_old(dir.path(), KEPT);
        assert!(!old.exists());
        assert!(new.exists());
    }

    #[test]
    fn variables_are_kept_as_digests() {
        let path = std::env::var("PATH").unwrap();
        let kept = variable("PATH").unwrap();
        assert_eq!(kept, sha256(&path));
        assert!(!kept.contains(&path));
        assert_eq!(variable("NOVA_RECORD_TEST_NEVER_SET"), None);
    }
}
