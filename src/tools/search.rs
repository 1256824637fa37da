//! What `grep` and `find` share: a tree walk configured the way `rg` and `fd` walk (ignore files
//! honoured, hidden files included, `.git` left out), a stop flag tied to the call's
//! cancellation, and a bounded collection that keeps the first results in path order.
//!
//! The walk runs on several threads and visits entries in no particular order, yet results must
//! not depend on thread timing. So each thread keeps its own first-N set, and the sets are merged
//! at the end. Because every path inside a directory sorts after the directory itself, a thread
//! whose set is full can skip any entry (and its whole subtree) that sorts after its worst kept
//! result: asking for 100 matches then stops searching early, as `rg` does when Pi kills it.

use super::truncate::{Head, Limits, MAX_BYTES, format_size};
use super::{ToolResult, fs};
use crate::protocol::{OutputDetails, ToolDetails};
use ignore::{DirEntry, WalkBuilder, WalkState};
use std::collections::BinaryHeap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio_util::sync::CancellationToken;

/// Pi truncates search output by bytes only, passing `Number.MAX_SAFE_INTEGER` as the line
/// limit; that value shows in `details.truncation.maxLines`.
const UNLIMITED_LINES: usize = (1 << 53) - 1;

/// Runs `f` on a blocking thread, within [`fs::SEARCH_TIME`]. When `cancel` fires (or time runs
/// out) the call ends at once with Pi's abort error, and the flag handed to `f` tells the walk to
/// wind down instead of running on unseen.
pub(super) async fn run_stoppable<F>(cancel: &CancellationToken, f: F) -> ToolResult
where
    F: FnOnce(&AtomicBool) -> ToolResult + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let result = fs::bounded(fs::Threads::Tools, cancel, fs::SEARCH_TIME, move |_| {
        f(&flag)
    })
    .await;
    // Ended early (or done): either way nothing should keep walking.
    stop.store(true, Ordering::Relaxed);
    result
}

/// The directory (or file) a search tool starts from: its `path` argument resolved against the
/// working directory, the working directory itself when absent or empty.
pub(super) fn root(arg: Option<&str>, cwd: &Path) -> PathBuf {
    clean(&super::path::resolve(
        arg.filter(|p| !p.is_empty()).unwrap_or("."),
        cwd,
    ))
}

/// Interior `.` components dropped, so error texts show `/work/p`, not `/work/p/.`.
fn clean(path: &Path) -> PathBuf {
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

/// The results at the smallest paths, holding at least `limit` units between them (a grep file
/// counts its matches), and how many units were pushed in all (at least `limit` whenever
/// anything was left out, which is all the limit notice needs). Comparing paths once per file
/// rather than once per match keeps a search with many matches cheap.
pub(super) struct FirstN<T> {
    limit: usize,
    heap: BinaryHeap<ByPath<T>>,
    kept: usize,
    seen: usize,
}

/// Ordered by path alone: each path is pushed once.
struct ByPath<T> {
    path: PathBuf,
    units: usize,
    item: T,
}

impl<T> PartialEq for ByPath<T> {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl<T> Eq for ByPath<T> {}

impl<T> PartialOrd for ByPath<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for ByPath<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.path.cmp(&other.path)
    }
}

impl<T> FirstN<T> {
    pub(super) fn new(limit: usize) -> Self {
        FirstN {
            limit,
            heap: BinaryHeap::new(),
            kept: 0,
            seen: 0,
        }
    }

    pub(super) fn push(&mut self, path: PathBuf, units: usize, item: T) {
        self.seen += units;
        if self.excludes(&path) {
            return;
        }
        self.heap.push(ByPath { path, units, item });
        self.kept += units;
        while let Some(worst) = self.heap.peek()
            && self.kept - worst.units >= self.limit
        {
            self.kept -= worst.units;
            self.heap.pop();
        }
    }

    /// Whether nothing at `path` or below it can make the cut any more.
    pub(super) fn excludes(&self, path: &Path) -> bool {
        self.kept >= self.limit && self.heap.peek().is_some_and(|w| path > w.path.as_path())
    }

    fn merge(&mut self, other: FirstN<T>) {
        let seen = self.seen + other.seen;
        for e in other.heap {
            self.push(e.path, e.units, e.item);
        }
        self.seen = seen;
    }

    pub(super) fn seen(&self) -> usize {
        self.seen
    }

    /// In path order. The last one may hold units beyond the limit.
    pub(super) fn into_sorted(self) -> impl Iterator<Item = (PathBuf, T)> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|e| (e.path, e.item))
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
    T: Send,
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
struct Local<'a, T> {
    first: FirstN<T>,
    merged: &'a Mutex<FirstN<T>>,
}

impl<T> Drop for Local<'_, T> {
    fn drop(&mut self) {
        let first = std::mem::replace(&mut self.first, FirstN::new(0));
        self.merged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .merge(first);
    }
}

/// Result lines joined as they come, keeping what fits in 50 KB: the cut `truncate_head` makes
/// with no line limit, without first building text that is thrown away (a search can yield
/// megabytes of matching lines).
pub(super) struct Lines {
    head: Head,
    scratch: String,
}

impl Default for Lines {
    fn default() -> Self {
        Lines {
            head: Head::new(Limits {
                max_lines: UNLIMITED_LINES,
                max_bytes: MAX_BYTES,
            }),
            scratch: String::new(),
        }
    }
}

impl Lines {
    pub(super) fn push_fmt(&mut self, line: std::fmt::Arguments<'_>) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let _ = scratch.write_fmt(line);
        self.push(&scratch);
        self.scratch = scratch;
    }

    pub(super) fn push(&mut self, line: &str) {
        self.head.push(line);
        self.head.end_line();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.head.lines() == 0
    }
}

/// What a notice records in `details`.
pub(super) enum Recorded {
    MatchLimit(usize),
    ResultLimit(usize),
    EntryLimit(usize),
    LinesTruncated,
}

impl Recorded {
    fn record(self, details: &mut OutputDetails) {
        match self {
            Recorded::MatchLimit(n) => details.match_limit_reached = Some(n),
            Recorded::ResultLimit(n) => details.result_limit_reached = Some(n),
            Recorded::EntryLimit(n) => details.entry_limit_reached = Some(n),
            Recorded::LinesTruncated => details.lines_truncated = Some(true),
        }
    }
}

/// A notice for the `[...]` line and what `details` records of it.
pub(super) type Notice = (String, Recorded);

/// Pi's notice when `limit` stopped the listing, e.g. `100 matches limit reached. Use limit=200
/// for more`, followed by `advice` when there is one; recorded in `details` as `recorded` says.
pub(super) fn limit_notice(
    limit: usize,
    what: &str,
    advice: &str,
    recorded: fn(usize) -> Recorded,
) -> Notice {
    (
        format!(
            "{limit} {what} limit reached. Use limit={} for more{advice}",
            limit.saturating_mul(2)
        ),
        recorded(limit),
    )
}

/// The text (lines, then Pi's notices in one `[...]` line) and `details`. `limit` is the limit
/// notice, if reached; `extra` goes after the size notice, as in Pi.
pub(super) fn finish(
    lines: Lines,
    limit: Option<Notice>,
    extra: Option<Notice>,
) -> (String, Option<ToolDetails>) {
    let mut notices = Vec::new();
    let mut details = OutputDetails::default();
    if let Some((notice, recorded)) = limit {
        notices.push(notice);
        recorded.record(&mut details);
    }
    let truncation = lines.head.finish();
    if truncation.truncated {
        notices.push(format!("{} limit reached", format_size(MAX_BYTES)));
        details.truncation = Some(truncation.details());
    }
    if let Some((notice, recorded)) = extra {
        notices.push(notice);
        recorded.record(&mut details);
    }
    let mut text = truncation.content;
    if !notices.is_empty() {
        text.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    (text, details.or_none())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn first_n_keeps_the_smallest_in_order() {
        let mut first = FirstN::new(2);
        for name in ["c", "a", "d", "b"] {
            first.push(PathBuf::from(name), 1, ());
        }
        assert_eq!(first.seen(), 4);
        assert!(first.excludes(Path::new("c")));
        assert!(!first.excludes(Path::new("a/x")));
        let names: Vec<_> = first.into_sorted().map(|(p, ())| p).collect();
        assert_eq!(names, [PathBuf::from("a"), PathBuf::from("b")]);
    }

    #[test]
    fn first_n_counts_units_and_merges() {
        let mut a = FirstN::new(3);
        a.push(PathBuf::from("x"), 2, 'x');
        a.push(PathBuf::from("y"), 1, 'y');
        let mut b = FirstN::new(3);
        b.push(PathBuf::from("a"), 2, 'a');
        b.push(PathBuf::from("z"), 5, 'z');
        a.merge(b);
        assert_eq!(a.seen(), 10);
        // "a" and "x" hold 4 units, enough for the limit, so "y" and "z" are dropped.
        let kept: Vec<_> = a.into_sorted().map(|(_, c)| c).collect();
        assert_eq!(kept, ['a', 'x']);
    }

    fn lines_of(items: &[String]) -> Lines {
        let mut lines = Lines::default();
        for item in items {
            lines.push(item);
        }
        lines
    }

    #[test]
    fn finish_appends_notices_in_pis_order() {
        let (text, details) = finish(
            lines_of(&["a".to_owned(), "b".to_owned()]),
            Some(("2 things".to_owned(), Recorded::MatchLimit(2))),
            Some(("Some note".to_owned(), Recorded::LinesTruncated)),
        );
        assert_eq!(text, "a\nb\n\n[2 things. Some note]");
        let details = details.unwrap().json();
        assert_eq!(details["matchLimitReached"], 2);
        assert_eq!(details["linesTruncated"], true);
        assert_eq!(finish(Lines::default(), None, None), (String::new(), None));
    }

    #[test]
    fn lines_cut_as_truncate_head_does() {
        use crate::tools::truncate::{Limits, truncate_head};
        let limits = Limits {
            max_lines: UNLIMITED_LINES,
            max_bytes: MAX_BYTES,
        };
        let mut big: Vec<String> = (0..2000).map(|i| format!("{i:0>40}")).collect();
        big.insert(1200, "y".repeat(3000));
        let expected = truncate_head(&big.join("\n"), limits);
        let (text, details) = finish(lines_of(&big), None, None);
        assert_eq!(
            text,
            format!("{}\n\n[50.0KB limit reached]", expected.content)
        );
        let t = &details.unwrap().json()["truncation"];
        assert_eq!(t, &serde_json::to_value(expected.details()).unwrap());
        assert_eq!(t["maxLines"], 9_007_199_254_740_991_u64);

        let huge = vec!["z".repeat(60_000), "a".to_owned()];
        let expected = truncate_head(&huge.join("\n"), limits);
        let (text, details) = finish(lines_of(&huge), None, None);
        assert_eq!(text, "\n\n[50.0KB limit reached]");
        assert_eq!(
            details.unwrap().json()["truncation"],
            serde_json::to_value(expected.details()).unwrap()
        );

        let fits = vec!["a".repeat(MAX_BYTES - 2), "b".to_owned()];
        assert_eq!(finish(lines_of(&fits), None, None).1, None);
    }
}
