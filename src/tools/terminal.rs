//! `bash` in an editor's terminal (ACP's `terminal/*`), so the user watches the command run.
//!
//! An editor runs what it is asked to run, outside nova's sandbox. So nova asks it to run
//! exactly the command nova would have started itself: the sandbox's launcher
//! (`/proc/<nova's pid>/exe __sandbox <launch> -- /bin/bash -c <command>`, from
//! [`Sandbox::handoff`]) in the same cwd, with nova's environment. The launcher restricts itself
//! before bash starts, whoever started it, and, knowing it was handed over, gives bash what nova
//! gives its own child: exactly nova's environment (not the editor's), an empty stdin, a keeper
//! that kills everything bash leaves behind, and death when nova dies (see
//! [`crate::sandbox`]'s launcher). The permission gate has decided before the tool runs, as
//! always.
//!
//! The rest is nova's as well: a timeout or an abort sends `terminal/kill` (the keeper ends
//! everything below it, however the editor kills it), then `terminal/release`; the result is
//! the text nova's own bash gives (exit code or signal, tail-truncated output, the full output
//! in a file), made from the editor's copy of the output. The editor keeps the last
//! [`OUTPUT_LIMIT`] bytes of it, so the full-output file holds at most that tail where nova's
//! own keeps the first 16 MiB.

use super::bash::{Ending, RunError};
use super::output::{Output, OutputFiles};
use super::truncate::Limits;
use crate::sandbox::{Handoff, Sandbox, kept_handoff};
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitStatus;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

/// How much output the editor keeps for nova (its tail): far more than the model is shown, and
/// small enough for one message.
pub const OUTPUT_LIMIT: u64 = 1024 * 1024;

/// How long a killed command may take to be reported gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

type Answer<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send>>;

/// How a command in an editor's terminal ended, as the editor reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalExit {
    pub code: Option<u32>,
    /// The signal's name (`SIGKILL`) or number.
    pub signal: Option<String>,
}

/// A client that runs commands in terminals the user sees (an editor, over ACP). Terminals are
/// named by the client's ids; an `Err` is the client's own word for what failed.
pub trait EditorTerminal: Send + Sync {
    /// Starts `command` in `cwd` in a new terminal shown with the call `call_id`, keeping the
    /// last `output_limit` bytes of its output.
    fn create(
        &self,
        call_id: &str,
        command: Handoff,
        cwd: &Path,
        output_limit: u64,
    ) -> Answer<String>;
    fn wait_for_exit(&self, terminal: &str) -> Answer<TerminalExit>;
    /// The output kept so far.
    fn output(&self, terminal: &str) -> Answer<String>;
    fn kill(&self, terminal: &str) -> Answer<()>;
    fn release(&self, terminal: &str) -> Answer<()>;
}

/// What a command the editor ran asks of nova: where, how, and when to give up.
pub(super) struct Run<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    pub call_id: &'a str,
    pub sandbox: Option<&'a Sandbox>,
    pub env: &'a super::bash::SessionEnv,
    pub cancel: &'a CancellationToken,
    pub deadline: Option<Instant>,
    pub outputs: &'a Arc<OutputFiles>,
}

/// Runs `run.command` in the editor's terminal to its end (exit, deadline or cancel), as
/// [`super::bash`] runs it in nova's own child.
pub(super) async fn execute(
    terminal: &dyn EditorTerminal,
    run: Run<'_>,
) -> Result<(std::io::Result<Ending>, Output), RunError> {
    let args = ["-c", run.command];
    let env = run.env.vars();
    let (handoff, placeholders) = match run.sandbox {
        Some(s) => s
            .handoff(super::bash::BASH, &args, &env)
            .map(|(h, p)| (h, Some(p))),
        None => kept_handoff(super::bash::BASH, &args, &env).map(|h| (h, None)),
    }
    .map_err(|e| RunError::Start(std::io::Error::other(e)))?;
    let created = terminal
        .create(run.call_id, handoff, run.cwd, OUTPUT_LIMIT)
        .await;
    let id = match created {
        Ok(id) => id,
        Err(e) => {
            if let Some(p) = placeholders {
                p.release();
            }
            return Err(RunError::Terminal(e));
        }
    };
    let far = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    let ending = tokio::select! {
        biased;
        () = run.cancel.cancelled() => Ok(Ending::Aborted),
        () = sleep_until(run.deadline.unwrap_or(far)) => Ok(Ending::TimedOut),
        exit = terminal.wait_for_exit(&id) => exit
            .and_then(|e| status(&e))
            .map(Ending::Exited)
            .map_err(std::io::Error::other),
    };
    let mut gone = matches!(ending, Ok(Ending::Exited(_)));
    if !gone {
        if let Err(e) = terminal.kill(&id).await {
            tracing::debug!("terminal/kill failed: {e}");
        }
        gone = matches!(
            tokio::time::timeout(KILL_WAIT, terminal.wait_for_exit(&id)).await,
            Ok(Ok(_))
        );
    }
    let text = terminal.output(&id).await.unwrap_or_else(|e| {
        tracing::debug!("terminal/output failed: {e}");
        String::new()
    });
    if let Err(e) = terminal.release(&id).await {
        tracing::debug!("terminal/release failed: {e}");
    }
    // Only once the launcher is known to be gone is nothing left relying on them.
    if let Some(p) = placeholders.filter(|_| gone) {
        p.release();
    }
    let mut output = Output::new(Limits::DEFAULT, "nova-bash", run.outputs.clone());
    output.push(text.as_bytes());
    output.finish();
    Ok((ending, output))
}

/// The editor's report as the status nova's own child would have had.
fn status(exit: &TerminalExit) -> Result<ExitStatus, String> {
    match (exit.code, exit.signal.as_deref()) {
        (Some(code), _) => Ok(ExitStatus::from_raw(((code & 0xff) as i32) << 8)),
        (None, Some(name)) => signal_number(name)
            .map(ExitStatus::from_raw)
            .ok_or_else(|| format!("the editor reported an unknown signal {name:?}")),
        (None, None) => {
            Err("the editor's terminal reported neither an exit code nor a signal".into())
        }
    }
}

fn signal_number(name: &str) -> Option<i32> {
    let name = name.trim();
    if let Ok(n) = name.parse::<i32>() {
        return Signal::try_from(n).ok().map(|s| s as i32);
    }
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    Signal::from_str(&full).ok().map(|s| s as i32)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn exit_reports_become_statuses() {
        let exit = |code, signal: Option<&str>| TerminalExit {
            code,
            signal: signal.map(str::to_owned),
        };
        assert_eq!(status(&exit(Some(3), None)).unwrap().code(), Some(3));
        for name in ["SIGKILL", "KILL", "9", "sigkill"] {
            assert_eq!(status(&exit(None, Some(name))).unwrap().signal(), Some(9));
        }
        assert!(status(&exit(None, Some("SIGNOPE"))).is_err());
        assert!(status(&exit(None, None)).is_err());
    }
}
