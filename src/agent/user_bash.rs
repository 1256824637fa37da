//! The user's own shell commands (the `bash` command): run in the session's cwd with the bash
//! tool's process handling, streamed as `bash_execution_update`, kept in the conversation as a
//! `bashExecution` message that the next request shows the model (unless excluded). The client
//! is the user, so nothing asks for permission; the gate still applies the `permissions.bash`
//! deny rules, and refuses a command they cannot be checked against (its program known only at
//! run time). An extension's `user_bash` hook comes after the gate, so it can answer for a
//! command (with its own result, which is recorded as the command's) but never run one the gate
//! refused.

use super::{Agent, CommandError, now_ms};
use crate::gate::{self, Decision, Refusal, Request};
use crate::protocol::{BashExecutionMessage, BashResult, Message};
use crate::tools::bash::run_for_user;
use tokio::sync::watch;

/// Counts the user commands running, so `abort` can wait until none is.
pub(super) type Running = watch::Sender<usize>;

/// Decrements the count however the command's future ends (finished or dropped).
struct Counted(Running);

impl Counted {
    fn start(running: &Running) -> Self {
        running.send_modify(|n| *n += 1);
        Counted(running.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Agent {
    /// Starts `command` now (so an `abort_bash` right after reaches it); the future resolves with
    /// Pi's `BashResult` once it ended and was recorded. Its output goes to `on_output` as it
    /// comes: the front end knows which of its requests the command answers, and so how to tag
    /// each chunk for its client.
    pub fn bash(
        &self,
        command: String,
        exclude_from_context: bool,
        on_output: impl Fn(&str) + Send + Sync + 'static,
    ) -> Result<impl Future<Output = Result<BashResult, CommandError>> + Send + 'static, CommandError>
    {
        let memory = gate::Memory::default();
        let session = gate::Session {
            approval: self.state().approval,
            bash: &self.inner.permission_rules,
            sandbox: &self.inner.sandbox,
            memory: &memory,
        };
        match gate::decide(&Request::UserBash { command: &command }, &session) {
            Decision::Refuse(Refusal::Denied { rule, .. }) => {
                return Err(CommandError::Blocked { rule });
            }
            Decision::Refuse(Refusal::Unchecked { reason, .. }) => {
                return Err(CommandError::Unchecked { reason });
            }
            Decision::Refuse(_) | Decision::Ask(_) | Decision::Run => {}
        }
        let cancel = self.state().bash_cancel.child_token();
        let counted = Counted::start(&self.inner.bash_running);
        let agent = self.clone();
        let env = self.session_env();
        let hook = self
            .extensions()
            .and_then(|e| e.user_bash(&command, exclude_from_context, &self.inner.cwd));
        Ok(async move {
            let answered = match hook {
                Some(hook) => hook.await.map_err(CommandError::Extension)?,
                None => None,
            };
            let result = match answered {
                Some(result) => result,
                None => {
                    let run = run_for_user(
                        &command,
                        &agent.inner.cwd,
                        &env,
                        &cancel,
                        &on_output,
                        &agent.inner.outputs,
                    )
                    .await?;
                    BashResult {
                        output: run.output,
                        exit_code: run.exit_code,
                        cancelled: run.cancelled,
                        truncated: run.truncated,
                        full_output_path: run.full_output_path,
                    }
                }
            };
            agent.record_bash(Message::BashExecution(BashExecutionMessage {
                command,
                output: result.output.clone(),
                exit_code: result.exit_code,
                cancelled: result.cancelled,
                truncated: result.truncated,
                full_output_path: result.full_output_path.clone(),
                exclude_from_context: exclude_from_context.then_some(true),
                timestamp: now_ms(),
            }));
            drop(counted);
            Ok(result)
        })
    }

    /// Cancels every running user command; they still answer, with `cancelled: true`.
    pub fn abort_bash(&self) {
        let mut state = self.state();
        state.bash_cancel.cancel();
        state.bash_cancel = tokio_util::sync::CancellationToken::new();
    }

    /// Resolves once no user command is running.
    pub(super) fn bash_idle(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut running = self.inner.bash_running.subscribe();
        async move {
            let _ = running.wait_for(|n| *n == 0).await;
        }
    }

    /// Into the conversation now, or, while a run streams, once it ends: a message slipped in
    /// between a tool call and its result would break the pairing every provider requires.
    fn record_bash(&self, message: Message) {
        let mut state = self.state();
        if state.run.is_some() {
            state.pending_bash.push(message);
        } else {
            self.store(&mut state, message);
        }
    }
}
