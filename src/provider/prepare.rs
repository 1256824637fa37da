//! The conversation as a model may see it. Every wire format serialises its request from
//! [`request_messages`], so the invariants providers reject requests over (a tool call without
//! exactly one result right after it, images sent to a text-only model) hold whatever the session
//! history looks like after aborts, crashes and retries.
//!
//! The result is a view of the conversation: it borrows every string and image, and owns only
//! what it has to invent (the note standing in for an image, a compaction summary's framing), so
//! that the request body a wire format writes from it is the only copy a turn makes.

use crate::protocol::{
    AssistantMessage, BashExecutionMessage, ContentBlock, Message, Model, ToolResultMessage,
    UserContent,
};
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Text of the result made up for a tool call that never got one (Pi's wording).
pub const MISSING_RESULT_TEXT: &str = "No result provided";

/// Pi's framing of a compaction summary, so a model reads it as history rather than a request.
const SUMMARY_LEAD: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const SUMMARY_END: &str = "\n</summary>";

/// One message as the model will see it, borrowed from the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum View<'a> {
    /// A user message, or a compaction summary framed as one.
    User(Vec<Part<'a>>),
    /// A reply that did not fail.
    Assistant(&'a AssistantMessage),
    /// Right after the reply whose call it answers, results in call order; a call that never
    /// got a result gets [`MISSING_RESULT_TEXT`].
    ToolResult {
        tool_call_id: &'a str,
        tool_name: &'a str,
        content: Vec<Part<'a>>,
        is_error: bool,
    },
}

/// A piece of user or tool-result content.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<'a> {
    Text(Cow<'a, str>),
    /// Only for a model that takes images: the others get a note instead.
    Image {
        data: &'a str,
        mime_type: &'a str,
    },
}

impl Part<'_> {
    fn text(&self) -> Option<&str> {
        match self {
            Part::Text(t) => Some(t),
            Part::Image { .. } => None,
        }
    }

    pub fn is_image(&self) -> bool {
        matches!(self, Part::Image { .. })
    }
}

/// `messages` with failed replies left out, each kept tool call followed by exactly one result
/// in call order, and images replaced by a note when `model` cannot take them.
pub fn request_messages<'a, M: AsRef<Message>>(messages: &'a [M], model: &Model) -> Vec<View<'a>> {
    // First result per call id, wherever it sits: a steer or a crash can separate a result from
    // its call, and a retry can record it twice.
    let mut results: HashMap<&str, &ToolResultMessage> = HashMap::new();
    for m in messages {
        if let Message::ToolResult(r) = m.as_ref() {
            results.entry(r.tool_call_id.as_str()).or_insert(r);
        }
    }

    let images_ok = model.accepts_images();
    let parts = |blocks: &'a [ContentBlock]| content(blocks, images_ok, &model.id);
    let mut answered: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m.as_ref() {
            Message::User(u) => out.push(View::User(match &u.content {
                UserContent::Text(t) => vec![Part::Text(Cow::Borrowed(t))],
                UserContent::Blocks(b) => parts(b),
            })),
            Message::Assistant(a) if a.is_failed() => {}
            Message::Assistant(a) => {
                out.push(View::Assistant(a));
                for (id, name, _) in a.tool_calls() {
                    let found = results.get(id).filter(|_| answered.insert(id));
                    out.push(match found {
                        Some(r) => View::ToolResult {
                            tool_call_id: &r.tool_call_id,
                            tool_name: &r.tool_name,
                            content: parts(&r.content),
                            is_error: r.is_error,
                        },
                        None => View::ToolResult {
                            tool_call_id: id,
                            tool_name: name,
                            content: vec![Part::Text(Cow::Borrowed(MISSING_RESULT_TEXT))],
                            is_error: false,
                        },
                    });
                }
            }
            // Placed after their call above; orphans and duplicates end here.
            Message::ToolResult(_) => {}
            Message::CompactionSummary(c) => out.push(View::User(vec![Part::Text(Cow::Owned(
                format!("{SUMMARY_LEAD}{}{SUMMARY_END}", c.summary),
            ))])),
            // Pi sends an extension's message as the user's.
            Message::Custom(c) => out.push(View::User(match &c.content {
                UserContent::Text(t) => vec![Part::Text(Cow::Borrowed(t))],
                UserContent::Blocks(b) => parts(b),
            })),
            Message::BashExecution(b) if b.exclude_from_context == Some(true) => {}
            Message::BashExecution(b) => {
                out.push(View::User(vec![Part::Text(Cow::Owned(bash_text(b)))]))
            }
        }
    }
    out
}

/// Pi's rendering of a user's shell command for the model.
fn bash_text(b: &BashExecutionMessage) -> String {
    let mut text = format!("Ran `{}`\n", b.command);
    if b.output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{}\n```", b.output));
    }
    if b.cancelled {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = b.exit_code.filter(|c| *c != 0) {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    if let Some(path) = b.full_output_path.as_ref().filter(|_| b.truncated) {
        text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
    }
    text
}

/// The text and images of `blocks`; other kinds of block have no place in user or tool content.
fn content<'a>(blocks: &'a [ContentBlock], images_ok: bool, model_id: &str) -> Vec<Part<'a>> {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(Part::Text(Cow::Borrowed(text))),
            ContentBlock::Image { data, mime_type } if images_ok => {
                Some(Part::Image { data, mime_type })
            }
            ContentBlock::Image { .. } => Some(Part::Text(Cow::Owned(format!(
                "[image omitted: model {model_id} does not accept images]"
            )))),
            ContentBlock::Thinking { .. } | ContentBlock::ToolCall { .. } => None,
        })
        .collect()
}

/// About how many bytes the strings and images of `views` take: the bulk of any body written
/// from them.
pub(super) fn content_len(views: &[View]) -> usize {
    let parts = |parts: &[Part]| -> usize {
        parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.len(),
                Part::Image { data, mime_type } => data.len() + mime_type.len(),
            })
            .sum()
    };
    views
        .iter()
        .map(|v| match v {
            View::User(content) | View::ToolResult { content, .. } => parts(content),
            View::Assistant(a) => a
                .content
                .iter()
                .map(|b| match b {
                    ContentBlock::Text { text, .. } => text.len(),
                    ContentBlock::Thinking { thinking, .. } => thinking.len(),
                    ContentBlock::ToolCall {
                        id,
                        name,
                        arguments,
                        ..
                    } => id.len() + name.len() + value_len(arguments),
                    ContentBlock::Image { data, .. } => data.len(),
                })
                .sum(),
        })
        .sum()
}

/// About how long `value` is as JSON, unescaped.
pub(super) fn value_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(|v| value_len(v) + 1).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 4 + value_len(v))
                .sum::<usize>()
                + 2
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 24,
    }
}

/// Pieces of text joined with newlines, the way both wire formats flatten content. It is
/// written into the body as it is serialised, never concatenated into a string of its own.
pub struct Joined<'a, T> {
    items: &'a [T],
    text_of: fn(&T) -> Option<&str>,
}

// Derived impls would demand `T: Copy`; only the slice is copied.
impl<T> Clone for Joined<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Joined<'_, T> {}

impl<'a> Joined<'a, Part<'a>> {
    /// The text of user or tool-result content (image notes included).
    pub fn parts(parts: &'a [Part<'a>]) -> Self {
        Joined {
            items: parts,
            text_of: Part::text,
        }
    }
}

impl<'a> Joined<'a, ContentBlock> {
    /// The text blocks of a reply.
    pub fn text(blocks: &'a [ContentBlock]) -> Self {
        Joined {
            items: blocks,
            text_of: |b| match b {
                ContentBlock::Text { text, .. } => Some(text),
                _ => None,
            },
        }
    }

    /// The thinking blocks of a reply.
    pub fn thinking(blocks: &'a [ContentBlock]) -> Self {
        Joined {
            items: blocks,
            text_of: |b| match b {
                ContentBlock::Thinking { thinking, .. } => Some(thinking),
                _ => None,
            },
        }
    }

    /// The thinking blocks of a reply that say something, as Pi sends reasoning back.
    pub fn nonblank_thinking(blocks: &'a [ContentBlock]) -> Self {
        Joined {
            items: blocks,
            text_of: |b| match b {
                ContentBlock::Thinking { thinking, .. } if !thinking.trim().is_empty() => {
                    Some(thinking)
                }
                _ => None,
            },
        }
    }
}

impl<'a, T> Joined<'a, T> {
    fn pieces(self) -> impl Iterator<Item = &'a str> {
        self.items.iter().filter_map(self.text_of)
    }

    /// Whether the joined text would be `""`: no pieces, or a single empty one.
    pub fn is_empty(self) -> bool {
        let mut pieces = self.pieces();
        match pieces.next() {
            None => true,
            Some(first) => first.is_empty() && pieces.next().is_none(),
        }
    }
}

impl<T> fmt::Display for Joined<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, piece) in self.pieces().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(piece)?;
        }
        Ok(())
    }
}

impl<T> Serialize for Joined<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::{ModelCost, StopReason, Usage, UserMessage};
    use serde_json::json;

    pub(crate) fn model(api: &str, images: bool) -> Model {
        Model {
            id: "m1".into(),
            name: "M1".into(),
            api: crate::protocol::Api::parse(api).expect("a known api"),
            provider: "local".into(),
            base_url: "http://127.0.0.1:1".into(),
            reasoning: false,
            input: if images {
                vec!["text".into(), "image".into()]
            } else {
                vec!["text".into()]
            },
            cost: ModelCost {
                input: 3.0,
                output: 15.0,
                cache_read: 0.3,
                cache_write: 0.0,
            },
            context_window: 128_000,
            max_tokens: 64_000,
            thinking_level_map: None,
            compat: None,
            load: Default::default(),
        }
    }

    pub(crate) fn user_text(t: &str) -> Message {
        Message::User(UserMessage {
            content: UserContent::Text(t.into()),
            timestamp: 1,
        })
    }

    pub(crate) fn assistant(blocks: Vec<ContentBlock>, stop: StopReason) -> Message {
        Message::Assistant(AssistantMessage {
            content: blocks,
            api: "ollama".into(),
            provider: "local".into(),
            model: "m1".into(),
            usage: Usage::default(),
            stop_reason: stop,
            error_message: None,
            response_id: None,
            thinking_level: None,
            raw_stop_reason: None,
            duration_ms: None,
            timestamp: 2,
        })
    }

    pub(crate) fn call(id: &str, name: &str) -> ContentBlock {
        ContentBlock::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({"path": id}),
            thought_signature: None,
        }
    }

    pub(crate) fn result(id: &str, content: Vec<ContentBlock>) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "read".into(),
            content,
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 3,
        })
    }

    fn shape(views: &[View]) -> Vec<String> {
        views
            .iter()
            .map(|v| match v {
                View::User(parts) => format!("user:{}", Joined::parts(parts)),
                View::Assistant(a) => format!(
                    "assistant:{}",
                    a.tool_calls().map(|c| c.0).collect::<Vec<_>>().join(",")
                ),
                View::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } => format!("result:{tool_call_id}:{}", Joined::parts(content)),
            })
            .collect()
    }

    #[test]
    fn a_compaction_summary_reaches_the_model_as_pis_user_message() {
        let msgs = vec![
            Message::CompactionSummary(crate::protocol::CompactionSummaryMessage {
                summary: "Goal: x".into(),
                tokens_before: 1234,
                timestamp: 7,
            }),
            user_text("next"),
        ];
        let out = request_messages(&msgs, &model("ollama", true));
        let text = "The conversation history before this point was compacted into the following \
                    summary:\n\n<summary>\nGoal: x\n</summary>";
        assert_eq!(shape(&out), [format!("user:{text}"), "user:next".into()]);
        assert_eq!(
            serde_json::to_value(&msgs[0]).unwrap(),
            json!({"role": "compactionSummary", "summary": "Goal: x", "tokensBefore": 1234, "timestamp": 7})
        );
    }

    #[test]
    fn failed_replies_and_their_results_are_dropped() {
        let msgs = vec![
            user_text("hi"),
            assistant(vec![call("a", "read")], StopReason::Error),
            result("a", vec![ContentBlock::text("A")]),
            assistant(vec![ContentBlock::text("partial")], StopReason::Aborted),
            user_text("again"),
            assistant(vec![ContentBlock::text("ok")], StopReason::Stop),
        ];
        assert_eq!(
            shape(&request_messages(&msgs, &model("ollama", true))),
            ["user:hi", "user:again", "assistant:"]
        );
    }

    #[test]
    fn results_are_paired_with_calls() {
        let msgs = vec![
            user_text("go"),
            assistant(
                vec![call("a", "read"), call("b", "read"), call("c", "read")],
                StopReason::ToolUse,
            ),
            result("c", vec![ContentBlock::text("C")]),
            result("zz", vec![ContentBlock::text("orphan")]),
            user_text("steer"),
            result("a", vec![ContentBlock::text("A")]),
            result("a", vec![ContentBlock::text("A again")]),
        ];
        let out = request_messages(&msgs, &model("ollama", true));
        let paired = [
            "user:go",
            "assistant:a,b,c",
            "result:a:A",
            "result:b:No result provided",
            "result:c:C",
            "user:steer",
        ];
        assert_eq!(shape(&out), paired);
        let View::ToolResult { tool_name, .. } = &out[3] else {
            panic!("expected a result")
        };
        assert_eq!(*tool_name, "read");
        // Already-valid input passes through unchanged.
        let valid = [
            msgs[0].clone(),
            msgs[1].clone(),
            result("a", vec![ContentBlock::text("A")]),
            result("b", vec![ContentBlock::text(MISSING_RESULT_TEXT)]),
            result("c", vec![ContentBlock::text("C")]),
            msgs[4].clone(),
        ];
        assert_eq!(
            shape(&request_messages(&valid, &model("ollama", true))),
            paired
        );
    }

    #[test]
    fn images_become_a_note_for_text_only_models() {
        let img = ContentBlock::image("aGk=", "image/png");
        let msgs = vec![
            Message::User(UserMessage {
                content: UserContent::Blocks(vec![ContentBlock::text("look"), img.clone()]),
                timestamp: 1,
            }),
            assistant(vec![call("a", "read")], StopReason::ToolUse),
            result("a", vec![ContentBlock::text("file"), img.clone()]),
        ];
        let note = "[image omitted: model m1 does not accept images]";
        let out = request_messages(&msgs, &model("ollama", false));
        let View::User(u) = &out[0] else { panic!() };
        assert_eq!(Joined::parts(u).to_string(), format!("look\n{note}"));
        let View::ToolResult { content, .. } = &out[2] else {
            panic!()
        };
        assert_eq!(content[1], Part::Text(note.into()));

        // A model that takes images sees the conversation as it is.
        let Message::Assistant(reply) = &msgs[1] else {
            panic!()
        };
        let image = Part::Image {
            data: "aGk=",
            mime_type: "image/png",
        };
        assert_eq!(
            request_messages(&msgs, &model("ollama", true)),
            [
                View::User(vec![Part::Text("look".into()), image.clone()]),
                View::Assistant(reply),
                View::ToolResult {
                    tool_call_id: "a",
                    tool_name: "read",
                    content: vec![Part::Text("file".into()), image],
                    is_error: false,
                },
            ]
        );
    }
}
