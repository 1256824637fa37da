//! `ls`: one directory's entries, every one of them (dotfiles and ignored files too), sorted
//! without regard to case, directories marked with a trailing `/`.

use super::search::{self, Lines};
use super::{ToolContext, ToolOutput, ToolResult, blocking, fs::error_text};
use crate::protocol::ToolSpec;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

const DEFAULT_LIMIT: i64 = 500;

#[derive(Deserialize)]
pub(super) struct Args {
    path: Option<String>,
    limit: Option<i64>,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "ls".into(),
        description: "List a directory's entries, sorted alphabetically without regard to case, \
            directories ending in '/'. Dotfiles are included. At most 500 entries by default \
            (see limit) and 50KB of output."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: the working directory)"},
                "limit": {"type": "integer", "description": "Most entries to return (default: 500)"}
            }
        }),
    }
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    let dir = search::root(args.path.as_deref(), &ctx.cwd);
    let limit = usize::try_from(args.limit.unwrap_or(DEFAULT_LIMIT).max(1)).unwrap_or(usize::MAX);
    blocking(&ctx.cancel, move |_| list(&dir, limit)).await
}

fn list(dir: &Path, limit: usize) -> ToolResult {
    let meta = std::fs::metadata(dir).map_err(|_| format!("Path not found: {}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("Not a directory: {}", dir.display()));
    }
    let read_err =
        |e: std::io::Error| format!("Cannot read directory: {}", error_text(&e, "scandir", dir));
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        names.push(
            entry
                .map_err(read_err)?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    // Pi compares lower-cased names; the raw name breaks ties so the order never depends on
    // the order the file system returned them in.
    names.sort_by_cached_key(|n| (n.to_lowercase(), n.clone()));

    let mut lines = Lines::default();
    let mut listed = 0;
    let mut reached = false;
    for name in names {
        if listed >= limit {
            reached = true;
            break;
        }
        // Pi follows symlinks here, so a link to a directory gets the `/` and a dangling one is
        // left out.
        match std::fs::metadata(dir.join(&name)) {
            Ok(m) if m.is_dir() => lines.push_fmt(format_args!("{name}/")),
            Ok(_) => lines.push(&name),
            Err(_) => continue,
        }
        listed += 1;
    }
    if lines.is_empty() {
        return Ok(ToolOutput::text("(empty directory)", None));
    }
    let limit_notice =
        reached.then(|| search::limit_notice(limit, "entries", "", search::Recorded::EntryLimit));
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

    async fn ls(dir: &Path, args: Value) -> ToolOutput {
        Tool::Ls.execute(args, ctx(dir)).await
    }

    #[tokio::test]
    async fn lists_everything_sorted_without_case_dirs_marked() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in ["b.txt", "A.txt", ".env", "c.log", ".gitignore"] {
            std::fs::write(d.join(f), "x").unwrap();
        }
        std::fs::write(d.join(".gitignore"), "*.log\n").unwrap();
        std::fs::create_dir(d.join("Src")).unwrap();
        std::fs::create_dir(d.join(".git")).unwrap();
        std::os::unix::fs::symlink(d.join("Src"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("gone"), d.join("dangling")).unwrap();
        let out = ls(d, json!({})).await;
        assert_eq!(
            joined_text(&out.content),
            ".env\n.git/\n.gitignore\nA.txt\nb.txt\nc.log\nlink/\nSrc/"
        );
        assert_eq!(out.details, None);

        let out = ls(d, json!({"path": ".", "limit": 2})).await;
        assert_eq!(
            joined_text(&out.content),
            ".env\n.git/\n\n[2 entries limit reached. Use limit=4 for more]"
        );
        assert_eq!(out.details.unwrap().json(), json!({"entryLimitReached": 2}));
        let out = ls(d, json!({"path": "Src"})).await;
        assert_eq!(out, ToolOutput::text("(empty directory)", None));
    }

    #[tokio::test]
    async fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("f"), "x").unwrap();
        let out = ls(d, json!({"path": "nope"})).await;
        let missing = d.join("nope");
        assert_eq!(
            out,
            ToolOutput::error(format!("Path not found: {}", missing.display()))
        );
        let out = ls(d, json!({"path": "f"})).await;
        assert_eq!(
            out,
            ToolOutput::error(format!("Not a directory: {}", d.join("f").display()))
        );

        let c = ctx(d);
        c.cancel.cancel();
        let out = Tool::Ls.execute(json!({}), c).await;
        assert_eq!(out, ToolOutput::error("Operation aborted"));
    }
}
