//! The launcher: nova re-executed as `nova __sandbox <launch-json> -- <program> <args…>`. It
//! runs in the child process, before any thread exists, restricts itself (when a sandbox is
//! asked for), starts the program and stays alive as its [keeper](super::keeper) (in every
//! mode, `off` included), so the restrictions bind the program and everything it starts, and
//! nothing it starts outlives it. Doing this in a fresh process instead of a `pre_exec` hook
//! keeps it free of `unsafe` and of the rules about what may run between `fork` and `exec`.
//!
//! Steps, each fatal (the program never runs half-protected):
//! 1. When something must be protected: a private mount namespace (inside a new user namespace
//!    that maps the caller's ids to themselves), protected paths bind-mounted onto themselves
//!    and remounted read-only, `.git` bind-mounted onto itself so it cannot be renamed away.
//! 2. Landlock: read and execute everywhere, write only beneath the writable roots and a few
//!    devices; with `network: false`, no TCP `connect` or `bind`. Landlock also forbids any
//!    later `mount`/`umount`, so the program cannot undo step 1.
//! 3. The keeper starts the program (which inherits the restrictions, the process group nova
//!    gave the launcher, and its pipes) and waits for it.
//!
//! Handed over ([`Handoff`]): another program — an editor's terminal, over ACP — starts the
//! launcher on nova's behalf, as `/proc/<nova's pid>/exe` with the same arguments, so the same
//! sandbox binds what it runs. What nova would otherwise give its own child the launcher then
//! sees to itself: the program's environment is exactly nova's (the names travel in the launch
//! description, the values as the starter's environment for it; the starter's own variables are
//! dropped), its stdin is empty, and nova's death stops it (watched, since nova is not the
//! parent) — never the end of the starter's thread, which the parent-death signal would follow.
//! The program runs under a second, plain keeper whose parent-death signal is the first: a
//! starter that kills the launcher outright (SIGKILL) still ends everything below it.

use super::{SandboxError, keeper};
use landlock::{
    ABI, Access, AccessFs, AccessNet, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, path_beneath_rules,
};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{getgid, getuid};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The hidden first argument that turns nova into the launcher.
const ARG: &str = "__sandbox";
/// Instead of `-- <program>`: apply everything, print any notes on stdout, exit 0.
const PROBE: &str = "--probe";
/// The exit code when the sandbox cannot be set up (and the program was never started).
const SETUP_FAILED: u8 = 125;
/// Printed around the reason when the sandbox cannot be set up.
pub const SETUP_FAILED_PREFIX: &str = "nova: the sandbox could not be set up";
pub const SETUP_FAILED_SUFFIX: &str = "; the command was not run";

/// Landlock access rights are requested as of this ABI (Linux 6.10); older kernels enforce the
/// subset they know (see docs/tools.md for what that leaves out).
const LANDLOCK_ABI: ABI = ABI::V5;

/// Devices a normal shell session writes to, in every mode.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// What nova tells the launcher, as JSON in one argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Launch {
    /// nova's pid: the keeper must not run a program for a nova that is already gone.
    parent: u32,
    /// `None`: no restrictions, only the keeper.
    sandbox: Option<Spec>,
    /// Handed over: started by another program, and the names of the variables the program
    /// keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    handed_over: Option<Vec<String>>,
}

/// A launcher command for another program to start on nova's behalf: the program, its
/// arguments and the environment to start it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// The restrictions the launcher applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    pub writable: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub pinned: Vec<PathBuf>,
    pub network: bool,
}

impl Spec {
    /// The launcher command for `program args…` under this spec.
    pub fn command<I, S>(
        &self,
        program: &str,
        args: I,
    ) -> Result<std::process::Command, SandboxError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        debug_assert!(on_main_thread());
        let mut cmd = sandboxed(self)?;
        cmd.arg("--").arg(program).args(args);
        Ok(cmd)
    }

    /// The launcher command for `program args…` under this spec, for another program to start.
    pub fn handoff(
        &self,
        program: &str,
        args: &[&str],
        env: &EnvChanges,
    ) -> Result<Handoff, SandboxError> {
        handoff(Some(self.clone()), program, args, env)
    }

    /// The launcher command that only checks that this spec can be applied.
    pub fn probe(&self) -> Result<std::process::Command, SandboxError> {
        let mut cmd = sandboxed(self)?;
        cmd.arg(PROBE);
        Ok(cmd)
    }
}

/// The launcher command for `program args…` without restrictions: only the keeper.
///
/// Unit tests run inside the test harness's binary, which cannot act as the launcher, so there
/// the program is started directly (the keeper is tested end to end through nova's binary).
pub fn kept<I, S>(program: impl AsRef<std::ffi::OsStr>, args: I) -> std::process::Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    if cfg!(test) {
        let mut cmd = std::process::Command::new(program);
        cmd.args(args);
        return cmd;
    }
    debug_assert!(on_main_thread());
    plain_keeper(program, args)
}

/// The launcher command for a keeper without restrictions, whose parent is this process.
fn plain_keeper<I, S>(program: impl AsRef<std::ffi::OsStr>, args: I) -> std::process::Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    // A `Launch` without a sandbox (whose paths may not be UTF-8, so its encoding can fail).
    let json = serde_json::json!({ "parent": std::process::id() }).to_string();
    let mut cmd = launcher(json);
    cmd.arg("--").arg(program).args(args);
    cmd
}

/// The launcher command for `spec`.
fn sandboxed(spec: &Spec) -> Result<std::process::Command, SandboxError> {
    let launch = Launch {
        parent: std::process::id(),
        sandbox: Some(spec.clone()),
        handed_over: None,
    };
    serde_json::to_string(&launch)
        .map(launcher)
        .map_err(SandboxError::Describe)
}

/// [`kept`] for another program to start: only the keeper, no restrictions.
pub fn kept_handoff(
    program: &str,
    args: &[&str],
    env: &EnvChanges,
) -> Result<Handoff, SandboxError> {
    handoff(None, program, args, env)
}

/// Variables to set (`Some`) or drop (`None`) for the program, over nova's own environment.
pub type EnvChanges = [(&'static str, Option<String>)];

/// nova's environment (the variables whose names and values are text, which is all another
/// program can be told) with `changes` goes with the command; the launcher keeps exactly those.
fn handoff(
    sandbox: Option<Spec>,
    program: &str,
    args: &[&str],
    changes: &EnvChanges,
) -> Result<Handoff, SandboxError> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| !changes.iter().any(|(changed, _)| changed == name))
        .collect();
    env.extend(
        changes
            .iter()
            .filter_map(|(name, value)| Some(((*name).to_owned(), value.clone()?))),
    );
    let launch = Launch {
        parent: std::process::id(),
        sandbox,
        handed_over: Some(env.iter().map(|(name, _)| name.clone()).collect()),
    };
    let json = serde_json::to_string(&launch).map_err(SandboxError::Describe)?;
    let mut all = vec![ARG.to_owned(), json, "--".to_owned(), program.to_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    Ok(Handoff {
        // nova's own image, as `/proc/self/exe` names it for nova's children.
        program: format!("/proc/{}/exe", std::process::id()),
        args: all,
        env,
    })
}

/// The keeper's parent-death signal follows the thread that spawned it, so programs must be
/// started from one that lives as long as nova: the main thread, where nova's single-threaded
/// runtime runs.
fn on_main_thread() -> bool {
    nix::unistd::gettid() == nix::unistd::getpid()
}

fn launcher(json: String) -> std::process::Command {
    // This very binary, even if the file has since been replaced or deleted (say, by a
    // rebuild while nova runs): the kernel resolves the link in the child, whose image is
    // still nova's.
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg(ARG).arg(json);
    cmd
}

/// Runs the launcher when nova was started as one; `None` for a normal start. Must be called
/// first thing in `main`, while the process has a single thread (a user namespace cannot be
/// entered otherwise).
pub fn run_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != ARG {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(launch(&rest))
}

fn launch(args: &[OsString]) -> ExitCode {
    let parsed = args
        .first()
        .map(|a| serde_json::from_str::<Launch>(&a.to_string_lossy()));
    let launch = match parsed {
        Some(Ok(launch)) => launch,
        Some(Err(e)) => return setup_failed(&format!("invalid sandbox description: {e}")),
        None => return setup_failed("missing sandbox description"),
    };
    let signals = match keeper::Signals::catch() {
        Ok(signals) => signals,
        Err(e) => return setup_failed(&format!("cannot watch for signals: {e}")),
    };
    let notes = match launch.sandbox.as_ref().map(apply) {
        None => Vec::new(),
        Some(Ok(notes)) => notes,
        Some(Err(e)) => return setup_failed(&e),
    };
    match args.get(1).and_then(|a| a.to_str()) {
        Some(PROBE) => {
            let mut out = std::io::stdout();
            for note in notes {
                let _ = writeln!(out, "{note}");
            }
            ExitCode::SUCCESS
        }
        Some("--") if args.len() > 2 => {
            let (program, rest) = (&args[2], &args[3..]);
            match &launch.handed_over {
                None => keeper::keep(signals, launch.parent, program, rest),
                Some(names) => {
                    let mut inner = plain_keeper(program, rest);
                    inner.env_clear().stdin(std::process::Stdio::null());
                    for name in names {
                        if let Some(value) = std::env::var_os(name) {
                            inner.env(name, value);
                        }
                    }
                    keeper::keep_handed_over(signals, launch.parent, inner, program)
                }
            }
        }
        _ => setup_failed("no program to run"),
    }
}

fn setup_failed(reason: &str) -> ExitCode {
    let _ = writeln!(
        std::io::stderr(),
        "{SETUP_FAILED_PREFIX}: {reason}{SETUP_FAILED_SUFFIX}"
    );
    ExitCode::from(SETUP_FAILED)
}

/// Restricts this process as `spec` says. The notes say what the kernel could not enforce.
fn apply(spec: &Spec) -> Result<Vec<String>, String> {
    if !spec.read_only.is_empty() || !spec.pinned.is_empty() {
        enter_mount_namespace()?;
        // Pinned first: binding `.git` after `.git/hooks` would hide the read-only hooks mount.
        for path in &spec.pinned {
            bind_onto_itself(path)?;
        }
        for path in &spec.read_only {
            bind_onto_itself(path)?;
            remount_read_only(path)?;
        }
        // The working directory was looked up before the mounts: look it up again so relative
        // paths lead through them.
        let cwd = std::env::current_dir().map_err(|e| format!("getcwd: {e}"))?;
        std::env::set_current_dir(&cwd).map_err(|e| format!("chdir {}: {e}", cwd.display()))?;
    }
    restrict(spec)
}

fn enter_mount_namespace() -> Result<(), String> {
    let (uid, gid) = (getuid(), getgid());
    if uid.is_root() {
        unshare(CloneFlags::CLONE_NEWNS)
            .map_err(|e| format!("cannot create a mount namespace: {e}"))?;
    } else {
        // Mounting needs privilege, which a new user namespace grants over its own mount
        // namespace; the caller's ids are mapped to themselves so files keep their owners.
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .map_err(|e| format!("cannot create a user namespace: {e}"))?;
        // An unprivileged process must give up setgroups before it may map its group.
        write_proc("/proc/self/setgroups", "deny")?;
        write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
        write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    }
    // Without this the mounts below would propagate back to the host's namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make mounts private: {e}"))
}

fn write_proc(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))
}

fn bind_onto_itself(path: &Path) -> Result<(), String> {
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| format!("cannot bind-mount {}: {e}", path.display()))
}

fn remount_read_only(path: &Path) -> Result<(), String> {
    // Inside a user namespace the kernel refuses to drop the flags the original mount carries
    // (nosuid, nodev, noexec, atime), so they are repeated.
    let current = statvfs(path)
        .map_err(|e| format!("statvfs {}: {e}", path.display()))?
        .flags();
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (has, keep) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
    ] {
        if current.contains(has) {
            flags |= keep;
        }
    }
    mount(None::<&str>, path, None::<&str>, flags, None::<&str>)
        .map_err(|e| format!("cannot make {} read-only: {e}", path.display()))
}

fn restrict(spec: &Spec) -> Result<Vec<String>, String> {
    let landlock_error = |e: landlock::RulesetError| format!("Landlock: {e}");
    let abi = LANDLOCK_ABI;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(landlock_error)?;
    if !spec.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(landlock_error)?;
    }
    let status = ruleset
        .create()
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(&spec.writable, AccessFs::from_all(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi))))
        .and_then(|r| r.restrict_self())
        .map_err(landlock_error)?;
    let kernel_abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi,
        _ => ABI::Unsupported,
    };
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("Landlock is not available on this kernel".into());
    }
    let mut notes = Vec::new();
    if kernel_abi < ABI::V3 {
        notes.push(format!(
            "this kernel's Landlock ABI is {kernel_abi}: truncating files outside the writable \
             roots is not prevented (that needs 3)"
        ));
    }
    if !spec.network && kernel_abi < ABI::V4 {
        notes.push(format!(
            "sandbox.network false is not enforced: this kernel's Landlock ABI is {kernel_abi} \
             and network rules need 4"
        ));
    }
    Ok(notes)
}
