//! The permission gate: the one place that decides whether a call runs, is refused, or asks the
//! person driving nova first. Every tool source comes here — the built-in tools, MCP tools, the
//! user's own `bash` command, extension tools, and an extension's `pi.exec` (as the model's
//! `bash`) — with a typed [`Request`]; the
//! gate weighs it against the session's settings, sandbox, approval mode ([`Approval`]) and
//! remembered answers ([`Memory`]) and returns one [`Decision`]. How a question reaches a person
//! (or the unattended policy) is the agent's business; what may be asked, and what an "always"
//! answer may cover, is decided here.
//!
//! Escalations always ask, whatever was answered before: a command that leaves the sandbox (or
//! runs where there is none to apply), a write outside the writable roots or into a protected
//! path, a command whose program is known only at run time. An "always" answer is remembered
//! for the [`Class`] the question was asked for, and no wider.
//!
//! [`classify`] reads a bash command as bash will run it and says whether it is flagged; it
//! depends on nothing of nova but the glob engine, so it can be tested and fuzzed alone.

pub mod classify;
mod memory;

pub use memory::{Class, Memory};

use crate::sandbox::Sandbox;
use classify::{Judgement, Mode, Verdict};
use std::path::Path;

/// One call the gate is asked about.
#[derive(Debug)]
pub enum Request<'a> {
    /// A tool that only reads (`read`, `grep`, `find`, `ls`, images).
    Read,
    /// The model's `bash` call; `unsandboxed` when it asked to leave the sandbox.
    Bash { command: &'a str, unsandboxed: bool },
    /// The user's own command (Pi's `bash` command): the client is the user, so nothing asks,
    /// but the deny rules still apply.
    UserBash { command: &'a str },
    /// A `write` or `edit` of `target`: the path it really changes
    /// ([`crate::sandbox::resolve_for_write`]), which the tool then writes and no other.
    Write { target: &'a Path },
    /// A call to a tool nova does not implement itself (an MCP server's or an extension's),
    /// which can change anything its server or extension can; `rules` is what the settings say
    /// of its name, `args` the call's arguments as a person is shown them.
    Tool {
        source: Source,
        name: &'a str,
        args: &'a str,
        rules: Verdict,
    },
}

/// Where a [`Request::Tool`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// An MCP server; `permissions.mcp` rules match its tools' names.
    Mcp,
    /// An extension in the extension host. No setting has rules for extension tools (an
    /// extension is code the user chose to run, as in Pi), so only the approval mode and
    /// remembered answers apply.
    Extension,
}

impl Source {
    /// The setting whose rules match this source's tools.
    fn rules(self) -> Option<&'static str> {
        match self {
            Source::Mcp => MCP_RULES,
            Source::Extension => None,
        }
    }

    fn every_call(self) -> &'static str {
        match self {
            Source::Mcp => "the session asks before every MCP call",
            Source::Extension => "the session asks before every extension tool call",
        }
    }
}

/// What the gate knows of the session a call belongs to.
pub struct Session<'a> {
    pub approval: Approval,
    /// `permissions.bash`, compiled.
    pub bash: &'a classify::Gate,
    pub sandbox: &'a Sandbox,
    pub memory: &'a Memory,
}

#[derive(Debug)]
pub enum Decision {
    Run,
    /// Refused without asking anyone.
    Refuse(Refusal),
    Ask(Question),
}

/// Why a call was refused without asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A deny rule of `setting` matched.
    Denied { setting: &'static str, rule: String },
    /// The deny rules cannot be checked against what the command runs, and `nobody` (why no one
    /// is asked) — or, for the user's own command, the user runs it from their own shell.
    Unchecked {
        reason: String,
        nobody: &'static str,
    },
    /// The session is in read-only mode.
    ReadOnly,
    /// The user answered "always reject" for calls like this one.
    Remembered,
}

impl Refusal {
    /// The call's error result; `not_done` says what did not happen ("the command was not run").
    pub fn text(&self, not_done: &str) -> String {
        match self {
            Refusal::Denied { setting, rule } => blocked(setting, rule, not_done),
            Refusal::Unchecked { reason, nobody } => unchecked(reason, nobody),
            Refusal::ReadOnly => READ_ONLY.to_owned(),
            Refusal::Remembered => REMEMBERED.to_owned(),
        }
    }
}

/// One question for the person driving nova.
#[derive(Debug, Clone)]
pub struct Question {
    /// What would run: the command, the path written, an MCP call's arguments.
    pub subject: String,
    /// Why the gate asks.
    pub reason: String,
    /// The setting whose allow rules would let such calls run unasked, for the unattended
    /// refusal's advice; `None` when no rule can (leaving the sandbox, writing outside it).
    pub allow_rule: Option<&'static str>,
    /// What an "always" answer covers; `None` when the question must be asked every time (an
    /// escalation, or a command known only at run time).
    pub class: Option<Class>,
    /// The deny rules could not be checked: nobody but a person may let it run, not even
    /// `--approve-flagged`.
    pub unchecked: bool,
}

/// How much the session asks before it acts, on top of the settings' rules: a front end's
/// switch (ACP's session modes), for this process only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approval {
    /// Every bash command, file change and MCP call asks.
    Ask,
    /// The settings' rules decide (by default flagged commands ask, and writes outside the
    /// sandbox's bounds).
    #[default]
    Auto,
    /// Bash, `write`, `edit` and MCP tools are refused without asking; reading tools run.
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

/// The setting whose allow rules let a flagged bash command run unasked.
const BASH_RULES: Option<&str> = Some("permissions.bash");
const MCP_RULES: Option<&str> = Some("permissions.mcp");

pub fn decide(request: &Request, session: &Session) -> Decision {
    match *request {
        Request::Read => Decision::Run,
        Request::Bash {
            command,
            unsandboxed,
        } => bash(command, unsandboxed, session),
        Request::UserBash { command } => match classify::judge(command, session.bash) {
            Judgement::Deny { rule } => Decision::Refuse(Refusal::Denied {
                setting: "permissions.bash",
                rule,
            }),
            Judgement::Unchecked { reason } => Decision::Refuse(Refusal::Unchecked {
                reason,
                nobody: "the command came from the user, who can run it from their own shell",
            }),
            Judgement::Run | Judgement::Ask(_) => Decision::Run,
        },
        Request::Write { target } => write(target, session),
        Request::Tool {
            source,
            name,
            args,
            ref rules,
        } => tool(source, name, args, rules.clone(), session),
    }
}

fn bash(command: &str, unsandboxed: bool, session: &Session) -> Decision {
    if session.approval == Approval::ReadOnly {
        return Decision::Refuse(Refusal::ReadOnly);
    }
    let sandbox = session.sandbox.bash_reason(unsandboxed);
    let asks_all;
    let rules = if session.approval == Approval::Ask {
        let mut rules = session.bash.clone();
        rules.mode = Mode::Always;
        asks_all = rules;
        &asks_all
    } else {
        session.bash
    };
    let ask = |reason: String, allow_rule, class, unchecked| {
        Decision::Ask(Question {
            subject: command.to_owned(),
            reason,
            allow_rule,
            class,
            unchecked,
        })
    };
    match (classify::judge(command, rules), sandbox) {
        (Judgement::Deny { rule }, _) => Decision::Refuse(Refusal::Denied {
            setting: "permissions.bash",
            rule,
        }),
        (Judgement::Run, None) => Decision::Run,
        // What the sandbox asks about is an escalation: no allow rule or earlier answer lifts it.
        (Judgement::Run, Some(reason)) => ask(reason, None, None, false),
        (Judgement::Ask(asking), Some(sandbox)) => ask(
            format!("{}; {sandbox}", asking[0].reason),
            None,
            None,
            false,
        ),
        (Judgement::Ask(asking), None) => {
            let class = asking
                .iter()
                .map(|a| a.exact.clone())
                .collect::<Option<Vec<_>>>()
                .map(Class::Commands);
            if let Some(decided) = recalled(class.as_ref(), session.memory) {
                return decided;
            }
            // Name a command the person has not answered for yet.
            let open = class
                .as_ref()
                .and_then(|_| {
                    asking.iter().find(|a| {
                        a.exact.as_ref().is_none_or(|e| {
                            session.memory.recall(&Class::Commands(vec![e.clone()])) != Some(true)
                        })
                    })
                })
                .unwrap_or(&asking[0]);
            ask(open.reason.clone(), BASH_RULES, class, false)
        }
        (Judgement::Unchecked { reason }, sandbox) => {
            if rules.mode == Mode::Never {
                return Decision::Refuse(Refusal::Unchecked {
                    reason,
                    nobody: "permissions.bash.mode is \"never\", so nobody is asked",
                });
            }
            match sandbox {
                Some(sandbox) => ask(format!("{reason}; {sandbox}"), None, None, true),
                None => ask(reason, BASH_RULES, None, true),
            }
        }
    }
}

fn write(target: &Path, session: &Session) -> Decision {
    if session.approval == Approval::ReadOnly {
        return Decision::Refuse(Refusal::ReadOnly);
    }
    if let Some(refusal) = session.sandbox.write_refusal(target) {
        // Outside the roots, protected, or a read-only sandbox: asks every time.
        return Decision::Ask(Question {
            subject: refusal.path.display().to_string(),
            reason: refusal.reason,
            allow_rule: None,
            class: None,
            unchecked: false,
        });
    }
    if session.approval != Approval::Ask {
        return Decision::Run;
    }
    let class = session
        .sandbox
        .workspace_root(target)
        .map(|root| Class::WritesUnder(root.to_path_buf()));
    if let Some(decided) = recalled(class.as_ref(), session.memory) {
        return decided;
    }
    Decision::Ask(Question {
        subject: target.display().to_string(),
        reason: "the session asks before every change".into(),
        allow_rule: None,
        class,
        unchecked: false,
    })
}

fn tool(source: Source, name: &str, args: &str, rules: Verdict, session: &Session) -> Decision {
    // Such a tool can change anything its server or extension can: read-only refuses it like
    // bash.
    if session.approval == Approval::ReadOnly {
        return Decision::Refuse(Refusal::ReadOnly);
    }
    let reason = match rules {
        Verdict::Deny { rule } => {
            return Decision::Refuse(Refusal::Denied {
                setting: source.rules().unwrap_or("permissions"),
                rule,
            });
        }
        // MCP rules match names only, so no call is left unchecked; were one, it would ask.
        Verdict::Ask { reason } | Verdict::Unchecked { reason } => reason,
        Verdict::Run if session.approval == Approval::Ask => source.every_call().to_owned(),
        Verdict::Run => return Decision::Run,
    };
    let class = Class::Tool {
        name: name.to_owned(),
        reason: reason.clone(),
    };
    if let Some(decided) = recalled(Some(&class), session.memory) {
        return decided;
    }
    Decision::Ask(Question {
        subject: args.to_owned(),
        reason,
        allow_rule: source.rules(),
        class: Some(class),
        unchecked: false,
    })
}

/// The decision an earlier "always" answer already made for `class`.
fn recalled(class: Option<&Class>, memory: &Memory) -> Option<Decision> {
    match memory.recall(class?)? {
        true => Some(Decision::Run),
        false => Some(Decision::Refuse(Refusal::Remembered)),
    }
}

/// The result of a call the user refused.
pub const DENIED: &str = "The user denied permission for this call, so it was not run.";

/// The result of a call the read-only approval mode stops.
const READ_ONLY: &str =
    "The session is in read-only mode, so this call was not run; the user can switch the mode.";

const REMEMBERED: &str = "The user chose to reject calls like this one for the rest of the \
    session, so it was not run.";

/// The one wording of a call a deny rule stopped: `rules` is the setting, `not_done` what did
/// not happen ("the command was not run").
pub fn blocked(rules: &str, rule: &str, not_done: &str) -> String {
    format!("Blocked by the {rules} deny rule `{rule}`; {not_done}.")
}

/// The error result of a command the deny rules cannot be checked against, where `nobody`
/// says why no one was asked.
pub fn unchecked(reason: &str, nobody: &str) -> String {
    format!(
        "Not run: {reason}, and {nobody}. Write the command with its program names spelled out \
         (no variable, substitution or `eval` of a variable as the command), or tell the user \
         to run it."
    )
}

#[cfg(test)]
mod tests;
