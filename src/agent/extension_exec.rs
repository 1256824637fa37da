//! An extension's `pi.exec(command, args)`: extension code is as untrusted as the model's
//! output, so the program it names goes through the same gate as the model's `bash` call (its
//! words quoted as bash would read them back, so every rule and escalation applies) and runs in
//! the same sandbox, never in nova's own rights. It runs without a shell, as Pi runs it.

use super::Agent;
use super::permission::{self, Permission};
use crate::gate::classify::shell_word;
use crate::gate::{self, Request};
use crate::tools::exec::{self, Exec, ExecOutput, MAX_OUTPUT};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const ABORTED: &str = "the command was aborted before it ran";

/// One `pi.exec` call as the host forwards it.
pub struct ExtensionExec {
    /// The host's id for the call: the permission question's tool call id.
    pub id: String,
    pub program: String,
    pub args: Vec<String>,
    /// Where the program is looked for: the host's `PATH`, as nova set it (what an extension
    /// changes of its own environment does not reach here).
    pub path: Option<OsString>,
    /// The extension's working directory, or the one it named.
    pub cwd: Option<PathBuf>,
    pub timeout: Option<Duration>,
    pub max_output: Option<usize>,
}

impl Agent {
    /// Puts the call through the gate, then runs it (or answers for it: a refusal is a failed
    /// run whose stderr says why, as Pi reports a program that could not start).
    pub async fn extension_exec(
        &self,
        call: ExtensionExec,
        cancel: &CancellationToken,
    ) -> ExecOutput {
        let line = std::iter::once(&call.program)
            .chain(&call.args)
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ");
        let request = Request::Bash {
            command: &line,
            unsandboxed: false,
        };
        let not_done = "the extension's command was not run";
        match self.gate(&request, &call.id, "exec", not_done) {
            Permission::Granted => {}
            Permission::Refused(why) => return ExecOutput::failed(why),
            Permission::Pending(answer) => {
                if permission::answered(answer, cancel, ABORTED).await.is_err() {
                    let why = if cancel.is_cancelled() {
                        ABORTED
                    } else {
                        gate::DENIED
                    };
                    return ExecOutput::failed(why);
                }
            }
        }
        let sandbox = self.inner.sandbox.as_ref();
        let env = self.session_env();
        let cwd = match &call.cwd {
            Some(dir) => crate::files::path::resolve(&dir.to_string_lossy(), &self.inner.cwd),
            None => self.inner.cwd.clone(),
        };
        exec::run(Exec {
            program: &call.program,
            args: &call.args,
            cwd: &cwd,
            sandbox: sandbox.wraps_commands().then_some(sandbox),
            env: &env,
            path: call.path.as_deref(),
            deadline: call.timeout.map(|t| Instant::now() + t),
            max_output: call.max_output.map_or(MAX_OUTPUT, |n| n.min(MAX_OUTPUT)),
            cancel,
        })
        .await
    }
}
