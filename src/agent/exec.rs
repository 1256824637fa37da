//! Running one assistant message's tool calls: prepared in call order, run concurrently, and
//! finalised in call order (a call that finishes early waits for the ones before it).

use super::{Agent, now_ms};
use crate::protocol::{Event, Message, ToolResultMessage, ToolResultPayload};
use crate::tools::{Tool, ToolContext, ToolOutput};
use serde_json::Value;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Pi's text for calls dropped because the user steered before they ran.
pub const SKIPPED: &str = "Skipped due to queued user message.";

type Call = (String, String, Value);

/// Runs the calls and returns their result messages in call order.
pub(super) async fn run_tools(
    agent: &Agent,
    cancel: &CancellationToken,
    calls: &[Call],
) -> Vec<Message> {
    if calls.is_empty() {
        return Vec::new();
    }
    let skip = agent.state().queue.has_steering();
    let mut running: Vec<(&Call, JoinHandle<ToolOutput>)> = Vec::new();
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        let (id, name, args) = call;
        agent.emit(Event::ToolExecutionStart {
            tool_call_id: id.clone(),
            tool_name: name.clone(),
            args: args.clone(),
        });
        let tool = Tool::from_name(name).filter(|t| agent.inner.tools.contains(t));
        match tool {
            _ if skip => results.push(finish(agent, call, ToolOutput::error(SKIPPED))),
            None => results.push(finish(
                agent,
                call,
                ToolOutput::error(format!("Tool {name} not found")),
            )),
            Some(tool) => {
                let ctx = ToolContext {
                    cwd: agent.inner.cwd.clone(),
                    cancel: cancel.child_token(),
                    on_update: update_sink(agent, call),
                };
                running.push((call, tokio::spawn(tool.execute(args.clone(), ctx))));
            }
        }
    }
    for (call, handle) in running {
        let output = handle.await.unwrap_or_else(|e| {
            ToolOutput::error(format!("Tool {} failed unexpectedly: {e}", call.1))
        });
        results.push(finish(agent, call, output));
    }
    results
}

fn update_sink(agent: &Agent, call: &Call) -> crate::tools::UpdateFn {
    let out = agent.inner.out.clone();
    let (id, name, args) = call.clone();
    Arc::new(move |partial: ToolResultPayload| {
        out.emit(Event::ToolExecutionUpdate {
            tool_call_id: id.clone(),
            tool_name: name.clone(),
            args: args.clone(),
            partial_result: partial,
        });
    })
}

/// Emits the end of one call and records its result message.
fn finish(agent: &Agent, call: &Call, output: ToolOutput) -> Message {
    let (id, name, _) = call;
    agent.emit(Event::ToolExecutionEnd {
        tool_call_id: id.clone(),
        tool_name: name.clone(),
        result: ToolResultPayload {
            content: output.content.clone(),
            details: output.details.clone(),
        },
        is_error: output.is_error,
    });
    let message = Message::ToolResult(ToolResultMessage {
        tool_call_id: id.clone(),
        tool_name: name.clone(),
        content: output.content,
        details: Some(
            output
                .details
                .unwrap_or_else(|| Value::Object(Default::default())),
        ),
        is_error: output.is_error,
        timestamp: now_ms(),
    });
    agent.append(message.clone());
    message
}
