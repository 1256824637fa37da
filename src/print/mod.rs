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
pub use output::{Format, Line, Output};

use crate::agent::{Agent, FlaggedCommand, Prompted, Runtime, Unattended};
use crate::frontend::{self, Second, Signals, note};
use crate::protocol::{AssistantMessage, ContentBlock, Message, StopReason};
use std::process::ExitCode;
use std::sync::Arc;

/// What the command line asks of a one-shot run.
#[derive(Debug)]
pub struct Options {
    pub format: Format,
    pub verbose: bool,
    pub approve_flagged: bool,
    /// Prompt texts and `@path` attachments, as given.
    pub args: Vec<String>,
    /// What was piped in, which goes before the first prompt.
    pub stdin: Option<String>,
}

/// How a one-shot run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    /// A reply failed, was aborted or was cut off, or a prompt could not start; stderr says why.
    Failed,
}

/// Opens the session the command line describes, runs its prompts and exits: 0 when every
/// reply succeeded, 1 when one did not, 2 for a usage error.
pub async fn run(runtime: Runtime, options: Options) -> ExitCode {
    let mode = match options.format {
        Format::Text => crate::exthost::Mode::Print,
        Format::Json => crate::exthost::Mode::Json,
    };
    let prepared = match frontend::open_cli_session(&runtime, mode).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    let prompts = match prompts(&options.args, options.stdin, prepared.cwd()) {
        Ok(p) => p,
        Err(e) => return frontend::usage_error(&e),
    };
    let (out, writer) = frontend::writer::spawn(std::io::stdout());
    // The first signal aborts the run and releases a stream waiting for stdout; the second
    // exits even while the writer is stuck on a reader that stopped reading.
    let signals = match Signals::install(out.shutdown_flag(), Second::Exits) {
        Ok(s) => s,
        Err(e) => return frontend::fatal(&format!("cannot install signal handlers: {e}")),
    };
    let output = Arc::new(Output::new(options.format, options.verbose, out.clone()));
    output.header(prepared.header());
    let extensions = frontend::extension_spec(&prepared, mode);
    let (live, subscription) = runtime.live().open(prepared, output.clone());
    let agent = live.agent().clone();
    agent.set_unattended(unattended(options.approve_flagged));
    let host = match extensions {
        Some(spec) => match frontend::start_extensions(spec, &live).await {
            Ok(host) => Some(host),
            Err(code) => {
                runtime.live().close_all().await;
                frontend::close_writer(&out, writer).await;
                return code;
            }
        },
        None => None,
    };
    let outcome = run_prompts(&agent, &output, prompts, signals).await;
    // The extensions hear of the end (session_shutdown) before their host stops.
    runtime.live().close_all().await;
    drop(host);
    drop(subscription);
    frontend::close_writer(&out, writer).await;
    match outcome {
        Outcome::Succeeded => ExitCode::SUCCESS,
        Outcome::Failed => ExitCode::FAILURE,
    }
}

/// Runs `prompts` in turn, stopping at the first that fails, then prints the final answer (in
/// print mode).
async fn run_prompts(
    agent: &Agent,
    output: &Output,
    prompts: Vec<Prompt>,
    mut signals: Signals,
) -> Outcome {
    for prompt in prompts {
        if signals.received() {
            return Outcome::Failed;
        }
        let run = match agent.prompt(prompt.text, prompt.images, None) {
            Ok(Prompted::Started(run)) => run,
            // Only a busy agent queues, and each run here ends before the next prompt.
            Ok(Prompted::Queued) => continue,
            Err(e) => {
                note(&e.to_string());
                return Outcome::Failed;
            }
        };
        let finished = run.run();
        tokio::pin!(finished);
        loop {
            tokio::select! {
                () = &mut finished => break,
                // `abort` cancels at once; the future it returns only waits for the run's end,
                // which `finished` reports.
                () = signals.recv() => { let _run_ends_soon = agent.abort(); }
            }
        }
        let Some(reply) = last_reply(agent) else {
            continue;
        };
        match reply.stop_reason {
            StopReason::Error | StopReason::Aborted => {
                note(reply.error_message.as_deref().unwrap_or("the run failed"));
                return Outcome::Failed;
            }
            StopReason::Length => {
                answer(output, &reply);
                note("the reply was cut off: the model reached its output token limit");
                return Outcome::Failed;
            }
            // A stored reply has always ended; a pending one is nothing to report.
            StopReason::Pending | StopReason::Stop | StopReason::ToolUse => {}
        }
    }
    if signals.received() {
        return Outcome::Failed;
    }
    if let Some(reply) = last_reply(agent) {
        answer(output, &reply);
    }
    Outcome::Succeeded
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
                let or_rule = flagged
                    .allow_rule
                    .map(|rules| format!(" or a {rules} allow rule"))
                    .unwrap_or_default();
                note(&format!(
                    "refused a flagged command ({reason}): {command}\n      \
                     (no one can be asked here; allow it with --approve-flagged{or_rule})"
                ));
            }
        }),
    }
}
