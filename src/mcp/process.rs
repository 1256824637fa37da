//! A stdio server's process. It runs under the sandbox's keeper (without restrictions), in a
//! process group of its own with it, so that stopping it reaches whatever it started (servers
//! are often launched through `npx` or `uvx`, whose child is the real server): stdin is closed
//! first (the caller closes the MCP connection), then the group gets SIGTERM, on which the
//! keeper kills the server and all it started, then SIGKILL if anything is left. A process that
//! is dropped without being stopped has its group stopped at once, and the keeper also kills
//! the server when nova dies, so no server outlives nova however nova leaves.

use super::McpError;
use super::isolate::Isolation;
use crate::sandbox::kept;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::VecDeque;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::watch;

/// How many of the last stderr lines are kept to explain a failure.
const STDERR_LINES: usize = 3;
/// Longer stderr lines are cut to this many characters.
const STDERR_LINE_CHARS: usize = 300;
/// How long stderr may stay open after the process exited (a grandchild can hold it).
const STDERR_DRAIN: Duration = Duration::from_millis(200);

pub struct Process {
    pgid: Pid,
    /// `Some(description)` once the process has exited.
    exit: watch::Receiver<Option<String>>,
    stopped: bool,
}

/// The pipes the MCP connection runs over.
pub type Pipes = (ChildStdout, ChildStdin);

/// Starts `command` in `cwd` with nova's environment and `env` over it; `isolation` (a user's
/// server) keeps the project off its search paths.
pub fn spawn(
    command: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: &Path,
    isolation: Option<&Isolation>,
) -> Result<(Process, Pipes), McpError> {
    let mut command_line = tokio::process::Command::from(kept(command, args));
    if let Some(isolation) = isolation {
        isolation.apply(&mut command_line, cwd, env)?;
    }
    let mut child = command_line
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| McpError::Spawn {
            command: command.to_owned(),
            cwd: cwd.to_owned(),
            source,
        })?;
    let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) = (
        child.id(),
        child.stdin.take(),
        child.stdout.take(),
        child.stderr.take(),
    ) else {
        return Err(McpError::NoPipes(command.to_owned()));
    };
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let reader = tokio::spawn(keep_tail(stderr, tail.clone()));
    let (exit_tx, exit) = watch::channel(None);
    tokio::spawn(async move {
        let status = child.wait().await;
        let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
        let lines: Vec<String> = lock(&tail).iter().cloned().collect();
        let mut said = match status {
            Ok(status) => describe(status),
            Err(e) => format!("could not be waited for: {e}"),
        };
        if !lines.is_empty() {
            said.push_str(&format!("; stderr: {}", lines.join(" | ")));
        }
        exit_tx.send_replace(Some(said));
    });
    let process = Process {
        pgid: Pid::from_raw(pid as i32),
        exit,
        stopped: false,
    };
    Ok((process, (stdout, stdin)))
}

impl Process {
    /// Resolves with how the process ended.
    pub fn exited(&self) -> watch::Receiver<Option<String>> {
        self.exit.clone()
    }

    /// The process has exited (or the caller closed its stdin): the group gets `grace` to
    /// finish, then SIGTERM and another `grace`, then SIGKILL.
    pub async fn stop(mut self, grace: Duration) {
        self.stopped = true;
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(grace, exit.wait_for(Option::is_some)).await;
        if self.group_alive() {
            let _ = killpg(self.pgid, Signal::SIGTERM);
            let deadline = tokio::time::Instant::now() + grace;
            while self.group_alive() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if self.group_alive() {
                let _ = killpg(self.pgid, Signal::SIGKILL);
            }
        }
    }

    fn group_alive(&self) -> bool {
        killpg(self.pgid, None).is_ok()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.stopped {
            // SIGTERM, not SIGKILL: the keeper must live to kill what left the group.
            let _ = killpg(self.pgid, Signal::SIGTERM);
        }
    }
}

async fn keep_tail(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "nova::mcp", "server stderr: {line}");
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut tail = lock(&tail);
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(line.chars().take(STDERR_LINE_CHARS).collect());
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(s) => format!("was killed by {s}"),
            Err(_) => format!("was killed by signal {signal}"),
        },
        _ => format!("ended ({status})"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Processes of the group that still run: killed orphans may stay zombies here, where the
    /// container's init does not reap them.
    fn live_members(pgid: Pid) -> usize {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        entries
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                // pid (comm) state ppid pgrp …; comm may hold spaces, so split after the `)`.
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
                fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
            })
            .count()
    }

    fn sh(script: &str) -> (Process, Pipes) {
        let args = ["-c".to_owned(), script.to_owned()];
        spawn("/bin/sh", &args, &[], Path::new("/"), None).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_exit_is_described_with_the_end_of_stderr() {
        let (p, _pipes) = sh("echo first >&2; echo second >&2; exit 3");
        let mut exit = p.exited();
        let said = exit
            .wait_for(Option::is_some)
            .await
            .unwrap()
            .clone()
            .unwrap();
        assert_eq!(said, "exited with code 3; stderr: first | second");
        p.stop(Duration::from_millis(100)).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stop_reaches_the_whole_group_even_when_it_ignores_sigterm() {
        // The grandchild ignores SIGTERM and outlives its parent: only SIGKILL to the group
        // ends it.
        let (p, pipes) = sh("trap '' TERM; sh -c \"trap '' TERM; sleep 30\" & wait");
        let pgid = p.pgid;
        drop(pipes);
        let started = std::time::Instant::now();
        p.stop(Duration::from_millis(200)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(live_members(pgid), 0, "the group is gone");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_process_takes_its_group_with_it() {
        let (p, _pipes) = sh("sleep 30 & sleep 30");
        let pgid = p.pgid;
        drop(p);
        for _ in 0..100 {
            if live_members(pgid) == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the group outlived its dropped process");
    }
}
