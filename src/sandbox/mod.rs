//! The sandbox around everything the agent runs.
//!
//! Bash commands run through [the launcher](launcher): nova re-executes itself, the child
//! restricts itself (a private mount namespace for the read-only paths inside writable roots,
//! then Landlock for everything else), starts bash and stays alive as its [keeper], which
//! kills whatever bash leaves behind. Every other program nova starts (the user's commands, MCP
//! servers, `!command` values) runs under the keeper too, without restrictions ([`kept`]). The file tools do not run in a child;
//! they ask the agent's permission gate instead, through [`Sandbox::check_write`], which
//! decides from the same [`Policy`]. Where the kernel cannot sandbox commands, nova asks before
//! every bash command instead (fail closed), unless the user turned the sandbox off.
//!
//! Nothing here knows about the RPC layer or the agent: the gate and the bash tool call in.

mod error;
mod git;
mod keeper;
mod launcher;
mod placeholder;
mod policy;
mod settings;
mod shell;

pub use error::SandboxError;
pub use launcher::{EnvChanges, Handoff, kept, kept_handoff, run_if_requested};
pub use placeholder::Placeholders;
pub use policy::{Policy, WriteRefusal, resolve_for_write};
pub use settings::{Mode, SandboxSettings};
pub use shell::{GroupStop, output_within, shell_command};

use crate::protocol::SandboxState;
use crate::warnings::Warnings;
use launcher::Spec;
use policy::Protected;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// Output that means a command was refused something (what the kernel's error texts say).
const REFUSALS: &[&str] = &[
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
];

/// How long a question may wait for the startup check: a launcher stuck on, say, a hung
/// network mount must not freeze nova.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Scratch space programs expect to write (POSIX shared memory, semaphores).
const SHARED_MEMORY: &str = "/dev/shm";

#[derive(Debug)]
pub struct Sandbox {
    mode: Mode,
    network: bool,
    /// The policy as known before the startup walk (without nested repositories).
    policy: Policy,
    /// Why commands cannot be sandboxed here; `None` when they can (or the sandbox is off).
    unavailable: Background<Option<String>>,
    /// The policy with the repositories nested below the cwd.
    nested: Background<Policy>,
    /// The session's, for what the background checks find.
    warnings: Warnings,
}

impl Sandbox {
    /// No sandbox at all.
    pub fn off() -> Sandbox {
        Sandbox::known(
            Mode::Off,
            true,
            Policy::new(Mode::Off, Path::new("/"), &[], Path::new("/")),
            None,
        )
    }

    /// A workspace sandbox the kernel is taken to enforce, without checking: for tests of what
    /// depends on the policy alone.
    #[cfg(test)]
    pub(crate) fn workspace(cwd: &Path, agent_dir: &Path) -> Sandbox {
        let policy = Policy::new(Mode::WorkspaceWrite, cwd, &[], agent_dir);
        Sandbox::known(Mode::WorkspaceWrite, true, policy, None)
    }

    fn known(mode: Mode, network: bool, policy: Policy, unavailable: Option<String>) -> Sandbox {
        Sandbox {
            mode,
            network,
            unavailable: Background::ready(unavailable),
            nested: Background::ready(policy.clone()),
            policy,
            warnings: Warnings::default(),
        }
    }

    /// Builds the sandbox from `--sandbox` (which wins) and the `sandbox` settings object, and
    /// creates `<cwd>/.nova/` so that it can be protected. Problems become `warnings`.
    ///
    /// Two things are worked out in the background so that they do not add to startup: whether
    /// the kernel can apply the sandbox (a throwaway launcher) and which git repositories are
    /// nested below the cwd (a bounded walk). The first question that depends on either waits
    /// for it, and a failure goes to `later` (the session's warnings) as soon as it is known.
    pub fn start(
        flag: Option<Mode>,
        settings: Result<SandboxSettings, String>,
        cwd: &Path,
        agent_dir: &Path,
        warnings: &mut Vec<String>,
        later: &Warnings,
    ) -> Sandbox {
        let mut settings = settings.unwrap_or_else(|e| {
            warnings.push(format!(
                "{e}; the sandbox is read-only and without network until this is fixed"
            ));
            SandboxSettings::strictest()
        });
        if let Some(mode) = flag {
            settings.mode = mode;
        }
        if settings.mode == Mode::Off {
            // Nothing to enforce, but the gate still needs the workspace and its protected
            // paths, to keep a remembered answer inside them.
            let policy = Policy::new(Mode::Off, cwd, &[], agent_dir);
            return Sandbox::known(Mode::Off, true, policy, None);
        }
        let roots = writable_roots(&settings.writable_roots, cwd, warnings);
        let policy = Policy::new(settings.mode, cwd, &roots, agent_dir);
        let sandbox = Sandbox::known(settings.mode, settings.network, policy, None);
        let probe = sandbox.spec(&sandbox.policy).probe();
        let probe = probe.map_err(|e| e.to_string()).and_then(|mut cmd| {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start the launcher: {e}"))
        });
        let checked = later.clone();
        let unavailable = Background::spawn("nova-sandbox-check", move || {
            report(probe.and_then(probe_result), &checked)
        })
        .unwrap_or_else(|e| Background::ready(report(Err(format!("cannot check it: {e}")), later)));
        let mut policy = sandbox.policy.clone();
        let walked = later.clone();
        let nested = match settings.mode {
            Mode::WorkspaceWrite => Background::spawn("nova-sandbox-repos", move || {
                if let Some(note) = policy.find_nested() {
                    warn(&note, &walked);
                }
                policy
            })
            .unwrap_or_else(|e| {
                warn(
                    &format!("cannot look for nested git repositories: {e}"),
                    later,
                );
                Background::ready(sandbox.policy.clone())
            }),
            _ => Background::ready(policy),
        };
        Sandbox {
            unavailable,
            nested,
            warnings: later.clone(),
            ..sandbox
        }
    }

    /// Bash commands run inside the sandbox (it is on, and the kernel can apply it).
    pub fn wraps_commands(&self) -> bool {
        self.mode != Mode::Off && self.unavailable().is_none()
    }

    /// Waits for the startup check the first time (a few milliseconds, and usually over long
    /// before anyone asks).
    fn unavailable(&self) -> Option<&str> {
        self.unavailable
            .get(|why| report(Err(format!("the check {why}")), &self.warnings))
            .as_deref()
    }

    /// The whole policy: waits for the startup walk the first time.
    fn policy(&self) -> &Policy {
        self.nested.get(|why| {
            warn(
                &format!("the search for nested git repositories {why}; they are not protected"),
                &self.warnings,
            );
            self.policy.clone()
        })
    }

    /// `get_state.sandbox`.
    pub fn wire_state(&self) -> SandboxState {
        SandboxState {
            mode: self.mode.as_str(),
            enforced: self.wraps_commands(),
            network: self.network,
            unavailable: self.unavailable().map(str::to_owned),
        }
    }

    /// Why a file tool's write to `target` (a path [`resolve_for_write`] gave, which the tool
    /// then writes and no other) must ask first; `None` to go ahead.
    pub fn write_refusal(&self, target: &Path) -> Option<WriteRefusal> {
        self.policy().refusal_for(target.to_path_buf())
    }

    /// The workspace root `target` lies in, when it lies in one and in no protected path, in any
    /// sandbox mode: the scope an answer about a file change may be remembered for.
    pub fn workspace_root(&self, target: &Path) -> Option<&Path> {
        self.policy().workspace_root(target)
    }

    /// Why a bash command must ask first as far as the sandbox is concerned: it cannot be
    /// sandboxed here, or the model asked to run it without the sandbox (`unsandboxed`).
    pub fn bash_reason(&self, unsandboxed: bool) -> Option<String> {
        if self.mode == Mode::Off {
            return None;
        }
        if let Some(why) = self.unavailable() {
            return Some(format!(
                "the sandbox is unavailable ({why}), so every bash command needs approval"
            ));
        }
        unsandboxed.then(|| {
            "the model asked to run this command without the sandbox (\"sandbox\": false): it \
             could change any file nova can change"
                .to_owned()
        })
    }

    /// The launcher command that runs `program args…` inside the sandbox, and the placeholders
    /// it relies on: [`Placeholders::release`] them once the launcher has exited.
    pub fn command(
        &self,
        program: &str,
        args: &[&str],
    ) -> Result<(Command, Placeholders), SandboxError> {
        let policy = self.policy();
        let placeholders = Placeholders::hold(&policy.placeholders())?;
        match self.spec(policy).command(program, args) {
            Ok(cmd) => Ok((cmd, placeholders)),
            Err(e) => {
                placeholders.release();
                Err(e)
            }
        }
    }

    /// [`Sandbox::command`] for another program to start (an editor's terminal): the same
    /// launcher, binding what that program runs as it binds nova's own children.
    pub fn handoff(
        &self,
        program: &str,
        args: &[&str],
        env: &EnvChanges,
    ) -> Result<(Handoff, Placeholders), SandboxError> {
        let policy = self.policy();
        let placeholders = Placeholders::hold(&policy.placeholders())?;
        match self.spec(policy).handoff(program, args, env) {
            Ok(handoff) => Ok((handoff, placeholders)),
            Err(e) => {
                placeholders.release();
                Err(e)
            }
        }
    }

    /// A note for the model when a sandboxed command failed with a permission error.
    pub fn refusal_note(&self, output: &str) -> Option<String> {
        if output.contains(launcher::SETUP_FAILED_PREFIX) {
            return Some(
                "[The sandbox could not be set up, so the command did not run. To run it \
                 anyway, call bash again with \"sandbox\": false; the user will be asked to \
                 approve it.]"
                    .to_owned(),
            );
        }
        if !REFUSALS.iter().any(|r| output.contains(r)) {
            return None;
        }
        let allowed = match self.mode {
            Mode::ReadOnly => "commands may not change any file".to_owned(),
            _ => format!(
                "commands may write only under {}, and never to .nova/, .mcp.json or the files \
                 through which git runs programs (hooks, config, commondir, …)",
                self.policy.roots_text()
            ),
        };
        let network = if self.network {
            ""
        } else {
            "; TCP connections are blocked"
        };
        Some(format!(
            "[The sandbox ({}) probably refused this: {allowed}{network}. If the command \
             really needs that, call bash again with \"sandbox\": false; the user will be \
             asked to approve running it without the sandbox.]",
            self.mode
        ))
    }

    /// What the launcher must set up for a command starting now (protected paths are looked
    /// up each time: `.git` may appear during a session).
    fn spec(&self, policy: &Policy) -> Spec {
        let Protected { read_only, pinned } = policy.protected();
        let mut writable = policy.writable().to_vec();
        if self.mode == Mode::WorkspaceWrite {
            writable.push(PathBuf::from(SHARED_MEMORY));
        }
        Spec {
            writable,
            read_only,
            pinned,
            network: self.network,
        }
    }
}

/// Says, in the words of nova's other startup warnings, what the check found; returns why the
/// sandbox is unavailable.
fn report(check: Result<Vec<String>, String>, warnings: &Warnings) -> Option<String> {
    let (lines, unavailable) = match check {
        Ok(notes) => (
            notes.iter().map(|n| format!("sandbox: {n}")).collect(),
            None,
        ),
        Err(reason) => (
            vec![format!(
                "sandbox unavailable: {reason}; nova will ask before every bash command \
                 (sandbox mode \"off\" runs them unsandboxed without asking)"
            )],
            Some(reason),
        ),
    };
    for line in lines {
        warnings.warn(&format!("warning: {line}"));
    }
    unavailable
}

fn warn(note: &str, warnings: &Warnings) {
    warnings.warn(&format!("warning: sandbox: {note}"));
}

/// A value worked out on a thread of its own while nova starts. The first reader waits for it
/// (at most [`CHECK_TIMEOUT`]); then it is kept.
#[derive(Debug)]
struct Background<T> {
    value: OnceLock<T>,
    pending: Mutex<Option<Receiver<T>>>,
}

impl<T: Send + 'static> Background<T> {
    fn ready(value: T) -> Background<T> {
        Background {
            value: OnceLock::from(value),
            pending: Mutex::new(None),
        }
    }

    fn spawn(
        name: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<Background<T>> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _ = tx.send(work());
            })?;
        Ok(Background {
            value: OnceLock::new(),
            pending: Mutex::new(Some(rx)),
        })
    }

    /// `failed` is told why there is no value ("did not finish within 5 s", "failed").
    fn get(&self, failed: impl FnOnce(String) -> T) -> &T {
        self.value.get_or_init(|| {
            let pending = self
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match pending.map(|rx| rx.recv_timeout(CHECK_TIMEOUT)) {
                Some(Ok(value)) => value,
                Some(Err(RecvTimeoutError::Timeout)) => failed(format!(
                    "did not finish within {} s",
                    CHECK_TIMEOUT.as_secs()
                )),
                _ => failed("failed".into()),
            }
        })
    }
}

/// What the throwaway launcher said: `Ok` holds what the kernel cannot enforce.
fn probe_result(child: Child) -> Result<Vec<String>, String> {
    let output = child
        .wait_with_output()
        .map_err(|e| format!("cannot wait for the launcher: {e}"))?;
    if output.status.success() {
        let notes = String::from_utf8_lossy(&output.stdout);
        return Ok(notes.lines().map(str::to_owned).collect());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let reason = stderr
        .trim()
        .strip_prefix(launcher::SETUP_FAILED_PREFIX)
        .map(|r| r.trim_start_matches(": "))
        .and_then(|r| r.strip_suffix(launcher::SETUP_FAILED_SUFFIX))
        .unwrap_or(stderr.trim());
    Err(if reason.is_empty() {
        format!("the launcher failed ({})", output.status)
    } else {
        reason.to_owned()
    })
}

/// `sandbox.writableRoots` as absolute paths (`~` is the home directory, relative paths start
/// at the cwd); missing directories are reported and left out.
fn writable_roots(raw: &[String], cwd: &Path, warnings: &mut Vec<String>) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut roots = Vec::new();
    for entry in raw {
        let path = match (entry.as_str(), &home) {
            ("~", Some(home)) => home.clone(),
            (s, Some(home)) if s.starts_with("~/") => home.join(&s[2..]),
            (s, _) => cwd.join(s),
        };
        if path.is_dir() {
            roots.push(path);
        } else {
            warnings.push(format!(
                "settings: sandbox.writableRoots entry \"{entry}\" is not a directory; ignored"
            ));
        }
    }
    roots
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_settings_fall_back_to_the_strictest_and_the_flag_wins() {
        let dir = tempfile::tempdir().unwrap();
        let mut warnings = vec![];
        let bad = json!({"mode": "sometimes"});
        let s = Sandbox::start(
            Some(Mode::Off),
            SandboxSettings::from_settings(Some(&bad)),
            dir.path(),
            dir.path(),
            &mut warnings,
            &Warnings::default(),
        );
        assert_eq!(s.wire_state().mode, "off");
        assert!(!s.wraps_commands());
        assert_eq!(s.bash_reason(true), None);
        assert!(warnings[0].contains("\"sandbox.mode\""), "{warnings:?}");
        assert!(!dir.path().join(".nova").exists(), "off creates nothing");
    }

    #[test]
    fn writable_roots_expand_and_skip_missing_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("cache")).unwrap();
        let mut warnings = vec![];
        let raw = ["cache".to_owned(), "missing".to_owned(), "/".to_owned()];
        let roots = writable_roots(&raw, dir.path(), &mut warnings);
        assert_eq!(roots, [dir.path().join("cache"), PathBuf::from("/")]);
        assert!(warnings[0].contains("\"missing\""), "{warnings:?}");
    }

    #[test]
    fn notes_and_reasons() {
        let policy = Policy::new(Mode::WorkspaceWrite, Path::new("/w"), &[], Path::new("/a"));
        let sandbox = Sandbox::known(Mode::WorkspaceWrite, false, policy.clone(), None);
        assert_eq!(sandbox.refusal_note("No such file or directory"), None);
        let note = sandbox
            .refusal_note("bash: /etc/x: Permission denied")
            .unwrap();
        assert!(note.contains("/w") && note.contains("TCP"), "{note}");
        assert!(note.contains("\"sandbox\": false"), "{note}");
        assert_eq!(sandbox.bash_reason(false), None);
        assert!(
            sandbox
                .bash_reason(true)
                .unwrap()
                .contains("without the sandbox")
        );

        let unavailable = Sandbox::known(
            Mode::WorkspaceWrite,
            false,
            policy,
            Some("no Landlock".into()),
        );
        assert!(!unavailable.wraps_commands());
        assert!(
            unavailable
                .bash_reason(false)
                .unwrap()
                .contains("no Landlock")
        );
        let state = unavailable.wire_state();
        assert_eq!((state.mode, state.enforced), ("workspace-write", false));
    }
}
