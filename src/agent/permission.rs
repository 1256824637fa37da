//! The one way a call asks whether it may run — bash, `write`/`edit` outside the sandbox's
//! bounds, MCP tools, and whatever comes later: [`Agent::ask_permission`] raises a
//! `permission_request` and hands back the answer to wait for ([`answered`]), or, when no client
//! can answer (the one-shot modes), lets the [`Unattended`] policy decide at once. One verdict
//! type, one wording for a denial, and no path that waits for an answer nobody can give.

use super::Agent;
use crate::protocol::Event;
use crate::tools::ToolOutput;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// The result of a call the user refused.
pub(super) const DENIED: &str = "The user denied permission for this call, so it was not run.";

/// What a call that asked may do.
pub(super) enum Permission {
    Granted,
    /// Refused without anyone to ask; the text is the call's error result.
    Refused(String),
    /// Wait for the client's answer ([`answered`]).
    Pending(oneshot::Receiver<bool>),
}

/// One question to the person driving nova.
pub(super) struct Question {
    /// The call that asks.
    pub tool_call_id: String,
    /// The tool, as the `permission_request` names it.
    pub tool_name: String,
    /// What would run: the command, the path written, an MCP call's arguments.
    pub command: String,
    /// Why the gate asks.
    pub reason: String,
    /// The setting whose allow rule would let such calls run unasked, for the refusal's
    /// advice (`permissions.bash`, `permissions.mcp`); `None` when no rule can, as for a
    /// command that leaves the sandbox, which only a person or `--approve-flagged` lets run.
    pub allow_rule: Option<&'static str>,
}

impl Agent {
    pub(super) fn ask_permission(&self, question: Question) -> Permission {
        let mut state = self.state();
        if let Some(policy) = state.unattended.clone() {
            drop(state);
            return if policy.decide(&question.command, &question.reason, question.allow_rule) {
                Permission::Granted
            } else {
                Permission::Refused(refusal(&question.reason, question.allow_rule))
            };
        }
        let (request_id, answer) = state.permissions.open();
        self.emit(Event::PermissionRequest {
            request_id,
            tool_call_id: question.tool_call_id,
            tool_name: question.tool_name,
            command: question.command,
            reason: question.reason,
        });
        Permission::Pending(answer)
    }
}

/// Waits for the client's answer; the error is the result of a call that must not run
/// (`aborted` is the tool's own text for an abort).
pub(super) async fn answered(
    answer: oneshot::Receiver<bool>,
    cancel: &CancellationToken,
    aborted: &str,
) -> Result<(), ToolOutput> {
    let approved = tokio::select! {
        answer = answer => answer.unwrap_or(false),
        () = cancel.cancelled() => false,
    };
    if cancel.is_cancelled() {
        return Err(ToolOutput::error(aborted));
    }
    if !approved {
        return Err(ToolOutput::error(DENIED));
    }
    Ok(())
}

/// How much the session asks before it acts, on top of the settings' rules: a front end's
/// switch (ACP's session modes), for this process only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approval {
    /// Every bash command, `write` and `edit` asks.
    Ask,
    /// The settings' rules decide (by default flagged commands ask, and writes outside the
    /// sandbox's bounds).
    #[default]
    Auto,
    /// `bash`, `write` and `edit` are refused without asking; reading tools run.
    ReadOnly,
}

impl Approval {
    pub const ALL: [Approval; 3] = [Approval::Ask, Approval::Auto, Approval::ReadOnly];

    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Ask => "ask",
            Approval::Auto => "auto",
            Approval::ReadOnly => "read-only",
        }
    }

    pub fn parse(name: &str) -> Option<Approval> {
        Approval::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

/// The result of a call the read-only approval mode stops.
pub(super) const READ_ONLY: &str =
    "The session is in read-only mode, so this call was not run; the user can switch the mode.";

/// How calls that ask are decided when no one can answer a `permission_request` (the one-shot
/// modes). `deny` and `allow` rules have already applied by then.
#[derive(Clone)]
pub struct Unattended {
    /// Run flagged commands instead of refusing them.
    pub approve_flagged: bool,
    /// Told of each decision, so the person who started nova learns what ran or why not.
    pub report: Arc<dyn Fn(&FlaggedCommand) + Send + Sync>,
}

/// One flagged command and what [`Unattended`] made of it.
#[derive(Debug)]
pub struct FlaggedCommand<'a> {
    pub command: &'a str,
    /// Why the gate flagged it.
    pub reason: &'a str,
    pub approved: bool,
    /// The setting whose allow rule would have let it run, when one could.
    pub allow_rule: Option<&'a str>,
    /// Refused because the deny rules cannot be checked against it, which neither
    /// `approve_flagged` nor an allow rule overrides.
    pub unchecked: bool,
}

impl Unattended {
    pub(super) fn decide(&self, command: &str, reason: &str, allow_rule: Option<&str>) -> bool {
        let approved = self.approve_flagged;
        (self.report)(&FlaggedCommand {
            command,
            reason,
            approved,
            allow_rule,
            unchecked: false,
        });
        approved
    }

    /// Tells of a command the deny rules cannot be checked against, refused whatever
    /// `approve_flagged` says.
    pub(super) fn refuse(&self, command: &str, reason: &str) {
        (self.report)(&FlaggedCommand {
            command,
            reason,
            approved: false,
            allow_rule: None,
            unchecked: true,
        });
    }
}

/// The one wording of a call a deny rule stopped: `rules` is the setting, `not_done` what did
/// not happen ("the command was not run").
pub(super) fn blocked(rules: &str, rule: &str, not_done: &str) -> String {
    format!("Blocked by the {rules} deny rule `{rule}`; {not_done}.")
}

/// The error result a refused call gets, so the model can work around it.
fn refusal(reason: &str, allow_rule: Option<&str>) -> String {
    let or_rule = allow_rule
        .map(|rules| format!(" or a {rules} allow rule"))
        .unwrap_or_default();
    format!(
        "This call needs the user's permission ({reason}), but nova is running without \
         anyone to ask, so it was not run. Find another way, or tell the user it needs \
         --approve-flagged{or_rule}."
    )
}

/// The error result of a command the deny rules cannot be checked against, where `nobody`
/// says why no one was asked.
pub(super) fn unchecked(reason: &str, nobody: &str) -> String {
    format!(
        "Not run: {reason}, and {nobody}. Write the command with its program names spelled out \
         (no variable, substitution or `eval` of a variable as the command), or tell the user \
         to run it."
    )
}

#[derive(Debug, Default)]
pub struct Pending {
    /// Request ids are unique for the process and increase from 1, across sessions.
    last_id: u64,
    waiting: HashMap<u64, oneshot::Sender<bool>>,
}

impl Pending {
    /// Registers a new request; the receiver yields the client's answer, or an error when the
    /// request is dropped (abort), which counts as a denial.
    pub fn open(&mut self) -> (u64, oneshot::Receiver<bool>) {
        self.last_id += 1;
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(self.last_id, tx);
        (self.last_id, rx)
    }

    pub fn resolve(&mut self, id: u64, approved: bool) -> Result<(), String> {
        let sender = self.waiting.remove(&id).ok_or_else(|| {
            format!("Unknown permission request {id}: it was never issued or is already resolved")
        })?;
        // The call may have been aborted meanwhile; then nobody is listening and that is fine.
        let _ = sender.send(approved);
        Ok(())
    }

    pub fn deny_all(&mut self) {
        self.waiting.clear();
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_increase_and_resolve_once() {
        let mut p = Pending::default();
        let (a, mut rx_a) = p.open();
        let (b, rx_b) = p.open();
        assert_eq!((a, b), (1, 2));
        assert_eq!(p.len(), 2);
        p.resolve(a, true).unwrap();
        assert!(rx_a.try_recv().unwrap());
        assert!(
            p.resolve(a, false)
                .unwrap_err()
                .contains("Unknown permission request 1")
        );
        p.deny_all();
        assert_eq!(p.len(), 0);
        assert!(rx_b.blocking_recv().is_err());
        assert_eq!(p.open().0, 3);
    }
}
