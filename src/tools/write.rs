//! `write`: create or replace a whole file, making its directories as needed.

use super::safe_open::Target;
use super::{ToolContext, ToolOutput, ToolResult, blocking, fs};
use crate::protocol::ToolSpec;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
pub(super) struct Args {
    path: String,
    content: String,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "write".into(),
        description: "Write a whole file: creates it (and any missing parent directories) or \
            replaces what is there. Prefer edit for changing part of an existing file."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to write, absolute or relative to the working directory"},
                "content": {"type": "string", "description": "The complete new contents of the file"}
            },
            "required": ["path", "content"]
        }),
    }
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    // Never handed to an editor to write by name: an editor follows a symlink planted at the
    // path (or swapped in meanwhile), so nova writes through its own walk; the editor sees the
    // change on disk as it sees any other.
    let target = ctx.write_target(&args.path);
    blocking(&ctx.cancel, move |commit| {
        Target::open(&target, true)
            .map_err(|e| fs::error_text(&e, "mkdir", &target))?
            .replace(args.content.as_bytes(), commit)
            .map_err(|e| fs::error_text(&e, "write", &target))?;
        Ok(ToolOutput::text(
            format!(
                "Successfully wrote {} bytes to {}",
                args.content.len(),
                args.path
            ),
            None,
        ))
    })
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::{Tool, ToolContext, ToolOutput};
    use serde_json::json;

    fn ctx(dir: &std::path::Path) -> ToolContext {
        ToolContext::quiet(dir)
    }

    #[tokio::test]
    async fn creates_parent_directories_and_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"path": "a/b/c.txt", "content": "héllo"});
        let out = Tool::Write.execute(args, ctx(dir.path())).await;
        assert_eq!(
            out,
            ToolOutput::text("Successfully wrote 6 bytes to a/b/c.txt", None)
        );
        let p = dir.path().join("a/b/c.txt");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "héllo");

        let args = json!({"path": p.to_str().unwrap(), "content": ""});
        let out = Tool::Write.execute(args, ctx(dir.path())).await;
        assert!(!out.is_error);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "");
    }

    #[tokio::test]
    async fn missing_content_fails_validation() {
        let dir = tempfile::tempdir().unwrap();
        let out = Tool::Write
            .execute(json!({"path": "x"}), ctx(dir.path()))
            .await;
        assert!(out.is_error);
        let text = crate::protocol::joined_text(&out.content);
        assert!(text.contains("  - content: must have required property 'content'"));
        assert!(!dir.path().join("x").exists());
    }

    #[tokio::test]
    async fn cancelled_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        c.cancel.cancel();
        let out = Tool::Write
            .execute(json!({"path": "x", "content": "y"}), c)
            .await;
        assert_eq!(out, ToolOutput::error("Operation aborted"));
        assert!(!dir.path().join("x").exists());
    }
}
