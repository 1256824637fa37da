//! `grep`: lines matching a regex (or a literal) in a file or a tree, searched the way `rg` does
//! (ignore files honoured, hidden files included, binary files skipped), each match shown as
//! `path:LINE: text` with optional context lines as `path-LINE- text`.

use super::search::{self, FirstN, Lines};
use super::{ToolContext, ToolOutput, ToolResult};
use crate::protocol::ToolSpec;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;
use serde::Deserialize;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

const DEFAULT_LIMIT: i64 = 100;
/// Longer lines are cut (counted in chars) so one minified file cannot fill the output.
const MAX_LINE_CHARS: usize = 500;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    ignore_case: Option<bool>,
    literal: Option<bool>,
    context: Option<i64>,
    limit: Option<i64>,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "grep".into(),
        description: "Search file contents with a regular expression (or a literal string). \
            Prints each matching line as path:LINE: text, paths relative to the searched \
            directory. Honours .gitignore, includes hidden files, skips binary files. At most \
            100 matches by default (see limit) and 50KB of output; lines longer than 500 \
            characters are cut."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to look for, or a plain string with literal: true"},
                "path": {"type": "string", "description": "Directory or file to search (default: the working directory)"},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. '*.rs' or 'src/**/*.ts'"},
                "ignoreCase": {"type": "boolean", "description": "Match regardless of case (default: false)"},
                "literal": {"type": "boolean", "description": "Take the pattern as a plain string, not a regex (default: false)"},
                "context": {"type": "integer", "description": "Lines to show before and after each match (default: 0)"},
                "limit": {"type": "integer", "description": "Most matches to return (default: 100)"}
            },
            "required": ["pattern"]
        }),
    }
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    let root = search::root(args.path.as_deref(), &ctx.cwd);
    search::run_stoppable(&ctx.cancel, move |stop| grep(&args, &root, stop)).await
}

/// A line of a file that is shown: a match, or context around one.
struct Line {
    n: u64,
    text: String,
    /// False for a match past the limit, shown only as another match's context.
    is_match: bool,
}

fn grep(args: &Args, root: &Path, stop: &AtomicBool) -> ToolResult {
    let meta =
        std::fs::metadata(root).map_err(|_| format!("Path not found: {}", root.display()))?;
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.ignore_case.unwrap_or(false))
        .fixed_strings(args.literal.unwrap_or(false))
        // As rg sets it: lets the searcher scan whole buffers for candidates, not line by line.
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| e.to_string())?;
    let context = u64::try_from(args.context.unwrap_or(0)).unwrap_or(0);
    let limit = usize::try_from(args.limit.unwrap_or(DEFAULT_LIMIT).max(1)).unwrap_or(usize::MAX);

    let mut builder = search::walker(root, true, ".rgignore");
    if let Some(glob) = args.glob.as_deref().filter(|g| !g.is_empty()) {
        let overrides = OverrideBuilder::new(root)
            .add(glob)
            .and_then(|b| b.build())
            .map_err(|e| format!("Invalid glob {glob:?}: {e}"))?;
        builder.overrides(overrides);
    }
    let context_usize = usize::try_from(context).unwrap_or(usize::MAX);
    let make_searcher = || {
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\0'))
            .before_context(context_usize)
            .after_context(context_usize)
            .build();
        (searcher, matcher.clone())
    };
    let visit = |(searcher, matcher): &mut (Searcher, RegexMatcher),
                 entry: &ignore::DirEntry,
                 rel: &Path,
                 first: &mut FirstN<Vec<Line>>| {
        let searchable = entry
            .file_type()
            .is_some_and(|t| t.is_file() || (entry.depth() == 0 && !t.is_dir()));
        if !searchable {
            return WalkState::Continue;
        }
        let mut sink = FileSink::new(limit, context, stop);
        // An unreadable file is skipped, as rg skips it (with a message we have nowhere to put).
        // Regular files only, opened without blocking: a FIFO or device is skipped like an
        // unreadable file.
        let searched = super::safe_open::open_regular(entry.path())
            .and_then(|file| searcher.search_file(&*matcher, &file, &mut sink));
        if searched.is_ok() && !sink.binary && sink.matches > 0 {
            first.push(rel.to_path_buf(), sink.matches, sink.lines);
        }
        WalkState::Continue
    };
    let found = search::collect(&builder, root, limit, stop, make_searcher, visit)
        .ok_or_else(|| super::fs::ABORTED.to_owned())?;
    // A single file is shown by its name, as Pi does.
    let single = (!meta.is_dir()).then(|| {
        root.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    Ok(render(found, single.as_deref(), context, limit))
}

/// Pi's text: each match's block of lines, the first `limit` matches in path order, then the
/// notices.
fn render(
    found: FirstN<Vec<Line>>,
    single: Option<&str>,
    context: u64,
    limit: usize,
) -> ToolOutput {
    if found.seen() == 0 {
        return ToolOutput::text("No matches found", None);
    }
    let reached = found.seen() >= limit;
    let mut out = Lines::default();
    let mut shown_matches = 0;
    let mut any_cut = false;
    'files: for (rel, lines) in found.into_sorted() {
        let rel = rel.to_string_lossy();
        let shown = single.unwrap_or(&rel);
        for (n, block) in blocks(&lines, context) {
            if shown_matches == limit {
                break 'files;
            }
            shown_matches += 1;
            for line in block {
                let sep = if line.n == n { ':' } else { '-' };
                let (text, cut) = cut_line(&line.text);
                any_cut |= cut;
                out.push_fmt(format_args!("{shown}{sep}{}{sep} {text}", line.n));
            }
        }
    }
    let limit_notice = reached.then(|| {
        search::limit_notice(limit, "matches", ", or refine pattern", "matchLimitReached")
    });
    let cut_notice = any_cut.then(|| {
        (
            format!(
                "Some lines truncated to {MAX_LINE_CHARS} chars. Use read tool to see full lines"
            ),
            "linesTruncated",
            Value::Bool(true),
        )
    });
    let (text, details) = search::finish(out, limit_notice, cut_notice);
    ToolOutput::text(text, details)
}

/// Each match with the lines within `context` of it. Pi repeats lines shared by overlapping
/// blocks rather than merging them.
fn blocks(lines: &[Line], context: u64) -> impl Iterator<Item = (u64, &[Line])> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_match)
        .map(move |(i, l)| {
            let lo = l.n.saturating_sub(context);
            let hi = l.n.saturating_add(context);
            let before = lines[..i].iter().rev().take_while(|m| m.n >= lo).count();
            let after = lines[i + 1..].iter().take_while(|m| m.n <= hi).count();
            (l.n, &lines[i - before..=i + after])
        })
}

/// Collects one file's first `limit` matching lines and the context lines around them.
struct FileSink<'a> {
    limit: usize,
    context: u64,
    stop: &'a AtomicBool,
    lines: Vec<Line>,
    matches: usize,
    /// Once the limit is reached, the last line still needed as after-context.
    last_needed: Option<u64>,
    binary: bool,
}

impl<'a> FileSink<'a> {
    fn new(limit: usize, context: u64, stop: &'a AtomicBool) -> Self {
        FileSink {
            limit,
            context,
            stop,
            lines: Vec::new(),
            matches: 0,
            last_needed: None,
            binary: false,
        }
    }

    fn take(&mut self, line: Option<u64>, bytes: &[u8], is_match: bool) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let n = line.unwrap_or(0);
        if self.last_needed.is_some_and(|last| n > last) {
            return false;
        }
        let is_match = is_match && self.matches < self.limit;
        self.lines.push(Line {
            n,
            text: clean_line(bytes),
            is_match,
        });
        if is_match {
            self.matches += 1;
            if self.matches == self.limit {
                self.last_needed = Some(n.saturating_add(self.context));
                return self.context > 0;
            }
        }
        true
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        Ok(self.take(m.line_number(), m.bytes(), true))
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        Ok(self.take(c.line_number(), c.bytes(), false))
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// The line without its terminator or any carriage returns, invalid UTF-8 replaced.
fn clean_line(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    if text.contains('\r') {
        text.replace('\r', "")
    } else {
        text.into_owned()
    }
}

fn cut_line(text: &str) -> (Cow<'_, str>, bool) {
    // A line of at most MAX_LINE_CHARS bytes cannot have more chars than that.
    if text.len() <= MAX_LINE_CHARS {
        return (Cow::Borrowed(text), false);
    }
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => (Cow::Owned(format!("{}... [truncated]", &text[..at])), true),
        None => (Cow::Borrowed(text), false),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::{Tool, ToolContext, ToolOutput};
    use crate::protocol::joined_text;
    use serde_json::{Value, json};
    use std::path::Path;
    use std::sync::atomic::AtomicBool;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::quiet(dir)
    }

    fn write(dir: &Path, rel: &str, body: impl AsRef<[u8]>) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }

    async fn grep(dir: &Path, args: Value) -> ToolOutput {
        Tool::Grep.execute(args, ctx(dir)).await
    }

    async fn text(dir: &Path, args: Value) -> String {
        let out = grep(dir, args).await;
        assert!(!out.is_error, "{:?}", out.content);
        joined_text(&out.content)
    }

    /// A repository with ignored, hidden, binary and `.git` content, all containing "needle".
    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(d, ".git/config", "needle in the object store\n");
        write(d, ".gitignore", "ignored/\n*.log\n");
        write(d, "ignored/a.txt", "needle\n");
        write(d, "b.log", "needle\n");
        write(d, ".env", "KEY=needle\n");
        write(d, ".hidden/h.txt", "a needle here\n");
        write(d, "bin.dat", b"needle\0\x01\x02needle\n");
        write(d, "src/main.rs", "fn main() {\n    needle();\n}\n");
        write(d, "src/lib.rs", "// no match\n");
        dir
    }

    #[tokio::test]
    async fn honours_gitignore_includes_hidden_skips_binary_and_git() {
        let dir = repo();
        let out = text(dir.path(), json!({"pattern": "needle"})).await;
        assert_eq!(
            out,
            ".env:1: KEY=needle\n.hidden/h.txt:1: a needle here\nsrc/main.rs:2:     needle();"
        );
    }

    #[tokio::test]
    async fn gitignore_counts_only_inside_a_repository_as_with_rg() {
        let dir = repo();
        std::fs::remove_dir_all(dir.path().join(".git")).unwrap();
        let out = text(
            dir.path(),
            json!({"pattern": "needle", "glob": "*.{log,txt}"}),
        )
        .await;
        assert_eq!(
            out,
            ".hidden/h.txt:1: a needle here\nb.log:1: needle\nignored/a.txt:1: needle"
        );
    }

    #[tokio::test]
    async fn context_lines_surround_each_match() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "f.txt",
            "a\nb\nneedle\nc\nd\nx\nneedle\nneedle\ne\n",
        );
        let out = text(dir.path(), json!({"pattern": "needle", "context": 1})).await;
        let expected = [
            "f.txt-2- b",
            "f.txt:3: needle",
            "f.txt-4- c",
            "f.txt-6- x",
            "f.txt:7: needle",
            "f.txt-8- needle",
            "f.txt-7- needle",
            "f.txt:8: needle",
            "f.txt-9- e",
        ];
        assert_eq!(out, expected.join("\n"));
    }

    #[tokio::test]
    async fn limit_keeps_the_first_matches_in_path_order_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["d", "b", "a", "c", "e"] {
            write(dir.path(), &format!("{name}.txt"), "hit 1\nhit 2\nhit 3\n");
        }
        let out = grep(dir.path(), json!({"pattern": "hit", "limit": 4})).await;
        assert_eq!(
            joined_text(&out.content),
            "a.txt:1: hit 1\na.txt:2: hit 2\na.txt:3: hit 3\nb.txt:1: hit 1\n\n\
             [4 matches limit reached. Use limit=8 for more, or refine pattern]"
        );
        assert_eq!(out.details.unwrap(), json!({"matchLimitReached": 4}));

        // The last match of the limit still gets its after-context.
        let out = text(
            dir.path(),
            json!({"pattern": "hit", "limit": 1, "context": 1, "path": "c.txt"}),
        )
        .await;
        assert_eq!(
            out,
            "c.txt:1: hit 1\nc.txt-2- hit 2\n\n\
             [1 matches limit reached. Use limit=2 for more, or refine pattern]"
        );
    }

    #[tokio::test]
    async fn literal_regex_and_ignore_case() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "f.txt", "abc\na.c\nA.C\n");
        let out = text(dir.path(), json!({"pattern": "a.c"})).await;
        assert_eq!(out, "f.txt:1: abc\nf.txt:2: a.c");
        let out = text(dir.path(), json!({"pattern": "a.c", "literal": true})).await;
        assert_eq!(out, "f.txt:2: a.c");
        let out = text(
            dir.path(),
            json!({"pattern": "a.c", "literal": true, "ignoreCase": true}),
        )
        .await;
        assert_eq!(out, "f.txt:2: a.c\nf.txt:3: A.C");
    }

    #[tokio::test]
    async fn glob_filters_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "src/a.rs", "x\n");
        write(dir.path(), "src/deep/b.rs", "x\n");
        write(dir.path(), "c.rs", "x\n");
        write(dir.path(), "d.txt", "x\n");
        let out = text(dir.path(), json!({"pattern": "x", "glob": "*.rs"})).await;
        assert_eq!(out, "c.rs:1: x\nsrc/a.rs:1: x\nsrc/deep/b.rs:1: x");
        let out = text(dir.path(), json!({"pattern": "x", "glob": "src/**/*.rs"})).await;
        assert_eq!(out, "src/a.rs:1: x\nsrc/deep/b.rs:1: x");
    }

    #[tokio::test]
    async fn single_file_long_lines_and_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("needle{}", "y".repeat(600));
        write(dir.path(), "sub/f.txt", format!("needle\r\n{long}\n"));
        let out = grep(
            dir.path(),
            json!({"pattern": "needle", "path": "sub/f.txt"}),
        )
        .await;
        let expected = format!(
            "f.txt:1: needle\nf.txt:2: needle{}... [truncated]\n\n\
             [Some lines truncated to 500 chars. Use read tool to see full lines]",
            "y".repeat(494)
        );
        assert_eq!(joined_text(&out.content), expected);
        assert_eq!(out.details.unwrap(), json!({"linesTruncated": true}));
    }

    #[tokio::test]
    async fn a_symlinked_root_is_followed_but_links_inside_are_not() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "real/f.txt", "needle\n");
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let out = text(dir.path(), json!({"pattern": "needle", "path": "link"})).await;
        assert_eq!(out, "f.txt:1: needle");
        let out = text(dir.path(), json!({"pattern": "needle"})).await;
        assert_eq!(out, "real/f.txt:1: needle");
    }

    #[tokio::test]
    async fn output_is_capped_at_50kb() {
        let dir = tempfile::tempdir().unwrap();
        let body: String = (0..300)
            .map(|i| format!("{i} {}\n", "z".repeat(300)))
            .collect();
        write(dir.path(), "big.txt", body);
        let out = grep(dir.path(), json!({"pattern": "z", "limit": 1000})).await;
        let text = joined_text(&out.content);
        assert!(text.ends_with("\n\n[50.0KB limit reached]"), "{text}");
        assert!(text.len() < 51_300);
        assert_eq!(out.details.unwrap()["truncation"]["truncatedBy"], "bytes");
    }

    #[tokio::test]
    async fn misses_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "f.txt", "abc\n");
        assert_eq!(
            text(dir.path(), json!({"pattern": "zzz"})).await,
            "No matches found"
        );
        let out = grep(dir.path(), json!({"pattern": "x", "path": "nope"})).await;
        assert!(out.is_error);
        assert_eq!(
            joined_text(&out.content),
            format!("Path not found: {}", dir.path().join("nope").display())
        );
        let out = grep(dir.path(), json!({"pattern": "(abc"})).await;
        assert!(out.is_error);
        let err = joined_text(&out.content);
        assert!(err.starts_with("regex parse error:"), "{err}");
        assert!(err.contains("unclosed group"), "{err}");
    }

    #[tokio::test]
    async fn cancellation_aborts() {
        let dir = repo();
        let c = ctx(dir.path());
        c.cancel.cancel();
        let out = Tool::Grep.execute(json!({"pattern": "needle"}), c).await;
        assert_eq!(out, ToolOutput::error("Operation aborted"));

        // A raised stop flag ends the walk itself, not just the wait for it.
        let args = serde_json::from_value(json!({"pattern": "needle"})).unwrap();
        let stopped = super::grep(&args, dir.path(), &AtomicBool::new(true));
        assert_eq!(stopped, Err("Operation aborted".to_owned()));

        // Cancelling mid-walk ends the call promptly.
        for i in 0..2000 {
            write(dir.path(), &format!("many/{}/{i}.txt", i % 50), "needle\n");
        }
        let c = ctx(dir.path());
        let cancel = c.cancel.clone();
        let call = tokio::spawn(Tool::Grep.execute(json!({"pattern": "needle"}), c));
        cancel.cancel();
        let out = tokio::time::timeout(std::time::Duration::from_secs(5), call)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(out, ToolOutput::error("Operation aborted"));
    }
}
