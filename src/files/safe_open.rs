//! How the file tools (and `export_html`) open files: act on exactly what was checked, and only
//! on regular files.
//!
//! A write's boundary check (the permission gate) runs when the call starts and resolves the
//! model's path into a path without symlinks or `..` ([`crate::sandbox::resolve_for_write`]).
//! Other calls of the same reply run at the same time, so by the time the write happens any
//! directory on that path may have been swapped for a symlink. Opening the path again by name
//! would follow it. So a write walks the checked path from `/` one component at a time, each
//! opened with `O_NOFOLLOW` beneath the handle of the one before ([`Target::open`]), and then
//! works only through the final directory's handle: `openat` to read, a temp file made with
//! `O_CREAT | O_EXCL` beside the target and `renameat` over it. A symlink (or anything but a
//! directory) where the check saw a directory ends the walk with [`Refused::Changed`], and the
//! write does not happen. The walk works on every kernel and creates missing directories as it
//! goes, which `openat2(RESOLVE_NO_SYMLINKS)` alone would not.
//!
//! Reads follow symlinks as before (reading is not a boundary nova checks), but every file is
//! opened with `O_NONBLOCK` and checked with `fstat` before a byte is read: a FIFO, device or
//! socket is refused with [`Refused::NotRegular`], so `/dev/zero` cannot fill memory and a FIFO
//! cannot hold a thread forever.

use super::fs::ABORTED;
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// Why the layer refused to act; carried inside an [`io::Error`] so callers keep one error type,
/// and worded by [`super::fs::error_text`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A FIFO, device, socket (or, for a write, a symlink or directory) where a file must be.
    #[error("not a regular file ({0})")]
    NotRegular(&'static str),
    /// A component of a checked path is no longer a plain directory.
    #[error("{0} changed after it was checked")]
    Changed(PathBuf),
    /// The write was abandoned (aborted or timed out) before it replaced anything.
    #[error("{ABORTED}")]
    Aborted,
}

impl Refused {
    fn into_io(self) -> io::Error {
        io::Error::other(self)
    }

    /// The refusal inside `err`, if the layer made it.
    pub fn of(err: &io::Error) -> Option<&Refused> {
        err.get_ref().and_then(|e| e.downcast_ref::<Refused>())
    }
}

/// What kind of non-regular file `file_type` is, as people name it.
fn kind_name(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

fn stat_kind(st: &FileStat) -> Option<&'static str> {
    let fmt = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    match fmt {
        SFlag::S_IFREG => None,
        SFlag::S_IFDIR => Some("a directory"),
        SFlag::S_IFLNK => Some("a symbolic link"),
        SFlag::S_IFIFO => Some("a FIFO"),
        SFlag::S_IFCHR => Some("a character device"),
        SFlag::S_IFBLK => Some("a block device"),
        SFlag::S_IFSOCK => Some("a socket"),
        _ => Some("a special file"),
    }
}

/// Opens `path` for reading, following symlinks, and only if it is a regular file. Never blocks
/// on a FIFO or device: it is opened non-blocking and refused after `fstat`.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)?;
    let ft = file.metadata()?.file_type();
    if ft.is_dir() {
        return Err(io::Error::from(io::ErrorKind::IsADirectory));
    }
    if !ft.is_file() {
        return Err(Refused::NotRegular(kind_name(ft)).into_io());
    }
    Ok(file)
}

/// The whole text of a regular file, as [`std::fs::read_to_string`] reads it, but never
/// blocking on a FIFO or device planted where a configuration or context file is expected.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    io::Read::read_to_string(&mut open_regular(path)?, &mut text)?;
    Ok(text)
}

/// Whether a write may still go ahead: the blocking side asks [`Commit::begin`] right before it
/// replaces anything, the waiting side [`Commit::abandon`]s it on abort or time-out. Exactly one
/// of the two wins, so "aborted" always means "nothing replaced".
#[derive(Debug, Default)]
pub struct Commit(AtomicU8);

const OPEN: u8 = 0;
const COMMITTING: u8 = 1;
const ABANDONED: u8 = 2;

impl Commit {
    /// True when the write may replace its target now (and can no longer be abandoned).
    pub fn begin(&self) -> bool {
        self.0
            .compare_exchange(OPEN, COMMITTING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// True when the work was stopped before committing; false when it had already begun.
    pub fn abandon(&self) -> bool {
        match self
            .0
            .compare_exchange(OPEN, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(state) => state == ABANDONED,
        }
    }

    pub fn abandoned(&self) -> bool {
        self.0.load(Ordering::Acquire) == ABANDONED
    }
}

/// A directory reached from `/` without following a symlink at any step.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

const DIR_FLAGS: OFlag = OFlag::O_PATH
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

impl Dir {
    /// Walks `path` (absolute, without `..`; a path the check resolved) component by component.
    /// With `create`, missing directories are made. A component that is a symlink or not a
    /// directory is [`Refused::Changed`]; a missing one (without `create`) is `NotFound`.
    pub fn walk(path: &Path, create: bool) -> io::Result<Dir> {
        let mut fd = nix::fcntl::open("/", DIR_FLAGS, Mode::empty()).map_err(io::Error::from)?;
        let mut walked = PathBuf::from("/");
        for component in path.components() {
            let name = match component {
                Component::RootDir | Component::CurDir => continue,
                Component::Normal(name) => name,
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} is not a resolved path", path.display()),
                    ));
                }
            };
            walked.push(name);
            fd = step(&fd, name, create).map_err(|e| match e {
                // ENOTDIR: a symlink (opened as itself with O_PATH) or a file; ELOOP: a symlink.
                Errno::ENOTDIR | Errno::ELOOP => Refused::Changed(walked.clone()).into_io(),
                e => io::Error::from(e),
            })?;
        }
        Ok(Dir { fd })
    }

    /// The entry `name` here, not following a symlink; `None` when there is none.
    fn entry(&self, name: &OsStr) -> io::Result<Option<FileStat>> {
        match fstatat(&self.fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens the regular file `name` here for reading, never through a symlink.
    pub fn open_regular(&self, name: &OsStr) -> io::Result<File> {
        let flags = OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::empty()).map_err(|e| match e {
            Errno::ELOOP => Refused::NotRegular("a symbolic link").into_io(),
            e => e.into(),
        })?;
        let file = File::from(fd);
        let ft = file.metadata()?.file_type();
        if ft.is_dir() {
            return Err(io::ErrorKind::IsADirectory.into());
        }
        if !ft.is_file() {
            return Err(Refused::NotRegular(kind_name(ft)).into_io());
        }
        Ok(file)
    }

    /// Replaces `name` here with `data` so that a reader (or a crash) sees the old file or the
    /// new one, never a mix: a temp file beside it, then one `renameat`. An existing file's
    /// permissions carry over; anything there that is not a regular file (a symlink, FIFO,
    /// device, directory) is refused, never written through or replaced. `commit` is asked just
    /// before the rename, the last moment the write can still be undone.
    pub fn replace(&self, name: &OsStr, data: &[u8], commit: &Commit) -> io::Result<()> {
        let mode = match self.entry(name)? {
            None => None,
            Some(st) => match stat_kind(&st) {
                None => Some(st.st_mode & 0o7777),
                Some("a directory") => return Err(io::ErrorKind::IsADirectory.into()),
                Some(kind) => return Err(Refused::NotRegular(kind).into_io()),
            },
        };
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut tmp = OsString::from(".");
        tmp.push(name);
        tmp.push(format!(".nova-{}.tmp", &id[..16]));
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(
            &self.fd,
            tmp.as_os_str(),
            flags,
            Mode::from_bits_truncate(0o666),
        )?;
        let result = fill_and_swap(self, File::from(fd), &tmp, name, data, mode, commit);
        if result.is_err() {
            let _ = unlinkat(&self.fd, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return result;
        }
        // Makes the rename itself durable; a failure here cannot undo the write, so it is ignored.
        if let Ok(d) = openat(
            &self.fd,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            let _ = File::from(d).sync_all();
        }
        Ok(())
    }
}

fn fill_and_swap(
    dir: &Dir,
    mut file: File,
    tmp: &OsStr,
    name: &OsStr,
    data: &[u8],
    mode: Option<u32>,
    commit: &Commit,
) -> io::Result<()> {
    file.write_all(data)?;
    if let Some(mode) = mode {
        fchmod(file.as_fd(), Mode::from_bits_truncate(mode))?;
    }
    file.sync_all()?;
    drop(file);
    if !commit.begin() {
        return Err(Refused::Aborted.into_io());
    }
    renameat(&dir.fd, tmp, &dir.fd, name).map_err(io::Error::from)
}

/// One step of [`Dir::walk`]: `name` beneath `dir`, made first when missing and `create`.
fn step(dir: &OwnedFd, name: &OsStr, create: bool) -> Result<OwnedFd, Errno> {
    match openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Err(Errno::ENOENT) if create => {
            match mkdirat(dir, name, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e),
            }
            openat(dir, name, DIR_FLAGS, Mode::empty())
        }
        other => other,
    }
}

/// A checked write target: the directory it lies in, reached without links, and its name.
#[derive(Debug)]
pub struct Target {
    dir: Dir,
    name: OsString,
}

impl Target {
    /// Opens the directory of `checked` (a path [`crate::sandbox::resolve_for_write`] gave),
    /// creating missing directories when `create_dirs`.
    pub fn open(checked: &Path, create_dirs: bool) -> io::Result<Target> {
        let (Some(parent), Some(name)) = (checked.parent(), checked.file_name()) else {
            return Err(io::ErrorKind::IsADirectory.into());
        };
        Ok(Target {
            dir: Dir::walk(parent, create_dirs)?,
            name: name.to_owned(),
        })
    }

    /// The file as it is now, for reading (regular files only, never through a link).
    pub fn open_existing(&self) -> io::Result<File> {
        self.dir.open_regular(&self.name)
    }

    /// See [`Dir::replace`].
    pub fn replace(&self, data: &[u8], commit: &Commit) -> io::Result<()> {
        self.dir.replace(&self.name, data, commit)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::resolve_for_write;
    use std::fs;
    use std::io::Read;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn refused(err: &io::Error) -> Refused {
        Refused::of(err)
            .cloned()
            .unwrap_or_else(|| panic!("{err:?}"))
    }

    #[test]
    fn replaces_contents_keeps_mode_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap().join("run.sh");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o750)).unwrap();
        Target::open(&p, false)
            .unwrap()
            .replace(b"new", &Commit::default())
            .unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o750
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_resolved_symlink_is_written_through_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (real, link) = (base.join("real.txt"), base.join("link.txt"));
        fs::write(&real, "old").unwrap();
        symlink(&real, &link).unwrap();
        let checked = resolve_for_write(&link);
        assert_eq!(checked, real);
        Target::open(&checked, false)
            .unwrap()
            .replace(b"new", &Commit::default())
            .unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }

    /// The race of issue 16: the path is checked, then a directory on it becomes a symlink to
    /// somewhere else before the write. The write must not land there.
    #[test]
    fn a_directory_swapped_for_a_symlink_after_the_check_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (work, outside) = (base.join("work"), base.join("outside"));
        fs::create_dir_all(work.join("dir")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("file"), "precious").unwrap();
        let checked = resolve_for_write(&work.join("dir/file"));
        assert_eq!(checked, work.join("dir/file"));

        fs::rename(work.join("dir"), work.join("dir.old")).unwrap();
        symlink(&outside, work.join("dir")).unwrap();

        let err = Target::open(&checked, true).unwrap_err();
        assert_eq!(refused(&err), Refused::Changed(work.join("dir")));
        assert_eq!(
            fs::read_to_string(outside.join("file")).unwrap(),
            "precious"
        );
        // Nor does a walk that creates missing directories create anything through the link.
        let err = Dir::walk(&work.join("dir/new/deeper"), true).unwrap_err();
        assert_eq!(refused(&err), Refused::Changed(work.join("dir")));
        assert!(!outside.join("new").exists());
    }

    /// A handle taken before the swap keeps pointing at the directory that was checked.
    #[test]
    fn a_target_opened_before_a_swap_writes_where_it_was_opened() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (work, outside) = (base.join("work"), base.join("outside"));
        fs::create_dir_all(work.join("dir")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(work.join("dir/file"), "mine").unwrap();
        fs::write(outside.join("file"), "precious").unwrap();
        let target = Target::open(&work.join("dir/file"), false).unwrap();
        let mut text = String::new();
        target
            .open_existing()
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "mine");

        fs::rename(work.join("dir"), work.join("dir.old")).unwrap();
        symlink(&outside, work.join("dir")).unwrap();
        target.replace(b"edited", &Commit::default()).unwrap();
        assert_eq!(
            fs::read_to_string(outside.join("file")).unwrap(),
            "precious"
        );
        assert_eq!(
            fs::read_to_string(work.join("dir.old/file")).unwrap(),
            "edited"
        );
    }

    #[test]
    fn missing_directories_are_made_and_a_final_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let t = Target::open(&base.join("a/b/c.txt"), true).unwrap();
        t.replace(b"x", &Commit::default()).unwrap();
        assert_eq!(fs::read_to_string(base.join("a/b/c.txt")).unwrap(), "x");
        let err = Target::open(&base.join("z/c.txt"), false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);

        fs::write(base.join("outside.txt"), "precious").unwrap();
        symlink(base.join("outside.txt"), base.join("a/link")).unwrap();
        let t = Target::open(&base.join("a/link"), false).unwrap();
        let err = t.replace(b"y", &Commit::default()).unwrap_err();
        assert_eq!(refused(&err), Refused::NotRegular("a symbolic link"));
        let err = t.open_existing().unwrap_err();
        assert_eq!(refused(&err), Refused::NotRegular("a symbolic link"));
        assert_eq!(
            fs::read_to_string(base.join("outside.txt")).unwrap(),
            "precious"
        );
        assert!(
            fs::symlink_metadata(base.join("a/link"))
                .unwrap()
                .is_symlink()
        );
    }

    #[test]
    fn an_abandoned_write_replaces_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        fs::write(base.join("a.txt"), "old").unwrap();
        let commit = Commit::default();
        assert!(commit.abandon());
        let err = Target::open(&base.join("a.txt"), false)
            .unwrap()
            .replace(b"new", &commit)
            .unwrap_err();
        assert_eq!(refused(&err), Refused::Aborted);
        assert_eq!(fs::read_to_string(base.join("a.txt")).unwrap(), "old");
        assert_eq!(fs::read_dir(&base).unwrap().count(), 1);

        let commit = Commit::default();
        assert!(commit.begin());
        assert!(!commit.abandon(), "too late once the rename has begun");
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let fifo = base.join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let err = open_regular(&fifo).unwrap_err();
        assert_eq!(refused(&err), Refused::NotRegular("a FIFO"));
        let err = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(refused(&err), Refused::NotRegular("a character device"));
        let err = open_regular(&base).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);

        let t = Target::open(&fifo, false).unwrap();
        assert_eq!(
            refused(&t.open_existing().unwrap_err()),
            Refused::NotRegular("a FIFO")
        );
        assert_eq!(
            refused(&t.replace(b"x", &Commit::default()).unwrap_err()),
            Refused::NotRegular("a FIFO")
        );
        fs::write(base.join("f.txt"), "ok").unwrap();
        let mut text = String::new();
        open_regular(&base.join("f.txt"))
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "ok");
    }
}
