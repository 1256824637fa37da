//! Running one assistant message's tool calls: prepared in call order (a flagged bash command
//! asks for permission here), run concurrently, and finalised in call order (a call that
//! finishes early, or is answered without running, waits for the ones before it). Pi ends
//! unknown and blocked calls at once; nova keeps every end in call order, as its contract says.

use super::{Agent, now_ms, permission};
use crate::protocol::{Event, Message, ToolResultMessage, ToolResultPayload};
use crate::tools::permission::{Verdict, classify};
use crate::tools::{Tool, ToolContext, ToolOutput};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Pi's text for calls dropped because the user steered before they ran.
pub const SKIPPED: &str = "Skipped due to queued user message.";
const DENIED: &str = "The user denied permission to run this command, so it was not run.";
const ABORTED: &str = "Command aborted";

pub(super) type Call = (String, String, Value);

/// Runs the calls and returns their result messages in call order.
pub(super) async fn run_tools(
    agent: &Agent,
    cancel: &CancellationToken,
    calls: &[Call],
) -> Vec<Message> {
    if calls.is_empty() {
        return Vec::new();
    }
    let (skip, active) = {
        let state = agent.state();
        (state.queue.has_steering(), state.tools.active.clone())
    };
    // One slot per call: answered at once (skipped, unknown, denied) or running. All are
    // finalised in call order below, so ends and results never come out of order.
    let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
    for call in calls {
        let (id, name, args) = call;
        agent.emit(Event::ToolExecutionStart {
            tool_call_id: id.clone(),
            tool_name: name.clone(),
            args: args.clone(),
        });
        let tool = Tool::from_name(name).filter(|t| active.contains(t));
        let mut write_target = None;
        let slot = match tool {
            _ if skip => Slot::Done(ToolOutput::error(SKIPPED)),
            None => super::mcp::prepare(agent, cancel, call)
                .unwrap_or_else(|| Slot::Done(ToolOutput::error(format!("Tool {name} not found")))),
            Some(tool) => match gate(agent, tool, call, &mut write_target) {
                Gate::Deny(text) => Slot::Done(ToolOutput::error(text)),
                gate => {
                    let approval = match gate {
                        Gate::Ask(answer) => Some(answer),
                        _ => None,
                    };
                    let ctx = ToolContext {
                        cwd: agent.inner.cwd.clone(),
                        cancel: cancel.child_token(),
                        on_update: update_sink(agent, call),
                        sandbox: agent.inner.sandbox.clone(),
                        write_target: write_target.take(),
                    };
                    Slot::Running(tokio::spawn(run_approved(
                        tool,
                        args.clone(),
                        ctx,
                        approval,
                    )))
                }
            },
        };
        slots.push(slot);
    }
    let mut results = Vec::with_capacity(calls.len());
    for (call, slot) in calls.iter().zip(slots) {
        let output = match slot {
            Slot::Done(output) => output,
            Slot::Running(handle) => handle.await.unwrap_or_else(|e| {
                ToolOutput::error(format!("Tool {} failed unexpectedly: {e}", call.1))
            }),
        };
        results.push(finish(agent, call, output));
    }
    results
}

pub(super) enum Slot {
    Done(ToolOutput),
    Running(JoinHandle<ToolOutput>),
}

enum Gate {
    Run,
    Ask(oneshot::Receiver<bool>),
    Deny(String),
}

/// Classifies a bash call's command, and checks a `write`/`edit` path against the sandbox; a
/// flagged call gets a `permission_request` right after its `tool_execution_start`. The path a
/// write was checked as goes to `write_target`: the tool writes that path and no other, so a
/// directory swapped for a symlink meanwhile (by a bash call of the same reply) cannot redirect it.
fn gate(agent: &Agent, tool: Tool, call: &Call, write_target: &mut Option<PathBuf>) -> Gate {
    if matches!(tool, Tool::Write | Tool::Edit) {
        let refusal = as_text(&call.2["path"]).and_then(|p| {
            let abs = crate::tools::path::resolve(&p, &agent.inner.cwd);
            let (target, refusal) = agent.inner.sandbox.check_write(&abs);
            *write_target = Some(target);
            refusal
        });
        return match refusal {
            Some(r) => ask(agent, call, r.path.display().to_string(), r.reason),
            None => Gate::Run,
        };
    }
    if tool != Tool::Bash {
        return Gate::Run;
    }
    let Some(command) = as_text(&call.2["command"]) else {
        return Gate::Run;
    };
    let unsandboxed = call.2["sandbox"] == Value::Bool(false);
    let sandbox = agent.inner.sandbox.bash_reason(unsandboxed);
    match (classify(&command, &agent.inner.permission_rules), sandbox) {
        (Verdict::Deny { rule }, _) => Gate::Deny(format!(
            "Blocked by the permissions.bash deny rule `{rule}`; the command was not run."
        )),
        (Verdict::Run, None) => Gate::Run,
        (Verdict::Run, Some(reason)) | (Verdict::Ask { reason }, None) => {
            ask(agent, call, command, reason)
        }
        (Verdict::Ask { reason }, Some(sandbox)) => {
            ask(agent, call, command, format!("{reason}; {sandbox}"))
        }
    }
}

/// A string argument as the tool will see it: validation turns numbers and booleans into
/// strings (anything else fails validation, so the tool never runs).
fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Without a client to answer (the one-shot modes), the unattended policy decides at once.
fn ask(agent: &Agent, call: &Call, command: String, reason: String) -> Gate {
    let mut state = agent.state();
    if let Some(policy) = state.unattended.clone() {
        drop(state);
        return if policy.decide(&command, &reason) {
            Gate::Run
        } else {
            Gate::Deny(permission::refusal(&reason))
        };
    }
    let (request_id, answer) = state.permissions.open();
    agent.emit(Event::PermissionRequest {
        request_id,
        tool_name: call.1.clone(),
        command,
        reason,
    });
    Gate::Ask(answer)
}

/// Waits for the client's answer (when one is needed), then runs the tool.
async fn run_approved(
    tool: Tool,
    args: Value,
    ctx: ToolContext,
    approval: Option<oneshot::Receiver<bool>>,
) -> ToolOutput {
    if let Some(answer) = approval {
        let approved = tokio::select! {
            answer = answer => answer.unwrap_or(false),
            () = ctx.cancel.cancelled() => false,
        };
        if ctx.cancel.is_cancelled() {
            return ToolOutput::error(ABORTED);
        }
        if !approved {
            return ToolOutput::error(DENIED);
        }
    }
    tool.execute(args, ctx).await
}

fn update_sink(agent: &Agent, call: &Call) -> crate::tools::UpdateFn {
    let sink = agent.inner.sink.clone();
    let (id, name, args) = call.clone();
    Arc::new(move |partial: ToolResultPayload| {
        sink.emit(Event::ToolExecutionUpdate {
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
