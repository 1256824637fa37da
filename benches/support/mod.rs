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
