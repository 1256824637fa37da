//! `grep`: lines matching a regex (or a literal) in a file or a tree, searched the way `rg` does
//! (ignore files honoured, hidden files included, binary files skipped), each match shown as
//! `path:LINE: text` with optional context lines as `path-LINE- text`.
//!
//! Memory per line is bounded: a file is read through [`CutLines`], which passes at most
//! [`line_budget`] bytes of each line to the searcher (so a 512 MiB file of one line is searched
//! in its first MiB, within a buffer of that size), and only the shown part of a line, at most
//! 500 chars, is kept.

use super::search::{self, FirstN, Lines};
use super::{ToolContext, ToolOutput, ToolResult};
use crate::protocol::ToolSpec;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;
use serde::Deserialize;
use serde_json::json;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

const DEFAULT_LIMIT: i64 = 100;
/// Longer lines are cut (counted in chars) so one minified file cannot fill the output.
const MAX_LINE_CHARS: usize = 500;
/// The most of one line the searcher is given. Matches further into a longer line are not
/// found (the tool's description says so).
const MAX_SEARCHED_LINE: usize = 1024 * 1024;
/// What one search thread may hold of the lines around a match: the searcher keeps `context`
/// lines before the current one, so with more context each line is searched in less.
const CONTEXT_BUDGET: usize = 8 * 1024 * 1024;
/// The most context lines on each side: more never fit in the 50 KB the output may show.
const MAX_CONTEXT: u64 = 1000;

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
            characters are cut, and only the first 1MB of a line is searched."
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
    /// At most [`MAX_LINE_CHARS`] of it.
    text: String,
    /// The line was longer than `text`.
    cut: bool,
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
    let context = u64::try_from(args.context.unwrap_or(0))
        .unwrap_or(0)
        .min(MAX_CONTEXT);
    let max_line = line_budget(context);
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
        let searched = super::safe_open::open_regular(entry.path()).and_then(|file| {
            searcher.search_reader(&*matcher, CutLines::new(file, max_line), &mut sink)
        });
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
                any_cut |= line.cut;
                let more = if line.cut { "... [truncated]" } else { "" };
                out.push_fmt(format_args!(
                    "{shown}{sep}{}{sep} {}{more}",
                    line.n, line.text
                ));
            }
        }
    }
    let limit_notice = reached.then(|| {
        search::limit_notice(
            limit,
            "matches",
            ", or refine pattern",
            search::Recorded::MatchLimit,
        )
    });
    let cut_notice = any_cut.then(|| {
        (
            format!(
                "Some lines truncated to {MAX_LINE_CHARS} chars. Use read tool to see full lines"
            ),
            search::Recorded::LinesTruncated,
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
        let (text, cut) = shown_part(bytes);
        self.lines.push(Line {
            n,
            text,
            cut,
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

/// The line as shown: without its terminator or any carriage returns, invalid UTF-8 replaced,
/// cut to [`MAX_LINE_CHARS`] chars; and whether it was cut.
fn shown_part(bytes: &[u8]) -> (String, bool) {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    // A char takes at most four bytes (and a bad byte one U+FFFD), carriage returns aside.
    let decode = |bytes: &[u8]| String::from_utf8_lossy(bytes).replace('\r', "");
    let mut text = decode(&bytes[..bytes.len().min(4 * MAX_LINE_CHARS)]);
    let mut whole = bytes.len() <= 4 * MAX_LINE_CHARS;
    if !whole && text.chars().count() <= MAX_LINE_CHARS {
        // Mostly carriage returns: rare enough to decode the whole line.
        text = decode(bytes);
        whole = true;
    }
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => {
            text.truncate(at);
            (text, true)
        }
        None => (text, !whole),
    }
}

/// How many bytes of each line are searched, with `context` lines kept on each side.
fn line_budget(context: u64) -> usize {
    let lines = usize::try_from(context)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    (CONTEXT_BUDGET / lines).min(MAX_SEARCHED_LINE)
}

/// A reader that passes on at most `max` bytes of each line, dropping the rest of a longer line
/// up to its newline; line numbers stay right. Where no line can run past `max`, it only looks
/// for the last newline of what was read.
struct CutLines<R> {
    inner: R,
    max: usize,
    /// Bytes of the current line passed on so far.
    line: usize,
}

impl<R: Read> CutLines<R> {
    fn new(inner: R, max: usize) -> Self {
        CutLines {
            inner,
            max,
            line: 0,
        }
    }

    /// Drops what `buf` holds past `max` bytes of a line; returns the length kept.
    fn cut(&mut self, buf: &mut [u8]) -> usize {
        if self.line + buf.len() <= self.max {
            self.line = match buf.iter().rposition(|&b| b == b'\n') {
                Some(i) => buf.len() - i - 1,
                None => self.line + buf.len(),
            };
            return buf.len();
        }
        let (mut read, mut write) = (0, 0);
        while read < buf.len() {
            let newline = buf[read..].iter().position(|&b| b == b'\n');
            let body = newline.unwrap_or(buf.len() - read);
            let keep = body.min(self.max.saturating_sub(self.line));
            buf.copy_within(read..read + keep, write);
            write += keep;
            read += body;
            if newline.is_some() {
                buf[write] = b'\n';
                write += 1;
                read += 1;
                self.line = 0;
            } else {
                self.line += keep;
            }
        }
        write
    }
}

impl<R: Read> Read for CutLines<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                return Ok(0);
            }
            let kept = self.cut(&mut buf[..n]);
            if kept > 0 {
                return Ok(kept);
            }
        }
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
        assert_eq!(out.details.unwrap().json(), json!({"matchLimitReached": 4}));

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
        assert_eq!(out.details.unwrap().json(), json!({"linesTruncated": true}));
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

    #[test]
    fn long_lines_reach_the_searcher_cut_with_their_newlines() {
        use std::io::Read;
        let text = b"short\nabcdefghij\n\nxy\nlonger than ten\nend";
        for chunk in [1, 2, 3, 7, 64] {
            // A reader that hands out `chunk` bytes at a time.
            struct Trickle<'a>(&'a [u8], usize);
            impl Read for Trickle<'_> {
                fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                    let n = self.1.min(buf.len()).min(self.0.len());
                    buf[..n].copy_from_slice(&self.0[..n]);
                    self.0 = &self.0[n..];
                    Ok(n)
                }
            }
            let mut cut = super::CutLines::new(Trickle(text, chunk), 6);
            let mut out = Vec::new();
            let mut buf = [0u8; 5];
            loop {
                let n = cut.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "short\nabcdef\n\nxy\nlonger\nend",
                "chunks of {chunk}"
            );
        }
        assert_eq!(super::line_budget(0), 1024 * 1024);
        assert_eq!(super::line_budget(1000), 8 * 1024 * 1024 / 1001);
    }

    #[tokio::test]
    async fn a_line_longer_than_the_searched_part_is_found_by_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut body = b"needle".to_vec();
        body.resize(3 * 1024 * 1024, b'x');
        body.extend_from_slice(b" needle at the far end\nneedle\n");
        write(dir.path(), "f.txt", body);
        let out = text(dir.path(), json!({"pattern": "needle"})).await;
        assert_eq!(
            out,
            format!(
                "f.txt:1: needle{}... [truncated]\nf.txt:2: needle\n\n\
                 [Some lines truncated to 500 chars. Use read tool to see full lines]",
                "x".repeat(494)
            )
        );
        let out = text(dir.path(), json!({"pattern": "far end"})).await;
        assert_eq!(
            out, "No matches found",
            "only the first MiB of a line is searched"
        );
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
        assert_eq!(
            out.details.unwrap().json()["truncation"]["truncatedBy"],
            "bytes"
        );
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
