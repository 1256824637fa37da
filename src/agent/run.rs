//! One run: from `agent_start` to `agent_settled`. Turns repeat while the model calls tools or
//! queued messages wait; steering is delivered after a tool batch, follow-ups when the agent
//! would otherwise stop, both inside the same run (Pi's semantics). Between `agent_end` and
//! `agent_settled` a compaction may run: on a context overflow (then the turn is retried once)
//! or when the context passed the threshold.

use super::assemble::Assembler;
use super::compact::compact;
use super::{Agent, exec, now_ms};
use crate::protocol::{
    AssistantMessage, CompactionReason, Event, Message, StopReason, Usage, UserMessage,
};
use crate::provider::http::Transport;
use crate::provider::{self, ErrorKind, Request};
use tokio_util::sync::CancellationToken;

pub(super) async fn run(agent: &Agent, cancel: CancellationToken, prompt: UserMessage) {
    agent.wait_for_mcp(&cancel).await;
    // Pi's pre-prompt check: a context already past the threshold (after an aborted reply, or
    // on a model with a smaller window) is compacted before it is sent again.
    if agent.needs_compaction() {
        let _ = compact(agent, &cancel, CompactionReason::Threshold, None, false).await;
    }
    // Steering queued while idle rides along with the prompt, in the first turn.
    let mut pending = vec![prompt];
    pending.extend(agent.take_queued(|q| q.take_steering()));
    let mut overflow_retried = false;
    loop {
        agent.emit(Event::AgentStart);
        let outcome = turns(agent, &cancel, std::mem::take(&mut pending)).await;
        let next = if outcome.aborted {
            None
        } else if outcome.overflow && agent.auto_compaction_enabled() {
            Some(if overflow_retried {
                After::OverflowGaveUp
            } else {
                After::Overflow
            })
        } else if agent.needs_compaction() {
            Some(After::Threshold)
        } else {
            None
        };
        let Some(next) = next else {
            agent.finish_run(outcome.aborted);
            return;
        };
        agent.emit_agent_end(next == After::Overflow);
        match next {
            After::Overflow => {
                overflow_retried = true;
                let compacted =
                    compact(agent, &cancel, CompactionReason::Overflow, None, true).await;
                if compacted.is_ok() {
                    // The failed turn is tried again on the compacted context; the user's
                    // message is already there and is not sent twice.
                    continue;
                }
            }
            After::OverflowGaveUp => agent.emit(Event::CompactionEnd {
                reason: CompactionReason::Overflow,
                result: None,
                aborted: false,
                will_retry: false,
                error_message: Some(OVERFLOW_GAVE_UP.to_owned()),
            }),
            After::Threshold => {
                let _ = compact(agent, &cancel, CompactionReason::Threshold, None, false).await;
            }
        }
        // Messages queued while the compaction ran start the next run at once.
        pending = agent.take_queued(|q| {
            let mut all = q.take_steering();
            all.extend(q.take_follow_up());
            all
        });
        if pending.is_empty() || cancel.is_cancelled() {
            agent.settle(cancel.is_cancelled());
            return;
        }
    }
}

const OVERFLOW_GAVE_UP: &str = "Context overflow recovery failed after one compact-and-retry \
                                attempt; the conversation is still too long for the model";

/// What happens between a run's `agent_end` and its `agent_settled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Overflow,
    OverflowGaveUp,
    Threshold,
}

struct Outcome {
    aborted: bool,
    /// The last reply failed because the context was too long for the model.
    overflow: bool,
}

/// The turns of one `agent_start`…`agent_end` span.
async fn turns(
    agent: &Agent,
    cancel: &CancellationToken,
    mut pending: Vec<UserMessage>,
) -> Outcome {
    let mut turn_index = 0;
    loop {
        agent.emit(Event::TurnStart);
        for message in pending.drain(..) {
            agent.append(Message::User(message));
        }
        let (reply, overflow) = stream_reply(agent, cancel).await;
        let calls: Vec<_> = if reply.is_failed() {
            Vec::new()
        } else {
            reply
                .tool_calls()
                .map(|(id, name, args)| (id.to_owned(), name.to_owned(), args.clone()))
                .collect()
        };
        let results = exec::run_tools(agent, cancel, &calls).await;
        let stop = reply.stop_reason;
        agent.emit(Event::TurnEnd {
            turn_index,
            message: Message::Assistant(reply),
            tool_results: results,
        });
        turn_index += 1;
        if matches!(stop, StopReason::Error | StopReason::Aborted) {
            return Outcome {
                aborted: stop == StopReason::Aborted,
                overflow,
            };
        }
        pending = agent.take_queued(|q| q.take_steering());
        if !pending.is_empty() || !calls.is_empty() {
            continue;
        }
        pending = agent.take_queued(|q| q.take_follow_up());
        if pending.is_empty() {
            return Outcome {
                aborted: false,
                overflow: false,
            };
        }
    }
}

/// Streams one assistant reply, emitting `message_start`, the updates and `message_end`.
/// Every failure ends up in the returned message (`stopReason` error or aborted), never as a
/// lost turn. The flag says whether the failure was the context being too long.
async fn stream_reply(agent: &Agent, cancel: &CancellationToken) -> (AssistantMessage, bool) {
    let (model, history, tools, thinking) = {
        let state = agent.state();
        (
            state.model.clone(),
            state.messages.clone(),
            state.tools.clone(),
            state.thinking_level,
        )
    };
    let mut empty = AssistantMessage {
        content: Vec::new(),
        api: String::new(),
        provider: String::new(),
        model: String::new(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        timestamp: now_ms(),
    };
    if let Some(m) = &model {
        empty.api = m.api.clone();
        empty.provider = m.provider.clone();
        empty.model = m.id.clone();
    }
    agent.emit(Event::MessageStart {
        message: Message::Assistant(empty.clone()),
    });
    let mut assembler = Assembler::new(empty);
    let mut updates = Vec::new();

    let mut overflow = false;
    let outcome = match &model {
        _ if cancel.is_cancelled() => Err((StopReason::Aborted, ABORTED.to_owned())),
        None => Err((StopReason::Error, super::CommandError::NoModel.to_string())),
        Some(model) => {
            let inner = &agent.inner;
            match inner.registry.credentials(model).await {
                Err(e) => Err((StopReason::Error, e)),
                Ok((api_key, headers)) => {
                    let request = Request {
                        model,
                        system_prompt: &tools.system_prompt,
                        messages: &history,
                        tools: &agent.tool_specs(&tools.specs),
                        max_tokens: None,
                        thinking: Some(thinking),
                    };
                    let result = provider::http::stream(
                        &Transport {
                            client: &inner.client,
                            idle_timeout: inner.idle_timeout,
                            api_key,
                            headers,
                        },
                        &request,
                        cancel,
                        |event| {
                            assembler.push(event, &mut updates);
                            for update in updates.drain(..) {
                                agent.emit(Event::MessageUpdate {
                                    assistant_message_event: update,
                                });
                            }
                        },
                    )
                    .await;
                    match result {
                        Ok(()) => Ok(()),
                        Err(_) if cancel.is_cancelled() => {
                            Err((StopReason::Aborted, ABORTED.to_owned()))
                        }
                        Err(e) => {
                            overflow = e.kind() == ErrorKind::Overflow;
                            Err((StopReason::Error, e.to_string()))
                        }
                    }
                }
            }
        }
    };
    let message = match outcome {
        Ok(()) => assembler.finish(&mut updates),
        Err((reason, error)) => assembler.fail(reason, error, &mut updates),
    };
    for update in updates {
        agent.emit(Event::MessageUpdate {
            assistant_message_event: update,
        });
    }
    agent.append(Message::Assistant(message.clone()));
    (message, overflow)
}

const ABORTED: &str = "Request was aborted";
