//! Bash commands waiting for the client's `permission_response`, and the policy that answers
//! at once when there is no client to ask.

use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::oneshot;

/// How flagged commands are decided when no one can answer a `permission_request` (the
/// one-shot modes). `deny` and `allow` rules have already applied by then.
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
    /// Refused because the deny rules cannot be checked against it, which neither
    /// `approve_flagged` nor an allow rule overrides.
    pub unchecked: bool,
}

impl Unattended {
    pub(super) fn decide(&self, command: &str, reason: &str) -> bool {
        let approved = self.approve_flagged;
        (self.report)(&FlaggedCommand {
            command,
            reason,
            approved,
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
            unchecked: true,
        });
    }
}

/// The error result a refused command gets, so the model can work around it.
pub(super) fn refusal(reason: &str) -> String {
    format!(
        "This command needs the user's permission ({reason}), but nova is running without \
         anyone to ask, so it was not run. Find another way, or tell the user it needs \
         --approve-flagged or a permissions.bash allow rule."
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
