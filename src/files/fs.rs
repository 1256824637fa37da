//! File-system helpers shared by the file tools and `export_html`: Node-style error texts (what
//! Pi's models are used to seeing) and [`bounded`], the one way file work runs off the async
//! threads: on a capped share of the blocking pool, bounded in time, and never waited on after
//! an abort.

use super::safe_open::{Commit, Refused};
use std::io::{self, ErrorKind};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub const ABORTED: &str = "Operation aborted";

/// `ENOENT: no such file or directory, open '/x'`, as Node words it.
pub fn error_text(err: &io::Error, op: &str, path: &Path) -> String {
    match Refused::of(err) {
        Some(Refused::NotRegular(kind)) => {
            return format!(
                "Not a regular file: {} is {kind}; nova's file tools {} regular files only",
                path.display(),
                if op == "open" { "read" } else { "write" }
            );
        }
        Some(Refused::Changed(dir)) => {
            return format!(
                "{} changed after the path was checked ({} is no longer a plain directory, \
                 perhaps a symbolic link now); nothing was {}",
                path.display(),
                dir.display(),
                if op == "open" { "read" } else { "written" }
            );
        }
        Some(Refused::Aborted) => return ABORTED.to_owned(),
        None => {}
    }
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

/// How long one file tool's work may take (a hung network mount, a file that never ends).
pub const FILE_TIME: Duration = Duration::from_secs(120);
/// How long a `grep` or `find` walk may take.
pub const SEARCH_TIME: Duration = Duration::from_secs(600);
/// How long `export_html` may take.
pub const EXPORT_TIME: Duration = Duration::from_secs(30);
/// After an abort or a time-out, how long a write that has begun its rename is still waited for.
const COMMIT_GRACE: Duration = Duration::from_millis(500);

/// The file tools' share of tokio's blocking pool (512 threads). A thread stuck in the kernel
/// cannot be stopped, only left behind; its permit is returned when it finally ends. So stuck
/// file work can hold at most this many threads, and everything else nova runs off the async
/// threads (sessions, exports) always finds one.
const TOOL_THREADS: usize = 64;
static TOOL_POOL: Semaphore = Semaphore::const_new(TOOL_THREADS);

/// Which share of the blocking pool work runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// A model's tool call: one of [`TOOL_THREADS`].
    Tools,
    /// A client's command (one at a time): not counted against the tools.
    Client,
}

/// Runs blocking file work `f` off the async threads and waits at most `limit` for it. When
/// `cancel` fires (or time runs out) the call ends at once: work that has not begun replacing a
/// file is abandoned (its [`Commit`] refuses the rename), and a write already renaming is given
/// [`COMMIT_GRACE`] to finish. A thread stuck in the kernel is left behind, never waited for.
pub async fn bounded<T, F>(
    threads: Threads,
    cancel: &CancellationToken,
    limit: Duration,
    f: F,
) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(&Commit) -> Result<T, String> + Send + 'static,
{
    let pool = match threads {
        Threads::Tools => Some(&TOOL_POOL),
        Threads::Client => None,
    };
    run_bounded(pool, cancel, limit, f).await
}

async fn run_bounded<T, F>(
    pool: Option<&'static Semaphore>,
    cancel: &CancellationToken,
    limit: Duration,
    f: F,
) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(&Commit) -> Result<T, String> + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(ABORTED.to_owned());
    }
    let deadline = Instant::now() + limit;
    let timed_out = || {
        format!(
            "The operation did not finish within {} s and was abandoned (a hung file system?)",
            limit.as_secs_f64()
        )
    };
    let permit = match pool {
        None => None,
        Some(pool) => tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ABORTED.to_owned()),
            () = tokio::time::sleep_until(deadline) => {
                return Err(format!(
                    "All {} of nova's file-tool threads are still busy with earlier operations \
                     that did not finish (a hung file system?); gave up after {} s",
                    TOOL_THREADS,
                    limit.as_secs_f64()
                ));
            }
            permit = pool.acquire() => Some(permit.map_err(|e| e.to_string())?),
        },
    };
    let commit = Arc::new(Commit::default());
    let theirs = Arc::clone(&commit);
    let mut task = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        f(&theirs)
    });
    let stopped = tokio::select! {
        biased;
        () = cancel.cancelled() => ABORTED.to_owned(),
        () = tokio::time::sleep_until(deadline) => timed_out(),
        joined = &mut task => return joined.map_err(|e| format!("Tool task failed: {e}"))?,
    };
    if commit.abandon() {
        return Err(stopped);
    }
    match tokio::time::timeout(COMMIT_GRACE, task).await {
        Ok(joined) => joined.map_err(|e| format!("Tool task failed: {e}"))?,
        Err(_) => Err(format!(
            "{stopped}; the file was already being replaced when it stopped and may have changed"
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_look_like_node() {
        let e = io::Error::from(ErrorKind::NotFound);
        assert_eq!(
            error_text(&e, "open", Path::new("/x/y")),
            "ENOENT: no such file or directory, open '/x/y'"
        );
    }

    /// A blocking job that waits until the test lets it go, then reports whether it could still
    /// commit.
    fn held() -> (
        std::sync::mpsc::Sender<()>,
        std::sync::mpsc::Receiver<bool>,
        impl FnOnce(&Commit) -> Result<(), String> + Send + 'static,
    ) {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (report, committed) = std::sync::mpsc::channel();
        let job = move |commit: &Commit| {
            let _ = wait.recv();
            let _ = report.send(commit.begin());
            Ok(())
        };
        (go, committed, job)
    }

    #[tokio::test]
    async fn abort_answers_at_once_and_the_write_cannot_commit_later() {
        let (go, committed, job) = held();
        let cancel = CancellationToken::new();
        let stopper = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stopper.cancel();
        });
        let started = std::time::Instant::now();
        let out = bounded(Threads::Tools, &cancel, FILE_TIME, job).await;
        assert_eq!(out, Err(ABORTED.to_owned()));
        assert!(started.elapsed() < Duration::from_secs(1));
        go.send(()).unwrap();
        assert!(!committed.recv().unwrap(), "abandoned work must not rename");
    }

    #[tokio::test]
    async fn work_past_its_time_is_abandoned() {
        let (go, committed, job) = held();
        let started = std::time::Instant::now();
        let out = bounded(
            Threads::Client,
            &CancellationToken::new(),
            Duration::from_millis(100),
            job,
        )
        .await;
        let text = out.unwrap_err();
        assert!(text.contains("did not finish within 0.1 s"), "{text}");
        assert!(started.elapsed() < Duration::from_secs(1));
        go.send(()).unwrap();
        assert!(!committed.recv().unwrap());
    }

    #[tokio::test]
    async fn stuck_work_holds_only_its_own_share_of_threads() {
        static POOL: Semaphore = Semaphore::const_new(1);
        let (go, committed, job) = held();
        let cancel = CancellationToken::new();
        let stuck = {
            let cancel = cancel.clone();
            tokio::spawn(async move { run_bounded(Some(&POOL), &cancel, FILE_TIME, job).await })
        };
        while POOL.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        // The stuck call is abandoned, but its thread still holds the one permit.
        cancel.cancel();
        assert_eq!(stuck.await.unwrap(), Err(ABORTED.to_owned()));
        let out = run_bounded(
            Some(&POOL),
            &CancellationToken::new(),
            Duration::from_millis(100),
            |_: &Commit| Ok(()),
        )
        .await;
        assert!(out.unwrap_err().contains("still busy"));
        // Work outside the tools' share still runs.
        let out = bounded(
            Threads::Client,
            &CancellationToken::new(),
            FILE_TIME,
            |_| Ok(7),
        )
        .await;
        assert_eq!(out, Ok(7));
        go.send(()).unwrap();
        assert!(!committed.recv().unwrap());
        let out = run_bounded(Some(&POOL), &CancellationToken::new(), FILE_TIME, |c| {
            Ok(c.begin())
        })
        .await;
        assert_eq!(out, Ok(true), "the permit came back when the thread ended");
    }
}
