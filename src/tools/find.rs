//! `find`: files and directories whose name (or, for a pattern with a `/`, whose path below the
//! search root) matches a glob, found the way Pi runs `fd --glob --hidden --no-require-git`.

use super::search::{self, FirstN, Lines};
use super::{ToolContext, ToolOutput, ToolResult, fs::ABORTED};
use crate::glob::{Case, Glob};
use crate::protocol::ToolSpec;
use ignore::WalkState;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;
use std::sync::atomic::AtomicBool;

const DEFAULT_LIMIT: i64 = 1000;

#[derive(Deserialize)]
pub(super) struct Args {
    pattern: String,
    path: Option<String>,
    limit: Option<i64>,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "find".into(),
        description: "Find files and directories by glob pattern. A pattern without '/' matches \
            names anywhere in the tree ('*.rs'); one with '/' matches paths below the search \
            directory ('src/**/*.rs'). Returns paths relative to the search directory, \
            directories ending in '/'. Honours .gitignore and includes hidden files. At most \
            1000 results by default (see limit) and 50KB of output."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob to match, e.g. '*.rs', '**/*.json' or 'src/**/test_*.py'"},
                "path": {"type": "string", "description": "Directory to search (default: the working directory)"},
                "limit": {"type": "integer", "description": "Most results to return (default: 1000)"}
            },
            "required": ["pattern"]
        }),
    }
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    let root = search::root(args.path.as_deref(), &ctx.cwd);
    search::run_stoppable(&ctx.cancel, move |stop| find(&args, &root, stop)).await
}

/// What a pattern is matched against, as fd decides it.
enum Target {
    Name,
    /// The path below the root; Pi prefixes `**/` so the pattern may start at any depth.
    RelativePath,
    AbsolutePath,
}

fn matcher(pattern: &str) -> Result<(Glob, Target), String> {
    let (glob, target) = if !pattern.contains('/') {
        (pattern.to_owned(), Target::Name)
    } else if pattern.starts_with('/') {
        (pattern.to_owned(), Target::AbsolutePath)
    } else if pattern.starts_with("**/") || pattern == "**" {
        (pattern.to_owned(), Target::RelativePath)
    } else {
        (format!("**/{pattern}"), Target::RelativePath)
    };
    // fd's smart case: a pattern with no capital letter matches either case.
    let case = if pattern.chars().any(char::is_uppercase) {
        Case::Sensitive
    } else {
        Case::Insensitive
    };
    let matcher =
        Glob::path(&glob, case).map_err(|e| format!("Invalid glob pattern {pattern:?}: {e}"))?;
    Ok((matcher, target))
}

fn find(args: &Args, root: &Path, stop: &AtomicBool) -> ToolResult {
    let meta =
        std::fs::metadata(root).map_err(|_| format!("Path not found: {}", root.display()))?;
    if !meta.is_dir() {
        return Err(format!("Not a directory: {}", root.display()));
    }
    let (glob, target) = matcher(&args.pattern)?;
    let limit = usize::try_from(args.limit.unwrap_or(DEFAULT_LIMIT).max(1)).unwrap_or(usize::MAX);
    let builder = search::walker(root, false, ".fdignore");
    let visit = |(): &mut (), entry: &ignore::DirEntry, rel: &Path, first: &mut FirstN<bool>| {
        if entry.depth() == 0 {
            return WalkState::Continue;
        }
        let hit = match target {
            Target::Name => glob.is_match(entry.file_name()),
            Target::RelativePath => glob.is_match(rel),
            Target::AbsolutePath => glob.is_match(entry.path()),
        };
        if hit {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            first.push(rel.to_path_buf(), 1, is_dir);
        }
        WalkState::Continue
    };
    let found = search::collect(&builder, root, limit, stop, || (), visit)
        .ok_or_else(|| ABORTED.to_owned())?;
    if found.seen() == 0 {
        return Ok(ToolOutput::text("No files found matching pattern", None));
    }
    let reached = found.seen() >= limit;
    let mut lines = Lines::default();
    for (rel, is_dir) in found.into_sorted() {
        let rel = rel.to_string_lossy();
        if is_dir {
            lines.push_fmt(format_args!("{rel}/"));
        } else {
            lines.push(&rel);
        }
    }
    let limit_notice = reached.then(|| {
        search::limit_notice(
            limit,
            "results",
            ", or refine pattern",
            search::Recorded::ResultLimit,
        )
    });
    let (text, details) = search::finish(lines, limit_notice, None);
    Ok(ToolOutput::text(text, details))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::{Tool, ToolContext, ToolOutput};
    use crate::protocol::joined_text;
    use serde_json::{Value, json};
    use std::path::Path;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::quiet(dir)
    }

    fn touch(dir: &Path, rel: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }

    async fn find(dir: &Path, args: Value) -> ToolOutput {
        Tool::Find.execute(args, ctx(dir)).await
    }

    async fn text(dir: &Path, args: Value) -> String {
        let out = find(dir, args).await;
        assert!(!out.is_error, "{:?}", out.content);
        joined_text(&out.content)
    }

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for rel in [
            ".git/HEAD",
            ".gitignore",
            ".hidden/x.rs",
            "build/out.rs",
            "src/main.rs",
            "src/tools/grep.rs",
            "src/tools/README.md",
            "tests/main.rs",
            "notes.log",
        ] {
            touch(d, rel);
        }
        std::fs::write(d.join(".gitignore"), "build/\n*.log\n").unwrap();
        std::fs::create_dir_all(d.join("src/main.rs.d")).unwrap();
        dir
    }

    #[tokio::test]
    async fn names_match_anywhere_with_dirs_marked() {
        let dir = tree();
        // No `.git` needed: Pi runs fd with --no-require-git. `.git` itself is left out.
        let out = text(dir.path(), json!({"pattern": "*.rs*"})).await;
        assert_eq!(
            out,
            ".hidden/x.rs\nsrc/main.rs\nsrc/main.rs.d/\nsrc/tools/grep.rs\ntests/main.rs"
        );
        assert_eq!(text(dir.path(), json!({"pattern": "src"})).await, "src/");
        assert_eq!(
            text(dir.path(), json!({"pattern": "HEAD"})).await,
            "No files found matching pattern"
        );
    }

    #[tokio::test]
    async fn patterns_with_a_slash_match_paths() {
        let dir = tree();
        let out = text(dir.path(), json!({"pattern": "src/**/*.rs"})).await;
        assert_eq!(out, "src/main.rs\nsrc/tools/grep.rs");
        let out = text(dir.path(), json!({"pattern": "tools/*.rs"})).await;
        assert_eq!(out, "src/tools/grep.rs");
        let abs = format!("{}/src/*.rs", dir.path().display());
        assert_eq!(
            text(dir.path(), json!({"pattern": abs})).await,
            "src/main.rs"
        );
        let out = text(dir.path(), json!({"pattern": "*.rs", "path": "src"})).await;
        assert_eq!(out, "main.rs\ntools/grep.rs");
    }

    #[tokio::test]
    async fn smart_case() {
        let dir = tree();
        let out = text(dir.path(), json!({"pattern": "readme*"})).await;
        assert_eq!(out, "src/tools/README.md");
        let out = text(dir.path(), json!({"pattern": "Readme*"})).await;
        assert_eq!(out, "No files found matching pattern");
    }

    #[tokio::test]
    async fn limit_notice_and_errors() {
        let dir = tree();
        let out = find(dir.path(), json!({"pattern": "*", "limit": 3})).await;
        assert_eq!(
            joined_text(&out.content),
            ".gitignore\n.hidden/\n.hidden/x.rs\n\n\
             [3 results limit reached. Use limit=6 for more, or refine pattern]"
        );
        assert_eq!(
            out.details.unwrap().json(),
            json!({"resultLimitReached": 3})
        );

        let out = find(dir.path(), json!({"pattern": "*", "path": "nope"})).await;
        let missing = dir.path().join("nope");
        assert_eq!(
            out,
            ToolOutput::error(format!("Path not found: {}", missing.display()))
        );
        let out = find(dir.path(), json!({"pattern": "*", "path": "notes.log"})).await;
        let file = dir.path().join("notes.log");
        assert_eq!(
            out,
            ToolOutput::error(format!("Not a directory: {}", file.display()))
        );
        let out = find(dir.path(), json!({"pattern": "a[b"})).await;
        assert!(out.is_error);
        assert!(joined_text(&out.content).starts_with("Invalid glob pattern \"a[b\""));

        let c = ctx(dir.path());
        c.cancel.cancel();
        let out = Tool::Find.execute(json!({"pattern": "*"}), c).await;
        assert_eq!(out, ToolOutput::error("Operation aborted"));
    }
}
