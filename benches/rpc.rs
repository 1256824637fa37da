//! `cargo bench --bench rpc`: figures for the core issue's targets, printed, not asserted.
//!
//! - startup: spawn → first `get_state` response (median of 20 runs)
//! - idle RSS after that response
//! - a 20,000-chunk streamed reply: time and peak RSS, next to the time the mock server needs
//!   to send the same reply to a plain socket reader
//! - peak RSS while skipping a 64 MiB record
//! - turn overhead on a resumed 2,000-message (~2 MB) conversation: from a tool result's
//!   `tool_execution_end` on stdout to the first byte of the next request at the server, and
//!   nova's peak RSS growth next to the conversation's size (medians of 9 runs): up to that
//!   request's arrival, less what the same prompt costs on a 20-message conversation, and over
//!   the whole prompt (which adds `agent_end`, carrying every message)
//!
//! - what a second and third idle session cost in one process (the runtime of sessions, from
//!   library code in this process: its resident set after one, two and three sessions, and the
//!   mean over ten more)
//!
//! `NOVA_BENCH_BIN=<path>` measures another build of nova (an older one, say) instead, and
//! `cargo bench --bench rpc -- <part>…` (startup, reply, skip, sessions, turn) runs only those parts.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mock_llm/mod.rs"]
#[allow(dead_code)]
mod mock_llm;
mod support;

use mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::io::{BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::{Figures, Rpc, cpu_time_of, median, mib, nova_rpc, rss_of};

const CHUNKS: usize = 20_000;
/// Messages in the resumed conversation of the turn-overhead figure.
const TURN_MESSAGES: usize = 2_000;
/// A conversation this short shows what any prompt costs in memory, whatever its history.
const SHORT_MESSAGES: usize = 20;
const TURN_RUNS: usize = 9;

/// nova in RPC mode with an agent dir of its own, which lives as long as it does.
struct Proc {
    rpc: Rpc,
    _dir: tempfile::TempDir,
}

impl Proc {
    fn spawn(models: Option<&Value>) -> Proc {
        let dir = tempfile::tempdir().unwrap();
        if let Some(m) = models {
            std::fs::write(dir.path().join("models.json"), m.to_string()).unwrap();
        }
        Proc::launch(dir, &[])
    }

    /// Starts nova in RPC mode with `dir` as its agent dir and working directory.
    fn launch(dir: tempfile::TempDir, args: &[&OsStr]) -> Proc {
        let mut command = nova_rpc(dir.path());
        command.args(args);
        Proc {
            rpc: Rpc::spawn(command),
            _dir: dir,
        }
    }

    fn send(&mut self, line: &str) {
        self.rpc.send(line);
    }

    /// Reads up to the first record of type `ty`.
    fn until(&mut self, ty: &str) -> Value {
        self.rpc.until(|v| v["type"] == ty)
    }

    fn pid(&self) -> u32 {
        self.rpc.child.id()
    }

    /// (current, peak) resident set in KiB.
    fn rss(&self) -> (u64, u64) {
        rss_of(self.pid())
    }

    /// Resets the peak resident set (VmHWM) to the current one.
    fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").unwrap();
    }

    fn finish(self) {
        self.rpc.finish();
    }
}

fn models(mock: &MockLlm) -> Value {
    json!({"providers": {"mock": {"baseUrl": mock.base_url_ollama(), "api": "ollama",
        "models": [{"id": "bench-model"}]}}})
}

fn anthropic_models(mock: &MockLlm) -> Value {
    json!({"providers": {"mock": {"baseUrl": mock.base_url_anthropic(),
        "api": "anthropic-messages", "apiKey": "bench", "models": [{"id": "bench-model"}]}}})
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// How long the mock takes to stream the reply to a reader that does nothing but read, from
/// `path` (`/api/chat` or `/v1/messages`).
fn mock_send_time(mock: &MockLlm, path: &str) -> Duration {
    mock.push(Reply::many_chunks(CHUNKS, "x"));
    let body = r#"{"model":"bench-model","max_tokens":10,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#;
    let mut socket = TcpStream::connect(("127.0.0.1", mock.port())).unwrap();
    let started = Instant::now();
    write!(
        socket,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut sink = Vec::new();
    socket.read_to_end(&mut sink).unwrap();
    started.elapsed()
}

/// Deterministic filler text with the characters JSON must escape (quotes, backslashes,
/// newlines, tabs) and some non-ASCII, `len` bytes or a few more.
fn filler(seed: usize, len: usize) -> String {
    let mut s = String::with_capacity(len + 64);
    let mut n = seed;
    while s.len() < len {
        n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let line = match n >> 61 {
            0 => format!("let v{} = \"quoted\\\\path\";\n", n % 997),
            1 => format!("\tfn step_{}() -> Result<(), Error> {{\n", n % 331),
            2 => "error: ünïcode ✓ in src/agent/run.rs:42\n".to_string(),
            _ => format!("{} lines changed, {} files read\n", n % 89, n % 13),
        };
        s.push_str(&line);
    }
    s
}

/// Writes a Pi v3 session of `messages` messages: user prompts every 40 tool rounds,
/// each round an assistant reply calling `bash` and its result. Returns the bytes of text in
/// the messages.
fn write_turn_session(path: &Path, messages: usize) -> usize {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let header = json!({"type": "session", "version": 3,
        "id": "0190bench-0000-7000-8000-000000000001",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/bench"});
    writeln!(out, "{header}").unwrap();
    let (mut count, mut text_bytes, mut call) = (0, 0, 0);
    let mut parent = Value::Null;
    let mut entry = |message: Value, count: &mut usize| {
        *count += 1;
        let id = format!("{:08x}", *count);
        let line = json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z", "message": message});
        writeln!(out, "{line}").unwrap();
        parent = json!(id);
    };
    while count < messages {
        if call % 40 == 0 {
            let text = filler(count, 400);
            text_bytes += text.len();
            entry(
                json!({"role": "user", "content": [{"type": "text", "text": text}],
                    "timestamp": count}),
                &mut count,
            );
        }
        call += 1;
        let (said, command, output) = (
            filler(count, 150),
            format!("cat src/file_{call}.rs"),
            filler(call, 1_800),
        );
        text_bytes += said.len() + command.len() + output.len();
        entry(
            json!({"role": "assistant", "content": [
                    {"type": "text", "text": said},
                    {"type": "toolCall", "id": format!("call_{call}"), "name": "bash",
                        "arguments": {"command": command}}],
                "api": "ollama", "provider": "bench", "model": "bench-model",
                "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0,
                    "totalTokens": 120, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                    "cacheWrite": 0, "total": 0}},
                "stopReason": "toolUse", "timestamp": count}),
            &mut count,
        );
        entry(
            json!({"role": "toolResult", "toolCallId": format!("call_{call}"),
                "toolName": "bash", "content": [{"type": "text", "text": output}],
                "isError": false, "timestamp": count}),
            &mut count,
        );
    }
    out.flush().unwrap();
    text_bytes
}

/// What the turn figure's server saw of one request.
struct Arrival {
    first_byte: Instant,
    body_len: usize,
    /// nova's peak RSS (KiB) once the whole request was in.
    nova_peak: u64,
}

/// A stand-in Ollama for the turn figure, serving one run of nova (whose pid comes first) on a
/// conversation of `messages`: it reports each request's arrival, answers the first request
/// with an `ls` call and the second with text.
fn turn_server(
    listener: TcpListener,
    messages: usize,
    pid: mpsc::Receiver<u32>,
    arrivals: mpsc::Sender<Arrival>,
) {
    let pid = pid.recv().unwrap();
    let line = |message: Value, done: bool| {
        let mut frame = json!({"model": "bench-model", "created_at": "2026-01-01T00:00:00Z",
            "message": message, "done": done});
        if done {
            frame["done_reason"] = json!("stop");
            frame["prompt_eval_count"] = json!(100);
            frame["eval_count"] = json!(5);
        }
        format!("{frame}\n")
    };
    let replies = [
        line(
            json!({"role": "assistant", "content": "",
                "tool_calls": [{"function": {"name": "ls", "arguments": {}}}]}),
            false,
        ) + &line(json!({"role": "assistant", "content": ""}), true),
        line(json!({"role": "assistant", "content": "done"}), false)
            + &line(json!({"role": "assistant", "content": ""}), true),
    ];
    for reply in replies {
        let (mut socket, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let n = socket.read(&mut buf).unwrap();
        let first_byte = Instant::now();
        request.extend_from_slice(&buf[..n]);
        let (head_len, body_len) = loop {
            if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map(|v| v.trim().parse::<usize>().unwrap())
                    .expect("nova sends a Content-Length");
                break (end + 4, length);
            }
            let n = socket.read(&mut buf).unwrap();
            request.extend_from_slice(&buf[..n]);
        };
        while request.len() < head_len + body_len {
            let n = socket.read(&mut buf).unwrap();
            assert!(n > 0, "request cut short");
            request.extend_from_slice(&buf[..n]);
        }
        let body: Value = serde_json::from_slice(&request[head_len..]).unwrap();
        assert!(body["messages"].as_array().unwrap().len() > messages);
        arrivals
            .send(Arrival {
                first_byte,
                body_len,
                nova_peak: rss_of(pid).1,
            })
            .unwrap();
        write!(
            socket,
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{reply}",
            reply.len()
        )
        .unwrap();
    }
}

/// One run's figures.
struct Turn {
    /// From `tool_execution_end` to the next request's first byte.
    latency: Duration,
    /// nova's RSS before the prompt, its peak when the second request was in and its peak over
    /// the whole prompt, in KiB.
    before: u64,
    peak_at_request: u64,
    peak: u64,
    body_len: usize,
}

/// One prompt on a resumed conversation of `messages`: the model calls `ls`, then answers.
fn turn_run(session: &Path, messages: usize) -> Turn {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (pid_tx, pid) = mpsc::channel();
    let (tx, arrivals) = mpsc::channel();
    let server = std::thread::spawn(move || turn_server(listener, messages, pid, tx));

    let dir = tempfile::tempdir().unwrap();
    let models = json!({"providers": {"bench": {"baseUrl": base, "api": "ollama",
        "models": [{"id": "bench-model", "contextWindow": 10_000_000}]}}});
    std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
    std::fs::write(
        dir.path().join("settings.json"),
        json!({"compaction": {"enabled": false}}).to_string(),
    )
    .unwrap();
    let copy = dir.path().join("session.jsonl");
    std::fs::copy(session, &copy).unwrap();
    let mut p = Proc::launch(dir, &[OsStr::new("--session"), copy.as_os_str()]);
    pid_tx.send(p.pid()).unwrap();
    p.send(r#"{"id":"s","type":"get_state"}"#);
    let state = p.until("response");
    assert!(state["data"]["messageCount"].as_u64().unwrap() >= messages as u64);
    let (before, _) = p.rss();
    p.reset_peak();
    p.send(r#"{"id":"p","type":"prompt","message":"list the files"}"#);
    let end = p.until("tool_execution_end");
    let result_ready = Instant::now();
    assert_eq!(end["isError"], false);
    let settled = p.until("agent_settled");
    assert_eq!(settled["aborted"], false);
    let (_, peak) = p.rss();
    p.finish();
    server.join().unwrap();
    let _first = arrivals.recv().unwrap();
    let next = arrivals.recv().unwrap();
    Turn {
        latency: next.first_byte.saturating_duration_since(result_ready),
        before,
        peak_at_request: next.nova_peak,
        peak,
        body_len: next.body_len,
    }
}

/// The median time from `prompt` to `agent_settled` for the 20,000-chunk reply, and the peak
/// RSS, over five fresh processes configured with `models`.
fn reply_run(mock: &MockLlm, models: &Value) -> (Duration, u64, Duration) {
    let mut runs = Vec::new();
    let mut cpu = Vec::new();
    let mut peak = 0;
    for _ in 0..5 {
        let mut p = Proc::spawn(Some(models));
        p.send(r#"{"id":"s","type":"get_state"}"#);
        p.until("response");
        mock.push(Reply::many_chunks(CHUNKS, "x"));
        let cpu_before = cpu_time_of(p.pid());
        let started = Instant::now();
        p.send(r#"{"id":"p","type":"prompt","message":"go"}"#);
        let end = p.until("agent_settled");
        runs.push(started.elapsed());
        cpu.push(cpu_time_of(p.pid()).saturating_sub(cpu_before));
        assert_eq!(end["aborted"], false);
        peak = peak.max(p.rss().1);
        p.send(r#"{"id":"t","type":"get_last_assistant_text"}"#);
        let text = p.until("response");
        assert_eq!(
            text["data"]["text"].as_str().map(str::len),
            Some(CHUNKS),
            "{text}"
        );
        p.finish();
    }
    (median(runs), peak, median(cpu))
}

/// Idle sessions on their own cwds in this process: the resident set (KiB) after the first,
/// second and third, and after `1 + MORE`.
fn session_costs(models: &Value) -> ([u64; 3], u64) {
    const MORE: usize = 10;
    let agent_dir = tempfile::tempdir().unwrap();
    std::fs::write(agent_dir.path().join("models.json"), models.to_string()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The sandbox is off: its probe would start this bench binary as the launcher.
        let cli = <nova::config::Cli as clap::Parser>::try_parse_from([
            "nova",
            "--mode",
            "rpc",
            "--sandbox",
            "off",
        ])
        .unwrap();
        let runtime = nova::agent::Runtime::load(cli, agent_dir.path().to_path_buf())
            .await
            .unwrap();
        let mut cwds = Vec::new();
        let mut agents = Vec::new();
        let mut open = |cwds: &mut Vec<tempfile::TempDir>| {
            let cwd = tempfile::tempdir().unwrap();
            std::fs::write(cwd.path().join("AGENTS.md"), "Use tabs.").unwrap();
            let spec = nova::config::SessionSpec::new(cwd.path().to_path_buf());
            let sink: nova::agent::Sink = std::sync::Arc::new(Discard);
            agents.push(runtime.prepare(&spec).unwrap().start(sink));
            cwds.push(cwd);
        };
        let mut after = [0; 3];
        for slot in &mut after {
            open(&mut cwds);
            tokio::time::sleep(Duration::from_millis(50)).await;
            *slot = rss_of(std::process::id()).0;
        }
        for _ in 0..MORE {
            open(&mut cwds);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let many = rss_of(std::process::id()).0;
        (after, (many - after[0]) / (MORE as u64 + 2))
    })
}

struct Discard;

impl nova::agent::EventSink for Discard {
    fn emit(&self, _: nova::protocol::Event) {}
}

type Part = fn(&MockLlm, &Value);

/// The bench's parts, each printing its own figures; `cargo bench --bench rpc -- turn startup` runs only
/// those named, so one figure can be compared between two builds without the whole 15 minutes.
const PARTS: [(&str, Part); 5] = [
    ("startup", startup_part),
    ("reply", reply_part),
    ("skip", skip_part),
    ("sessions", sessions_part),
    ("turn", turn_part),
];

fn main() {
    let figures = Figures::from_args(&PARTS.map(|(name, _)| name));
    let mock = MockLlm::start();
    let models = models(&mock);
    println!(
        "nova rpc benchmark ({} CPUs)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if let Some(bin) = std::env::var_os("NOVA_BENCH_BIN") {
        println!("  (nova binary: {})", bin.to_string_lossy());
    }
    for (name, part) in PARTS {
        if figures.wanted(name) {
            part(&mock, &models);
        }
    }
}

fn startup_part(_: &MockLlm, models: &Value) {
    let mut startups = Vec::new();
    let mut idle = (0, 0);
    for _ in 0..20 {
        let started = Instant::now();
        let mut p = Proc::spawn(Some(models));
        p.send(r#"{"id":"s","type":"get_state"}"#);
        p.until("response");
        startups.push(started.elapsed());
        idle = p.rss();
        p.finish();
    }
    println!(
        "  startup to first get_state response   median {}  (min {})",
        ms(median(startups.clone())),
        ms(*startups.iter().min().unwrap())
    );
    println!("  idle RSS                               {}", mib(idle.0));
}

fn reply_part(mock: &MockLlm, models: &Value) {
    let baseline = median((0..5).map(|_| mock_send_time(mock, "/api/chat")).collect());
    let (reply, peak, reply_cpu) = reply_run(mock, models);
    let anthropic_baseline = median(
        (0..5)
            .map(|_| mock_send_time(mock, "/v1/messages"))
            .collect(),
    );
    let (anthropic_reply, anthropic_peak, anthropic_cpu) = reply_run(mock, &anthropic_models(mock));
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
    println!(
        "  nova's CPU time for that reply         median {} ({:.1} µs per chunk)",
        ms(reply_cpu),
        reply_cpu.as_secs_f64() * 1e6 / CHUNKS as f64
    );
    println!("  peak RSS during the reply              {}", mib(peak));
    println!(
        "  the same reply as Anthropic SSE        median {}",
        ms(anthropic_reply)
    );
    println!(
        "  mock sending the Anthropic reply alone median {}",
        ms(anthropic_baseline)
    );
    println!(
        "  nova's time beyond the mock's          {}",
        ms(anthropic_reply.saturating_sub(anthropic_baseline))
    );
    println!(
        "  nova's CPU time for the Anthropic one  median {}",
        ms(anthropic_cpu)
    );
    println!(
        "  peak RSS during the Anthropic reply    {}",
        mib(anthropic_peak)
    );
}

fn skip_part(_: &MockLlm, _: &Value) {
    let mut p = Proc::spawn(None);
    let chunk = vec![b'x'; 1024 * 1024];
    for _ in 0..64 {
        p.rpc.write_raw(&chunk);
    }
    p.send("");
    p.until("response");
    p.send(r#"{"id":"s","type":"get_state"}"#);
    p.until("response");
    let (_, skip_peak) = p.rss();
    p.finish();
    println!(
        "  peak RSS skipping a 64 MiB record      {}",
        mib(skip_peak)
    );
}

fn sessions_part(_: &MockLlm, models: &Value) {
    let (sessions, per_session) = session_costs(models);
    println!(
        "  idle sessions in one process           RSS {} with one, +{} for the 2nd, +{} \
         for the 3rd; {} each over 12 more",
        mib(sessions[0]),
        mib(sessions[1].saturating_sub(sessions[0])),
        mib(sessions[2].saturating_sub(sessions[1])),
        mib(per_session)
    );
}

fn turn_part(_: &MockLlm, _: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("turn.jsonl");
    let text_bytes = write_turn_session(&session, TURN_MESSAGES);
    let session_bytes = std::fs::metadata(&session).unwrap().len();
    let short = dir.path().join("short.jsonl");
    write_turn_session(&short, SHORT_MESSAGES);
    let turns: Vec<Turn> = (0..TURN_RUNS)
        .map(|_| turn_run(&session, TURN_MESSAGES))
        .collect();
    let short_turns: Vec<Turn> = (0..TURN_RUNS)
        .map(|_| turn_run(&short, SHORT_MESSAGES))
        .collect();
    let latencies: Vec<Duration> = turns.iter().map(|t| t.latency).collect();
    let body_len = turns[0].body_len as u64;
    let median_of = |turns: &[Turn], f: fn(&Turn) -> u64| {
        let mut v: Vec<u64> = turns.iter().map(f).collect();
        v.sort();
        v[v.len() / 2]
    };
    let before = median_of(&turns, |t| t.before);
    let turn_growth = median_of(&turns, |t| t.peak_at_request.saturating_sub(t.before));
    let prompt_growth = median_of(&turns, |t| t.peak.saturating_sub(t.before));
    let short_growth = median_of(&short_turns, |t| t.peak_at_request.saturating_sub(t.before));
    let beyond = turn_growth.saturating_sub(short_growth);
    println!(
        "  conversation for the turn figures      {TURN_MESSAGES} messages, {} of text \
         ({} session file, {} request body)",
        mib(text_bytes as u64 / 1024),
        mib(session_bytes / 1024),
        mib(body_len / 1024)
    );
    println!(
        "  tool result → next request's 1st byte  median {}  (min {}, max {}; {TURN_RUNS} runs)",
        ms(median(latencies.clone())),
        ms(*latencies.iter().min().unwrap()),
        ms(*latencies.iter().max().unwrap())
    );
    println!("  RSS before the prompt                  {}", mib(before));
    println!(
        "  peak RSS growth up to the 2nd request  {} ({:.2}× the text); with {SHORT_MESSAGES} \
         messages {}",
        mib(turn_growth),
        (turn_growth * 1024) as f64 / text_bytes as f64,
        mib(short_growth)
    );
    println!(
        "    growth due to the conversation       {} ({:.2}× the request body)",
        mib(beyond),
        (beyond * 1024) as f64 / body_len as f64
    );
    println!(
        "  peak RSS growth, whole prompt          {} ({:.2}× the text)",
        mib(prompt_growth),
        (prompt_growth * 1024) as f64 / text_bytes as f64
    );
}
