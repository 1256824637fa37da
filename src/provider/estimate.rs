//! nova's token estimate, where a server reports no count: `ceil(chars / 4)` over text,
//! thinking, tool calls and results, 1,200 tokens per image (DESIGN.md). Compaction measures the
//! conversation with it; a reply without reported usage is counted with it; and Ollama's own
//! prompt count is checked against it to notice a prompt the server cut.

use super::{ProviderEvent, Request, priced_usage};
use crate::protocol::{ContentBlock, Message, ToolSpec, Usage, UserContent};
use serde_json::Value;

/// An image costs about as much context as this much text (1,200 tokens), whatever its size.
const IMAGE_CHARS: usize = 4800;

/// Estimated context tokens of one message: `ceil(chars / 4)` over its text, thinking, tool
/// calls (name plus JSON arguments) and results, 1,200 tokens per image.
pub fn estimate_tokens(message: &Message) -> u64 {
    let chars = match message {
        Message::User(u) => match &u.content {
            UserContent::Text(t) => t.chars().count(),
            UserContent::Blocks(b) => blocks_chars(b),
        },
        Message::Assistant(a) => blocks_chars(&a.content),
        Message::ToolResult(r) => blocks_chars(&r.content),
        Message::CompactionSummary(s) => s.summary.chars().count(),
        Message::BashExecution(b) => b.command.chars().count() + b.output.chars().count(),
        Message::Custom(c) => match &c.content {
            UserContent::Text(t) => t.chars().count(),
            UserContent::Blocks(b) => blocks_chars(b),
        },
    };
    (chars as u64).div_ceil(4)
}

fn blocks_chars(blocks: &[ContentBlock]) -> usize {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text, .. } => text.chars().count(),
            ContentBlock::Thinking { thinking, .. } => thinking.chars().count(),
            ContentBlock::ToolCall {
                name, arguments, ..
            } => {
                let args = match arguments {
                    // Arguments that did not parse are kept as the model's raw text.
                    Value::String(raw) => raw.chars().count(),
                    other => other.to_string().chars().count(),
                };
                name.chars().count() + args
            }
            ContentBlock::Image { .. } => IMAGE_CHARS,
        })
        .sum()
}

/// How full the context is, as Pi counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextEstimate {
    pub tokens: u64,
    /// What the provider reported for the last successful reply (0 when there is none).
    pub usage_tokens: u64,
    /// The estimate of the messages after that reply (all of them when there is none).
    pub trailing_tokens: u64,
}

/// The last successful reply's reported usage plus an estimate of every message after it.
///
/// Failed and aborted replies are passed over: their usage, if any, describes a request that did
/// not complete. So is a reply whose usage is all zeros (a server that reports none), which
/// would otherwise make a full context look empty. Usage is only taken from messages at index
/// `usage_from` or later: replies kept through a compaction measured the context before it.
pub fn context_tokens<M: AsRef<Message>>(messages: &[M], usage_from: usize) -> ContextEstimate {
    let last_usage = messages
        .iter()
        .enumerate()
        .skip(usage_from)
        .rev()
        .find_map(|(i, m)| match m.as_ref() {
            Message::Assistant(a) if !a.is_failed() => {
                Some((i, usage_tokens(&a.usage))).filter(|(_, t)| *t > 0)
            }
            _ => None,
        });
    let (usage_tokens, trailing) = match last_usage {
        Some((i, tokens)) => (tokens, &messages[i + 1..]),
        None => (0, messages),
    };
    let trailing_tokens = trailing.iter().map(|m| estimate_tokens(m.as_ref())).sum();
    ContextEstimate {
        tokens: usage_tokens + trailing_tokens,
        usage_tokens,
        trailing_tokens,
    }
}

fn usage_tokens(usage: &Usage) -> u64 {
    if usage.total_tokens > 0 {
        usage.total_tokens
    } else {
        usage.input + usage.output + usage.cache_read + usage.cache_write
    }
}

/// Estimated tokens of everything a request sends: the system prompt, the tool definitions and
/// the conversation.
pub fn request_tokens(req: &Request) -> u64 {
    prompt_tokens(req.system_prompt, req.tools)
        + req.messages.iter().map(|m| estimate_tokens(m)).sum::<u64>()
}

/// Estimated tokens of what every request sends before the conversation: the system prompt and
/// the tool definitions (Pi's leading system message).
pub fn prompt_tokens(system_prompt: &str, tools: &[ToolSpec]) -> u64 {
    let tools: usize = tools
        .iter()
        .map(|t| {
            t.name.chars().count() + t.description.chars().count() + t.parameters.to_string().len()
        })
        .sum();
    ((system_prompt.chars().count() + tools) as u64).div_ceil(4)
}

/// Watches a reply's events and makes sure its usage never reads zero: a count the server left
/// out (no usage at all, or a prompt or output count of 0) is filled in with the estimate before
/// the final `Finish`.
#[derive(Debug)]
pub struct Meter {
    prompt_estimate: u64,
    reply_chars: usize,
    reported: Option<Usage>,
}

impl Meter {
    pub fn new(req: &Request) -> Self {
        Meter {
            prompt_estimate: request_tokens(req),
            reply_chars: 0,
            reported: None,
        }
    }

    pub fn prompt_estimate(&self) -> u64 {
        self.prompt_estimate
    }

    /// Whether the reply has produced any content yet.
    pub fn reply_is_empty(&self) -> bool {
        self.reply_chars == 0
    }

    /// The prompt tokens the server reported, if it did.
    pub fn reported_prompt(&self) -> Option<u64> {
        let u = self.reported.as_ref()?;
        Some(u.input + u.cache_read + u.cache_write).filter(|n| *n > 0)
    }

    /// Passes `event` on through `out`, holding back the server's usage until `Finish`, where it
    /// goes out completed.
    pub fn pass(
        &mut self,
        req: &Request,
        event: ProviderEvent,
        out: &mut impl FnMut(ProviderEvent),
    ) {
        match event {
            ProviderEvent::Text(ref t) | ProviderEvent::Thinking(ref t) => {
                self.reply_chars += t.chars().count();
            }
            ProviderEvent::ToolCall {
                ref name,
                ref arguments,
                ..
            } => {
                self.reply_chars +=
                    name.as_deref().map_or(0, |n| n.chars().count()) + arguments.chars().count();
            }
            ProviderEvent::Usage(usage) => {
                self.reported = Some(usage);
                return;
            }
            ProviderEvent::Finish(_) => out(ProviderEvent::Usage(self.completed(req))),
            // Opaque to the model's output count: the servers that send them report usage.
            ProviderEvent::ThinkingSignature(_)
            | ProviderEvent::RedactedThinking(_)
            | ProviderEvent::TextSignature(_)
            | ProviderEvent::ToolCallSignature { .. }
            | ProviderEvent::Start { .. } => {}
        }
        out(event);
    }

    fn completed(&mut self, req: &Request) -> Usage {
        let reported = self.reported.take().unwrap_or_default();
        let prompt = reported.input + reported.cache_read + reported.cache_write;
        let output = match reported.output {
            0 => (self.reply_chars as u64).div_ceil(4),
            n => n,
        };
        if prompt > 0 && output == reported.output {
            return reported;
        }
        let input = if prompt > 0 {
            reported.input
        } else {
            self.prompt_estimate
        };
        let mut usage = priced_usage(req.model, input, output, reported.cache_read);
        usage.cache_write = reported.cache_write;
        usage.total_tokens += reported.cache_write;
        usage
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::StopReason;
    use crate::provider::prepare::tests::{model, user_text};
    use std::sync::Arc;

    /// The events `Meter` lets through for `events`.
    fn metered(events: Vec<ProviderEvent>) -> Vec<ProviderEvent> {
        let m = model("ollama", false);
        let messages = vec![Arc::new(user_text(&"x".repeat(400)))];
        let req = Request {
            model: &m,
            system_prompt: "12345678",
            messages: &messages,
            tools: &[],
            max_tokens: None,
            thinking: None,
            session_id: None,
        };
        let mut meter = Meter::new(&req);
        assert_eq!(meter.prompt_estimate(), 2 + 100);
        let mut out = Vec::new();
        for e in events {
            meter.pass(&req, e, &mut |e| out.push(e));
        }
        out
    }

    fn usage_of(events: &[ProviderEvent]) -> (u64, u64, u64) {
        match &events[events.len() - 2] {
            ProviderEvent::Usage(u) => (u.input, u.output, u.total_tokens),
            other => panic!("no usage before Finish: {other:?}"),
        }
    }

    #[test]
    fn missing_counts_are_estimated() {
        let finish = ProviderEvent::Finish(StopReason::Stop);
        let text = ProviderEvent::Text("abcdefgh".into());
        // Nothing reported: both estimated, usage placed before Finish.
        let out = metered(vec![text.clone(), finish.clone()]);
        assert_eq!(out[0], text);
        assert_eq!(usage_of(&out), (102, 2, 104));
        // Reported counts stand; a 0 prompt or output count is filled in.
        let reported = |input, output| {
            ProviderEvent::Usage(crate::provider::priced_usage(
                &model("ollama", false),
                input,
                output,
                0,
            ))
        };
        let out = metered(vec![text.clone(), reported(50, 7), finish.clone()]);
        assert_eq!(usage_of(&out), (50, 7, 57));
        let out = metered(vec![text.clone(), reported(0, 7), finish.clone()]);
        assert_eq!(usage_of(&out), (102, 7, 109));
        let out = metered(vec![text, reported(50, 0), finish]);
        assert_eq!(usage_of(&out), (50, 2, 52));
    }
}
