//! `cargo bench --bench rpc`: figures for the core issue's targets, printed, not asserted.
//!
//! - startup: spawn → first `get_state` response (median of 20 runs)
//! - idle RSS after that response
//! - a 20,000-chunk streamed reply: time and peak RSS, next to the time the mock server needs
//!   to send the same reply to a plain socket reader
//! - peak RSS while skipping a 64 MiB record
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mock_llm/mod.rs"]
#[allow(dead_code)]
mod mock_llm;

use mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const CHUNKS: usize = 20_000;

struct Proc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    _dir: tempfile::TempDir,
}

impl Proc {
    fn spawn(models: Option<&Value>) -> Proc {
        let dir = tempfile::tempdir().unwrap();
        if let Some(m) = models {
            std::fs::write(dir.path().join("models.json"), m.to_string()).unwrap();
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_nova"))
            .args(["--mode", "rpc"])
            .env("NOVA_AGENT_DIR", dir.path())
            .env("OLLAMA_HOST", "127.0.0.1:9")
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Proc {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            _dir: dir,
        }
    }

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn until(&mut self, ty: &str) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "nova closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == ty {
                return v;
            }
        }
    }

    /// (current, peak) resident set in KiB.
    fn rss(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    fn finish(mut self) {
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

fn models(mock: &MockLlm) -> Value {
    json!({"providers": {"mock": {"baseUrl": mock.base_url_ollama(), "api": "ollama",
        "models": [{"id": "bench-model"}]}}})
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// How long the mock takes to stream the reply to a reader that does nothing but read.
fn mock_send_time(mock: &MockLlm) -> Duration {
    mock.push(Reply::many_chunks(CHUNKS, "x"));
    let body =
        r#"{"model":"bench-model","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let mut socket = TcpStream::connect(("127.0.0.1", mock.port())).unwrap();
    let started = Instant::now();
    write!(
        socket,
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut sink = Vec::new();
    socket.read_to_end(&mut sink).unwrap();
    started.elapsed()
}

fn main() {
    let mock = MockLlm::start();
    let models = models(&mock);

    let mut startups = Vec::new();
    let mut idle = (0, 0);
    for _ in 0..20 {
        let started = Instant::now();
        let mut p = Proc::spawn(Some(&models));
        p.send(r#"{"id":"s","type":"get_state"}"#);
        p.until("response");
        startups.push(started.elapsed());
        idle = p.rss();
        p.finish();
    }

    let baseline = median((0..5).map(|_| mock_send_time(&mock)).collect());
    let mut runs = Vec::new();
    let mut peak = 0;
    for _ in 0..5 {
        let mut p = Proc::spawn(Some(&models));
        p.send(r#"{"id":"s","type":"get_state"}"#);
        p.until("response");
        mock.push(Reply::many_chunks(CHUNKS, "x"));
        let started = Instant::now();
        p.send(r#"{"id":"p","type":"prompt","message":"go"}"#);
        let end = p.until("agent_settled");
        runs.push(started.elapsed());
        assert_eq!(end["aborted"], false);
        peak = peak.max(p.rss().1);
        p.finish();
    }
    let reply = median(runs);

    let mut p = Proc::spawn(None);
    let chunk = vec![b'x'; 1024 * 1024];
    for _ in 0..64 {
        p.stdin.write_all(&chunk).unwrap();
    }
    p.send("");
    p.until("response");
    p.send(r#"{"id":"s","type":"get_state"}"#);
    p.until("response");
    let (_, skip_peak) = p.rss();
    p.finish();

    println!(
        "nova rpc benchmark ({} CPUs)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "  startup to first get_state response   median {}  (min {})",
        ms(median(startups.clone())),
        ms(*startups.iter().min().unwrap())
    );
    println!("  idle RSS                               {}", mib(idle.0));
    println!(
        "  20,000-chunk reply, prompt → settled   median {}",
        ms(reply)
    );
    println!(
        "  mock sending the same reply alone      median {}",
        ms(baseline)
    );
    println!(
        "  nova's time beyond the mock's          {}",
        ms(reply.saturating_sub(baseline))
    );
    println!("  peak RSS during the reply              {}", mib(peak));
    println!(
        "  peak RSS skipping a 64 MiB record      {}",
        mib(skip_peak)
    );
}
