//! Context compaction, as Pi does it (pi-reference §8): when the conversation nears the model's
//! context window, the older part is replaced by a structured summary written by the model
//! itself, and only the recent tail is kept verbatim.
//!
//! Everything here is pure except [`summarize`], the one model call. The agent decides when to
//! compact ([`context_tokens`], [`should_compact`], `ProviderError::kind`), where to cut
//! ([`find_cut_point`]), asks for the summary and appends the file lists ([`file_lists`]); the
//! events, the session entry and the retry after an overflow are its business.
//!
//! Token counts follow DESIGN.md: the provider's reported usage is the truth, everything after it
//! is estimated at `ceil(chars / 4)`, 1,200 tokens per image.

mod overflow;
mod serialize;
mod summary;

pub use overflow::is_silent_overflow;
pub use serialize::{FileLists, file_lists, serialize_conversation};
pub use summary::{
    SUMMARY_SYSTEM_PROMPT, SummaryError, SummaryJob, SummaryRetry, summarize, summary_prompt,
    turn_prefix_prompt,
};

pub use crate::config::CompactionSettings;
use crate::protocol::Message;
pub use crate::provider::estimate::{ContextEstimate, context_tokens, estimate_tokens};
use std::ops::Range;

/// The settings for a model's window: `reserveTokens` and `keepRecentTokens` are each at most
/// a quarter of it. Pi's defaults (16,384 and 20,000) suit large windows; with a small local
/// model (8,192 tokens) they would put the threshold at 0 and keep everything, so every reply
/// would start a compaction that could cut nothing.
pub fn for_window(settings: &CompactionSettings, context_window: u64) -> CompactionSettings {
    if context_window == 0 {
        return *settings;
    }
    let quarter = context_window / 4;
    CompactionSettings {
        enabled: settings.enabled,
        reserve_tokens: settings.reserve_tokens.min(quarter),
        keep_recent_tokens: settings.keep_recent_tokens.min(quarter),
    }
}

/// Whether automatic compaction is due: `tokens > context_window - reserve_tokens`, the reserve
/// scaled to the window ([`for_window`]). Never when it is disabled, nor for a model whose
/// window is unknown (0).
pub fn should_compact(tokens: u64, context_window: u64, settings: &CompactionSettings) -> bool {
    let settings = for_window(settings, context_window);
    settings.enabled
        && context_window > 0
        && tokens > context_window.saturating_sub(settings.reserve_tokens)
}

/// Where to cut a conversation: everything before `first_kept` is summarised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutPoint {
    pub first_kept: usize,
    /// The entry id of `first_kept` (the compaction entry's `firstKeptEntryId`).
    pub first_kept_id: String,
    /// Set when the cut falls inside a turn: the index of that turn's user message. The turn's
    /// part before the cut is then summarised on its own (see [`summarize`]'s `turn_prefix`).
    pub turn_start: Option<usize>,
}

impl CutPoint {
    /// The entries that go into the main summary.
    pub fn summarized(&self) -> Range<usize> {
        0..self.turn_start.unwrap_or(self.first_kept)
    }

    /// The entries of a split turn before the cut (empty when the turn is not split).
    pub fn turn_prefix(&self) -> Range<usize> {
        self.turn_start.unwrap_or(self.first_kept)..self.first_kept
    }
}

/// Where to cut `entries` (entry id and message, oldest first, since the previous compaction)
/// so that about `keep_recent_tokens` of the newest conversation stays verbatim.
///
/// Walks back from the newest entry adding estimates until the budget is reached, then cuts at
/// the nearest valid point at or after that entry (or, if there is none, the nearest before it).
/// A valid point is any message but a tool result, and never inside a tool call's span (between
/// the call and its result), so a kept result always has its call. `None` when the conversation
/// is smaller than the budget or the cut would leave nothing to summarise.
pub fn find_cut_point<M: AsRef<Message>>(
    entries: &[(String, M)],
    keep_recent_tokens: u64,
) -> Option<CutPoint> {
    let mut accumulated = 0;
    let reached = entries.iter().rposition(|(_, m)| {
        accumulated += estimate_tokens(m.as_ref());
        accumulated >= keep_recent_tokens
    })?;

    let valid = valid_cut_points(entries);
    let first_kept = (reached..entries.len())
        .find(|&i| valid[i])
        .or_else(|| (0..reached).rev().find(|&i| valid[i]))
        .filter(|&i| i > 0)?;

    let turn_start = if is_user_like(entries[first_kept].1.as_ref()) {
        None
    } else {
        (0..first_kept)
            .rev()
            .find(|&i| is_user_like(entries[i].1.as_ref()))
    };
    Some(CutPoint {
        first_kept,
        first_kept_id: entries[first_kept].0.clone(),
        turn_start,
    })
}

/// For each entry, whether the kept part may start there.
fn valid_cut_points<M: AsRef<Message>>(entries: &[(String, M)]) -> Vec<bool> {
    let mut valid: Vec<bool> = entries
        .iter()
        .map(|(_, m)| !matches!(m.as_ref(), Message::ToolResult(_)))
        .collect();
    let mut calls = std::collections::HashMap::new();
    for (i, (_, m)) in entries.iter().enumerate() {
        match m.as_ref() {
            Message::Assistant(a) => {
                for (id, _, _) in a.tool_calls() {
                    calls.insert(id, i);
                }
            }
            // A message between a call and its result (a crash or a steer can put one there)
            // must not start the kept part: the result would be kept without its call.
            Message::ToolResult(r) => {
                if let Some(&call) = calls.get(r.tool_call_id.as_str()) {
                    valid[call + 1..i].iter_mut().for_each(|v| *v = false);
                }
            }
            _ => {}
        }
    }
    valid
}

/// Whether a message opens a turn: a user message, or a role this module does not know, which
/// (like Pi's summaries and bash executions) reaches the model as user text.
fn is_user_like(message: &Message) -> bool {
    matches!(message, Message::User(_))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::{ContentBlock, Usage, UserContent};
    use serde_json::Value;

    #[test]
    fn budgets_scale_to_small_windows() {
        let pi = CompactionSettings::default();
        assert_eq!(for_window(&pi, 200_000), pi);
        assert_eq!(for_window(&pi, 0), pi);
        let small = for_window(&pi, 8192);
        assert_eq!(
            (small.reserve_tokens, small.keep_recent_tokens),
            (2048, 2048)
        );
        // 8,192 tokens: due past 6,144, not at every reply.
        assert!(!should_compact(3000, 8192, &pi));
        assert!(should_compact(6145, 8192, &pi));
    }
    use crate::protocol::{AssistantMessage, StopReason, ToolResultMessage, UserMessage};
    use serde_json::json;

    pub(crate) fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: UserContent::Text(text.into()),
            timestamp: 1,
        })
    }

    pub(crate) fn assistant(blocks: Vec<ContentBlock>) -> Message {
        Message::Assistant(AssistantMessage {
            content: blocks,
            api: "ollama".into(),
            provider: "local".into(),
            model: "m1".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            response_id: None,
            thinking_level: None,
            raw_stop_reason: None,
            duration_ms: None,
            timestamp: 2,
        })
    }

    pub(crate) fn text(t: &str) -> ContentBlock {
        ContentBlock::text(t)
    }

    pub(crate) fn call(id: &str, name: &str, arguments: Value) -> ContentBlock {
        ContentBlock::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            thought_signature: None,
        }
    }

    pub(crate) fn result(id: &str, content: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "read".into(),
            content: vec![ContentBlock::text(content)],
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 3,
        })
    }

    fn with_usage(message: Message, usage: Usage, stop: StopReason) -> Message {
        match message {
            Message::Assistant(a) => Message::Assistant(AssistantMessage {
                usage,
                stop_reason: stop,
                ..a
            }),
            other => other,
        }
    }

    fn ids(messages: Vec<Message>) -> Vec<(String, Message)> {
        messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| (format!("e{i}"), m))
            .collect()
    }

    #[test]
    fn estimates() {
        assert_eq!(estimate_tokens(&user("")), 0);
        assert_eq!(estimate_tokens(&user("abcde")), 2);
        // Chars, not bytes.
        assert_eq!(estimate_tokens(&user("éééé")), 1);
        let m = assistant(vec![
            ContentBlock::Thinking {
                thinking: "hmm!".into(),
                thinking_signature: None,
                redacted: None,
            },
            text("done"),
            call("c1", "read", json!({"path": "a.rs"})),
        ]);
        // 4 + 4 + "read" 4 + {"path":"a.rs"} 15 = 27 chars.
        assert_eq!(estimate_tokens(&m), 7);
        let raw = assistant(vec![call("c1", "bash", json!("{not json"))]);
        assert_eq!(estimate_tokens(&raw), 4);
        let image = Message::User(UserMessage {
            content: UserContent::Blocks(vec![
                text("see"),
                ContentBlock::image("AAAA", "image/png"),
            ]),
            timestamp: 1,
        });
        assert_eq!(estimate_tokens(&image), 1201);
        let Message::ToolResult(r) = result("c1", "12345678") else {
            unreachable!()
        };
        let shot = Message::ToolResult(ToolResultMessage {
            content: vec![ContentBlock::image("AAAA", "image/png"), text("12345678")],
            ..r
        });
        assert_eq!(estimate_tokens(&shot), 1202);
    }

    #[test]
    fn context_from_usage_and_trailing_estimate() {
        let usage = |total, input, output| Usage {
            input,
            output,
            total_tokens: total,
            ..Usage::default()
        };
        let messages = vec![
            user("hello"),
            with_usage(
                assistant(vec![text("hi")]),
                usage(1000, 900, 100),
                StopReason::Stop,
            ),
            user("12345678"),
            with_usage(
                assistant(vec![text("partial")]),
                usage(5000, 4000, 1000),
                StopReason::Aborted,
            ),
        ];
        // The aborted reply's usage is ignored; its text is estimated.
        let e = context_tokens(&messages, 0);
        assert_eq!(
            e,
            ContextEstimate {
                tokens: 1000 + 2 + 2,
                usage_tokens: 1000,
                trailing_tokens: 4
            }
        );
        // totalTokens 0: the parts are added up.
        let e = context_tokens(
            &[with_usage(
                assistant(vec![]),
                Usage {
                    cache_read: 5,
                    cache_write: 7,
                    ..usage(0, 300, 20)
                },
                StopReason::ToolUse,
            )],
            0,
        );
        assert_eq!(e.tokens, 332);
        // No usage anywhere: everything is estimated.
        let e = context_tokens(&[user("abcd"), assistant(vec![text("abcd")])], 0);
        assert_eq!((e.tokens, e.usage_tokens, e.trailing_tokens), (2, 0, 2));
    }

    #[test]
    fn threshold() {
        let s = CompactionSettings::default();
        assert!(!should_compact(128_000 - 16_384, 128_000, &s));
        assert!(should_compact(128_000 - 16_383, 128_000, &s));
        // A window smaller than the reserve: the reserve shrinks to a quarter of it.
        assert!(!should_compact(10, 8_000, &s));
        assert!(should_compact(6_001, 8_000, &s));
        assert!(!should_compact(1_000_000, 0, &s));
        let off = CompactionSettings {
            enabled: false,
            ..s
        };
        assert!(!should_compact(1_000_000, 128_000, &off));
    }

    /// A message of about `tokens` estimated tokens.
    fn sized(tokens: usize) -> String {
        "x".repeat(tokens * 4)
    }

    #[test]
    fn cut_keeps_the_recent_part_at_a_user_message() {
        let entries = ids(vec![
            user(&sized(100)),
            assistant(vec![text(&sized(100))]),
            user(&sized(100)),
            assistant(vec![text(&sized(100))]),
            user(&sized(100)),
            assistant(vec![text(&sized(100))]),
        ]);
        // 250 tokens reach back into entry 3; the next valid point is entry 3 itself, an
        // assistant message, so turn 2 is split at its user message 2.
        let cut = find_cut_point(&entries, 250).unwrap();
        assert_eq!(
            cut,
            CutPoint {
                first_kept: 3,
                first_kept_id: "e3".into(),
                turn_start: Some(2)
            }
        );
        assert_eq!((cut.summarized(), cut.turn_prefix()), (0..2, 2..3));
        // Exactly 200 tokens reach entry 4, a user message: a clean cut.
        let cut = find_cut_point(&entries, 200).unwrap();
        assert_eq!((cut.first_kept, cut.turn_start), (4, None));
        assert_eq!((cut.summarized(), cut.turn_prefix()), (0..4, 4..4));
    }

    #[test]
    fn cut_is_never_at_a_tool_result_nor_inside_a_call() {
        let entries = ids(vec![
            user(&sized(100)),
            assistant(vec![call("c1", "read", json!({"path": "a"}))]),
            result("c1", &sized(300)),
            assistant(vec![call("c2", "read", json!({"path": "b"}))]),
            result("c2", &sized(300)),
            assistant(vec![text("done")]),
        ]);
        // The budget is reached at result c2 (4); the next valid point is the final reply.
        let cut = find_cut_point(&entries, 200).unwrap();
        assert_eq!((cut.first_kept, cut.turn_start), (5, Some(0)));
        // Reached at result c1 (2): the call after it (3) starts the kept part, with its result.
        let cut = find_cut_point(&entries, 400).unwrap();
        assert_eq!((cut.first_kept, cut.turn_start), (3, Some(0)));

        // A steer recorded between a call and its result cannot start the kept part.
        let entries = ids(vec![
            user(&sized(100)),
            assistant(vec![call("c1", "bash", json!({"command": "make"}))]),
            user("steer"),
            result("c1", &sized(300)),
            assistant(vec![text(&sized(10))]),
        ]);
        let cut = find_cut_point(&entries, 200).unwrap();
        assert_eq!((cut.first_kept, cut.turn_start), (4, Some(2)));
        // Reached at the steer (2): it and the result after it are passed over.
        let cut = find_cut_point(&entries, 311).unwrap();
        assert_eq!((cut.first_kept, cut.turn_start), (4, Some(2)));
        let cut = find_cut_point(&entries, 313).unwrap();
        assert_eq!((cut.first_kept, cut.turn_start), (1, Some(0)));

        // Nothing valid after the point reached: the nearest valid point before it.
        let entries = ids(vec![
            user(&sized(100)),
            user(&sized(100)),
            assistant(vec![call("c1", "read", json!({"path": "a"}))]),
            result("c1", &sized(1000)),
        ]);
        let cut = find_cut_point(&entries, 500).unwrap();
        assert_eq!((cut.first_kept, cut.turn_start), (2, Some(1)));
    }

    #[test]
    fn too_small_to_cut() {
        let entries = ids(vec![user(&sized(100)), assistant(vec![text(&sized(100))])]);
        assert_eq!(find_cut_point(&entries, 20_000), None);
        assert_eq!(find_cut_point::<Message>(&[], 0), None);
        // Reached only at the first message: nothing before it to summarise.
        assert_eq!(find_cut_point(&entries, 150), None);
        let only_results = ids(vec![result("x", &sized(100)), result("y", &sized(100))]);
        assert_eq!(find_cut_point(&only_results, 50), None);
    }
}
