//! The keeper: the launcher stays alive between nova and the program it starts, so that nothing
//! the program starts outlives it or nova — not even processes that leave its process group
//! (`setsid`, `nohup`, double forks).
//!
//! - As a child subreaper it inherits every orphaned descendant (instead of init), so all of
//!   them stay reachable as its children.
//! - When the program exits, every remaining descendant is killed, and the keeper exits the way
//!   the program did (same code, or the same signal).
//! - A stop signal (SIGTERM, SIGINT, SIGHUP) kills everything at once. nova's abort and timeout
//!   send SIGTERM to the process group, which holds the keeper and the program.
//! - nova's death is a stop signal too (`PR_SET_PDEATHSIG`), so this holds when nova is killed
//!   with SIGKILL. The signal follows the *thread* that spawned the keeper: nova spawns from the
//!   thread of its single-threaded runtime, which lives as long as nova. A keeper another
//!   program started for nova (see [`super::launcher`]) arms no parent-death signal — its
//!   parent is an editor's thread, which may end as soon as it has spawned it — and looks every
//!   250 ms whether nova still lives instead.
//!
//! Signals are caught by handlers that only record them and wake the keeper through a socket
//! (signal-hook). Not by blocking them: a blocked signal stays blocked across `exec`, so the
//! program would start unable to receive SIGTERM; handlers are reset by `exec`.

use nix::errno::Errno;
use nix::sys::prctl;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getppid};
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use signal_hook::{flag, low_level};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What ends everything at once.
const STOP: [i32; 3] = [SIGTERM, SIGINT, SIGHUP];

/// The exit code when `program` cannot be started (as a shell says it).
const CANNOT_RUN: u8 = 127;

/// The signals that concern the keeper, as they arrive.
pub(super) struct Signals {
    /// The stop signal received, 0 for none yet.
    stop: Arc<AtomicUsize>,
    /// Readable whenever a signal arrived (a child ended, or a stop).
    wake: UnixStream,
}

impl Signals {
    /// Installs the handlers. Called first, so that a stop signal arriving while the sandbox is
    /// set up is kept for the loop instead of killing the keeper half-way.
    pub(super) fn catch() -> std::io::Result<Signals> {
        let (wake, waker) = UnixStream::pair()?;
        let stop = Arc::new(AtomicUsize::new(0));
        for sig in STOP {
            // The flag first: the handlers run in order, so it is set when the wake-up is read.
            flag::register_usize(sig, stop.clone(), sig as usize)?;
            low_level::pipe::register(sig, waker.try_clone()?)?;
        }
        low_level::pipe::register(SIGCHLD, waker)?;
        Ok(Signals { stop, wake })
    }

    fn stop(&self) -> Option<i32> {
        match self.stop.load(Ordering::SeqCst) {
            0 => None,
            sig => i32::try_from(sig).ok(),
        }
    }

    /// Waits for the next signal (at once if one arrived since the last wait).
    fn wait(&mut self) {
        let mut buf = [0u8; 64];
        let _ = self.wake.read(&mut buf);
    }
}

/// Runs `program args…` to its end and then kills whatever it left behind. `parent` is nova's
/// pid, to tell whether nova is already gone.
pub(super) fn keep(
    signals: Signals,
    parent: u32,
    program: &OsString,
    args: &[OsString],
) -> ExitCode {
    arm();
    if getppid().as_raw() as u32 != parent {
        // nova died before the line above could arm: no one is waiting for this program.
        return ExitCode::from(CANNOT_RUN);
    }
    let mut cmd = Command::new(program);
    cmd.args(args);
    start(signals, cmd, program, None)
}

/// [`keep`] for a launcher another program started on nova's behalf: `inner` (the program
/// under a plain keeper of its own) runs while nova, whose pid is `nova`, lives.
pub(super) fn keep_handed_over(
    signals: Signals,
    nova: u32,
    inner: Command,
    program: &OsString,
) -> ExitCode {
    // Only the subreaper: its life is tied to nova (watched below), not to its starter.
    let _ = prctl::set_child_subreaper(true);
    let Some(watched) = Watched::new(nova) else {
        return ExitCode::from(CANNOT_RUN);
    };
    start(signals, inner, program, Some(watched))
}

fn arm() {
    // Both only fail on kernels older than 3.4, where orphans then escape to init as before.
    let _ = prctl::set_child_subreaper(true);
    // Set after the sandbox's user namespace: entering one clears the parent-death signal.
    let _ = prctl::set_pdeathsig(Signal::SIGTERM);
}

fn start(
    signals: Signals,
    mut cmd: Command,
    program: &OsString,
    nova: Option<Watched>,
) -> ExitCode {
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let _ = writeln!(
                std::io::stderr(),
                "nova: cannot run `{}` in {}: {e}",
                Path::new(program).display(),
                cwd.display()
            );
            return ExitCode::from(CANNOT_RUN);
        }
    };
    supervise(signals, child, nova)
}

/// nova, when it is not the keeper's parent: its pid and its start time (which a process that
/// reuses the pid does not share).
struct Watched {
    pid: u32,
    started: String,
}

impl Watched {
    /// `None` when nova is already gone.
    fn new(pid: u32) -> Option<Watched> {
        let started = start_time(pid)?;
        Some(Watched { pid, started })
    }

    fn gone(&self) -> bool {
        start_time(self.pid).as_ref() != Some(&self.started)
    }
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state …; comm may hold anything, so count fields after the last `)`.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19).map(str::to_owned)
}

/// How often a keeper whose parent is not nova looks whether nova still lives.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

fn supervise(mut signals: Signals, mut child: Child, nova: Option<Watched>) -> ExitCode {
    let program = Pid::from_raw(child.id() as i32);
    if nova.is_some() {
        let _ = signals.wake.set_read_timeout(Some(WATCH_INTERVAL));
    }
    loop {
        let stop = signals
            .stop()
            .or_else(|| nova.as_ref().filter(|n| n.gone()).map(|_| SIGTERM));
        if let Some(stop) = stop {
            kill_descendants();
            return die_by(stop);
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                kill_descendants();
                return exit_like(status);
            }
            // A descendant orphaned to the keeper may have ended: reap it now, or zombies would
            // pile up under a long-running program.
            Ok(None) => reap_orphans(program),
            Err(_) => {
                kill_descendants();
                return ExitCode::FAILURE;
            }
        }
        signals.wait();
    }
}

fn reap_orphans(program: Pid) {
    for pid in children().into_iter().filter(|p| *p != program) {
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
    }
}

/// Kills every descendant. Killing a child hands its own children to the keeper (it is their
/// subreaper), so this repeats until the keeper has no child left. Reaping each killed child
/// before looking again matters: its children are re-parented before it becomes reapable.
fn kill_descendants() {
    loop {
        let kids = children();
        if kids.is_empty() {
            return;
        }
        for &pid in &kids {
            let _ = kill(pid, Signal::SIGKILL);
        }
        let reaped = kids
            .iter()
            .filter(|&&pid| {
                matches!(
                    waitpid(pid, None),
                    Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD)
                )
            })
            .count();
        if reaped == 0 {
            // Nothing changed; looking again would spin.
            return;
        }
    }
}

/// The keeper's children, from `/proc/<pid>/task/<pid>/children` (the keeper has one thread),
/// or, on kernels built without that file, from every process's parent pid.
fn children() -> Vec<Pid> {
    let me = std::process::id();
    let parse = |text: &str| -> Vec<Pid> {
        text.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .map(Pid::from_raw)
            .collect()
    };
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")) {
        return parse(&text);
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let pid: i32 = name.to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // pid (comm) state ppid …; comm may hold anything, so split after the last `)`.
            let ppid: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (ppid == me).then_some(Pid::from_raw(pid))
        })
        .collect()
}

fn exit_like(status: ExitStatus) -> ExitCode {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code as u8),
        (None, Some(sig)) => die_by(sig),
        (None, None) => ExitCode::FAILURE,
    }
}

/// Ends the keeper by signal `sig`, so that nova sees what the program saw. A signal whose
/// default is to be ignored leaves it alive: then it exits with 128 + the number, as a shell
/// reports it.
fn die_by(sig: i32) -> ExitCode {
    // The program dumped its core already, if the system wanted one; not the keeper's.
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    // Restores the default action (undoing the keeper's handler, or the SIGPIPE nova's runtime
    // ignores) and raises the signal; returns for one that is ignored by default.
    let _ = low_level::emulate_default_handler(sig);
    ExitCode::from(128u8.wrapping_add(sig as u8))
}
