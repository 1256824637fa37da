//! Running one assistant message's tool calls: prepared in call order (a flagged bash command
//! asks for permission here), run concurrently, and finalised in call order (a call that
//! finishes early, or is answered without running, waits for the ones before it). Pi ends
//! each call as it finishes; nova keeps every end in call order. As in Pi, the result messages
//! follow once every call of the batch has ended.
//!
//! The work one reply can cause is bounded: only the first [`MAX_CALLS_PER_REPLY`] calls run
//! (every later one still gets its result, an error saying why, so the conversation stays valid
//! for every provider), and at most [`MAX_CONCURRENT_TOOLS`] built-in tools execute at once.
//! The loops over the calls are paced ([`crate::pace`]): a reply with a hundred thousand calls
//! must not keep `get_state` waiting.

use super::Hooked;
use super::permission::{self, Permission};
use super::{Agent, now_ms};
use crate::gate::classify::Verdict;
use crate::gate::{Request, Source};
use crate::pace::Pacer;
use crate::protocol::{Event, Message, ToolDetails, ToolResultMessage, ToolResultPayload};
use crate::tools::{Tool, ToolContext, ToolOutput};
use serde_json::Value;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Pi's text for calls dropped because the user steered before they ran.
pub const SKIPPED: &str = "Skipped due to queued user message.";
const ABORTED: &str = "Command aborted";

/// Calls of one reply that run. Models batch a handful of calls, a few dozen at most when they
/// fan out reads; 128 leaves room for that while bounding a reply's work (and its results, at
/// most 50 KB each, to about 6 MB) however many calls the model writes.
pub const MAX_CALLS_PER_REPLY: usize = 128;
/// Built-in tools executing at once (bash commands, searches, file reads); the rest of a batch
/// waits its turn, in call order. Enough to overlap slow commands on any machine, few enough
/// that one reply cannot start hundreds of processes.
pub const MAX_CONCURRENT_TOOLS: usize = 8;

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
    let (skip, tools, editor, terminal) = {
        let state = agent.state();
        (
            state.queue.has_steering(),
            state.tools.clone(),
            state.editor.clone(),
            state.terminal.clone(),
        )
    };
    let batch = Batch {
        tools,
        editor,
        terminal,
        running: Arc::new(Semaphore::new(MAX_CONCURRENT_TOOLS)),
    };
    let mut pacer = Pacer::default();
    // One slot per call: answered at once (skipped, over the cap, unknown, denied) or running.
    // All are finalised in call order below, so ends and results never come out of order.
    let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
    for (index, call) in calls.iter().enumerate() {
        pacer.tick(|| agent.inner.sink.ready()).await;
        let (id, name, args) = call;
        agent.emit(Event::ToolExecutionStart {
            tool_call_id: id.clone(),
            tool_name: name.clone(),
            args: args.clone(),
        });
        let slot = if skip {
            Slot::Done(ToolOutput::error(SKIPPED))
        } else if index >= MAX_CALLS_PER_REPLY {
            Slot::Done(ToolOutput::error(over_the_cap(index, calls.len())))
        } else {
            match hooked(agent, cancel, call).await {
                Err(text) => Slot::Done(ToolOutput::error(text)),
                Ok(Cow::Borrowed(call)) => prepare(agent, cancel, call, &batch),
                Ok(Cow::Owned(call)) => prepare(agent, cancel, &call, &batch),
            }
        };
        slots.push(slot);
    }
    let mut ended = Vec::with_capacity(calls.len());
    for (call, slot) in calls.iter().zip(slots) {
        pacer.tick(|| agent.inner.sink.ready()).await;
        let mut ran = match slot {
            Slot::Done(output) => Ran { output, took: None },
            Slot::Running(handle) => handle.await.unwrap_or_else(|e| Ran {
                output: ToolOutput::error(format!("Tool {} failed unexpectedly: {e}", call.1)),
                took: None,
            }),
        };
        if ran.took.is_some() {
            review(agent, cancel, call, &mut ran.output).await;
        }
        ended.push(end(agent, call, ran));
    }
    let mut results = Vec::with_capacity(ended.len());
    for message in ended {
        pacer.tick(|| agent.inner.sink.ready()).await;
        let replaced = agent.append(message.clone()).await;
        results.push(replaced.unwrap_or(message));
    }
    results
}

/// What every call of one batch shares.
struct Batch {
    tools: super::toolset::Tools,
    editor: Option<Arc<dyn crate::tools::EditorFiles>>,
    terminal: Option<Arc<dyn crate::tools::EditorTerminal>>,
    running: Arc<Semaphore>,
}

/// The call as the extensions' `tool_call` hooks leave it (they run first, as in Pi, so a call
/// they block never reaches the gate), or the error result of a blocked call.
async fn hooked<'c>(
    agent: &Agent,
    cancel: &CancellationToken,
    call: &'c Call,
) -> Result<Cow<'c, Call>, String> {
    let Some(hooks) = agent.extensions().and_then(|e| e.before_tool_call(call)) else {
        return Ok(Cow::Borrowed(call));
    };
    tokio::select! {
        hooked = hooks => match hooked {
            Hooked::Run(args) if args == call.2 => Ok(Cow::Borrowed(call)),
            Hooked::Run(args) => Ok(Cow::Owned((call.0.clone(), call.1.clone(), args))),
            Hooked::Block(reason) => Err(reason),
        },
        () = cancel.cancelled() => Err(ABORTED.to_owned()),
    }
}

/// The extensions' `tool_result` hooks on a call that ran, before its end is announced (as
/// in Pi); an abort keeps the result as it is.
async fn review(agent: &Agent, cancel: &CancellationToken, call: &Call, output: &mut ToolOutput) {
    let Some(hooks) = agent
        .extensions()
        .and_then(|e| e.after_tool_call(call, output))
    else {
        return;
    };
    tokio::select! {
        reviewed = hooks => reviewed.apply(output),
        () = cancel.cancelled() => {}
    }
}

/// A call's slot: answered at once (unknown, denied) or running.
fn prepare(agent: &Agent, cancel: &CancellationToken, call: &Call, batch: &Batch) -> Slot {
    let (id, name, args) = call;
    let Batch {
        tools,
        editor,
        terminal,
        running,
    } = batch;
    // An extension's tool goes first: one with a built-in's name replaces it, as in Pi.
    if agent.extensions().is_some_and(|e| e.has_tool(name)) {
        return if tools.offers_extension(name) {
            extension_slot(agent, cancel, call)
        } else {
            Slot::Done(ToolOutput::error(format!("Tool {name} not found")))
        };
    }
    let tool = Tool::from_name(name).filter(|t| tools.active.contains(t));
    let mut write_target = None;
    match tool {
        None => tools
            .offers_mcp(name)
            .then(|| super::mcp::prepare(agent, cancel, call))
            .flatten()
            .unwrap_or_else(|| Slot::Done(ToolOutput::error(format!("Tool {name} not found")))),
        Some(tool) => match gate(agent, tool, call, &mut write_target) {
            Permission::Refused(text) => Slot::Done(ToolOutput::error(text)),
            gate => {
                let approval = match gate {
                    Permission::Pending(answer) => Some(answer),
                    _ => None,
                };
                let ctx = ToolContext {
                    cwd: agent.inner.cwd.clone(),
                    cancel: cancel.child_token(),
                    on_update: update_sink(agent, call),
                    sandbox: agent.inner.sandbox.clone(),
                    outputs: agent.inner.outputs.clone(),
                    write_target: write_target.take(),
                    editor: editor.clone(),
                    terminal: terminal.clone(),
                    call_id: id.clone(),
                    env: agent.session_env(),
                };
                Slot::Running(tokio::spawn(run_approved(
                    tool,
                    args.clone(),
                    ctx,
                    approval,
                    running.clone(),
                )))
            }
        },
    }
}

/// An extension tool's call: through the gate like an MCP call, then run in the extension
/// host. One that replaces a built-in (an extension's `bash`) is gated as an extension tool,
/// not by the built-in's rules: those judge what nova's own tool would do in its sandbox, while
/// the extension's code runs with the user's rights and may do anything with its input, so
/// applying them would promise a protection that does not hold.
fn extension_slot(agent: &Agent, cancel: &CancellationToken, call: &Call) -> Slot {
    let Some(extensions) = agent.extensions() else {
        return Slot::Done(ToolOutput::error(format!("Tool {} not found", call.1)));
    };
    let (id, name, args) = call;
    let request = Request::Tool {
        source: Source::Extension,
        name,
        args: &args.to_string(),
        rules: Verdict::Run,
    };
    let approval = match agent.gate(&request, id, name, &format!("{name} was not called")) {
        Permission::Granted => None,
        Permission::Refused(text) => return Slot::Done(ToolOutput::error(text)),
        Permission::Pending(answer) => Some(answer),
    };
    let cancel = cancel.child_token();
    let work = extensions.call_tool(call.clone(), update_sink(agent, call), cancel.clone());
    Slot::Running(tokio::spawn(async move {
        if let Some(answer) = approval
            && let Err(refused) = permission::answered(answer, &cancel, ABORTED).await
        {
            return Ran::not_run(refused);
        }
        Ran::timed(work).await
    }))
}

/// The result of a call past [`MAX_CALLS_PER_REPLY`]: what happened and what to do instead.
fn over_the_cap(index: usize, calls: usize) -> String {
    format!(
        "Not run: this reply made {calls} tool calls and nova runs at most \
         {MAX_CALLS_PER_REPLY} per reply (this was call {}). Make the remaining calls in a \
         later reply.",
        index + 1
    )
}

#[allow(
    clippy::large_enum_variant,
    reason = "a slot lives only while its batch runs, and most slots of a long batch are Done"
)]
pub(super) enum Slot {
    Done(ToolOutput),
    Running(JoinHandle<Ran>),
}

/// A call's output, and how long the tool ran (`None` when it never started).
pub(super) struct Ran {
    pub output: ToolOutput,
    pub took: Option<Duration>,
}

impl Ran {
    /// Runs `work` and times it.
    pub async fn timed(work: impl Future<Output = ToolOutput>) -> Ran {
        let started = Instant::now();
        let output = work.await;
        Ran {
            output,
            took: Some(started.elapsed()),
        }
    }

    pub fn not_run(output: ToolOutput) -> Ran {
        Ran { output, took: None }
    }
}

/// Puts a built-in tool's call through the gate; a call that asks gets its
/// `permission_request` right after its `tool_execution_start`. The path a write was checked as
/// goes to `write_target`: the tool writes that path and no other, through nova's own
/// symlink-refusing walk ([`crate::files::safe_open`]), so neither a directory swapped for a
/// symlink meanwhile (by a bash call of the same reply) nor a dangling symlink planted before
/// can redirect it.
fn gate(agent: &Agent, tool: Tool, call: &Call, write_target: &mut Option<PathBuf>) -> Permission {
    let (id, name, args) = call;
    let text = |key: &str| as_text(&args[key]);
    let (command, target);
    let request = match tool {
        Tool::Bash => match text("command") {
            Some(c) => {
                command = c;
                Request::Bash {
                    command: &command,
                    unsandboxed: args["sandbox"] == Value::Bool(false),
                }
            }
            // Fails validation: the tool never runs.
            None => return Permission::Granted,
        },
        Tool::Write | Tool::Edit => match text("path") {
            Some(p) => {
                let abs = crate::files::path::resolve(&p, &agent.inner.cwd);
                target = crate::sandbox::resolve_for_write(&abs);
                *write_target = Some(target.clone());
                Request::Write { target: &target }
            }
            None => return Permission::Granted,
        },
        Tool::Read | Tool::Grep | Tool::Find | Tool::Ls | Tool::ViewImage | Tool::Zoom => {
            Request::Read
        }
    };
    agent.gate(&request, id, name, "the command was not run")
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

/// Waits for the client's answer (when one is needed) and for a free place among the tools
/// running, then runs the tool.
async fn run_approved(
    tool: Tool,
    args: Value,
    ctx: ToolContext,
    approval: Option<oneshot::Receiver<bool>>,
    running: Arc<Semaphore>,
) -> Ran {
    if let Some(answer) = approval
        && let Err(refused) = permission::answered(answer, &ctx.cancel, ABORTED).await
    {
        return Ran::not_run(refused);
    }
    // The semaphore is fair: calls get their place in the order they were spawned, call order.
    let place = tokio::select! {
        place = running.acquire_owned() => place.ok(),
        () = ctx.cancel.cancelled() => None,
    };
    // Cancelled while waiting: a file tool sees the token itself and answers with its own abort
    // text at once; a command is not started at all.
    if place.is_none() && tool == Tool::Bash {
        return Ran::not_run(ToolOutput::error(ABORTED));
    }
    Ran::timed(tool.execute(args, ctx)).await
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

/// Emits the end of one call and returns its result message, not yet recorded.
fn end(agent: &Agent, call: &Call, ran: Ran) -> Message {
    let (id, name, _) = call;
    let Ran { output, took } = ran;
    let duration_ms = took.map(|d| d.as_millis().try_into().unwrap_or(u64::MAX));
    // As Pi 1.6 has it: a failed call without details of its own carries empty ones.
    let details = output
        .details
        .or_else(|| output.is_error.then(ToolDetails::none));
    agent.emit(Event::ToolExecutionEnd {
        tool_call_id: id.clone(),
        tool_name: name.clone(),
        result: ToolResultPayload {
            content: output.content.clone(),
            details: details.clone(),
            structured_content: output.structured,
        },
        is_error: output.is_error,
        duration_ms,
    });
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.clone(),
        tool_name: name.clone(),
        content: output.content,
        details,
        is_error: output.is_error,
        duration_ms,
        timestamp: now_ms(),
    })
}
