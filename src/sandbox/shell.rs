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

/// Runs `/bin/sh -c command` (stdin empty, stdout captured) to its end. `Ok(None)`: it did not
/// finish within `limit`, and everything it started has been stopped.
pub async fn shell_output(
    command: &str,
    stderr: Stdio,
    limit: Duration,
) -> std::io::Result<Option<Output>> {
    let child = tokio::process::Command::from(kept("/bin/sh", ["-c", command]))
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
