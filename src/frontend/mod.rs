//! What every front end needs, in one place none of them owns, so that a new front end imports
//! no sibling: the record reader ([`reader`]) and the parser of records into commands
//! ([`parse`]), the stdout writer ([`writer`]), the signal
//! setup ([`signals`]), opening the session the command line describes, and nova's lines on
//! stderr.
//!
//! stderr is where the command-line front ends say what a person should know (startup and
//! session warnings, failures); the core never writes there itself.

mod events;
pub mod parse;
pub mod reader;
mod salvage;
pub mod signals;
pub mod writer;

pub use events::folds;
pub use signals::{Second, Signals};
pub use writer::{Line, Outbox};

use crate::agent::{Prepared, Runtime};
use std::io::Write;
use std::process::ExitCode;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long exit waits for stdout to take the last lines.
const WRITER_GRACE: Duration = Duration::from_secs(5);

/// Prepares the session the command line describes and says on stderr what was wrong with
/// its files (and the runtime's); an `Err` is the usage error to exit with.
pub async fn open_cli_session(
    runtime: &Runtime,
    mode: crate::exthost::Mode,
) -> Result<Prepared, ExitCode> {
    let mut spec = runtime
        .cli_session()
        .map_err(|e| usage_error(&e.to_string()))?;
    vote_on_trust(runtime, &mut spec, mode, note).await;
    let prepared = runtime
        .prepare(&spec)
        .map_err(|e| usage_error(&e.to_string()))?;
    for warning in runtime.warnings().iter().chain(&prepared.warnings) {
        note(&format!("warning: {warning}"));
    }
    Ok(prepared)
}

/// Asks the user's extensions for their `project_trust` vote on `spec`'s project, when one is
/// due, and puts it in `spec` (saving it in `trust.json` when they ask to remember it). A vote
/// that cannot be had leaves the decision to the saved ones and the settings, as in Pi, and
/// `say` says why.
pub async fn vote_on_trust(
    runtime: &Runtime,
    spec: &mut crate::config::SessionSpec,
    mode: crate::exthost::Mode,
    say: fn(&str),
) {
    let voters = runtime.trust_voters(spec);
    if voters.is_empty() {
        return;
    }
    let agent_dir = runtime.agent_dir();
    let warn = move |text: &str| say(&format!("warning: {text}"));
    match crate::exthost::vote(agent_dir, &spec.cwd, &voters, mode, say).await {
        Ok((vote, failures)) => {
            failures.iter().for_each(|f| warn(f));
            let Some(vote) = vote else { return };
            spec.trust_vote = Some(vote.trusted);
            if vote.remember {
                let file = agent_dir.join(crate::config::trust::TRUST_FILE);
                if let Err(e) = crate::config::trust::remember(&file, &spec.cwd, vote.trusted) {
                    warn(&e);
                }
            }
        }
        Err(e) => warn(&format!("no project_trust vote: {e}")),
    }
}

/// What the session's extension host needs, or `None` when it has no extension (then no Node
/// process starts).
pub fn extension_spec(
    prepared: &Prepared,
    mode: crate::exthost::Mode,
) -> Option<crate::exthost::Spec> {
    if prepared.extensions().is_empty() {
        return None;
    }
    Some(crate::exthost::Spec {
        agent_dir: prepared.agent_dir().to_path_buf(),
        cwd: prepared.cwd().to_path_buf(),
        project_trusted: prepared.project_trusted(),
        extensions: prepared.extensions().to_vec(),
        hook_timeout: prepared.extension_hook_timeout(),
        mode,
        flags: prepared.extension_flags().to_vec(),
    })
}

/// Starts the session's extension host, saying on stderr what failed to load; an `Err` is the
/// exit code of a host that cannot start (the extensions were asked for, so nova does not run
/// without them).
pub async fn start_extensions(
    spec: crate::exthost::Spec,
    live: &crate::agent::Live,
) -> Result<crate::exthost::Host, ExitCode> {
    start_host(spec, live).await.map_err(|e| match e {
        crate::exthost::HostError::Flags(e) => usage_error(&e),
        e => fatal(&e.to_string()),
    })
}

/// Starts the session's extension host, saying on stderr what failed to load; for a front end
/// that serves other sessions too, where a host that cannot start fails only its session.
pub async fn start_host(
    spec: crate::exthost::Spec,
    live: &crate::agent::Live,
) -> Result<crate::exthost::Host, crate::exthost::HostError> {
    let (host, failures) = crate::exthost::start(spec, live, note).await?;
    for failure in failures {
        note(&format!("warning: {failure}"));
    }
    Ok(host)
}

/// Closes `out` and waits for its writer to write what is queued, at most [`WRITER_GRACE`]: a
/// reader that never reads leaves the writer blocked on stdout, and nova exits without it.
pub async fn close_writer<L: Line>(out: &Outbox<L>, writer: JoinHandle<()>) {
    out.close();
    let _ = tokio::time::timeout(
        WRITER_GRACE,
        tokio::task::spawn_blocking(move || writer.join()),
    )
    .await;
}

/// The `tracing` target of [`note`]s once they are log records ([`notes_as_logs`]).
pub const NOTE_TARGET: &str = "nova::note";

/// Set once stderr carries JSON log lines: a note is then one of them.
static NOTES_AS_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, notes are `tracing` records at `info` under [`NOTE_TARGET`] (which the log
/// filter must let through), so that every line on stderr has the log's format.
pub fn notes_as_logs() {
    NOTES_AS_LOGS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// One line on stderr, prefixed like all of nova's there (or a log record, once
/// [`notes_as_logs`]).
pub fn note(text: &str) {
    if NOTES_AS_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(target: NOTE_TARGET, "{text}");
        return;
    }
    let _ = writeln!(std::io::stderr(), "nova: {text}");
}

/// Says `message` and gives the exit code of a usage error.
pub fn usage_error(message: &str) -> ExitCode {
    note(message);
    ExitCode::from(2)
}

/// Says `message` and gives the exit code of a failure.
pub fn fatal(message: &str) -> ExitCode {
    note(message);
    ExitCode::FAILURE
}
