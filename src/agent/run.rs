//! One run: from `agent_start` to `agent_settled`. Turns repeat while the model calls tools or
//! queued messages wait; steering is delivered after a tool batch, follow-ups when the agent
//! would otherwise stop, both inside the same run (Pi's semantics).

use super::assemble::Assembler;
use super::{Agent, exec, now_ms};
use crate::protocol::{AssistantMessage, Event, Message, StopReason, Usage, UserMessage};
use crate::provider::{self, Request};
use tokio_util::sync::CancellationToken;

pub(super) async fn run(agent: &Agent, cancel: CancellationToken, prompt: UserMessage) {
    agent.emit(Event::AgentStart);
    // Steering queued while idle rides along with the prompt, in the first turn.
    let mut pending = vec![prompt];
    pending.extend(agent.take_queued(|q| q.take_steering()));
    let mut turn_index = 0;
    let aborted = loop {
        agent.emit(Event::TurnStart);
        for message in pending.drain(..) {
            agent.append(Message::User(message));
        }
        let reply = stream_reply(agent, &cancel).await;
        let calls: Vec<_> = if reply.is_failed() {
            Vec::new()
        } else {
            reply
                .tool_calls()
                .map(|(id, name, args)| (id.to_owned(), name.to_owned(), args.clone()))
                .collect()
        };
        let results = exec::run_tools(agent, &cancel, &calls).await;
        let stop = reply.stop_reason;
        agent.emit(Event::TurnEnd {
            turn_index,
            message: Message::Assistant(reply),
            tool_results: results,
        });
        turn_index += 1;
        if matches!(stop, StopReason::Error | StopReason::Aborted) {
            break stop == StopReason::Aborted;
        }
        pending = agent.take_queued(|q| q.take_steering());
        if !pending.is_empty() || !calls.is_empty() {
            continue;
        }
        pending = agent.take_queued(|q| q.take_follow_up());
        if pending.is_empty() {
            break false;
        }
    };
    agent.finish_run(aborted);
}

/// Streams one assistant reply, emitting `message_start`, the updates and `message_end`.
/// Every failure ends up in the returned message (`stopReason` error or aborted), never as a
/// lost turn.
async fn stream_reply(agent: &Agent, cancel: &CancellationToken) -> AssistantMessage {
    let (model, history, tools) = {
        let state = agent.state();
        (
            state.model.clone(),
            state.messages.clone(),
            state.tools.clone(),
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

    let outcome = match &model {
        _ if cancel.is_cancelled() => Err((StopReason::Aborted, ABORTED.to_owned())),
        None => Err((StopReason::Error, super::no_model_error())),
        Some(model) => {
            let inner = &agent.inner;
            match inner.registry.credentials(model).await {
                Err(e) => Err((StopReason::Error, e)),
                Ok((api_key, headers)) => {
                    let messages = provider::prepare::request_messages(&history, model);
                    let request = Request {
                        model,
                        system_prompt: &tools.system_prompt,
                        messages: &messages,
                        tools: &tools.specs,
                        api_key,
                        headers,
                        max_tokens: None,
                    };
                    let result = provider::http::stream(
                        &inner.client,
                        &request,
                        cancel,
                        inner.idle_timeout,
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
                        Err(e) => Err((StopReason::Error, e.to_string())),
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
    message
}

const ABORTED: &str = "Request was aborted";
