//! Starting kept commands from async code: a guard that stops a command's process group, and
//! `/bin/sh -c` run for its output (the `!command` values of models.json and mcp.json).

use super::kept;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::process::{Output, Stdio};
use std::time::Duration;

/// Stops a process group started through the launcher (which leads it) when dropped, unless
/// disarmed: SIGTERM, not SIGKILL, because the keeper must live to kill what left the group.
pub struct GroupStop(Option<Pid>);

impl GroupStop {
    /// For the group led by `leader` (a child's `id()`: `None` once it was reaped).
    pub fn new(leader: Option<u32>) -> GroupStop {
        GroupStop(
            leader
                .and_then(|id| i32::try_from(id).ok())
                .map(Pid::from_raw),
        )
    }

    /// Stops the group now (at most once).
    pub fn stop(&mut self) {
        if let Some(pgid) = self.0.take() {
            // ESRCH only means the group is already gone.
            let _ = killpg(pgid, Signal::SIGTERM);
        }
    }

    /// The leader has been reaped, so its pid (the group id) may be reused: never signal it.
    pub fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupStop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `/bin/sh -c command` under the keeper, for a caller to prepare (its directory, its
/// environment) before [`output_within`] runs it.
pub fn shell_command(command: &str) -> tokio::process::Command {
    kept("/bin/sh", ["-c", command]).into()
}

/// Runs `command` (stdin empty, stdout captured) to its end. `Ok(None)`: it did not finish
/// within `limit`, and everything it started has been stopped.
pub async fn output_within(
    mut command: tokio::process::Command,
    stderr: Stdio,
    limit: Duration,
) -> std::io::Result<Option<Output>> {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .spawn()?;
    let mut group = GroupStop::new(child.id());
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => {
            group.disarm();
            output.map(Some)
        }
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn output_and_a_stopped_overrun() {
        let out = output_within(
            shell_command("echo hi; echo err >&2"),
            Stdio::piped(),
            Duration::from_secs(10),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(
            (&out.stdout[..], &out.stderr[..]),
            (&b"hi\n"[..], &b"err\n"[..])
        );

        let started = std::time::Instant::now();
        // The background sleep holds stdout open: only stopping the group ends the wait.
        let late = output_within(
            shell_command("sleep 30 & sleep 30"),
            Stdio::null(),
            Duration::from_millis(100),
        )
        .await
        .unwrap();
        assert!(late.is_none());
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
