//! The conversation as plain text for the summariser, and the files it touched.
//!
//! The summariser gets a transcript, not a conversation: given real turns, a model tends to
//! answer the last one instead of summarising them.

use crate::protocol::{ContentBlock, Message, UserContent, joined_text};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Tool output beyond this is cut: the summary needs what a tool was for and what it found, not
/// every line it printed.
const TOOL_RESULT_MAX_CHARS: usize = 2000;

/// One labelled paragraph per part: `[User]:`, `[Assistant thinking]:`, `[Assistant]:`,
/// `[Assistant tool calls]: name(k=v, …); …` and `[Tool result]:` (cut at 2,000 chars). Images
/// are left out. Messages of other roles, such as an earlier compaction's summary, appear as
/// user text.
pub fn serialize_conversation<M: AsRef<Message>>(messages: &[M]) -> String {
    let mut parts = Vec::new();
    for message in messages {
        match message.as_ref() {
            Message::User(u) => {
                let text = match &u.content {
                    UserContent::Text(t) => t.clone(),
                    UserContent::Blocks(b) => joined_text(b),
                };
                if !text.is_empty() {
                    parts.push(format!("[User]: {text}"));
                }
            }
            Message::Assistant(a) => {
                let mut thinking = Vec::new();
                let mut text = Vec::new();
                let mut calls = Vec::new();
                for block in &a.content {
                    match block {
                        ContentBlock::Thinking { thinking: t, .. } => thinking.push(t.as_str()),
                        ContentBlock::Text { text: t, .. } => text.push(t.as_str()),
                        ContentBlock::ToolCall {
                            name, arguments, ..
                        } => calls.push(format!("{name}({})", call_arguments(arguments))),
                        ContentBlock::Image { .. } => {}
                    }
                }
                if !thinking.is_empty() {
                    parts.push(format!("[Assistant thinking]: {}", thinking.join("\n")));
                }
                if !text.is_empty() {
                    parts.push(format!("[Assistant]: {}", text.join("\n")));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Message::ToolResult(r) => {
                let text = joined_text(&r.content);
                if !text.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        cut(&text, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
            // What the user ran reaches the model as their message, so the summary sees it so.
            Message::BashExecution(b) if b.exclude_from_context != Some(true) => parts.push(
                format!("[User]: Ran `{}`\n{}", b.command, cut(&b.output, TOOL_RESULT_MAX_CHARS)),
            ),
            Message::BashExecution(_) => {}
            // Sent to the model as the user's, so summarised as the user's.
            Message::Custom(c) => {
                let text = c.content.joined_text();
                if !text.is_empty() {
                    parts.push(format!("[User]: {text}"));
                }
            }
            Message::CompactionSummary(summary) => parts.push(format!(
                "[User]: The conversation before this point was summarized as follows:\n\n<summary>\n{}\n</summary>",
                summary.summary
            )),
        }
    }
    parts.join("\n\n")
}

/// `k=v, …` with each value as JSON; arguments that are not an object (the raw text of a call
/// whose JSON did not parse) are shown as they are.
fn call_arguments(arguments: &Value) -> String {
    let parsed;
    let object = match arguments {
        Value::Object(map) => Some(map),
        Value::String(raw) => {
            parsed = serde_json::from_str::<Value>(raw).ok();
            match &parsed {
                Some(Value::Object(map)) => Some(map),
                _ => return raw.clone(),
            }
        }
        Value::Null => return String::new(),
        _ => None,
    };
    match object {
        Some(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        None => arguments.to_string(),
    }
}

/// The first `max` chars of `text`, saying how many more there were.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => {
            let more = text[end..].chars().count();
            format!("{}\n\n[... {more} more characters truncated]", &text[..end])
        }
    }
}

/// The files a conversation read and changed, as compaction reports them: sorted, and a file
/// both read and changed listed only as modified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileLists {
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
}

/// The `path` arguments of `read`, `write` and `edit` calls in `messages`, merged with the
/// lists of the previous compaction's `details` (`{readFiles, modifiedFiles}`), so the lists
/// keep growing across compactions.
pub fn file_lists<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    previous_details: Option<&Value>,
) -> FileLists {
    let mut read = BTreeSet::new();
    let mut modified = BTreeSet::new();
    if let Some(details) = previous_details {
        for (key, set) in [("readFiles", &mut read), ("modifiedFiles", &mut modified)] {
            let listed = details.get(key).and_then(Value::as_array).into_iter();
            set.extend(
                listed
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string),
            );
        }
    }
    for message in messages {
        let Message::Assistant(a) = message else {
            continue;
        };
        for (_, name, arguments) in a.tool_calls() {
            let set = match name {
                "read" => &mut read,
                "write" | "edit" => &mut modified,
                _ => continue,
            };
            if let Some(path) = path_argument(arguments) {
                set.insert(path);
            }
        }
    }
    FileLists {
        read_files: read.difference(&modified).cloned().collect(),
        modified_files: modified.into_iter().collect(),
    }
}

fn path_argument(arguments: &Value) -> Option<String> {
    let parsed;
    let object = match arguments {
        Value::String(raw) => {
            parsed = serde_json::from_str::<Value>(raw).ok()?;
            &parsed
        }
        other => other,
    };
    object
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

impl FileLists {
    /// `summary` followed by `<read-files>` and `<modified-files>` blocks, one path a line;
    /// an empty list gets no block.
    pub fn append_to(&self, summary: &str) -> String {
        let mut out = summary.to_string();
        for (tag, files) in [
            ("read-files", &self.read_files),
            ("modified-files", &self.modified_files),
        ] {
            if !files.is_empty() {
                out.push_str(&format!("\n\n<{tag}>\n{}\n</{tag}>", files.join("\n")));
            }
        }
        out
    }

    /// The compaction entry's `details`.
    pub fn details(&self) -> Value {
        json!({"readFiles": self.read_files, "modifiedFiles": self.modified_files})
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::agent::compaction::tests::{assistant, call, result, text, user};
    use crate::protocol::UserMessage;

    #[test]
    fn transcript_format() {
        let messages = vec![
            user("Fix the build"),
            Message::User(UserMessage {
                content: UserContent::Blocks(vec![
                    ContentBlock::image("AAAA", "image/png"),
                    text("see the screenshot"),
                ]),
                timestamp: 1,
            }),
            assistant(vec![
                ContentBlock::Thinking {
                    thinking: "Look at main.rs".into(),
                    thinking_signature: None,
                    redacted: None,
                },
                text("Reading it."),
                call("c1", "read", json!({"path": "src/main.rs", "offset": 10})),
                call("c2", "bash", json!("{\"command\": \"ls\"}")),
                call("c3", "bash", json!("ls -la")),
            ]),
            result("c1", "fn main() {}"),
            result("c2", ""),
            assistant(vec![]),
        ];
        assert_eq!(
            serialize_conversation(&messages),
            "[User]: Fix the build\n\n\
             [User]: see the screenshot\n\n\
             [Assistant thinking]: Look at main.rs\n\n\
             [Assistant]: Reading it.\n\n\
             [Assistant tool calls]: read(path=\"src/main.rs\", offset=10); bash(command=\"ls\"); bash(ls -la)\n\n\
             [Tool result]: fn main() {}"
        );
    }

    #[test]
    fn long_tool_results_are_cut() {
        let long = format!("{}{}", "é".repeat(2000), "x".repeat(500));
        let out = serialize_conversation(&[result("c1", &long)]);
        assert_eq!(
            out,
            format!(
                "[Tool result]: {}\n\n[... 500 more characters truncated]",
                "é".repeat(2000)
            )
        );
        let exact = "y".repeat(2000);
        assert_eq!(
            serialize_conversation(&[result("c1", &exact)]),
            format!("[Tool result]: {exact}")
        );
    }

    #[test]
    fn files_read_and_modified() {
        let messages = vec![
            assistant(vec![
                call("1", "read", json!({"path": "b.rs"})),
                call("2", "read", json!({"path": "a.rs"})),
                call("3", "edit", json!({"path": "a.rs", "edits": []})),
                call("4", "bash", json!({"path": "ignored.rs"})),
                call(
                    "5",
                    "write",
                    json!("{\"path\": \"new.rs\", \"content\": \"\"}"),
                ),
                call("6", "read", json!({"offset": 3})),
            ]),
            user("thanks"),
        ];
        let previous = json!({"readFiles": ["old.rs", "new.rs"], "modifiedFiles": ["lib.rs"]});
        let lists = file_lists(&messages, Some(&previous));
        assert_eq!(
            lists,
            FileLists {
                read_files: vec!["b.rs".into(), "old.rs".into()],
                modified_files: vec!["a.rs".into(), "lib.rs".into(), "new.rs".into()],
            }
        );
        assert_eq!(
            lists.details(),
            json!({"readFiles": ["b.rs", "old.rs"], "modifiedFiles": ["a.rs", "lib.rs", "new.rs"]})
        );
        assert_eq!(
            lists.append_to("## Goal\nX"),
            "## Goal\nX\n\n<read-files>\nb.rs\nold.rs\n</read-files>\n\n\
             <modified-files>\na.rs\nlib.rs\nnew.rs\n</modified-files>"
        );

        let only_read = file_lists(&messages[..0], Some(&json!({"readFiles": ["r.rs", 3]})));
        assert_eq!(
            only_read.append_to("S"),
            "S\n\n<read-files>\nr.rs\n</read-files>"
        );
        assert_eq!(FileLists::default().append_to("S"), "S");
        assert_eq!(file_lists(&[], Some(&json!("junk"))), FileLists::default());
    }
}
