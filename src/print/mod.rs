//! The one-shot front end, a sibling of `rpc`: `nova -p "…"` runs the prompts one after
//! another and prints the final answer; `nova --mode json "…"` writes the session header and
//! then every event as a JSON line (Pi's JSON mode). Then nova exits.
//!
//! No one is there to answer a permission request, so a flagged bash command is refused (the
//! model gets an error result and can adapt) unless `--approve-flagged` says otherwise; either
//! way stderr says so. The first SIGINT or SIGTERM aborts the run, which keeps the partial reply
//! in the session, and nova exits 1; a second one ends nova at once.

mod input;
mod output;

pub use input::{Prompt, piped_stdin, prompts};
pub use output::{Format, Output};

use crate::agent::{Agent, FlaggedCommand, Prompted, Unattended};
use crate::protocol::{AssistantMessage, ContentBlock, Message, StopReason};
use output::note;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::signal::unix::{SignalKind, signal};

/// How a one-shot run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    /// A reply failed, was aborted or was cut off, or a prompt could not start; stderr says why.
    Failed,
}

/// Runs `prompts` in turn, stopping at the first that fails, then prints the final answer (in
/// print mode). `Err` only when the signal handlers cannot be installed.
pub async fn run(
    agent: &Agent,
    output: &Output,
    prompts: Vec<Prompt>,
    approve_flagged: bool,
) -> std::io::Result<Outcome> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for (signal, exit_code) in [(SIGINT, 130), (SIGTERM, 143)] {
        // Registered first, so it sees the flag as the previous signal left it: the second
        // signal exits even while the runtime thread is stuck writing to a stalled reader.
        signal_hook::flag::register_conditional_shutdown(signal, exit_code, interrupted.clone())?;
        signal_hook::flag::register(signal, interrupted.clone())?;
    }
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    agent.set_unattended(unattended(approve_flagged));
    for prompt in prompts {
        if interrupted.load(Ordering::Relaxed) {
            return Ok(Outcome::Failed);
        }
        let run = match agent.prompt(prompt.text, prompt.images, None) {
            Ok(Prompted::Started(run)) => run,
            // Only a busy agent queues, and each run here ends before the next prompt.
            Ok(Prompted::Queued) => continue,
            Err(e) => {
                note(&e.to_string());
                return Ok(Outcome::Failed);
            }
        };
        let finished = run.run();
        tokio::pin!(finished);
        loop {
            tokio::select! {
                () = &mut finished => break,
                // `abort` cancels at once; the future it returns only waits for the run's end,
                // which `finished` reports.
                _ = interrupt.recv() => { let _run_ends_soon = agent.abort(); }
                _ = terminate.recv() => { let _run_ends_soon = agent.abort(); }
            }
        }
        let Some(reply) = last_reply(agent) else {
            continue;
        };
        match reply.stop_reason {
            StopReason::Error | StopReason::Aborted => {
                note(reply.error_message.as_deref().unwrap_or("the run failed"));
                return Ok(Outcome::Failed);
            }
            StopReason::Length => {
                answer(output, &reply);
                note("the reply was cut off: the model reached its output token limit");
                return Ok(Outcome::Failed);
            }
            // A stored reply has always ended; a pending one is nothing to report.
            StopReason::Pending | StopReason::Stop | StopReason::ToolUse => {}
        }
    }
    if interrupted.load(Ordering::Relaxed) {
        return Ok(Outcome::Failed);
    }
    if let Some(reply) = last_reply(agent) {
        answer(output, &reply);
    }
    Ok(Outcome::Succeeded)
}

/// The conversation's last message, when it is the model's.
fn last_reply(agent: &Agent) -> Option<AssistantMessage> {
    match agent.messages().last().map(|m| &**m) {
        Some(Message::Assistant(reply)) => Some(reply.clone()),
        _ => None,
    }
}

/// Each text block of the reply on its own line, as Pi prints it.
fn answer(output: &Output, reply: &AssistantMessage) {
    for block in &reply.content {
        if let ContentBlock::Text { text, .. } = block {
            output.answer(text);
        }
    }
}

fn unattended(approve_flagged: bool) -> Unattended {
    Unattended {
        approve_flagged,
        report: Arc::new(|flagged: &FlaggedCommand| {
            let FlaggedCommand {
                command, reason, ..
            } = flagged;
            if flagged.unchecked {
                note(&format!(
                    "refused a command ({reason}): {command}\n      \
                     (deny rules win over --approve-flagged and allow rules; spell its program \
                     names out)"
                ));
            } else if flagged.approved {
                note(&format!(
                    "running a flagged command ({reason}), as --approve-flagged allows: {command}"
                ));
            } else {
                note(&format!(
                    "refused a flagged command ({reason}): {command}\n      \
                     (no one can be asked here; allow it with --approve-flagged or a \
                     permissions.bash allow rule)"
                ));
            }
        }),
    }
}
