//! `edit`: targeted replacements in one file. The model sends `edits[]` (or, as older Pi
//! accepted, one top-level `oldText`/`newText`). A byte-order mark and CRLF line endings are
//! invisible to the model, so matching happens without them and they are restored on write.

use super::edit_match::{self, Edit};
use super::safe_open::Target;
use super::{ToolContext, ToolOutput, ToolResult, blocking, diff, fs};
use crate::protocol::{EditDetails, ToolDetails, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::{ErrorKind, Read};

const BOM: &str = "\u{FEFF}";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EditArg {
    old_text: String,
    new_text: String,
}

#[derive(Deserialize)]
pub(super) struct Args {
    path: String,
    edits: Vec<EditArg>,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "edit".into(),
        description: "Change one file by replacing exact text. Each edits[].oldText must occur \
            exactly once in the file as it is now; all edits are matched against that original \
            text, must not overlap, and are applied together or not at all. Keep oldText short \
            but unique, and merge changes to nearby lines into one edit."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit, absolute or relative to the working directory"},
                "edits": {
                    "type": "array",
                    "description": "The replacements, each matched against the original file",
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": {"type": "string", "description": "Text to replace; must occur exactly once"},
                            "newText": {"type": "string", "description": "Text to put in its place"}
                        },
                        "required": ["oldText", "newText"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["path", "edits"]
        }),
    }
}

/// Accepts the shapes models actually send before validation: `edits` as a JSON string, and a
/// top-level `oldText`/`newText` pair (appended to `edits`).
pub(super) fn prepare(args: &Value) -> Value {
    let mut args = args.clone();
    let Some(map) = args.as_object_mut() else {
        return args;
    };
    if let Some(Value::String(s)) = map.get("edits")
        && let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(s)
    {
        map.insert("edits".into(), parsed);
    }
    if let (Some(Value::String(_)), Some(Value::String(_))) =
        (map.get("oldText"), map.get("newText"))
    {
        let mut pair = serde_json::Map::new();
        for key in ["oldText", "newText"] {
            if let Some(v) = map.remove(key) {
                pair.insert(key.into(), v);
            }
        }
        let mut edits = match map.remove("edits") {
            Some(Value::Array(list)) => list,
            _ => Vec::new(),
        };
        edits.push(Value::Object(pair));
        map.insert("edits".into(), Value::Array(edits));
    }
    args
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    if args.edits.is_empty() {
        return Err(
            "Edit tool input is invalid. edits must contain at least one replacement.".into(),
        );
    }
    let target = ctx.write_target(&args.path);
    // The text edited is what the model reads: the editor's buffer when it offers one. The
    // change is written by nova, as `write` writes, never handed to the editor by name.
    let buffer = match &ctx.editor {
        Some(editor) => Some(
            editor
                .read(&target)
                .await
                .map_err(|e| format!("Could not read {}: {e}", args.path))?,
        ),
        None => None,
    };
    blocking(&ctx.cancel, move |commit| {
        // The file is read and replaced through one directory handle: what is edited is what
        // was checked, whatever happens to the path meanwhile.
        let opened = Target::open(&target, false).and_then(|t| {
            let mut raw = Vec::new();
            t.open_existing()?.read_to_end(&mut raw)?;
            Ok((t, raw))
        });
        let (file, raw) = match opened {
            Ok(opened) => opened,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(format!("File not found: {}", args.path));
            }
            Err(e) => return Err(fs::error_text(&e, "open", &target)),
        };
        let text = match buffer {
            Some(text) => text,
            None => String::from_utf8(raw).map_err(|_| {
                format!("Could not edit {}: the file is not valid UTF-8.", args.path)
            })?,
        };
        let (content, output) = edited(&text, args)?;
        file.replace(content.as_bytes(), commit)
            .map_err(|e| fs::error_text(&e, "write", &target))?;
        Ok(output)
    })
    .await
}

/// The file's new text after the edits (its byte-order mark and line endings kept), and the
/// tool's answer.
fn edited(text: &str, args: Args) -> Result<(String, ToolOutput), String> {
    let (bom, body) = match text.strip_prefix(BOM) {
        Some(rest) => (BOM, rest),
        None => ("", text),
    };
    let crlf = uses_crlf(body);
    let edits: Vec<Edit> = args
        .edits
        .into_iter()
        .map(|e| Edit {
            old_text: e.old_text,
            new_text: e.new_text,
        })
        .collect();
    let (base, edited) = edit_match::apply(&edit_match::to_lf(body), &edits, &args.path)?;
    let restored = if crlf {
        edited.replace('\n', "\r\n")
    } else {
        edited.clone()
    };
    let (diff, first_changed_line) = diff::numbered(&base, &edited);
    let output = ToolOutput::text(
        format!(
            "Successfully replaced {} block(s) in {}.",
            edits.len(),
            args.path
        ),
        Some(ToolDetails::Edit(EditDetails {
            diff,
            first_changed_line,
        })),
    );
    Ok((format!("{bom}{restored}"), output))
}

/// The file's line ending is whichever comes first; a file without newlines counts as LF.
fn uses_crlf(text: &str) -> bool {
    text.find('\n')
        .is_some_and(|lf| text.find("\r\n").is_some_and(|crlf| crlf < lf))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::{Tool, ToolContext};
    use crate::protocol::joined_text;
    use serde_json::{Value, json};
    use std::path::Path;

    fn ctx(dir: &Path) -> ToolContext {
        ToolContext::quiet(dir)
    }

    async fn edit(dir: &Path, args: Value) -> (String, bool, Option<Value>) {
        let out = Tool::Edit.execute(args, ctx(dir)).await;
        (
            joined_text(&out.content),
            out.is_error,
            out.details.map(|d| d.json()),
        )
    }

    #[tokio::test]
    async fn legacy_single_edit_with_diff_details() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.rs");
        std::fs::write(&p, "fn a() {}\nfn b() {}\n").unwrap();
        let (text, err, details) = edit(
            dir.path(),
            json!({"path": "f.rs", "oldText": "fn b() {}", "newText": "fn c() {}"}),
        )
        .await;
        assert!(!err, "{text}");
        assert_eq!(text, "Successfully replaced 1 block(s) in f.rs.");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "fn a() {}\nfn c() {}\n"
        );
        let details = details.unwrap();
        assert_eq!(details["firstChangedLine"], 2);
        assert_eq!(details["diff"], " 1 fn a() {}\n-2 fn b() {}\n+2 fn c() {}");
    }

    #[tokio::test]
    async fn multi_edit_keeps_bom_and_crlf() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.txt");
        std::fs::write(&p, "\u{FEFF}one\r\ntwo\r\nthree\r\n").unwrap();
        let args = json!({"path": "w.txt", "edits": [
            {"oldText": "one\ntwo", "newText": "1\n2"},
            {"oldText": "three", "newText": "3"}
        ]});
        let (text, err, _) = edit(dir.path(), args).await;
        assert!(!err, "{text}");
        assert_eq!(text, "Successfully replaced 2 block(s) in w.txt.");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "\u{FEFF}1\r\n2\r\n3\r\n"
        );
    }

    #[tokio::test]
    async fn fuzzy_match_rewrites_in_normalised_form() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.txt");
        std::fs::write(&p, "it\u{2019}s here  \nkeep \u{2014} this\n").unwrap();
        let args = json!({"path": "q.txt", "edits": "[{\"oldText\": \"it's here\", \"newText\": \"gone\"}]"});
        let (text, err, _) = edit(dir.path(), args).await;
        assert!(!err, "{text}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "gone\nkeep - this\n");
    }

    #[tokio::test]
    async fn failures_leave_the_file_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        std::fs::write(&p, "aa bb aa\n").unwrap();
        let cases = [
            (
                json!({"path": "f.txt", "edits": [{"oldText": "aa", "newText": "x"}]}),
                "Found 2 occurrences of the text in f.txt.",
            ),
            (
                json!({"path": "f.txt", "edits": [{"oldText": "bb", "newText": "x"}, {"oldText": "zz", "newText": "y"}]}),
                "Could not find edits[1] in f.txt.",
            ),
            (
                json!({"path": "f.txt", "edits": [{"oldText": "aa bb", "newText": "x"}, {"oldText": "b a", "newText": "y"}]}),
                "edits[0] and edits[1] overlap in f.txt.",
            ),
            (
                json!({"path": "f.txt", "edits": []}),
                "Edit tool input is invalid. edits must contain at least one replacement.",
            ),
            (
                json!({"path": "none.txt", "oldText": "a", "newText": "b"}),
                "File not found: none.txt",
            ),
        ];
        for (args, expected) in cases {
            let (text, err, _) = edit(dir.path(), args).await;
            assert!(err);
            assert!(text.starts_with(expected), "{text}");
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "aa bb aa\n");
    }

    #[test]
    fn prepare_merges_legacy_fields() {
        let v = super::prepare(&json!({"path": "p", "oldText": "a", "newText": "b"}));
        assert_eq!(
            v,
            json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]})
        );
        let v = super::prepare(&json!({"path": "p", "oldText": "a"}));
        assert_eq!(v, json!({"path": "p", "oldText": "a"}));
    }
}
