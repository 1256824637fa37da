//! Placeholders: what nova puts where a protected file is missing, for as long as sandboxed
//! commands run, so that the launcher has something to mount read-only there.
//!
//! A command may not create `.git/commondir` or `.mcp.json` either, but no kernel mechanism here
//! forbids one name in a directory that must stay writable (git creates `index.lock` beside
//! `commondir`): Landlock only grants, and a mount needs an existing path. So the name is
//! occupied while commands run, by something git and nova read exactly as they read the name's
//! absence (an empty directory, an empty file, a `commondir` naming the git dir itself), and
//! the occupant is read-only in each command's mount namespace. When the last command relying
//! on it has ended, it is removed again.
//!
//! Several commands, in this nova or in another one working on the same files, may rely on one
//! placeholder; each holds a shared `flock` on it while its command runs. Removing takes the
//! exclusive lock without waiting, so a placeholder disappears only when nobody holds it, and
//! one that is removed while a command is about to rely on it is noticed (the path no longer
//! leads to the locked file) and made again. Anything that looks exactly like a placeholder is
//! treated as one (a previous nova may have been killed before removing its own): that is safe
//! because each placeholder means the same as its name being absent.

use super::SandboxError;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What stands in for a missing protected path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// An empty directory (`.git/hooks/`, `.mcp.json`, `.nova/`: git ignores empty directories,
    /// an empty `hooks/` runs nothing, and nova reads an empty `.nova/` as none).
    Dir,
    /// A file with exactly this text.
    File(&'static str),
}

/// How often a placeholder that keeps disappearing under us is made again before giving up.
const ATTEMPTS: usize = 8;
/// How long a shared lock is waited for: an exclusive lock is held by a nova only while it
/// removes the placeholder (microseconds). One held longer is a sandboxed command's own, and
/// then nobody can remove the placeholder anyway, so it is used without the lock.
const LOCK_TRIES: usize = 20;
const LOCK_PAUSE: Duration = Duration::from_millis(1);

/// The placeholders one command relies on, each under a shared lock. [`Placeholders::release`]
/// once the command has ended (its launcher reaped); dropped without that, they stay (a stale
/// placeholder is harmless, and the next command's release removes it).
#[derive(Debug, Default)]
pub struct Placeholders(Vec<Held>);

#[derive(Debug)]
struct Held {
    path: PathBuf,
    kind: Placeholder,
    /// `None`: someone else keeps it locked exclusively, so it stays.
    lock: Option<Flock<File>>,
}

impl Placeholders {
    /// Makes (or joins) a placeholder at each missing path of `wanted`. Paths that hold a real
    /// file or directory are left alone: they are protected as they are.
    pub fn hold(wanted: &[(PathBuf, Placeholder)]) -> Result<Placeholders, SandboxError> {
        let mut held = Placeholders::default();
        for (path, kind) in wanted {
            if let Some(h) = hold_one(path, *kind)? {
                held.0.push(h);
            }
        }
        Ok(held)
    }

    /// Removes each placeholder nobody else holds.
    pub fn release(mut self) {
        for held in self.0.drain(..) {
            let Some(lock) = held.lock else { continue };
            if lock.relock(FlockArg::LockExclusiveNonblock).is_ok()
                && same_file(&lock, &held.path)
                && is_placeholder(&lock, &held.path, held.kind)
            {
                let _ = match held.kind {
                    Placeholder::Dir => fs::remove_dir(&held.path),
                    Placeholder::File(_) => fs::remove_file(&held.path),
                };
            }
        }
    }

    #[cfg(test)]
    pub fn paths(&self) -> Vec<&Path> {
        self.0.iter().map(|h| h.path.as_path()).collect()
    }
}

fn hold_one(path: &Path, kind: Placeholder) -> Result<Option<Held>, SandboxError> {
    let failed = |source| SandboxError::Protect {
        path: path.to_owned(),
        source,
    };
    for _ in 0..ATTEMPTS {
        create(path, kind).map_err(failed)?;
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(e)),
        };
        if !is_placeholder(&file, path, kind) {
            return Ok(None);
        }
        let lock = lock_shared(file);
        let current = match &lock {
            Ok(lock) => same_file(lock, path),
            Err(file) => same_file(file, path),
        };
        if current {
            return Ok(Some(Held {
                path: path.to_path_buf(),
                kind,
                lock: lock.ok(),
            }));
        }
    }
    Err(SandboxError::Vanishing(path.to_owned()))
}

/// Creates the placeholder unless something is there already. A file appears whole (written
/// aside, then linked into place), so nobody reads a half-written one.
fn create(path: &Path, kind: Placeholder) -> std::io::Result<()> {
    let made = match kind {
        Placeholder::Dir => fs::create_dir(path),
        Placeholder::File(text) => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let aside = path.with_file_name(format!(
                ".{name}.nova-{}.tmp",
                uuid::Uuid::new_v4().simple()
            ));
            let mut file = File::options().write(true).create_new(true).open(&aside)?;
            let linked = file
                .write_all(text.as_bytes())
                .and_then(|()| fs::hard_link(&aside, path));
            let _ = fs::remove_file(&aside);
            linked
        }
    };
    match made {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

fn lock_shared(mut file: File) -> Result<Flock<File>, File> {
    for _ in 0..LOCK_TRIES {
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(lock) => return Ok(lock),
            Err((back, Errno::EWOULDBLOCK)) => {
                file = back;
                std::thread::sleep(LOCK_PAUSE);
            }
            Err((back, _)) => return Err(back),
        }
    }
    Err(file)
}

/// `path` still names the file `file` has open.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

fn is_placeholder(file: &File, path: &Path, kind: Placeholder) -> bool {
    let Ok(meta) = file.metadata() else {
        return false;
    };
    match kind {
        Placeholder::Dir => {
            meta.is_dir() && fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
        }
        Placeholder::File(text) => {
            let mut read = vec![0; text.len()];
            meta.is_file()
                && meta.len() == text.len() as u64
                && file.read_exact_at(&mut read, 0).is_ok()
                && read == text.as_bytes()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_appear_for_missing_paths_and_go_with_the_last_holder() {
        let dir = tempfile::tempdir().unwrap();
        let commondir = dir.path().join("commondir");
        let mcp = dir.path().join(".mcp.json");
        let real = dir.path().join("config");
        fs::write(&real, "[core]\n").unwrap();
        let wanted = [
            (commondir.clone(), Placeholder::File(".\n")),
            (mcp.clone(), Placeholder::Dir),
            (real.clone(), Placeholder::File("")),
        ];
        let first = Placeholders::hold(&wanted).unwrap();
        assert_eq!(first.paths(), [commondir.as_path(), mcp.as_path()]);
        assert_eq!(fs::read_to_string(&commondir).unwrap(), ".\n");
        assert!(mcp.is_dir());
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 3, "nothing else is left behind: {names:?}");

        // A second holder (another command, or another nova) keeps them while it runs.
        let second = Placeholders::hold(&wanted).unwrap();
        first.release();
        assert!(commondir.exists() && mcp.exists());
        second.release();
        assert!(!commondir.exists() && !mcp.exists());
        assert_eq!(fs::read_to_string(&real).unwrap(), "[core]\n");

        // Dropped without release (the command's end was never seen): they stay until the next
        // command's release.
        drop(Placeholders::hold(&wanted).unwrap());
        assert!(commondir.exists());
        Placeholders::hold(&wanted).unwrap().release();
        assert!(!commondir.exists());
    }

    #[test]
    fn what_is_not_exactly_a_placeholder_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let commondir = dir.path().join("commondir");
        let hooks = dir.path().join("hooks");
        fs::write(&commondir, "../..\n").unwrap();
        fs::create_dir(&hooks).unwrap();
        fs::write(hooks.join("pre-commit"), "#!/bin/sh\n").unwrap();
        let wanted = [
            (commondir.clone(), Placeholder::File(".\n")),
            (hooks.clone(), Placeholder::Dir),
        ];
        let held = Placeholders::hold(&wanted).unwrap();
        assert!(held.paths().is_empty());
        held.release();
        assert_eq!(fs::read_to_string(&commondir).unwrap(), "../..\n");
        assert!(hooks.join("pre-commit").exists());

        // Made a real file while held (by the user, outside every sandbox): kept.
        fs::remove_file(&commondir).unwrap();
        let held = Placeholders::hold(&wanted[..1]).unwrap();
        fs::remove_file(&commondir).unwrap();
        fs::write(&commondir, "../real\n").unwrap();
        held.release();
        assert_eq!(fs::read_to_string(&commondir).unwrap(), "../real\n");
    }

    #[test]
    fn an_exclusive_lock_held_by_someone_else_keeps_the_placeholder() {
        let dir = tempfile::tempdir().unwrap();
        let mcp = dir.path().join(".mcp.json");
        let wanted = [(mcp.clone(), Placeholder::Dir)];
        let held = Placeholders::hold(&wanted).unwrap();
        held.release();
        fs::create_dir(&mcp).unwrap();
        let squatter = Flock::lock(File::open(&mcp).unwrap(), FlockArg::LockExclusive).unwrap();
        let held = Placeholders::hold(&wanted).unwrap();
        assert_eq!(held.paths(), [mcp.as_path()]);
        held.release();
        assert!(mcp.is_dir(), "nobody removes what another keeps locked");
        drop(squatter);
    }
}
