//! A program run with its arguments and no shell, for an extension's `pi.exec` (the gate has
//! judged it first, as a `bash` call): inside the sandbox when it applies, under the keeper,
//! its stdout and stderr kept apart up to a byte cap, and ended with its whole process group by
//! its deadline, a cancel, or the cap.

use super::bash::{SessionEnv, read};
use crate::sandbox::{GroupStop, Sandbox, kept};
use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The most output (stdout and stderr together) one run keeps: Pi's own cap is 256 MiB, which
/// an extension could make nova hold; past this the run is stopped and marked truncated.
pub const MAX_OUTPUT: usize = 16 * 1024 * 1024;
/// How long the pipes are read after the program exits (see [`watch`]).
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// One run's request.
pub struct Exec<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    pub cwd: &'a Path,
    /// `None`: no sandbox applies (it is off, or the kernel cannot apply it, and the gate has
    /// asked about that).
    pub sandbox: Option<&'a Sandbox>,
    pub env: &'a SessionEnv,
    /// The `PATH` the program is looked for in and runs with; nova's own when `None`.
    pub path: Option<&'a OsStr>,
    pub deadline: Option<Instant>,
    pub max_output: usize,
    pub cancel: &'a CancellationToken,
}

/// Pi's `ExecResult`: what the extension gets back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
    /// The exit code, or 128 + the signal's number, as a shell reports it.
    pub code: i32,
    /// Stopped by nova: its deadline, a cancel, or the cap.
    pub killed: bool,
    /// The output reached the cap; what is kept is its start.
    pub truncated: bool,
}

impl ExecOutput {
    /// A run that could not start, as Pi reports one: code 1, the reason on stderr.
    pub fn failed(reason: impl Into<String>) -> ExecOutput {
        ExecOutput {
            stderr: reason.into(),
            code: 1,
            ..ExecOutput::default()
        }
    }
}

/// Runs `exec` to its end. Never fails: a program that cannot start is a failed run.
pub async fn run(exec: Exec<'_>) -> ExecOutput {
    if !exec.cwd.is_dir() {
        let cwd = exec.cwd.display();
        return ExecOutput::failed(format!("the working directory {cwd} does not exist"));
    }
    let (mut cmd, placeholders) = match exec.sandbox {
        Some(sandbox) => {
            let args: Vec<&str> = exec.args.iter().map(String::as_str).collect();
            match sandbox.command(exec.program, &args) {
                Ok((cmd, placeholders)) => (cmd, Some(placeholders)),
                Err(e) => return ExecOutput::failed(e.to_string()),
            }
        }
        None => (kept(exec.program, exec.args), None),
    };
    exec.env.apply(&mut cmd);
    if let Some(path) = exec.path {
        cmd.env("PATH", path);
    }
    let output = watch(tokio::process::Command::from(cmd), &exec).await;
    if let Some(placeholders) = placeholders {
        placeholders.release();
    }
    output
}

async fn watch(mut cmd: tokio::process::Command, exec: &Exec<'_>) -> ExecOutput {
    let spawned = cmd
        .current_dir(exec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return ExecOutput::failed(format!("{}: {e}", exec.program)),
    };
    let mut group = GroupStop::new(child.id());
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut result = ExecOutput::default();
    let (mut out_buf, mut err_buf) = ([0u8; 8192], [0u8; 8192]);
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let deadline = tokio::time::sleep_until(exec.deadline.unwrap_or(far).into());
    tokio::pin!(deadline);
    let mut exited = None;
    let grace = tokio::time::sleep_until(far.into());
    tokio::pin!(grace);
    // Both pipes are read until they close, or for a moment after the program's exit: a
    // background child may hold them open, and waiting for it would hang the extension.
    while out.is_some() || err.is_some() || exited.is_none() {
        tokio::select! {
            n = read(&mut out, &mut out_buf) => take(n, &out_buf, &mut out, &mut stdout),
            n = read(&mut err, &mut err_buf) => take(n, &err_buf, &mut err, &mut stderr),
            status = child.wait(), if exited.is_none() => {
                group.disarm();
                exited = Some(status);
                grace.as_mut().reset((Instant::now() + EXIT_GRACE).into());
            }
            () = &mut grace => break,
            () = &mut deadline => { result.killed = true; break; }
            () = exec.cancel.cancelled() => { result.killed = true; break; }
        }
        if stdout.len() + stderr.len() > exec.max_output {
            result.truncated = true;
            result.killed = true;
            break;
        }
    }
    let status = match exited {
        Some(status) => status,
        None => {
            group.stop();
            let status = child.wait().await;
            group.disarm();
            status
        }
    };
    if result.truncated {
        let keep_out = stdout.len().min(exec.max_output);
        stdout.truncate(keep_out);
        stderr.truncate(exec.max_output - keep_out);
    }
    result.stdout = String::from_utf8_lossy(&stdout).into_owned();
    result.stderr = String::from_utf8_lossy(&stderr).into_owned();
    result.code = match status {
        Ok(status) => status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        Err(e) => {
            result.stderr.push_str(&e.to_string());
            1
        }
    };
    // As in Pi: a run nova cut short never reads as a success.
    if result.killed && result.code == 0 {
        result.code = 1;
    }
    result
}

/// Keeps what a read brought; a closed or failed pipe is read no more.
fn take<R>(n: std::io::Result<usize>, buf: &[u8], pipe: &mut Option<R>, into: &mut Vec<u8>) {
    match n {
        Ok(0) | Err(_) => *pipe = None,
        Ok(n) => into.extend_from_slice(&buf[..n]),
    }
}
