//! The conversation as a model may see it. Every wire format builds its request from
//! [`request_messages`], so the invariants providers reject requests over (a tool call without
//! exactly one result right after it, images sent to a text-only model) hold whatever the session
//! history looks like after aborts, crashes and retries.

use crate::protocol::{
    AssistantMessage, BashExecutionMessage, ContentBlock, Message, Model, ToolResultMessage,
    UserContent, UserMessage,
};
use std::collections::{HashMap, HashSet};

/// Text of the result made up for a tool call that never got one (Pi's wording).
pub const MISSING_RESULT_TEXT: &str = "No result provided";

/// Pi's framing of a compaction summary, so a model reads it as history rather than a request.
const SUMMARY_LEAD: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const SUMMARY_END: &str = "\n</summary>";

/// `messages` with failed replies left out, each kept tool call followed by exactly one result
/// in call order, and images replaced by a note when `model` cannot take them.
pub fn request_messages<M: AsRef<Message>>(messages: &[M], model: &Model) -> Vec<Message> {
    // First result per call id, wherever it sits: a steer or a crash can separate a result from
    // its call, and a retry can record it twice.
    let mut results: HashMap<&str, &ToolResultMessage> = HashMap::new();
    for m in messages {
        if let Message::ToolResult(r) = m.as_ref() {
            results.entry(r.tool_call_id.as_str()).or_insert(r);
        }
    }

    let images_ok = model.accepts_images();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m.as_ref() {
            Message::User(u) => out.push(Message::User(user(u, images_ok, &model.id))),
            Message::Assistant(a) if a.is_failed() => {}
            Message::Assistant(a) => {
                out.push(Message::Assistant(a.clone()));
                for (id, name, _) in a.tool_calls() {
                    let found = results.get(id).filter(|_| answered.insert(id));
                    let result = match found {
                        Some(r) => ToolResultMessage {
                            content: blocks(&r.content, images_ok, &model.id),
                            ..(*r).clone()
                        },
                        None => missing_result(a, id, name),
                    };
                    out.push(Message::ToolResult(result));
                }
            }
            // Placed after their call above; orphans and duplicates end here.
            Message::ToolResult(_) => {}
            Message::CompactionSummary(c) => out.push(Message::User(UserMessage {
                content: UserContent::Blocks(vec![ContentBlock::text(format!(
                    "{SUMMARY_LEAD}{}{SUMMARY_END}",
                    c.summary
                ))]),
                timestamp: c.timestamp,
            })),
            Message::BashExecution(b) if b.exclude_from_context == Some(true) => {}
            Message::BashExecution(b) => out.push(Message::User(UserMessage {
                content: UserContent::Blocks(vec![ContentBlock::text(bash_text(b))]),
                timestamp: b.timestamp,
            })),
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

fn missing_result(call_message: &AssistantMessage, id: &str, name: &str) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: id.to_string(),
        tool_name: name.to_string(),
        content: vec![ContentBlock::text(MISSING_RESULT_TEXT)],
        details: Some(serde_json::json!({})),
        is_error: true,
        timestamp: call_message.timestamp,
    }
}

fn user(u: &UserMessage, images_ok: bool, model_id: &str) -> UserMessage {
    match &u.content {
        UserContent::Blocks(b) if !images_ok => UserMessage {
            content: UserContent::Blocks(blocks(b, images_ok, model_id)),
            timestamp: u.timestamp,
        },
        _ => u.clone(),
    }
}

fn blocks(blocks: &[ContentBlock], images_ok: bool, model_id: &str) -> Vec<ContentBlock> {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Image { .. } if !images_ok => ContentBlock::text(format!(
                "[image omitted: model {model_id} does not accept images]"
            )),
            other => other.clone(),
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::{ModelCost, StopReason, Usage};
    use serde_json::json;

    pub(crate) fn model(api: &str, images: bool) -> Model {
        Model {
            id: "m1".into(),
            name: "M1".into(),
            api: api.into(),
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
            timestamp: 3,
        })
    }

    fn shape(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                Message::User(u) => format!("user:{}", u.content.joined_text()),
                Message::Assistant(a) => format!(
                    "assistant:{}",
                    a.tool_calls().map(|c| c.0).collect::<Vec<_>>().join(",")
                ),
                Message::ToolResult(r) => format!(
                    "result:{}:{}",
                    r.tool_call_id,
                    crate::protocol::joined_text(&r.content)
                ),
                Message::CompactionSummary(c) => format!("summary:{}", c.summary),
                Message::BashExecution(b) => format!("bash:{}", b.command),
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
        let Message::User(u) = &out[0] else {
            panic!("expected a user message")
        };
        assert_eq!(u.timestamp, 7);
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
        assert_eq!(
            shape(&out),
            [
                "user:go",
                "assistant:a,b,c",
                "result:a:A",
                "result:b:No result provided",
                "result:c:C",
                "user:steer",
            ]
        );
        let Message::ToolResult(missing) = &out[3] else {
            panic!("expected a result")
        };
        assert!(missing.is_error);
        assert_eq!(missing.tool_name, "read");
        // Already-valid input passes through unchanged.
        assert_eq!(request_messages(&out, &model("ollama", true)), out);
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
        let Message::User(u) = &out[0] else { panic!() };
        assert_eq!(u.content.joined_text(), format!("look\n{note}"));
        let Message::ToolResult(r) = &out[2] else {
            panic!()
        };
        assert_eq!(r.content[1], ContentBlock::text(note));
        assert_eq!(request_messages(&msgs, &model("ollama", true)), msgs);
    }
}
