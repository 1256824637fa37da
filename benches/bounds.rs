//! `cargo bench --bench bounds`: nova's memory bounds, printed, not asserted.
//!
//! - queue flood: 10,000 `follow_up` commands of 1 KB sent while a slow reply streams; how many
//!   were queued and refused, and nova's peak RSS (VmHWM) over the whole flood, which includes
//!   writing every `queue_update` (each carries all queued texts) to a client that reads them
//! - image budget: four `read` calls in one batch (run in parallel) on a 10,000×10,000 16-bit
//!   PNG, refused (RGB, over the budget) and decoded (gray, within it), with the peak RSS
//! - huge reply: one reply of 100,000 tool calls (128 run, the rest answered with an error), its
//!   time from `prompt` to `agent_settled`, the peak RSS, and how long `get_state` takes to answer
//!   when asked every 20 ms throughout
//! - long conversation: CONVERSATION_PROMPTS prompts of CONVERSATION_PROMPT_BYTES each, each
//!   answered in a word, compaction off; nova's peak RSS against the conversation's size (issue
//!   30: under 2× it)
//! - huge line: `read` and `grep` of a 512 MiB file that is one line, each in its own nova, with
//!   its time and peak RSS
//!
//! `NOVA_BENCH_BIN=<path>` measures another build of nova instead; arguments pick figures by
//! name (`cargo bench --bench bounds -- huge`).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mock_llm/mod.rs"]
#[allow(dead_code)]
mod mock_llm;

#[path = "../tests/support/big_png.rs"]
mod big_png;
mod support;

use mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::{Figures, mib, nova_rpc, rss_of};

const FLOOD: usize = 10_000;
const FOLLOW_UP_BYTES: usize = 1024;
const PARALLEL_READS: usize = 4;
const HUGE_REPLY_CALLS: usize = 100_000;
const HUGE_LINE_BYTES: usize = 512 * 1024 * 1024;
const CONVERSATION_PROMPTS: usize = 25;
/// Just under RPC mode's 8 MiB record limit, with room for the command around the text.
const CONVERSATION_PROMPT_BYTES: usize = (79 << 20) / 10;

/// nova in RPC mode on the mock, with a reader thread that parses only the responses (lines
/// starting `{"id"`) and passes on small events and tool results; the rest (the flood's
/// events run to hundreds of MB) is dropped unparsed.
struct Nova {
    child: Child,
    stdin: BufWriter<std::process::ChildStdin>,
    responses: mpsc::Receiver<Value>,
    events: mpsc::Receiver<String>,
    reader: JoinHandle<(u64, usize)>,
    _dir: tempfile::TempDir,
}

impl Nova {
    fn spawn(mock: &MockLlm, files: &[(&str, &Path)]) -> Nova {
        Nova::spawn_with(mock, files, &["--no-session"])
    }

    fn spawn_with(mock: &MockLlm, files: &[(&str, &Path)], args: &[&str]) -> Nova {
        let dir = tempfile::tempdir().unwrap();
        let models = json!({"providers": {"mock": {"baseUrl": mock.base_url_ollama(),
            "api": "ollama", "models": [{"id": "bench-model", "input": ["text", "image"],
            "contextWindow": 1_000_000_000u64}]}}});
        std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
        for (name, from) in files {
            std::fs::copy(from, dir.path().join(name)).unwrap();
        }
        let mut child = nova_rpc(dir.path()).args(args).spawn().unwrap();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let (response_tx, responses) = mpsc::channel();
        let (event_tx, events) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let (mut bytes, mut longest) = (0u64, 0usize);
            for line in stdout.split(b'\n') {
                let line = line.unwrap();
                bytes += line.len() as u64 + 1;
                longest = longest.max(line.len());
                if line.starts_with(b"{\"id\"") {
                    let _ = response_tx.send(serde_json::from_slice(&line).unwrap());
                } else if line.len() < 4096 || line.starts_with(b"{\"type\":\"tool_execution_end\"")
                {
                    let _ = event_tx.send(String::from_utf8_lossy(&line).into_owned());
                }
            }
            (bytes, longest)
        });
        Nova {
            stdin: BufWriter::new(child.stdin.take().unwrap()),
            child,
            responses,
            events,
            reader,
            _dir: dir,
        }
    }

    fn send(&mut self, command: &Value) {
        serde_json::to_writer(&mut self.stdin, command).unwrap();
        self.stdin.write_all(b"\n").unwrap();
    }

    fn flush(&mut self) {
        self.stdin.flush().unwrap();
    }

    fn response(&self, id: &str) -> Value {
        loop {
            let r = self
                .responses
                .recv_timeout(Duration::from_secs(120))
                .unwrap();
            if r["id"] == id {
                return r;
            }
        }
    }

    fn until_event(&self, ty: &str) -> Value {
        let needle = format!("\"type\":\"{ty}\"");
        loop {
            let line = self.events.recv_timeout(Duration::from_secs(300)).unwrap();
            if line.contains(&needle) {
                return serde_json::from_str(&line).unwrap();
            }
        }
    }

    /// Peak resident set (VmHWM) in KiB.
    fn peak_rss(&self) -> u64 {
        rss_of(self.child.id()).1
    }

    /// Closes stdin and waits; returns the bytes nova wrote to stdout and its longest line.
    fn finish(mut self) -> (u64, usize) {
        drop(self.stdin);
        self.child.wait().unwrap();
        self.reader.join().unwrap()
    }
}

fn queue_flood() {
    let mock = MockLlm::start();
    // About 20 s of streaming, far longer than the flood takes: every follow-up meets a run.
    mock.push(
        Reply::text("x".repeat(2000))
            .text_chunks(2000)
            .delay_per_frame(Duration::from_millis(10)),
    );
    let mut nova = Nova::spawn(&mock, &[]);
    nova.send(&json!({"id": "p", "type": "prompt", "message": "stream slowly"}));
    nova.flush();
    nova.response("p");
    nova.until_event("message_update");
    let started = Instant::now();
    let text = "q".repeat(FOLLOW_UP_BYTES);
    for i in 0..FLOOD {
        nova.send(&json!({"id": format!("f{i}"), "type": "follow_up", "message": text}));
    }
    nova.flush();
    let (mut queued, mut refused, mut last_error) = (0, 0, String::new());
    for _ in 0..FLOOD {
        let r = nova
            .responses
            .recv_timeout(Duration::from_secs(120))
            .unwrap();
        if r["success"] == true {
            queued += 1;
        } else {
            refused += 1;
            last_error = r["error"].as_str().unwrap_or_default().to_owned();
        }
    }
    let flood_time = started.elapsed();
    nova.send(&json!({"id": "s", "type": "get_state"}));
    nova.flush();
    let state = nova.response("s");
    let still_streaming = state["data"]["isStreaming"] == true;
    nova.send(&json!({"id": "a", "type": "abort"}));
    nova.flush();
    nova.response("a");
    let peak = nova.peak_rss();
    let (written, _) = nova.finish();
    println!(
        "queue flood: {FLOOD} follow_up x {FOLLOW_UP_BYTES} B in {:.0} ms: {queued} queued, \
         {refused} refused (\"{last_error}\"); still streaming after it: {still_streaming}",
        flood_time.as_secs_f64() * 1000.0
    );
    println!(
        "queue flood: peak RSS {} (target <= 64 MB); {:.0} MiB of events written",
        mib(peak),
        written as f64 / (1024.0 * 1024.0)
    );
}

fn parallel_reads(label: &str, png: &Path) {
    let mock = MockLlm::start();
    let mut batch = Reply::new();
    for i in 0..PARALLEL_READS {
        batch = batch.tool_call(format!("r{i}"), "read", json!({"path": "big.png"}));
    }
    mock.push(batch);
    mock.push(Reply::text("done"));
    let mut nova = Nova::spawn(&mock, &[("big.png", png)]);
    let started = Instant::now();
    nova.send(&json!({"id": "p", "type": "prompt", "message": "read it four times"}));
    nova.flush();
    nova.response("p");
    let mut outcomes = Vec::new();
    while outcomes.len() < PARALLEL_READS {
        let end = nova.until_event("tool_execution_end");
        let text = end["result"]["content"][0]["text"].as_str().unwrap_or("");
        outcomes.push(if end["isError"] == true {
            format!("refused: {text}")
        } else {
            format!("ok: {}", text.lines().nth(1).unwrap_or(text))
        });
    }
    nova.until_event("agent_settled");
    let elapsed = started.elapsed();
    let peak = nova.peak_rss();
    nova.finish();
    outcomes.dedup();
    println!(
        "image budget, {label}: {PARALLEL_READS} parallel reads in {:.1} s, peak RSS {} \
         (target < 1 GB); {}",
        elapsed.as_secs_f64(),
        mib(peak),
        outcomes.join(" | ")
    );
}

fn huge_reply() {
    let mock = MockLlm::start();
    let mut reply = Reply::new();
    for _ in 0..HUGE_REPLY_CALLS {
        reply = reply.tool_call("", "ls", json!({}));
    }
    mock.push(reply);
    mock.push(Reply::text("done"));
    let mut nova = Nova::spawn(&mock, &[]);
    let started = Instant::now();
    nova.send(&json!({"id": "p", "type": "prompt", "message": "call everything"}));
    nova.flush();
    nova.response("p");
    let (mut latencies, mut errors, mut settled) = (Vec::new(), 0usize, false);
    while !settled {
        let id = format!("s{}", latencies.len());
        let asked = Instant::now();
        nova.send(&json!({"id": id, "type": "get_state"}));
        nova.flush();
        nova.response(&id);
        latencies.push(asked.elapsed());
        while let Ok(line) = nova.events.try_recv() {
            settled |= line.starts_with("{\"type\":\"agent_settled\"");
            errors += usize::from(
                line.starts_with("{\"type\":\"tool_execution_end\"")
                    && line.contains("\"isError\":true"),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    let peak = nova.peak_rss();
    let (written, longest) = nova.finish();
    latencies.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "huge reply: {HUGE_REPLY_CALLS} tool calls, {} ran and {errors} answered with an error, \
         prompt to agent_settled in {:.1} s; peak RSS {}",
        HUGE_REPLY_CALLS - errors,
        elapsed.as_secs_f64(),
        mib(peak)
    );
    println!(
        "huge reply: get_state asked {} times meanwhile, answered in {:.1} ms median, {:.1} ms \
         at most (target <= 100 ms); {:.0} MiB written to stdout, the longest line {:.1} MiB",
        latencies.len(),
        ms(latencies[latencies.len() / 2]),
        ms(latencies[latencies.len() - 1]),
        written as f64 / (1024.0 * 1024.0),
        longest as f64 / (1024.0 * 1024.0)
    );
}

/// A conversation that grows by one large prompt and a one-word answer per turn, with the
/// session file written as usual: how far nova's peak RSS exceeds what the conversation holds.
fn long_conversation() {
    let mock = MockLlm::start();
    mock.forget_bodies();
    for _ in 0..CONVERSATION_PROMPTS {
        mock.push(Reply::text("ok"));
    }
    let mut nova = Nova::spawn_with(&mock, &[], &[]);
    nova.send(&json!({"id": "c", "type": "set_auto_compaction", "enabled": false}));
    nova.flush();
    nova.response("c");
    // Distinct words, so nothing downstream can share or compress one prompt with another.
    let started = Instant::now();
    let mut sent = 0usize;
    for turn in 0..CONVERSATION_PROMPTS {
        let mut text = String::with_capacity(CONVERSATION_PROMPT_BYTES);
        let mut word = 0usize;
        while text.len() + 16 < CONVERSATION_PROMPT_BYTES {
            text.push_str(&format!("t{turn}w{word} "));
            word += 1;
        }
        sent += text.len();
        let id = format!("p{turn}");
        nova.send(&json!({"id": id, "type": "prompt", "message": text}));
        nova.flush();
        nova.response(&id);
        nova.until_event("agent_settled");
    }
    let elapsed = started.elapsed();
    let (settled, peak) = rss_of(nova.child.id());
    nova.finish();
    let conversation = sent as f64 / 1024.0;
    println!(
        "long conversation: {CONVERSATION_PROMPTS} prompts of {:.1} MiB ({:.0} MiB in all) in \
         {:.1} s; peak RSS {} ({:.2}× the conversation, target < 2×), {} after the last turn \
         ({:.2}×)",
        CONVERSATION_PROMPT_BYTES as f64 / f64::from(1u32 << 20),
        conversation / 1024.0,
        elapsed.as_secs_f64(),
        mib(peak),
        peak as f64 / conversation,
        mib(settled),
        settled as f64 / conversation
    );
}

/// `read` or `grep` (whose `args`) on `file`, a file of one huge line, in a nova of its own.
fn huge_line(tool: &str, args: Value, file: &Path) {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("h", tool, args));
    mock.push(Reply::text("done"));
    let mut nova = Nova::spawn(&mock, &[("huge.txt", file)]);
    let started = Instant::now();
    nova.send(&json!({"id": "p", "type": "prompt", "message": "look at it"}));
    nova.flush();
    nova.response("p");
    let end = nova.until_event("tool_execution_end");
    let elapsed = started.elapsed();
    nova.until_event("agent_settled");
    let peak = nova.peak_rss();
    nova.finish();
    let text = end["result"]["content"][0]["text"].as_str().unwrap_or("");
    let shown: String = text.chars().take(100).collect();
    println!(
        "huge line: {tool} of a {} MiB one-line file in {:.1} s, peak RSS {} (target < 64 MiB); \
         {shown:?}…",
        HUGE_LINE_BYTES >> 20,
        elapsed.as_secs_f64(),
        mib(peak)
    );
}

fn main() {
    let figures = Figures::from_args(&[
        "huge reply",
        "long conversation",
        "huge line",
        "queue flood",
        "image budget",
    ]);
    let wanted = |name: &str| figures.wanted(name);
    if wanted("huge reply") {
        huge_reply();
    }
    if wanted("long conversation") {
        long_conversation();
    }
    let dir = tempfile::tempdir().unwrap();
    if wanted("huge line") {
        let huge = dir.path().join("huge.txt");
        let mut out = BufWriter::new(std::fs::File::create(&huge).unwrap());
        out.write_all(b"needle").unwrap();
        let block = vec![b'x'; 1 << 20];
        for _ in 0..HUGE_LINE_BYTES >> 20 {
            out.write_all(&block).unwrap();
        }
        out.flush().unwrap();
        drop(out);
        huge_line("read", json!({"path": "huge.txt"}), &huge);
        huge_line("grep", json!({"pattern": "needle"}), &huge);
        std::fs::remove_file(&huge).unwrap();
    }
    if wanted("queue flood") {
        queue_flood();
    }
    if wanted("image budget") {
        let rgb = dir.path().join("rgb16.png");
        big_png::write_uniform_16_bit(&rgb, 10_000, 10_000, png::ColorType::Rgb);
        parallel_reads("10000x10000 16-bit RGB", &rgb);
        std::fs::remove_file(&rgb).unwrap();
        let gray = dir.path().join("gray16.png");
        big_png::write_uniform_16_bit(&gray, 10_000, 10_000, png::ColorType::Grayscale);
        parallel_reads("10000x10000 16-bit gray", &gray);
    }
}
