//! What the benches that drive the real binary share: how nova is started for a measurement,
//! how its records are read, and how its memory and CPU time are read and printed.
// Every bench includes this module and uses its own part of it.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// nova in RPC mode in `dir` (also its agent dir), stdin and stdout piped, stderr dropped, no
/// Ollama to discover. `NOVA_BENCH_BIN=<path>` measures another build instead.
pub fn nova_rpc(dir: &Path) -> Command {
    let bin =
        std::env::var_os("NOVA_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_nova").into());
    let mut command = Command::new(bin);
    command
        .args(["--mode", "rpc"])
        .env("NOVA_AGENT_DIR", dir)
        .env("OLLAMA_HOST", "127.0.0.1:9")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
}

/// A nova started from a [`nova_rpc`] command, spoken to line by line.
pub struct Rpc {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Rpc {
    pub fn spawn(mut command: Command) -> Rpc {
        let mut child = command.spawn().unwrap();
        Rpc {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    pub fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads records up to the first that `what` accepts, and gives it.
    pub fn until(&mut self, what: impl Fn(&Value) -> bool) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "nova closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if what(&v) {
                return v;
            }
        }
    }

    /// Bytes as they are, for a record a bench builds in pieces.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
    }

    /// Closes nova's stdin, which ends it, and waits for it.
    pub fn finish(mut self) {
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

/// The CPU time process `pid` has used so far, user and system, summed over its live threads
/// (`/proc/<pid>/task/*/schedstat`, in nanoseconds: `utime`/`stime` count 10 ms ticks, too
/// coarse for a figure of tens of milliseconds); zero for a process that is gone.
pub fn cpu_time_of(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// (current, peak) resident set of process `pid` in KiB: `VmRSS` and `VmHWM`.
pub fn rss_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The figures a run measures: `cargo bench --bench NAME -- WORD…` measures each figure whose
/// name contains one of the words, and every figure when no word is given. A word that matches
/// no figure stops the run, so a typo never measures nothing in silence.
pub struct Figures(Vec<String>);

impl Figures {
    pub fn from_args(names: &[&str]) -> Figures {
        let words: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        if let Some(bad) = words
            .iter()
            .find(|w| !names.iter().any(|n| n.contains(w.as_str())))
        {
            panic!("`{bad}` names no figure of this bench; its figures are {names:?}");
        }
        Figures(words)
    }

    pub fn wanted(&self, name: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|w| name.contains(w.as_str()))
    }
}
