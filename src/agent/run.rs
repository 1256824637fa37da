//! One run: from `agent_start` to `agent_settled`. Turns repeat while the model calls tools or
//! queued messages wait; steering is delivered after a tool batch, follow-ups when the agent
//! would otherwise stop, both inside the same run (Pi's semantics). Between `agent_end` and
//! `agent_settled` a compaction may run: on a context overflow (then the turn is retried once)
//! or when the context passed the threshold. A transient provider failure instead waits and
//! sends the turn again (see [`retry`](super::retry)): `agent_end` says `willRetry`, then
//! `auto_retry_start`, the wait, and a new `agent_start`; `auto_retry_end` follows the first
//! good reply, or comes once the retries are used up or cancelled.

use super::assemble::{Assembler, CallDeltas};
use super::compact::compact;
use super::retry::{self, Retries, Scheduled};
use super::{Agent, exec, now_ms};
use crate::protocol::{AssistantMessage, CompactionReason, Event, Message, StopReason};
use crate::provider::{self, ErrorKind, ProviderError, ProviderEvent, Request, SessionId};
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(super) async fn run(agent: &Agent, cancel: CancellationToken, prompt: Message) {
    agent.wait_for_mcp(&cancel).await;
    // Pi's pre-prompt check: a context already past the threshold (after an aborted reply, or
    // on a model with a smaller window) is compacted before it is sent again.
    if agent.needs_compaction() {
        let _ = compact(agent, &cancel, CompactionReason::Threshold, None, false).await;
    }
    // Steering queued while idle rides along with the prompt, in the first turn.
    let mut pending = agent.starting_messages(prompt).await;
    pending.extend(agent.take_queued(|q| q.take_steering()));
    let mut overflow_retried = false;
    let mut retries = Retries::new(agent.inner.retry);
    // Good replies so far, across the retries and compactions of this run.
    let mut replies = 0;
    loop {
        agent.emit(Event::AgentStart);
        let outcome = turns(
            agent,
            &cancel,
            std::mem::take(&mut pending),
            &mut retries,
            &mut replies,
        )
        .await;
        let mut schedule_retry = || {
            let error = outcome.error.as_ref()?;
            retries.schedule(agent.state().auto_retry, error)
        };
        let next = if outcome.aborted {
            None
        } else if outcome.overflow() && agent.auto_compaction_enabled() {
            Some(if overflow_retried {
                After::OverflowGaveUp
            } else {
                After::Overflow
            })
        } else if let Some(scheduled) = schedule_retry() {
            Some(After::Retry(scheduled))
        } else if agent.needs_compaction() {
            Some(After::Threshold)
        } else {
            None
        };
        // Retries that end without a good reply are reported after `agent_end`, before any
        // compaction and `agent_settled` (Pi's order).
        let retry_end = match next {
            Some(After::Retry(_)) => None,
            _ => retries.finish().map(|attempt| Event::AutoRetryEnd {
                success: false,
                attempt,
                final_error: Some(if outcome.aborted {
                    RETRY_CANCELLED.to_owned()
                } else {
                    outcome.error_message.clone().unwrap_or_default()
                }),
            }),
        };
        let Some(next) = next else {
            agent.finish_run(outcome.aborted, retry_end);
            return;
        };
        agent.emit_agent_end(matches!(next, After::Overflow | After::Retry(_)));
        if let Some(event) = retry_end {
            agent.emit(event);
        }
        match next {
            After::Retry(scheduled) => {
                let message = outcome.error_message.unwrap_or_default();
                if wait_to_retry(agent, &cancel, &mut retries, scheduled, message).await {
                    // The failed reply has left the context; the turn is sent again as it was.
                    continue;
                }
            }
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
        // Messages queued while the compaction ran (or the retry wait, until `abort_retry`)
        // start the next run at once.
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

/// Pi's `finalError` for retries ended by `abort` or `abort_retry`.
const RETRY_CANCELLED: &str = "Retry cancelled";

/// What happens between a run's `agent_end` and its `agent_settled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Overflow,
    OverflowGaveUp,
    Threshold,
    Retry(Scheduled),
}

struct Outcome {
    aborted: bool,
    /// Why the last reply failed, when the provider said.
    error: Option<ProviderError>,
    /// The failed last reply's `errorMessage`.
    error_message: Option<String>,
}

impl Outcome {
    /// The last reply failed because the context was too long for the model.
    fn overflow(&self) -> bool {
        self.error
            .as_ref()
            .is_some_and(|e| e.kind() == ErrorKind::Overflow)
    }
}

/// Announces `scheduled`, takes the failed reply out of the context and waits. `false` when
/// the wait was cut short, by `abort` (which cancels the run) or by `abort_retry`; the retries
/// are then over and reported so before this returns (what `abort_retry` waits for).
async fn wait_to_retry(
    agent: &Agent,
    cancel: &CancellationToken,
    retries: &mut Retries,
    scheduled: Scheduled,
    error_message: String,
) -> bool {
    let wait = cancel.child_token();
    // Dropped when this returns, which is what `abort_retry` waits for.
    let (_done, done_rx) = watch::channel(());
    agent.state().retry_wait = Some(super::RetryWait {
        cancel: wait.clone(),
        done: done_rx,
    });
    agent.emit(Event::AutoRetryStart {
        attempt: scheduled.attempt,
        max_attempts: scheduled.max_attempts,
        delay_ms: u64::try_from(scheduled.delay.as_millis()).unwrap_or(u64::MAX),
        error_message,
    });
    agent.drop_failed_reply();
    let elapsed = tokio::select! {
        () = tokio::time::sleep(scheduled.delay) => true,
        () = wait.cancelled() => false,
    };
    agent.state().retry_wait = None;
    if elapsed && !cancel.is_cancelled() {
        return true;
    }
    retries.finish();
    agent.emit(Event::AutoRetryEnd {
        success: false,
        attempt: scheduled.attempt,
        final_error: Some(RETRY_CANCELLED.to_owned()),
    });
    false
}

impl Agent {
    /// Takes the failed last reply out of the conversation before it is retried, as Pi 1.6
    /// does: the session file keeps it (with a `context_edit` omitting it), so a resumed session
    /// and `get_messages` see the conversation the retry continues.
    fn drop_failed_reply(&self) {
        let mut state = self.state();
        let Some(last) = state.messages.last().map(Arc::clone) else {
            return;
        };
        if !matches!(&*last, Message::Assistant(a) if a.is_failed()) {
            return;
        }
        state.messages.pop();
        state.usage_from = state.usage_from.min(state.messages.len());
        match state.session.omit_last_message(&last) {
            Ok(Some(entry)) => self.emit(Event::EntryAppended { entry }),
            Ok(None) => {}
            Err(e) => self.report_session_error(&e),
        }
    }
}

/// The turns of one `agent_start`…`agent_end` span. `replies` counts the run's good replies
/// for the turn limit.
async fn turns(
    agent: &Agent,
    cancel: &CancellationToken,
    mut pending: Vec<Message>,
    retries: &mut Retries,
    replies: &mut u32,
) -> Outcome {
    let mut turn_index = 0;
    // The first turn's messages are the prompt's; later ones come off the queue.
    let mut queued = false;
    loop {
        agent.emit(Event::TurnStart);
        if queued && !pending.is_empty() {
            agent.report_queue();
        }
        queued = true;
        for message in pending.drain(..) {
            agent.append(message).await;
        }
        let limit = agent.inner.max_turns.filter(|max| *replies >= *max);
        let (reply, error) = stream_reply(agent, cancel, limit).await;
        if !reply.is_failed() {
            *replies += 1;
        }
        // A good reply ends the retries that led to it (Pi reports that before the tools run).
        if !reply.is_failed()
            && let Some(attempt) = retries.finish()
        {
            agent.emit(Event::AutoRetryEnd {
                success: true,
                attempt,
                final_error: None,
            });
        }
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
        let error_message = reply.error_message.clone();
        agent.emit(Event::TurnEnd {
            turn_index,
            message: Message::Assistant(reply),
            tool_results: results,
        });
        agent.flush_held_custom(&mut agent.state());
        turn_index += 1;
        if matches!(stop, StopReason::Error | StopReason::Aborted) {
            return Outcome {
                aborted: stop == StopReason::Aborted,
                error,
                error_message,
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
                error: None,
                error_message: None,
            };
        }
    }
}

/// Streams one assistant reply, emitting `message_start`, the updates and `message_end`.
/// Every failure ends up in the returned message (`stopReason` error or aborted), never as a
/// lost turn. The provider's error comes back too, for the agent to decide what to do next.
/// With `turn_limit` (the run has had that many replies) no request is sent: the reply is the
/// error that says so, which ends the run as a failed request would, without a retry.
async fn stream_reply(
    agent: &Agent,
    cancel: &CancellationToken,
    turn_limit: Option<u32>,
) -> (AssistantMessage, Option<ProviderError>) {
    let (model, history, tools, system_prompt, thinking, auto_retry, session_id) = {
        let state = agent.state();
        (
            state.model.clone(),
            state.messages.clone(),
            state.tools.clone(),
            state.system_prompt(),
            state.thinking_level,
            state.auto_retry,
            state.session.id().to_owned(),
        )
    };
    let started = std::time::Instant::now();
    let empty = match &model {
        Some(m) => AssistantMessage::pending(m.api.as_str(), &m.provider, &m.id, now_ms()),
        None => AssistantMessage::pending("", "", "", now_ms()),
    };
    let call_deltas = match model.as_ref().map(|m| m.api) {
        Some(crate::protocol::Api::OpenAiCompletions) => CallDeltas::Every,
        _ => CallDeltas::AfterOpening,
    };
    let mut assembler = Assembler::new(empty, call_deltas);
    let mut updates = Vec::new();
    // Whether `message_start` is out: Pi announces a reply when the server begins it, so a
    // request that fails first announces the failed message itself.
    let mut announced = false;

    let mut failure = None;
    let outcome = match &model {
        _ if cancel.is_cancelled() => Err((StopReason::Aborted, ABORTED.to_owned())),
        _ if let Some(n) = turn_limit => Err((StopReason::Error, turn_limit_text(n))),
        None => Err((StopReason::Error, super::CommandError::NoModel.to_string())),
        Some(model) => {
            let inner = &agent.inner;
            match agent.credentials(model).await {
                Err(e) => Err((StopReason::Error, e.to_string())),
                Ok(credentials) => {
                    let history = agent.context_for_call(history).await;
                    let request = Request {
                        model,
                        system_prompt: &system_prompt,
                        messages: &history,
                        tools: &agent.tool_specs(&tools),
                        max_tokens: None,
                        thinking: Some(thinking),
                        session_id: Some(SessionId {
                            id: &session_id,
                            cache: true,
                        }),
                    };
                    let result = provider::http::stream_paced(
                        &agent.transport(
                            credentials,
                            agent.extensions().and_then(|e| e.provider_hooks()),
                        ),
                        &request,
                        cancel,
                        |event| {
                            let start = matches!(event, ProviderEvent::Start { .. });
                            if !announced && !start {
                                announced = announce(agent, assembler.message());
                            }
                            assembler.push(event, &mut updates);
                            if !announced && start {
                                announced = announce(agent, assembler.message());
                            }
                            for update in updates.drain(..) {
                                agent.emit(Event::MessageUpdate {
                                    assistant_message_event: update,
                                    usage: assembler.usage().clone(),
                                });
                            }
                        },
                        || inner.sink.ready(),
                    )
                    .await;
                    match result {
                        Ok(facts) => Ok(facts),
                        Err(_) if cancel.is_cancelled() => {
                            Err((StopReason::Aborted, ABORTED.to_owned()))
                        }
                        Err(e) => {
                            let text = retry::error_text(&inner.retry, auto_retry, &e);
                            failure = Some(e);
                            Err((StopReason::Error, text))
                        }
                    }
                }
            }
        }
    };
    let usage = assembler.usage().clone();
    let mut message = match outcome {
        Ok(facts) => {
            let mut message = assembler.finish(&mut updates);
            message.response_id = facts.response_id;
            message.raw_stop_reason = facts.raw_stop_reason;
            message
        }
        Err((reason, error)) => assembler.fail(reason, error, &mut updates),
    };
    if model.is_some() {
        message.thinking_level = Some(thinking.as_str().to_owned());
        message.duration_ms = Some(started.elapsed().as_millis().try_into().unwrap_or(u64::MAX));
    }
    if !announced {
        announce(agent, &message);
    }
    for update in updates {
        agent.emit(Event::MessageUpdate {
            assistant_message_event: update,
            usage: usage.clone(),
        });
    }
    // A message_end hook's replacement is the reply from here on, its tool calls included.
    if let Some(Message::Assistant(replaced)) =
        agent.append(Message::Assistant(message.clone())).await
    {
        message = replaced;
    }
    (message, failure)
}

/// Emits the reply's `message_start`; always `true`, for the caller's flag.
fn announce(agent: &Agent, message: &AssistantMessage) -> bool {
    agent.emit(Event::MessageStart {
        message: Message::Assistant(message.clone()),
    });
    true
}

const ABORTED: &str = "Request was aborted";

fn turn_limit_text(n: u32) -> String {
    let replies = if n == 1 { "reply" } else { "replies" };
    format!(
        "Stopped: the turn limit was reached after {n} {replies} (--max-turns or the maxTurns \
         setting); the model wanted another turn"
    )
}
