//! `bash`: run a command with `/bin/bash -c`, streaming its merged stdout and stderr.
//!
//! The shell runs under the sandbox's launcher, which restricts itself (unless the sandbox is
//! off) and stays alive as the shell's keeper: when the shell ends, the keeper kills whatever it
//! left running, background jobs and processes that left its group included, and so it does
//! when nova dies. The keeper and the shell lead their own process group, which a timeout or an
//! abort sends SIGTERM: the keeper answers by killing everything at once. Both output streams
//! share one pipe, so their lines arrive in the order they were written.

use super::output::{MAX_FILE_BYTES, Output, OutputFiles, Snapshot};
use super::truncate::{Limits, MAX_BYTES, TruncatedBy, format_size};
use super::utf8::Lossy;
use super::{ToolContext, ToolOutput, ToolResult, UpdateFn};
use crate::protocol::{
    COMMAND_OUTPUT_MAX_BYTES, CommandOutcome, ContentBlock, OutputDetails, StructuredContent,
    ToolDetails, ToolResultPayload, ToolSpec,
};
use crate::sandbox::{GroupStop, Placeholders, Sandbox, kept};
use nix::sys::signal::Signal;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

pub(super) const BASH: &str = "/bin/bash";

/// What a command learns from its environment about the session it runs for: Pi 1.6's
/// variables under Pi's names, so a script or a tool written for Pi's shell works unchanged.
/// Only names and ids that the session already shows the model, nothing secret: the sandbox
/// hands them on like the rest of nova's environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionEnv {
    pub session_id: String,
    /// `None` with `--no-session`.
    pub session_file: Option<String>,
    /// The model's provider and id, `None` before one is chosen.
    pub model: Option<(String, String)>,
    pub thinking_level: Option<String>,
}

impl SessionEnv {
    /// Each variable with its value, or `None` to drop the one nova inherited: a nova started
    /// from another agent's shell must not pass that agent's session on as its own.
    pub fn vars(&self) -> Vec<(&'static str, Option<String>)> {
        let (provider, model) = match &self.model {
            Some((provider, id)) => (Some(provider.clone()), Some(id.clone())),
            None => (None, None),
        };
        vec![
            ("PI_CODING_AGENT", Some("true".to_owned())),
            // The cross-agent convention's name for the program running the command.
            ("AI_AGENT", Some("nova".to_owned())),
            ("PI_SESSION_ID", Some(self.session_id.clone())),
            ("PI_SESSION_FILE", self.session_file.clone()),
            ("PI_PROVIDER", provider),
            ("PI_MODEL", model),
            ("PI_REASONING_LEVEL", self.thinking_level.clone()),
        ]
    }

    pub(crate) fn apply(&self, cmd: &mut std::process::Command) {
        for (name, value) in self.vars() {
            match value {
                Some(value) => cmd.env(name, value),
                None => cmd.env_remove(name),
            };
        }
    }
}

/// How often at most progress is reported while output streams in.
const UPDATE_INTERVAL: Duration = Duration::from_millis(50);
/// How long to keep reading after the shell exits: a background child may hold the pipe open
/// indefinitely, and waiting for it would hang the tool.
const EXIT_GRACE: Duration = Duration::from_millis(200);

#[derive(Deserialize)]
pub(super) struct Args {
    command: String,
    timeout: Option<f64>,
    /// `false`: run without the sandbox (the permission gate has asked the user first).
    sandbox: Option<bool>,
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        description: "Run a bash command in the working directory and return its combined \
            stdout and stderr. Only the last 2000 lines or 50KB are shown; when output is cut, \
            the full output is saved to a file whose path is given. Optionally stop the command \
            after a timeout in seconds."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run"},
                "timeout": {"type": "number", "description": "Seconds before the command is killed (default: no limit)"},
                "sandbox": {"type": "boolean", "description": "Run inside the sandbox (default true). Set false only to retry a command the sandbox refused; the user is asked to approve it first"}
            },
            "required": ["command"]
        }),
    }
}

pub(super) enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Aborted,
}

/// A started command, and the sandbox's placeholders it relies on while it runs.
type Started = (pipe::Receiver, Child, Option<Placeholders>);

fn spawn(
    command: &str,
    cwd: &Path,
    sandbox: Option<&Sandbox>,
    env: &SessionEnv,
) -> std::io::Result<Started> {
    let (mut cmd, placeholders) = match sandbox {
        Some(s) => {
            let (cmd, placeholders) = s
                .command(BASH, &["-c", command])
                .map_err(std::io::Error::other)?;
            (cmd, Some(placeholders))
        }
        None => (kept(BASH, ["-c", command]), None),
    };
    env.apply(&mut cmd);
    let started = start(Command::from(cmd), cwd);
    match started {
        Ok((rx, child)) => Ok((rx, child, placeholders)),
        Err(e) => {
            if let Some(p) = placeholders {
                p.release();
            }
            Err(e)
        }
    }
}

fn start(mut cmd: Command, cwd: &Path) -> std::io::Result<(pipe::Receiver, Child)> {
    let (tx, rx) = pipe::pipe()?;
    let stdout = tx.into_blocking_fd()?;
    let stderr = stdout.try_clone()?;
    // The `Command` (and with it our copy of the pipe's write end) is dropped at the end of this
    // function, so the reader sees end-of-file once the command's processes have closed it.
    let child = cmd
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .spawn()?;
    Ok((rx, child))
}

/// Who hears about the output while the command runs.
enum Progress<'a> {
    /// The tool's caller: the tail-truncated output so far, at most every [`UPDATE_INTERVAL`].
    Snapshots(&'a UpdateFn),
    /// A user's own command: each piece of text as it arrives.
    Chunks(&'a (dyn Fn(&str) + Send + Sync)),
}

/// Runs `command` in `cwd` to its end (exit, `deadline` or `cancel`), killing its process group
/// unless it exited by itself.
#[allow(clippy::too_many_arguments)]
async fn execute(
    command: &str,
    cwd: &Path,
    sandbox: Option<&Sandbox>,
    env: &SessionEnv,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
    progress: Progress<'_>,
    outputs: &Arc<OutputFiles>,
) -> Result<(std::io::Result<Ending>, Output), RunError> {
    if !cwd.is_dir() {
        return Err(RunError::NoCwd(cwd.to_owned()));
    }
    let (reader, mut child, placeholders) =
        spawn(command, cwd, sandbox, env).map_err(RunError::Start)?;
    // Stops the command if the tool stops early (its future dropped), so no command outlives
    // the run that started it.
    let mut group = GroupStop::new(child.id());
    let mut stream = Stream {
        reader: Some(reader),
        output: Output::new(Limits::DEFAULT, "nova-bash", outputs.clone()),
        last_update: None,
        dirty: false,
        cancel,
        progress,
    };
    let ending = stream.until_exit(&mut child, deadline).await;
    let reaped = match ending {
        Ok(Ending::Exited(_)) => true,
        _ => {
            group.stop();
            child.wait().await.is_ok()
        }
    };
    group.disarm();
    // The launcher has exited, and with it everything in the command's sandbox. (Otherwise, as
    // when this future is dropped with the command still dying, the placeholders stay.)
    if let Some(p) = placeholders.filter(|_| reaped) {
        p.release();
    }
    stream.drain(Instant::now() + EXIT_GRACE).await;
    stream.output.finish();
    stream.emit();
    Ok((ending, stream.output))
}

/// Why a command did not run (or could not be waited for); the text is the tool's error result
/// and the user `bash` command's error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("Working directory does not exist: {}\nCannot execute bash commands.", .0.display())]
    NoCwd(std::path::PathBuf),
    #[error("Could not start /bin/bash: {0}")]
    Start(#[source] std::io::Error),
    #[error("Could not wait for /bin/bash: {0}")]
    Wait(#[source] std::io::Error),
    #[error("The editor could not run the command in a terminal: {0}")]
    Terminal(String),
}

/// What a command the user ran (the RPC `bash` command) produced, in Pi's `BashResult` terms.
pub struct UserRun {
    /// Tail-truncated like the tool's output, without the tool's notice.
    pub output: String,
    /// `None` when cancelled or killed by a signal.
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    pub full_output_path: Option<String>,
}

/// Runs a command for the user: no timeout, output streamed to `on_chunk` as it arrives. Only a
/// failure to start it is an `Err`; a failing command is a result like any other. A full-output
/// file joins `outputs`.
pub async fn run_for_user(
    command: &str,
    cwd: &Path,
    env: &SessionEnv,
    cancel: &CancellationToken,
    on_chunk: &(dyn Fn(&str) + Send + Sync),
    outputs: &Arc<OutputFiles>,
) -> Result<UserRun, RunError> {
    let progress = Progress::Chunks(on_chunk);
    let (ending, mut output) =
        execute(command, cwd, None, env, cancel, None, progress, outputs).await?;
    let snapshot = output.snapshot();
    let t = snapshot.truncation;
    let (exit_code, cancelled) = match ending {
        Ok(Ending::Exited(status)) => (status.code(), false),
        Ok(Ending::Aborted) => (None, true),
        Ok(Ending::TimedOut) => (None, false),
        Err(e) => return Err(RunError::Wait(e)),
    };
    Ok(UserRun {
        output: t.content,
        exit_code,
        cancelled,
        truncated: t.truncated,
        full_output_path: snapshot
            .full_output_path
            .filter(|_| t.truncated)
            .map(|p| p.display().to_string()),
    })
}

pub(super) async fn run(args: Args, ctx: &ToolContext) -> ToolResult {
    let deadline = args
        .timeout
        .filter(|t| *t > 0.0 && t.is_finite())
        .map(|t| Instant::now() + Duration::from_secs_f64(t.min(1e9)));
    let sandbox = (args.sandbox != Some(false) && ctx.sandbox.wraps_commands())
        .then_some(ctx.sandbox.as_ref());
    if !ctx.cwd.is_dir() {
        return Err(RunError::NoCwd(ctx.cwd.clone()).to_string());
    }
    // An empty first update tells the tool's caller the command is running.
    (ctx.on_update)(ToolResultPayload {
        content: Vec::new(),
        details: None,
        structured_content: None,
    });
    let started = Instant::now();
    let ran = match &ctx.terminal {
        Some(terminal) => {
            let run = super::terminal::Run {
                command: &args.command,
                cwd: &ctx.cwd,
                call_id: &ctx.call_id,
                sandbox,
                env: &ctx.env,
                cancel: &ctx.cancel,
                deadline,
                outputs: &ctx.outputs,
            };
            super::terminal::execute(terminal.as_ref(), run).await
        }
        None => {
            let progress = Progress::Snapshots(&ctx.on_update);
            let (command, cwd) = (&args.command, &ctx.cwd);
            execute(
                command,
                cwd,
                sandbox,
                &ctx.env,
                &ctx.cancel,
                deadline,
                progress,
                &ctx.outputs,
            )
            .await
        }
    };
    let (ending, mut output) = ran.map_err(|e| e.to_string())?;
    let snapshot = output.snapshot();
    let last_line = output.last_line_bytes();
    let status = match ending {
        Ok(Ending::Exited(status)) => status,
        Ok(Ending::TimedOut) => {
            let secs = args.timeout.unwrap_or_default();
            let (text, _) = render(&snapshot, last_line, "");
            return Err(with_status(
                &text,
                &format!("Command timed out after {secs} seconds"),
            ));
        }
        Ok(Ending::Aborted) => {
            let (text, _) = render(&snapshot, last_line, "");
            return Err(with_status(&text, "Command aborted"));
        }
        Err(e) => return Err(RunError::Wait(e).to_string()),
    };
    let (text, details) = render(&snapshot, last_line, "(no output)");
    match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(0), _) => Ok(ToolOutput {
            structured: Some(Box::new(StructuredContent::Command(
                outcome(&snapshot, 0, started.elapsed()).await,
            ))),
            ..ToolOutput::text(text, details)
        }),
        (Some(code), _) => {
            let failed = with_status(&text, &format!("Command exited with code {code}"));
            let failed = match sandbox.and_then(|s| s.refusal_note(&text)) {
                Some(note) => format!("{failed}\n\n{note}"),
                None => failed,
            };
            // A failed result like any other, with what the command produced for programs.
            Ok(ToolOutput {
                structured: Some(Box::new(StructuredContent::Command(
                    outcome(&snapshot, code, started.elapsed()).await,
                ))),
                ..ToolOutput::error(failed)
            })
        }
        (None, Some(sig)) => {
            let name = Signal::try_from(sig).map_or_else(|_| sig.to_string(), |s| s.to_string());
            Err(with_status(
                &text,
                &format!("Command was killed by signal {name}"),
            ))
        }
        (None, None) => Ok(ToolOutput::text(text, details)),
    }
}

/// What a command that exited produced, for programs: the whole output where the model was
/// shown its tail (read back from the full-output file), as Pi 1.6 reports it.
async fn outcome(snapshot: &Snapshot, exit_code: i32, took: Duration) -> CommandOutcome {
    let shown = &snapshot.truncation;
    let whole = match (&snapshot.full_output_path, shown.truncated) {
        (Some(path), true) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || read_output_file(&path))
                .await
                .ok()
                .flatten()
        }
        (_, false) => Some((shown.content.clone(), false)),
        (None, true) => None,
    };
    let (output, cut) = whole.unwrap_or_else(|| (shown.content.clone(), true));
    let truncated = cut || (snapshot.full_output_path.is_some() && snapshot.full_output_cut);
    CommandOutcome {
        output,
        truncated,
        full_output_path: snapshot
            .full_output_path
            .as_ref()
            .filter(|_| truncated)
            .map(|p| p.display().to_string()),
        exit_code,
        wall_time_seconds: (took.as_secs_f64() * 10.0).round() / 10.0,
    }
}

/// The file's text, whole up to [`COMMAND_OUTPUT_MAX_BYTES`], else its first and last halves
/// around a note of how much was left out (cut at character boundaries); and whether any was.
fn read_output_file(path: &Path) -> Option<(String, bool)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    let max = COMMAND_OUTPUT_MAX_BYTES as u64;
    if size <= max {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        return Some((String::from_utf8_lossy(&bytes).into_owned(), false));
    }
    let half = max / 2;
    let mut head = vec![0; usize::try_from(half).ok()?];
    file.read_exact(&mut head).ok()?;
    let mut tail = vec![0; usize::try_from(max - half).ok()?];
    file.seek(SeekFrom::Start(size - (max - half))).ok()?;
    file.read_exact(&mut tail).ok()?;
    // The head holds back a character it cuts; the tail skips the rest of one.
    let head = Lossy::default().push(&head);
    let start = tail.iter().take_while(|b| *b & 0xC0 == 0x80).count();
    let tail = String::from_utf8_lossy(&tail[start..]);
    let omitted = size - max;
    Some((
        format!("{head}\n\n[... {omitted} bytes omitted ...]\n\n{tail}"),
        true,
    ))
}

fn with_status(text: &str, status: &str) -> String {
    if text.is_empty() {
        status.to_owned()
    } else {
        format!("{text}\n\n{status}")
    }
}

/// The final text (output plus Pi's truncation notice) and `details`.
fn render(
    snapshot: &Snapshot,
    last_line_bytes: usize,
    empty: &str,
) -> (String, Option<ToolDetails>) {
    let t = &snapshot.truncation;
    let mut text = if t.content.is_empty() {
        empty.to_owned()
    } else {
        t.content.clone()
    };
    if !t.truncated {
        return (text, None);
    }
    let full = match &snapshot.full_output_path {
        Some(p) if snapshot.full_output_cut => format!(
            ". Full output (its first {} only): {}",
            format_size(MAX_FILE_BYTES),
            p.display()
        ),
        Some(p) => format!(". Full output: {}", p.display()),
        None => String::new(),
    };
    let start = t.total_lines + 1 - t.output_lines;
    let end = t.total_lines;
    let notice = if t.last_line_partial {
        format!(
            "[Showing last {} of line {end} (line is {}){full}]",
            format_size(t.output_bytes),
            format_size(last_line_bytes)
        )
    } else if t.truncated_by == Some(TruncatedBy::Lines) {
        format!("[Showing lines {start}-{end} of {}{full}]", t.total_lines)
    } else {
        format!(
            "[Showing lines {start}-{end} of {} ({} limit){full}]",
            t.total_lines,
            format_size(MAX_BYTES)
        )
    };
    text.push_str("\n\n");
    text.push_str(&notice);
    (text, details(snapshot))
}

fn details(snapshot: &Snapshot) -> Option<ToolDetails> {
    let path = snapshot.full_output_path.as_ref();
    OutputDetails {
        truncation: snapshot
            .truncation
            .truncated
            .then(|| snapshot.truncation.details()),
        full_output_path: path.map(|p| p.display().to_string()),
        full_output_cut: (path.is_some() && snapshot.full_output_cut).then_some(MAX_FILE_BYTES),
        ..OutputDetails::default()
    }
    .or_none()
}

/// The read side of the pipe plus throttled progress reporting.
struct Stream<'a> {
    reader: Option<pipe::Receiver>,
    output: Output,
    last_update: Option<Instant>,
    dirty: bool,
    cancel: &'a CancellationToken,
    progress: Progress<'a>,
}

impl Stream<'_> {
    async fn until_exit(
        &mut self,
        child: &mut Child,
        deadline: Option<Instant>,
    ) -> std::io::Result<Ending> {
        let mut buf = vec![0u8; 64 * 1024];
        let far = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
        loop {
            let update_at = self.update_due().unwrap_or(far);
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Ok(Ending::Aborted),
                () = sleep_until(deadline.unwrap_or(far)) => return Ok(Ending::TimedOut),
                status = child.wait() => return status.map(Ending::Exited),
                n = read(&mut self.reader, &mut buf) => self.take(n, &buf),
                () = sleep_until(update_at) => self.emit(),
            }
        }
    }

    /// Reads what the command's leftovers still write, until end-of-file or `until`.
    async fn drain(&mut self, until: Instant) {
        let mut buf = vec![0u8; 64 * 1024];
        while self.reader.is_some() {
            tokio::select! {
                () = sleep_until(until) => break,
                n = read(&mut self.reader, &mut buf) => self.take(n, &buf),
            }
        }
        self.reader = None;
    }

    fn take(&mut self, n: std::io::Result<usize>, buf: &[u8]) {
        match n {
            Ok(0) | Err(_) => self.reader = None,
            Ok(n) => {
                let text = self.output.push(&buf[..n]);
                match &self.progress {
                    Progress::Snapshots(_) => self.dirty = true,
                    Progress::Chunks(on_chunk) if !text.is_empty() => on_chunk(&text),
                    Progress::Chunks(_) => {}
                }
            }
        }
    }

    fn update_due(&self) -> Option<Instant> {
        self.dirty.then(|| {
            self.last_update
                .map_or_else(Instant::now, |t| t + UPDATE_INTERVAL)
        })
    }

    /// Sends the whole tail-truncated output so far, if anything changed since the last update.
    fn emit(&mut self) {
        let Progress::Snapshots(on_update) = self.progress else {
            return;
        };
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.last_update = Some(Instant::now());
        let snapshot = self.output.snapshot();
        // Pi's updates with output always carry details, `{}` when there is nothing to say.
        let details = details(&snapshot).or_else(|| Some(ToolDetails::none()));
        on_update(ToolResultPayload {
            content: vec![ContentBlock::text(snapshot.truncation.content)],
            details,
            structured_content: None,
        });
    }
}

/// Reads from the pipe, or waits forever once it is closed (so a `select!` branch goes quiet).
pub(super) async fn read<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match reader {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::output::{MAX_FILE_BYTES, OutputFiles};
    use super::super::{Tool, ToolContext, ToolOutput};
    use crate::protocol::{StructuredContent, ToolResultPayload, joined_text};
    use serde_json::{Value, json};
    use std::path::Path;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    use tokio_util::sync::CancellationToken;

    type Updates = Arc<Mutex<Vec<ToolResultPayload>>>;

    fn ctx(dir: &Path) -> (ToolContext, Updates) {
        let updates: Updates = Arc::default();
        let sink = updates.clone();
        let ctx = ToolContext {
            cwd: dir.to_path_buf(),
            cancel: CancellationToken::new(),
            on_update: Arc::new(move |p| sink.lock().unwrap().push(p)),
            sandbox: Arc::new(crate::sandbox::Sandbox::off()),
            outputs: Arc::default(),
            write_target: None,
            editor: None,
            terminal: None,
            call_id: String::new(),
            env: super::SessionEnv::default(),
        };
        (ctx, updates)
    }

    async fn bash(args: Value) -> ToolOutput {
        let dir = tempfile::tempdir().unwrap();
        Tool::Bash.execute(args, ctx(dir.path()).0).await
    }

    /// The output of `command` with its full-output files still there (until the second is dropped).
    async fn bash_keeping(command: &str) -> (ToolOutput, Arc<OutputFiles>) {
        let dir = tempfile::tempdir().unwrap();
        let (c, _) = ctx(dir.path());
        let outputs = c.outputs.clone();
        (
            Tool::Bash.execute(json!({"command": command}), c).await,
            outputs,
        )
    }

    /// Gone, or a zombie waiting for a reaper that this container may not have.
    fn process_gone(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    #[tokio::test]
    async fn runs_in_cwd_with_merged_ordered_output() {
        let dir = tempfile::tempdir().unwrap();
        let (c, _) = ctx(dir.path());
        let cmd = "pwd; for i in 1 2 3; do echo out$i; echo err$i >&2; done";
        let out = Tool::Bash.execute(json!({"command": cmd}), c).await;
        assert!(!out.is_error);
        let cwd = dir.path().canonicalize().unwrap();
        let expected = format!("{}\nout1\nerr1\nout2\nerr2\nout3\nerr3\n", cwd.display());
        assert_eq!(joined_text(&out.content), expected);
        assert_eq!(out.details, None);
    }

    #[tokio::test]
    async fn empty_output_and_exit_codes() {
        // What the model is shown, and the exit code a program is told.
        let shown_and_code = |out: ToolOutput| {
            let code = match out.structured.as_deref() {
                Some(StructuredContent::Command(outcome)) => Some(outcome.exit_code),
                _ => None,
            };
            (
                ToolOutput {
                    structured: None,
                    ..out
                },
                code,
            )
        };
        let out = bash(json!({"command": "true"})).await;
        assert_eq!(
            shown_and_code(out),
            (ToolOutput::text("(no output)", None), Some(0))
        );

        let out = bash(json!({"command": "echo oops; exit 3"})).await;
        assert_eq!(
            shown_and_code(out),
            (
                ToolOutput::error("oops\n\n\nCommand exited with code 3"),
                Some(3)
            )
        );

        let out = bash(json!({"command": "exit 1"})).await;
        assert_eq!(
            shown_and_code(out),
            (
                ToolOutput::error("(no output)\n\nCommand exited with code 1"),
                Some(1)
            )
        );
    }

    #[tokio::test]
    async fn timeout_kills_the_group() {
        let started = Instant::now();
        let out = bash(json!({"command": "echo start; sleep 30", "timeout": "0.5"})).await;
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            out,
            ToolOutput::error("start\n\n\nCommand timed out after 0.5 seconds")
        );
    }

    #[tokio::test]
    async fn abort_kills_background_grandchildren() {
        let dir = tempfile::tempdir().unwrap();
        let (c, updates) = ctx(dir.path());
        let cancel = c.cancel.clone();
        let task =
            tokio::spawn(Tool::Bash.execute(json!({"command": "sleep 30 & echo $!; wait"}), c));
        // The grandchild's pid arrives as the first streamed update.
        let pid = loop {
            let seen = updates
                .lock()
                .unwrap()
                .iter()
                .map(|u| joined_text(&u.content))
                .find(|t| !t.trim().is_empty());
            if let Some(text) = seen {
                break text.trim().parse::<i32>().unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert!(!process_gone(pid));
        cancel.cancel();
        let out = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            ToolOutput::error(format!("{pid}\n\n\nCommand aborted"))
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !process_gone(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(process_gone(pid), "grandchild {pid} survived the abort");
    }

    #[tokio::test]
    async fn background_child_holding_the_pipe_does_not_hang() {
        let started = Instant::now();
        let out = bash(json!({"command": "sleep 30 & echo $!"})).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        let text = joined_text(&out.content);
        let pid: i32 = text.trim().parse().unwrap();
        // Unit tests run without the keeper, which would kill the job as the shell ends
        // (tests/suite/orphans.rs): here it is left running.
        assert!(!process_gone(pid));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }

    #[tokio::test]
    async fn long_output_is_tail_truncated_with_full_output_file() {
        let dir = tempfile::tempdir().unwrap();
        let (c, updates) = ctx(dir.path());
        let outputs = c.outputs.clone();
        let out = Tool::Bash
            .execute(json!({"command": "seq 1 3000"}), c)
            .await;
        assert!(!out.is_error);
        let text = joined_text(&out.content);
        let details = out.details.unwrap().json();
        let path = details["fullOutputPath"].as_str().unwrap().to_owned();
        assert!(path.contains("nova-bash-"));
        assert!(text.starts_with("1001\n1002\n"), "{}", &text[..20]);
        assert!(text.ends_with(&format!(
            "3000\n\n\n[Showing lines 1001-3000 of 3000. Full output: {path}]"
        )));
        assert_eq!(details["truncation"]["truncatedBy"], "lines");
        let full = std::fs::read_to_string(&path).unwrap();
        assert_eq!(full.lines().count(), 3000);
        drop(outputs);
        assert!(!Path::new(&path).exists(), "removed with the session");

        let updates = updates.lock().unwrap();
        assert!(
            updates.len() >= 2,
            "an initial update and at least one with output"
        );
        let last = updates.last().unwrap();
        assert!(joined_text(&last.content).ends_with("2999\n3000\n"));
        assert_eq!(
            last.details.as_ref().unwrap().json()["fullOutputPath"],
            path.as_str()
        );
    }

    #[tokio::test]
    async fn byte_limit_and_overlong_last_line_notices() {
        // 1000 lines of 101 bytes: the 50KB limit bites before the line limit.
        let out = bash(json!({"command": "seq -f '%0100g' 1 1000"})).await;
        let text = joined_text(&out.content);
        let path = out.details.as_ref().unwrap().json()["fullOutputPath"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            text.ends_with(&format!(
                "\n\n[Showing lines 495-1000 of 1000 (50.0KB limit). Full output: {path}]"
            )),
            "{}",
            &text[text.len() - 120..]
        );

        let out = bash(json!({"command": "head -c 60000 /dev/zero | tr '\\0' x"})).await;
        let text = joined_text(&out.content);
        let path = out.details.as_ref().unwrap().json()["fullOutputPath"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.starts_with(&"x".repeat(51200)));
        assert!(text.ends_with(&format!(
            "x\n\n[Showing last 50.0KB of line 1 (line is 58.6KB). Full output: {path}]"
        )));
    }

    #[tokio::test]
    async fn the_full_output_file_keeps_the_first_16_mib() {
        let (out, outputs) =
            bash_keeping("head -c 20000000 /dev/zero | tr '\\0' x; echo; echo end").await;
        let text = joined_text(&out.content);
        let details = out.details.unwrap().json();
        let path = details["fullOutputPath"].as_str().unwrap().to_owned();
        assert!(text.ends_with(&format!(
            "end\n\n\n[Showing lines 2-2 of 2 (50.0KB limit). Full output (its first 16.0MB only): {path}]"
        )), "{:?}", &text[text.len().saturating_sub(300)..]);
        assert_eq!(details["fullOutputCut"], MAX_FILE_BYTES);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            MAX_FILE_BYTES as u64
        );
        drop(outputs);
        assert!(!Path::new(&path).exists());
    }

    #[tokio::test]
    async fn updates_stream_while_running() {
        let dir = tempfile::tempdir().unwrap();
        let (c, updates) = ctx(dir.path());
        let cmd = "echo one; sleep 0.3; echo two";
        let out = Tool::Bash.execute(json!({"command": cmd}), c).await;
        assert_eq!(joined_text(&out.content), "one\ntwo\n");
        let texts: Vec<String> = updates
            .lock()
            .unwrap()
            .iter()
            .map(|u| joined_text(&u.content))
            .collect();
        assert_eq!(texts.first().map(String::as_str), Some(""));
        assert!(texts.contains(&"one\n".to_owned()), "{texts:?}");
        assert_eq!(texts.last().map(String::as_str), Some("one\ntwo\n"));
    }

    #[tokio::test]
    async fn missing_command_fails_validation() {
        let out = bash(json!({"timeout": "x"})).await;
        let text = joined_text(&out.content);
        assert!(out.is_error);
        assert!(text.starts_with(
            "Validation failed for tool \"bash\":\n  - command: must have required property 'command'\n  - timeout: must be number\n\nReceived arguments:\n"
        ), "{text}");
    }
}
