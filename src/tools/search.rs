//! What `grep` and `find` share: a tree walk configured the way `rg` and `fd` walk (ignore files
//! honoured, hidden files included, `.git` left out), a stop flag tied to the call's
//! cancellation, and a bounded collection that keeps the first results in path order.
//!
//! The walk runs on several threads and visits entries in no particular order, yet results must
//! not depend on thread timing. So each thread keeps its own first-N set, and the sets are merged
//! at the end. Because every path inside a directory sorts after the directory itself, a thread
//! whose set is full can skip any entry (and its whole subtree) that sorts after its worst kept
//! result: asking for 100 matches then stops searching early, as `rg` does when Pi kills it.

use super::truncate::{Limits, MAX_BYTES, Truncation, format_size, truncate_head};
use super::{ToolResult, fs::ABORTED};
use ignore::{DirEntry, WalkBuilder, WalkState};
use serde_json::{Map, Value};
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio_util::sync::CancellationToken;

/// Pi truncates search output by bytes only, passing `Number.MAX_SAFE_INTEGER` as the line
/// limit; that value shows in `details.truncation.maxLines`.
const UNLIMITED_LINES: usize = (1 << 53) - 1;

/// Runs `f` on a blocking thread. When `cancel` fires the call ends at once with Pi's abort
/// error, and the flag handed to `f` tells the walk to wind down instead of running on unseen.
pub(super) async fn run_stoppable<F>(cancel: &CancellationToken, f: F) -> ToolResult
where
    F: FnOnce(&AtomicBool) -> ToolResult + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(ABORTED.to_owned());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let task = tokio::task::spawn_blocking(move || f(&flag));
    tokio::select! {
        biased;
        () = cancel.cancelled() => {
            stop.store(true, Ordering::Relaxed);
            Err(ABORTED.to_owned())
        }
        joined = task => joined.map_err(|e| format!("Tool task failed: {e}"))?,
    }
}

/// Interior `.` components dropped, so error texts show `/work/p`, not `/work/p/.`.
pub(super) fn clean(path: &Path) -> PathBuf {
    path.components().collect()
}

/// A walker over `root` with the filters both tools share. `require_git` is rg's default (a
/// `.gitignore` counts only inside a repository); Pi runs fd with `--no-require-git`.
pub(super) fn walker(root: &Path, require_git: bool, custom_ignore: &str) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .require_git(require_git)
        .add_custom_ignore_filename(custom_ignore)
        .threads(
            std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1),
        )
        // Hidden files are searched, but the repository's object store is never what the model
        // is looking for and can dwarf the tree.
        .filter_entry(|e| !(e.file_name() == ".git" && e.file_type().is_some_and(|t| t.is_dir())));
    builder
}

/// The `limit` smallest `(path, item)` pairs pushed, and how many were pushed in all (at least
/// `limit` whenever anything was skipped, which is all the limit notice needs).
pub(super) struct FirstN<T: Ord> {
    limit: usize,
    heap: BinaryHeap<(PathBuf, T)>,
    seen: usize,
}

impl<T: Ord> FirstN<T> {
    pub(super) fn new(limit: usize) -> Self {
        FirstN {
            limit,
            heap: BinaryHeap::new(),
            seen: 0,
        }
    }

    pub(super) fn push(&mut self, path: PathBuf, item: T) {
        self.seen += 1;
        if self.heap.len() < self.limit {
            self.heap.push((path, item));
        } else if self
            .heap
            .peek()
            .is_some_and(|worst| (&path, &item) < (&worst.0, &worst.1))
        {
            self.heap.pop();
            self.heap.push((path, item));
        }
    }

    /// Whether nothing at `path` or below it can make the cut any more.
    pub(super) fn excludes(&self, path: &Path) -> bool {
        self.heap.len() >= self.limit && self.heap.peek().is_some_and(|w| path > w.0.as_path())
    }

    fn merge(&mut self, other: FirstN<T>) {
        let seen = self.seen + other.seen;
        for (path, item) in other.heap {
            self.push(path, item);
        }
        self.seen = seen;
    }

    pub(super) fn seen(&self) -> usize {
        self.seen
    }

    pub(super) fn into_sorted(self) -> Vec<(PathBuf, T)> {
        self.heap.into_sorted_vec()
    }
}

/// Walks `root` in parallel. Each thread gets its own `state` from `make_state` and its own
/// first-N set; `visit` sees every entry with its path relative to `root` (empty for the root
/// itself). Errors on single entries (unreadable directories, vanished files) are skipped, as
/// `rg` and `fd` skip them. Returns `None` when `stop` was raised.
pub(super) fn collect<T, S, M, V>(
    builder: &WalkBuilder,
    root: &Path,
    limit: usize,
    stop: &AtomicBool,
    make_state: M,
    visit: V,
) -> Option<FirstN<T>>
where
    T: Ord + Send,
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, &DirEntry, &Path, &mut FirstN<T>) -> WalkState + Sync,
{
    let merged = Mutex::new(FirstN::new(limit));
    builder.build_parallel().run(|| {
        let mut local = Local {
            first: FirstN::new(limit),
            merged: &merged,
        };
        let mut state = make_state();
        let visit = &visit;
        Box::new(move |entry| {
            if stop.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            if local.first.excludes(rel) {
                return WalkState::Skip;
            }
            visit(&mut state, &entry, rel, &mut local.first)
        })
    });
    if stop.load(Ordering::Relaxed) {
        return None;
    }
    Some(merged.into_inner().unwrap_or_else(PoisonError::into_inner))
}

/// One thread's results, handed over when the walk drops the thread's visitor.
struct Local<'a, T: Ord> {
    first: FirstN<T>,
    merged: &'a Mutex<FirstN<T>>,
}

impl<T: Ord> Drop for Local<'_, T> {
    fn drop(&mut self) {
        let first = std::mem::replace(&mut self.first, FirstN::new(0));
        self.merged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .merge(first);
    }
}

/// Joins result lines, cuts them at 50 KB, and appends Pi's notices in one `[...]` line. `limit`
/// is the limit notice (if reached) with the `details` key and value that record it.
pub(super) fn finish(
    lines: &[String],
    limit: Option<(String, &str, Value)>,
    extra: Option<(String, &str, Value)>,
) -> (String, Option<Value>) {
    let truncation: Truncation = truncate_head(
        &lines.join("\n"),
        Limits {
            max_lines: UNLIMITED_LINES,
            max_bytes: MAX_BYTES,
        },
    );
    let mut notices = Vec::new();
    let mut details = Map::new();
    if let Some((notice, key, value)) = limit {
        notices.push(notice);
        details.insert(key.to_owned(), value);
    }
    if truncation.truncated {
        notices.push(format!("{} limit reached", format_size(MAX_BYTES)));
        details.insert(
            "truncation".to_owned(),
            serde_json::to_value(&truncation).unwrap_or(Value::Null),
        );
    }
    if let Some((notice, key, value)) = extra {
        notices.push(notice);
        details.insert(key.to_owned(), value);
    }
    let mut text = truncation.content;
    if !notices.is_empty() {
        text.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    let details = (!details.is_empty()).then_some(Value::Object(details));
    (text, details)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn first_n_keeps_the_smallest_in_order() {
        let mut first = FirstN::new(2);
        for name in ["c", "a", "d", "b"] {
            first.push(PathBuf::from(name), 0);
        }
        assert_eq!(first.seen(), 4);
        assert!(first.excludes(Path::new("c")));
        assert!(!first.excludes(Path::new("a/x")));
        let names: Vec<_> = first.into_sorted().into_iter().map(|(p, _)| p).collect();
        assert_eq!(names, [PathBuf::from("a"), PathBuf::from("b")]);
    }

    #[test]
    fn merged_sets_count_everything_seen() {
        let mut a = FirstN::new(3);
        a.push(PathBuf::from("x"), 1);
        a.push(PathBuf::from("x"), 2);
        let mut b = FirstN::new(3);
        b.push(PathBuf::from("a"), 9);
        b.push(PathBuf::from("y"), 1);
        a.merge(b);
        assert_eq!(a.seen(), 4);
        let kept: Vec<_> = a.into_sorted().into_iter().map(|(_, n)| n).collect();
        assert_eq!(kept, [9, 1, 2]);
    }

    #[test]
    fn finish_appends_notices_in_pis_order() {
        let lines = vec!["a".to_owned(), "b".to_owned()];
        let (text, details) = finish(
            &lines,
            Some(("2 things".to_owned(), "limitReached", Value::from(2))),
            Some(("Some note".to_owned(), "note", Value::Bool(true))),
        );
        assert_eq!(text, "a\nb\n\n[2 things. Some note]");
        let details = details.unwrap();
        assert_eq!(details["limitReached"], 2);
        assert_eq!(details["note"], true);

        let big: Vec<String> = (0..2000).map(|i| format!("{i:0>40}")).collect();
        let (text, details) = finish(&big, None, None);
        assert!(text.ends_with("\n\n[50.0KB limit reached]"), "{text}");
        let t = &details.unwrap()["truncation"];
        assert_eq!(t["truncatedBy"], "bytes");
        assert_eq!(t["maxLines"], 9_007_199_254_740_991_u64);
    }
}
