//! Builds the assistant message from provider deltas and derives the block boundaries the wire
//! shows: a block is closed (its `*_end` carrying the whole block) before the next one opens, as
//! RPC.md says (Pi 1.6 keeps an OpenAI-compatible reply's blocks open until it ends).

use crate::protocol::{AssistantMessage, AssistantMessageEvent as Ev, ContentBlock, StopReason};
use crate::provider::ProviderEvent;
use serde_json::Value;
use std::collections::HashMap;

/// The text of a redacted thinking block, whose reasoning only the provider can read.
const REDACTED_THINKING_TEXT: &str = "[Reasoning redacted]";

fn empty_thinking() -> ContentBlock {
    ContentBlock::Thinking {
        thinking: String::new(),
        thinking_signature: None,
        redacted: None,
    }
}

/// Which fragments of a tool call become `toolcall_delta`s, as Pi passes them on for the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallDeltas {
    /// Every fragment after the one that opens the call, even an empty one (Anthropic's
    /// `input_json_delta`s: the call opens with its `content_block_start`).
    AfterOpening,
    /// Every fragment, the opening one too (OpenAI-compatible servers open a call with a
    /// fragment of its arguments, often empty).
    Every,
}

pub struct Assembler {
    message: AssistantMessage,
    call_deltas: CallDeltas,
    /// Index into `message.content` of the block still receiving deltas.
    open: Option<usize>,
    /// Raw argument text per tool-call block, in block order.
    calls: Vec<PendingCall>,
    /// Where each provider call index is in `calls`: a reply may hold many thousands of calls,
    /// and a scan per fragment would make assembling them quadratic.
    by_provider_index: HashMap<usize, usize>,
    finish: Option<StopReason>,
}

struct PendingCall {
    block: usize,
    arguments: String,
}

impl Assembler {
    /// `message` is the empty assistant message announced by `message_start`.
    pub fn new(message: AssistantMessage, call_deltas: CallDeltas) -> Self {
        Assembler {
            message,
            call_deltas,
            open: None,
            calls: Vec::new(),
            by_provider_index: HashMap::new(),
            finish: None,
        }
    }

    pub fn push(&mut self, event: ProviderEvent, out: &mut Vec<Ev>) {
        match event {
            ProviderEvent::Text(delta) => {
                let index = self.open_block(
                    out,
                    |b| matches!(b, ContentBlock::Text { .. }),
                    || ContentBlock::text(""),
                );
                if let Some(ContentBlock::Text { text, .. }) = self.message.content.get_mut(index) {
                    text.push_str(&delta);
                }
                out.push(Ev::TextDelta {
                    content_index: index,
                    delta,
                });
            }
            ProviderEvent::Thinking(delta) => {
                let index = self.open_thinking(out);
                if let Some(ContentBlock::Thinking { thinking, .. }) =
                    self.message.content.get_mut(index)
                {
                    thinking.push_str(&delta);
                }
                // An empty delta only opens the block (a thinking block may have no text).
                if !delta.is_empty() {
                    out.push(Ev::ThinkingDelta {
                        content_index: index,
                        delta,
                    });
                }
            }
            ProviderEvent::ThinkingSignature(fragment) => {
                let open_signed = self.open.and_then(|i| match self.message.content.get(i) {
                    Some(ContentBlock::Thinking {
                        redacted: None,
                        thinking_signature,
                        ..
                    }) => Some(i).filter(|_| thinking_signature.is_some()),
                    _ => None,
                });
                let index = match open_signed {
                    Some(i) => i,
                    None => self.open_thinking(out),
                };
                if let Some(ContentBlock::Thinking {
                    thinking_signature, ..
                }) = self.message.content.get_mut(index)
                {
                    thinking_signature
                        .get_or_insert_default()
                        .push_str(&fragment);
                }
            }
            ProviderEvent::RedactedThinking(data) => {
                self.close(out);
                let index = self.message.content.len();
                out.push(Ev::ThinkingStart {
                    content_index: index,
                });
                // Pi's stand-in text: clients show it where the hidden reasoning was.
                self.message.content.push(ContentBlock::Thinking {
                    thinking: REDACTED_THINKING_TEXT.to_string(),
                    thinking_signature: Some(data),
                    redacted: Some(true),
                });
                self.open = Some(index);
            }
            ProviderEvent::TextSignature(signature) => {
                // Only an open text block takes one: a signature for no text has nothing to
                // identify.
                if let Some(i) = self.open
                    && let Some(ContentBlock::Text { text_signature, .. }) =
                        self.message.content.get_mut(i)
                {
                    *text_signature = Some(signature);
                    self.close(out);
                }
            }
            ProviderEvent::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                self.push_tool_call(index, id, name, arguments, out);
            }
            ProviderEvent::ToolCallSignature { index, signature } => {
                let block = self
                    .by_provider_index
                    .get(&index)
                    .map(|&c| self.calls[c].block);
                if let Some(ContentBlock::ToolCall {
                    thought_signature, ..
                }) = block.and_then(|b| self.message.content.get_mut(b))
                {
                    *thought_signature = Some(signature);
                }
            }
            ProviderEvent::Usage(usage) => self.message.usage = usage,
            ProviderEvent::Start { response_id, usage } => {
                if response_id.is_some() {
                    self.message.response_id = response_id;
                }
                if let Some(usage) = usage {
                    self.message.usage = usage;
                }
            }
            ProviderEvent::Finish(reason) => self.finish = Some(reason),
        }
    }

    /// Opens the block of a new tool call and returns its place in `calls`.
    fn start_call(
        &mut self,
        provider_index: usize,
        id: Option<String>,
        name: Option<String>,
        out: &mut Vec<Ev>,
    ) -> usize {
        let block = self.message.content.len();
        let fallback_id = format!("call_{}_{}", self.message.timestamp, block);
        let id = id.filter(|i| !i.is_empty()).unwrap_or(fallback_id);
        let name = name.unwrap_or_default();
        self.message.content.push(ContentBlock::ToolCall {
            id: id.clone(),
            name: name.clone(),
            arguments: Value::Object(Default::default()),
            thought_signature: None,
        });
        self.by_provider_index
            .insert(provider_index, self.calls.len());
        self.calls.push(PendingCall {
            block,
            arguments: String::new(),
        });
        out.push(Ev::ToolcallStart {
            content_index: block,
            id,
            tool_name: name,
        });
        self.calls.len() - 1
    }

    fn push_tool_call(
        &mut self,
        provider_index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
        out: &mut Vec<Ev>,
    ) {
        let existing = self.by_provider_index.get(&provider_index).copied();
        let call = match existing {
            Some(c) if Some(self.calls[c].block) == self.open => c,
            // A late fragment of a call that is already closed: keep its text so the final
            // arguments are whole, but its boundaries were already reported.
            Some(c) => {
                self.calls[c].arguments.push_str(&arguments);
                return;
            }
            None => {
                self.close(out);
                let call = self.start_call(provider_index, id, name, out);
                self.open = Some(self.calls[call].block);
                call
            }
        };
        let delta = match self.call_deltas {
            CallDeltas::Every => true,
            CallDeltas::AfterOpening => existing.is_some() || !arguments.is_empty(),
        };
        if delta {
            self.calls[call].arguments.push_str(&arguments);
            out.push(Ev::ToolcallDelta {
                content_index: self.calls[call].block,
                delta: arguments,
            });
        }
    }

    /// The open thinking block that may still grow: one neither signed nor redacted (a
    /// signature ends a block; more thinking after it starts the next).
    fn open_thinking(&mut self, out: &mut Vec<Ev>) -> usize {
        self.open_block(
            out,
            |b| {
                matches!(
                    b,
                    ContentBlock::Thinking {
                        thinking_signature: None,
                        redacted: None,
                        ..
                    }
                )
            },
            empty_thinking,
        )
    }

    /// Returns the index of the open block if `is_kind` accepts it, else closes it and opens a
    /// fresh one made by `make`.
    fn open_block(
        &mut self,
        out: &mut Vec<Ev>,
        is_kind: impl Fn(&ContentBlock) -> bool,
        make: impl FnOnce() -> ContentBlock,
    ) -> usize {
        if let Some(i) = self.open
            && self.message.content.get(i).is_some_and(&is_kind)
        {
            return i;
        }
        self.close(out);
        let index = self.message.content.len();
        let block = make();
        out.push(match block {
            ContentBlock::Thinking { .. } => Ev::ThinkingStart {
                content_index: index,
            },
            _ => Ev::TextStart {
                content_index: index,
            },
        });
        self.message.content.push(block);
        self.open = Some(index);
        index
    }

    fn close(&mut self, out: &mut Vec<Ev>) {
        let Some(index) = self.open.take() else {
            return;
        };
        self.settle_arguments(index);
        match self.message.content.get(index) {
            Some(ContentBlock::Text { text, .. }) => out.push(Ev::TextEnd {
                content_index: index,
                content: text.clone(),
            }),
            Some(ContentBlock::Thinking { thinking, .. }) => out.push(Ev::ThinkingEnd {
                content_index: index,
                content: thinking.clone(),
            }),
            Some(block @ ContentBlock::ToolCall { .. }) => out.push(Ev::ToolcallEnd {
                content_index: index,
                tool_call: block.clone(),
            }),
            _ => {}
        }
    }

    /// Parses a tool call's argument text into its block: an object when it parses, else the
    /// raw text, so the tool can report exactly what the model sent.
    fn settle_arguments(&mut self, block: usize) {
        let Ok(at) = self.calls.binary_search_by_key(&block, |c| c.block) else {
            return;
        };
        let call = &self.calls[at];
        let parsed = if call.arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()))
        };
        if let Some(ContentBlock::ToolCall { arguments, .. }) = self.message.content.get_mut(block)
        {
            *arguments = parsed;
        }
    }

    /// The reply's usage as far as the provider has reported it.
    /// The message as it stands.
    pub fn message(&self) -> &AssistantMessage {
        &self.message
    }

    pub fn usage(&self) -> &crate::protocol::Usage {
        &self.message.usage
    }

    /// Ends the message normally.
    pub fn finish(mut self, out: &mut Vec<Ev>) -> AssistantMessage {
        self.close(out);
        for block in 0..self.message.content.len() {
            self.settle_arguments(block);
        }
        let has_calls = self.message.tool_calls().next().is_some();
        self.message.stop_reason = match self.finish {
            Some(StopReason::Stop) | None if has_calls => StopReason::ToolUse,
            Some(reason) => reason,
            None => StopReason::Stop,
        };
        self.message
    }

    /// Ends the message as failed or aborted, keeping the partial content.
    pub fn fail(
        mut self,
        reason: StopReason,
        error: String,
        out: &mut Vec<Ev>,
    ) -> AssistantMessage {
        self.close(out);
        for block in 0..self.message.content.len() {
            self.settle_arguments(block);
        }
        self.message.stop_reason = reason;
        self.message.error_message = Some(error);
        self.message
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::Usage;
    use serde_json::json;

    fn empty() -> AssistantMessage {
        AssistantMessage {
            content: vec![],
            api: "ollama".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            response_id: None,
            thinking_level: None,
            raw_stop_reason: None,
            duration_ms: None,
            timestamp: 7,
        }
    }

    fn call(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> ProviderEvent {
        ProviderEvent::ToolCall {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: args.into(),
        }
    }

    #[test]
    fn boundaries_are_synthesised_and_ends_carry_whole_blocks() {
        let mut a = Assembler::new(empty(), CallDeltas::AfterOpening);
        let mut evs = vec![];
        for e in [
            ProviderEvent::Thinking("hm".into()),
            ProviderEvent::Thinking("m".into()),
            ProviderEvent::Text("Hel".into()),
            ProviderEvent::Text("lo".into()),
            call(0, Some("c1"), Some("read"), "{\"pa"),
            call(0, None, None, "th\":\"a\"}"),
            call(1, Some("c2"), Some("bash"), "not json"),
            ProviderEvent::Finish(StopReason::Stop),
        ] {
            a.push(e, &mut evs);
        }
        let msg = a.finish(&mut evs);
        assert_eq!(msg.stop_reason, StopReason::ToolUse);
        let kinds: Vec<String> = evs
            .iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "thinking_start",
                "thinking_delta",
                "thinking_delta",
                "thinking_end",
                "text_start",
                "text_delta",
                "text_delta",
                "text_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_delta",
                "toolcall_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_end"
            ]
        );
        assert_eq!(
            evs[3],
            Ev::ThinkingEnd {
                content_index: 0,
                content: "hmm".into()
            }
        );
        assert_eq!(
            evs[7],
            Ev::TextEnd {
                content_index: 1,
                content: "Hello".into()
            }
        );
        assert_eq!(
            msg.content[2],
            ContentBlock::ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: json!({"path": "a"}),
                thought_signature: None
            }
        );
        assert!(
            matches!(&msg.content[3], ContentBlock::ToolCall { arguments: Value::String(s), .. } if s == "not json")
        );
    }

    #[test]
    fn signatures_end_thinking_blocks_and_redacted_blocks_stand_alone() {
        let mut a = Assembler::new(empty(), CallDeltas::AfterOpening);
        let mut evs = vec![];
        for e in [
            ProviderEvent::Thinking("one".into()),
            ProviderEvent::ThinkingSignature("s1".into()),
            ProviderEvent::ThinkingSignature("+".into()),
            ProviderEvent::Thinking(String::new()),
            ProviderEvent::ThinkingSignature("s2".into()),
            ProviderEvent::RedactedThinking("opaque".into()),
            ProviderEvent::Thinking("three".into()),
            ProviderEvent::Finish(StopReason::Stop),
        ] {
            a.push(e, &mut evs);
        }
        let msg = a.finish(&mut evs);
        let thinking = |text: &str, sig: Option<&str>, redacted| ContentBlock::Thinking {
            thinking: text.into(),
            thinking_signature: sig.map(Into::into),
            redacted,
        };
        assert_eq!(
            msg.content,
            [
                thinking("one", Some("s1+"), None),
                thinking("", Some("s2"), None),
                thinking("[Reasoning redacted]", Some("opaque"), Some(true)),
                thinking("three", None, None),
            ]
        );
        let deltas = evs
            .iter()
            .filter(|e| matches!(e, Ev::ThinkingDelta { .. }))
            .count();
        assert_eq!(
            deltas, 2,
            "no delta for empty or redacted thinking: {evs:?}"
        );
        assert_eq!(
            evs.iter()
                .filter(|e| matches!(e, Ev::ThinkingEnd { .. }))
                .count(),
            4
        );
    }

    #[test]
    fn failure_keeps_partial_content() {
        let mut a = Assembler::new(empty(), CallDeltas::AfterOpening);
        let mut evs = vec![];
        a.push(ProviderEvent::Text("part".into()), &mut evs);
        let msg = a.fail(StopReason::Aborted, "Request was aborted".into(), &mut evs);
        assert_eq!(msg.content, vec![ContentBlock::text("part")]);
        assert_eq!(msg.stop_reason, StopReason::Aborted);
        assert_eq!(
            evs.last(),
            Some(&Ev::TextEnd {
                content_index: 0,
                content: "part".into()
            })
        );
    }

    #[test]
    fn every_fragment_of_a_call_can_be_a_delta_as_pi_streams_openai() {
        let deltas = |mode| {
            let mut a = Assembler::new(empty(), mode);
            let mut out = Vec::new();
            a.push(call(0, Some("c1"), Some("read"), ""), &mut out);
            a.push(call(0, None, None, ""), &mut out);
            a.push(call(0, None, None, "{\"path\":\"a\"}"), &mut out);
            let message = a.finish(&mut out);
            assert_eq!(
                message.tool_calls().next().unwrap().2,
                &json!({"path": "a"})
            );
            out.iter()
                .filter(|e| matches!(e, Ev::ToolcallDelta { .. }))
                .count()
        };
        assert_eq!(deltas(CallDeltas::Every), 3);
        assert_eq!(deltas(CallDeltas::AfterOpening), 2);
    }
}
