//! `find`: files and directories whose name (or, for a pattern with a `/`, whose path below the
//! search root) matches a glob, found the way Pi runs `fd --glob --hidden --no-require-git`.

use super::search::{self, FirstN};
use super::{ToolContext, ToolOutput, ToolResult, fs::ABORTED, path};
use crate::provider::ToolSpec;
use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkState;
use serde::Deserialize;
use serde_json::{Value, json};
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
        name: "find",
        description: "Find files and directories by glob pattern. A pattern without '/' matches \
            names anywhere in the tree ('*.rs'); one with '/' matches paths below the search \
            directory ('src/**/*.rs'). Returns paths relative to the search directory, \
            directories ending in '/'. Honours .gitignore and includes hidden files. At most \
            1000 results by default (see limit) and 50KB of output.",
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
    let root = search::clean(&path::resolve(
        args.path
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("."),
        &ctx.cwd,
    ));
    search::run_stoppable(&ctx.cancel, move |stop| find(&args, &root, stop)).await
}

/// What a pattern is matched against, as fd decides it.
enum Target {
    Name,
    /// The path below the root; Pi prefixes `**/` so the pattern may start at any depth.
    RelativePath,
    AbsolutePath,
}

fn matcher(pattern: &str) -> Result<(GlobMatcher, Target), String> {
    let (glob, target) = if !pattern.contains('/') {
        (pattern.to_owned(), Target::Name)
    } else if pattern.starts_with('/') {
        (pattern.to_owned(), Target::AbsolutePath)
    } else if pattern.starts_with("**/") || pattern == "**" {
        (pattern.to_owned(), Target::RelativePath)
    } else {
        (format!("**/{pattern}"), Target::RelativePath)
    };
    let matcher = GlobBuilder::new(&glob)
        .literal_separator(true)
        // fd's smart case: a pattern with no capital letter matches either case.
        .case_insensitive(!pattern.chars().any(char::is_uppercase))
        .build()
        .map_err(|e| format!("Invalid glob pattern {pattern:?}: {e}"))?
        .compile_matcher();
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
            first.push(rel.to_path_buf(), is_dir);
        }
        WalkState::Continue
    };
    let found = search::collect(&builder, root, limit, stop, || (), visit)
        .ok_or_else(|| ABORTED.to_owned())?;
    if found.seen() == 0 {
        return Ok(ToolOutput::text("No files found matching pattern", None));
    }
    let reached = found.seen() >= limit;
    let lines: Vec<String> = found
        .into_sorted()
        .into_iter()
        .map(|(rel, is_dir)| {
            let rel = rel.to_string_lossy();
            if is_dir {
                format!("{rel}/")
            } else {
                rel.into_owned()
            }
        })
        .collect();
    let limit_notice = reached.then(|| {
        (
            format!(
                "{limit} results limit reached. Use limit={} for more, or refine pattern",
                limit.saturating_mul(2)
            ),
            "resultLimitReached",
            Value::from(limit),
        )
    });
    let (text, details) = search::finish(&lines, limit_notice, None);
    Ok(ToolOutput::text(text, details))
}
