//! File-system helpers shared by the file tools: Node-style error texts (what Pi's models are
//! used to seeing) and atomic replacement of a file's contents.

use std::fs::{self, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

pub const ABORTED: &str = "Operation aborted";

/// `ENOENT: no such file or directory, open '/x'`, as Node words it.
pub fn error_text(err: &io::Error, op: &str, path: &Path) -> String {
    let code = match err.kind() {
        ErrorKind::NotFound => Some(("ENOENT", "no such file or directory")),
        ErrorKind::PermissionDenied => Some(("EACCES", "permission denied")),
        ErrorKind::IsADirectory => Some(("EISDIR", "illegal operation on a directory")),
        ErrorKind::NotADirectory => Some(("ENOTDIR", "not a directory")),
        ErrorKind::ReadOnlyFilesystem => Some(("EROFS", "read-only file system")),
        ErrorKind::StorageFull => Some(("ENOSPC", "no space left on device")),
        _ => None,
    };
    match code {
        Some((code, what)) => format!("{code}: {what}, {op} '{}'", path.display()),
        None => format!("{err}, {op} '{}'", path.display()),
    }
}

/// Replaces `path`'s contents so that a reader (or a crash) sees either the old file or the new
/// one, never a mix: the data goes to a temp file beside it, then one rename swaps it in. The
/// old file's permissions carry over, and a symlink is written through, not replaced.
/// `cancel` is checked just before the rename, the last moment the write can still be undone.
pub fn write_atomic(path: &Path, data: &[u8], cancel: &CancellationToken) -> Result<(), String> {
    let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let tmp = dir.join(format!(".{name}.nova-{}.tmp", &id[..16]));
    let result = fill_and_swap(&tmp, &target, data, cancel);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    // Makes the rename itself durable; a failure here cannot undo the write, so it is ignored.
    let _ = fs::File::open(&dir).and_then(|d| d.sync_all());
    Ok(())
}

fn fill_and_swap(
    tmp: &Path,
    target: &Path,
    data: &[u8],
    cancel: &CancellationToken,
) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| error_text(&e, "open", target))?;
    file.write_all(data)
        .map_err(|e| error_text(&e, "write", target))?;
    if let Ok(meta) = fs::metadata(target) {
        file.set_permissions(meta.permissions())
            .map_err(|e| error_text(&e, "chmod", target))?;
    }
    file.sync_all()
        .map_err(|e| error_text(&e, "write", target))?;
    drop(file);
    if cancel.is_cancelled() {
        return Err(ABORTED.to_owned());
    }
    fs::rename(tmp, target).map_err(|e| error_text(&e, "rename", target))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_contents_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.sh");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o750)).unwrap();
        write_atomic(&p, b"new", &CancellationToken::new()).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o750
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn writes_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new", &CancellationToken::new()).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn cancelled_write_leaves_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        fs::write(&p, "old").unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert_eq!(write_atomic(&p, b"new", &cancel).unwrap_err(), ABORTED);
        assert_eq!(fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn error_texts_look_like_node() {
        let e = io::Error::from(ErrorKind::NotFound);
        assert_eq!(
            error_text(&e, "open", Path::new("/x/y")),
            "ENOENT: no such file or directory, open '/x/y'"
        );
    }
}
