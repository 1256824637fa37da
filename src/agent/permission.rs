//! How the gate's questions reach a person: every call — built-in tools, MCP tools, and
//! whatever comes later — goes through [`Agent::gate`], which asks [`crate::gate::decide`] and,
//! when it says to ask, raises a `permission_request` and hands back the answer to wait for
//! ([`answered`]), or, when no client can answer (the one-shot modes), lets the [`Unattended`]
//! policy decide at once. The answers kept "always" go to the session's [`crate::gate::Memory`].
//! No path waits for an answer nobody can give.

use super::Agent;
use crate::gate::{self, Class, Decision, Question, Request};
use crate::protocol::Event;
use crate::tools::ToolOutput;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// What a call that went through the gate may do.
pub(super) enum Permission {
    Granted,
    /// Refused without anyone to ask; the text is the call's error result.
    Refused(String),
    /// Wait for the client's answer ([`answered`]).
    Pending(oneshot::Receiver<bool>),
}

impl Agent {
    /// Puts one call through the gate ([`gate::decide`]) with this session's approval mode,
    /// rules, sandbox and remembered answers, and asks when it says to. `not_done` words what a
    /// deny rule stopped ("the command was not run").
    pub(super) fn gate(
        &self,
        request: &Request,
        tool_call_id: &str,
        tool_name: &str,
        not_done: &str,
    ) -> Permission {
        // A copy, so that neither classifying a long command nor the sandbox's path checks
        // hold the session's lock.
        let (approval, memory) = {
            let state = self.state();
            (state.approval, state.memory.clone())
        };
        let session = gate::Session {
            approval,
            bash: &self.inner.permission_rules,
            sandbox: &self.inner.sandbox,
            memory: &memory,
        };
        match gate::decide(request, &session) {
            Decision::Run => Permission::Granted,
            Decision::Refuse(refusal) => Permission::Refused(refusal.text(not_done)),
            Decision::Ask(question) => self.ask_permission(tool_call_id, tool_name, question),
        }
    }

    /// Raises the `permission_request`, or, when no client can answer (the one-shot modes),
    /// lets the unattended policy decide at once.
    fn ask_permission(&self, tool_call_id: &str, tool_name: &str, q: Question) -> Permission {
        let mut state = self.state();
        if let Some(policy) = state.unattended.clone() {
            drop(state);
            if q.unchecked {
                // Not even --approve-flagged runs it: the deny rules, which win over
                // everything, could not be checked.
                policy.refuse(&q.subject, &q.reason);
                let nobody = "nova is running without anyone to ask";
                return Permission::Refused(gate::unchecked(&q.reason, nobody));
            }
            return if policy.decide(&q.subject, &q.reason, q.allow_rule) {
                Permission::Granted
            } else {
                Permission::Refused(refusal(&q.reason, q.allow_rule))
            };
        }
        let (request_id, answer) = state.permissions.open(q.class);
        self.emit(Event::PermissionRequest {
            request_id,
            tool_call_id: tool_call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            command: q.subject,
            reason: q.reason,
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
        return Err(ToolOutput::error(gate::DENIED));
    }
    Ok(())
}

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

#[derive(Debug, Default)]
pub struct Pending {
    /// Request ids are unique for the process and increase from 1, across sessions.
    last_id: u64,
    /// Each with what an "always" answer to it would cover.
    waiting: HashMap<u64, (oneshot::Sender<bool>, Option<Class>)>,
}

impl Pending {
    /// Registers a new request; the receiver yields the client's answer, or an error when the
    /// request is dropped (abort), which counts as a denial.
    pub fn open(&mut self, class: Option<Class>) -> (u64, oneshot::Receiver<bool>) {
        self.last_id += 1;
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(self.last_id, (tx, class));
        (self.last_id, rx)
    }

    /// Answers a request; returns what an "always" answer to it would cover.
    pub fn resolve(&mut self, id: u64, approved: bool) -> Result<Option<Class>, String> {
        let (sender, class) = self.waiting.remove(&id).ok_or_else(|| {
            format!("Unknown permission request {id}: it was never issued or is already resolved")
        })?;
        // The call may have been aborted meanwhile; then nobody is listening and that is fine.
        let _ = sender.send(approved);
        Ok(class)
    }

    /// What an "always" answer to request `id` would cover, while it waits.
    pub fn class(&self, id: u64) -> Option<&Class> {
        self.waiting.get(&id)?.1.as_ref()
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
        let (a, mut rx_a) = p.open(None);
        let (b, rx_b) = p.open(None);
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
        assert_eq!(p.open(None).0, 3);
    }
}
