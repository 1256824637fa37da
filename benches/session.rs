//! `cargo bench --bench session`: figures for the session issue's targets, printed, not asserted.
//!
//! - resume: `Session::open` + `context()` of a 100,000-entry (~100 MB) file, time and peak RSS
//!   (VmHWM, reset just before) next to the file size; targets ≤ 1 s and ≤ 3× the file size
//! - the mean time of `append_message` on a session that is already on disk
//! - `list_sessions` over 10,000 session files of 20 entries each (~10 KB); target ≤ 200 ms
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use nova::protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, UserContent, UserMessage,
};
use nova::session::Session;
use serde_json::json;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const ENTRIES: usize = 100_000;
const APPENDS: usize = 1_000;
const LISTED: usize = 10_000;

/// A deterministic xorshift, enough to vary sizes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % below as u64) as usize
    }
}

fn text(rng: &mut Rng, min: usize, spread: usize) -> String {
    const WORDS: &[&str] = &[
        "fn",
        "let",
        "the",
        "session",
        "entry",
        "parent",
        "{",
        "}",
        "\"quoted\"",
        "path/to/file.rs",
        "error:",
        "\n",
        "\t",
        "ok",
        "value",
        "ünïcode",
    ];
    let target = min + rng.next(spread);
    let mut s = String::with_capacity(target + 16);
    while s.len() < target {
        s.push_str(WORDS[rng.next(WORDS.len())]);
        s.push(' ');
    }
    s
}

/// Streams a Pi-format session: a user prompt, then assistant turns with tool calls and their
/// results, with the odd plain reply, user message and settings change.
fn generate(path: &Path) {
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).unwrap());
    let header = json!({"type": "session", "version": 3, "id": "0190bench-0000-7000-8000-000000000000",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/bench"});
    writeln!(out, "{header}").unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut parent: Option<String> = None;
    let mut call = 0usize;
    for i in 0..ENTRIES {
        let id = format!("{:08x}", i + 1);
        let ts = "2026-01-01T00:00:01.000Z";
        let message = match (i % 10, rng.next(8)) {
            (0, _) => {
                json!({"role": "user", "content": [{"type": "text", "text": text(&mut rng, 40, 1100)}],
                "timestamp": i})
            }
            (9, 0) => {
                let entry = json!({"type": "model_change", "id": id, "parentId": parent,
                    "timestamp": ts, "provider": "ollama", "modelId": "llama3.1:8b"});
                writeln!(out, "{entry}").unwrap();
                parent = Some(id);
                continue;
            }
            (n, _) if n % 2 == 1 => {
                call += 1;
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": text(&mut rng, 15, 300)},
                    {"type": "text", "text": text(&mut rng, 10, 450)},
                    {"type": "toolCall", "id": format!("call_{call}"), "name": "bash",
                        "arguments": {"command": text(&mut rng, 10, 150)}}],
                    "api": "openai-completions", "provider": "ollama", "model": "llama3.1:8b",
                    "usage": {"input": 1000 + i, "output": 200, "cacheRead": 0, "cacheWrite": 0,
                        "totalTokens": 1200 + i, "cost": {"input": 0.001, "output": 0.002,
                        "cacheRead": 0, "cacheWrite": 0, "total": 0.003}},
                    "stopReason": "toolUse", "timestamp": i})
            }
            _ => json!({"role": "toolResult", "toolCallId": format!("call_{call}"),
                "toolName": "bash", "content": [{"type": "text", "text": text(&mut rng, 80, 1850)}],
                "isError": rng.next(20) == 0, "timestamp": i}),
        };
        let entry = json!({"type": "message", "id": id, "parentId": parent, "timestamp": ts,
            "message": message});
        writeln!(out, "{entry}").unwrap();
        parent = Some(id);
    }
    out.flush().unwrap();
}

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets VmHWM to the current RSS, so the peak measured is the resume's own.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

/// The whole path a client sees: start `nova --session <file>`, ask `get_messages`, and read
/// the (file-sized) answer. Returns the time to the end of that line and nova's peak RSS.
fn nova_resume(path: &Path) -> (std::time::Duration, u64) {
    let agent = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(["--mode", "rpc", "--session"])
        .arg(path)
        .env("NOVA_AGENT_DIR", agent.path())
        .env("OLLAMA_HOST", "127.0.0.1:9")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"id":"m","type":"get_messages"}}"#).unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let answered = started.elapsed();
    assert!(
        line.starts_with('{') && line.contains("\"messages\""),
        "{}",
        &line[..line.len().min(200)]
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024;
    drop(stdin);
    child.wait().unwrap();
    (answered, peak)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    generate(&path);
    let size = std::fs::metadata(&path).unwrap().len();

    reset_peak();
    let rss_before = status_kb("VmRSS:") * 1024;
    let started = Instant::now();
    let (session, warnings) = Session::open(&path).unwrap();
    let opened = started.elapsed();
    let peak_open = status_kb("VmHWM:") * 1024;
    let context = session.context();
    let resumed = started.elapsed();
    let peak = status_kb("VmHWM:") * 1024;
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(context.messages.len() > ENTRIES * 9 / 10);
    drop(context);
    drop(session);

    let mut s = Session::create(Some(dir.path().join("appends")), Path::new("/bench"), None);
    let user = Message::User(UserMessage {
        content: UserContent::Text("start".into()),
        timestamp: 0,
    });
    s.append_message(&Arc::new(user)).unwrap();
    let reply = Arc::new(Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::text(text(&mut Rng(7), 800, 1))],
        stop_reason: StopReason::Stop,
        ..AssistantMessage::pending("openai-completions", "ollama", "llama3.1:8b", 0)
    }));
    let started = Instant::now();
    for _ in 0..APPENDS {
        s.append_message(&reply).unwrap();
    }
    let append_mean = started.elapsed() / APPENDS as u32;

    println!("session bench ({ENTRIES} entries)");
    println!("{:<34} {:>14}", "figure", "value");
    println!("{:<34} {:>11.1} MB", "file size", mb(size));
    println!("{:<34} {:>11.0} ms", "open", opened.as_secs_f64() * 1000.0);
    println!(
        "{:<34} {:>11.0} ms   (target ≤ 1000)",
        "open + context()",
        resumed.as_secs_f64() * 1000.0
    );
    println!(
        "{:<34} {:>11.1} MB   ({:.2}× file; target ≤ 3×)",
        "peak RSS (VmHWM) during resume",
        mb(peak),
        peak as f64 / size as f64
    );
    println!(
        "{:<34} {:>11.1} MB   ({:.2}× file)",
        "  peak RSS after open alone",
        mb(peak_open),
        peak_open as f64 / size as f64
    );
    println!("{:<34} {:>11.1} MB", "  RSS before resume", mb(rss_before));
    let (answered, nova_peak) = nova_resume(&path);
    println!(
        "{:<34} {:>11.0} ms   (target ≤ 1000)",
        "nova --session → get_messages",
        answered.as_secs_f64() * 1000.0
    );
    println!(
        "{:<34} {:>11.1} MB   ({:.2}× file; target ≤ 3×)",
        "  nova's peak RSS",
        mb(nova_peak),
        nova_peak as f64 / size as f64
    );
    println!(
        "{:<34} {:>11.1} µs",
        "append_message mean (1 KB, flushed)",
        append_mean.as_secs_f64() * 1e6
    );
    let (listed, took) = list_many(dir.path());
    println!(
        "{:<34} {:>11.0} ms   (target ≤ 200)",
        format!("list_sessions, {listed} files"),
        took.as_secs_f64() * 1000.0
    );
}

/// Writes [`LISTED`] small sessions into one directory and times listing them (the files were
/// just written, so they are in the page cache, as a user's recent sessions are).
fn list_many(dir: &Path) -> (usize, std::time::Duration) {
    use nova::session::paths::Scope;
    let sessions = dir.join("many");
    std::fs::create_dir_all(&sessions).unwrap();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for n in 0..LISTED {
        let path = sessions.join(format!("2026-01-01T00-00-00-000Z_{n:08}.jsonl"));
        let mut out = BufWriter::new(File::create(path).unwrap());
        let header = json!({"type": "session", "version": 3, "id": format!("0190list-{n:08}"),
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/bench"});
        writeln!(out, "{header}").unwrap();
        for i in 0..20 {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            let entry = json!({"type": "message", "id": format!("{i:08x}"), "parentId": null,
                "timestamp": "2026-01-01T00:00:01.000Z", "message": {"role": role,
                "content": [{"type": "text", "text": text(&mut rng, 200, 600)}], "timestamp": i}});
            writeln!(out, "{entry}").unwrap();
        }
        out.flush().unwrap();
    }
    let scope = Scope {
        agent_dir: dir,
        cwd: Path::new("/bench"),
        session_dir: Some(&sessions),
    };
    let started = Instant::now();
    let listed = nova::session::list(scope, false);
    (listed.len(), started.elapsed())
}
