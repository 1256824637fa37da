//! What the benches that drive the real binary share: how nova is started for a measurement,
//! and how its memory is read and printed.

use std::path::Path;
use std::process::{Command, Stdio};

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
