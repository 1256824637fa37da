//! A client that floods the queues while a reply streams (issue 34): 10,000 one-kilobyte
//! `follow_up`s (or `steer`s) sent at once during a 20,000-chunk reply. Every `queue_update`
//! lists every queued text, so what nova owes such a client grows with the square of the queue
//! (about 500 MB here); it must answer every command and stay within a small, fixed memory
//! whether the client reads as fast as it can or slowly, because what waits for the client is
//! bounded by bytes and a snapshot that a newer one replaces is dropped unencoded.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::openai_models;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

const FLOOD: usize = 10_000;
const MESSAGE_BYTES: usize = 1024;
/// nova's queue limit (README, "Bounded resources").
const MAX_QUEUED: usize = 1000;
/// The documented bound is 64 MB for a release build; a debug build's code and unoptimised
/// allocations fit in it too, with room to spare.
const RSS_BOUND_MIB: u64 = 64;
/// How long the whole flood may take (a debug build encodes the ~500 MB slowly).
const FLOOD_TIMEOUT: Duration = Duration::from_secs(400);

/// Peak resident set (`VmHWM`) of process `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    kib / 1024
}

#[derive(Clone, Copy, Debug)]
enum Pace {
    /// Reads as fast as it can.
    Fast,
    /// Reads nothing for the first seconds of the flood, then at most 16 KiB a millisecond.
    Slow,
}

/// stdout read at `pace` once `flooding` is set.
struct Paced<R> {
    inner: R,
    pace: Pace,
    flooding: Arc<AtomicBool>,
    since: Option<Instant>,
}

impl<R: Read> Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if matches!(self.pace, Pace::Fast) || !self.flooding.load(Ordering::Relaxed) {
            return self.inner.read(buf);
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        if let Some(rest) = Duration::from_secs(3).checked_sub(since.elapsed()) {
            std::thread::sleep(rest);
        }
        std::thread::sleep(Duration::from_millis(1));
        let n = buf.len().min(16 * 1024);
        self.inner.read(&mut buf[..n])
    }
}

/// Floods a streaming nova with `kind` commands read back at `pace`; returns the peak RSS.
#[allow(clippy::print_stderr, reason = "the figures, shown with --nocapture")]
fn flood(kind: &'static str, pace: Pace) -> u64 {
    let mock = MockLlm::start();
    // Longer than any flood takes (and paused whenever stdout is full): every command meets a run.
    mock.push(Reply::many_chunks(20_000, "x").delay_per_frame(Duration::from_millis(10)));
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(
        agent.path().join("models.json"),
        openai_models(&mock).to_string(),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(["--mode", "rpc", "--no-session"])
        .current_dir(cwd.path())
        .env("NOVA_AGENT_DIR", agent.path())
        .env("HOME", cwd.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = BufWriter::new(child.stdin.take().unwrap());
    let stdout = child.stdout.take().unwrap();

    // Only responses are parsed: the rest is hundreds of MB of queue snapshots.
    let (responses, answers) = mpsc::channel::<Value>();
    let (streaming, stream_started) = mpsc::channel::<()>();
    let flooding = Arc::new(AtomicBool::new(false));
    let paced = Paced {
        inner: stdout,
        pace,
        flooding: flooding.clone(),
        since: None,
    };
    let reader = std::thread::spawn(move || {
        let mut written = 0u64;
        for line in BufReader::with_capacity(64 * 1024, paced).split(b'\n') {
            let Ok(line) = line else { break };
            written += line.len() as u64 + 1;
            if line.starts_with(b"{\"id\"") {
                let _ = responses.send(serde_json::from_slice(&line).unwrap());
            } else if line.starts_with(b"{\"type\":\"message_update\"") {
                let _ = streaming.send(());
            }
        }
        written
    });
    let send = |stdin: &mut BufWriter<_>, command: Value| {
        serde_json::to_writer(&mut *stdin, &command).unwrap();
        stdin.write_all(b"\n").unwrap();
    };
    send(
        &mut stdin,
        json!({"id": "p", "type": "prompt", "message": "go"}),
    );
    stdin.flush().unwrap();
    stream_started
        .recv_timeout(Duration::from_secs(30))
        .unwrap();

    // The whole flood in one go, from a thread of its own: writes block whenever nova stops
    // reading commands because its client is behind.
    flooding.store(true, Ordering::Relaxed);
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let text = "q".repeat(MESSAGE_BYTES);
        for i in 0..FLOOD {
            send(
                &mut stdin,
                json!({"id": format!("f{i}"), "type": kind, "message": text}),
            );
        }
        send(&mut stdin, json!({"id": "s", "type": "get_state"}));
        send(&mut stdin, json!({"id": "a", "type": "abort"}));
        stdin.flush().unwrap();
        stdin
    });
    let (mut queued, mut refused) = (0, 0);
    let mut state = Value::Null;
    let mut aborted = false;
    let mut peak = 0;
    while !aborted {
        let r = answers
            .recv_timeout(FLOOD_TIMEOUT.saturating_sub(started.elapsed()))
            .unwrap_or_else(|_| {
                panic!("{kind} flood at {pace:?}: {queued} queued, {refused} refused so far")
            });
        peak = peak.max(peak_rss_mib(pid));
        match r["id"].as_str().unwrap_or_default() {
            "p" => {}
            "s" => state = r,
            "a" => aborted = true,
            id => {
                assert!(id.starts_with('f'), "{r}");
                if r["success"] == true {
                    queued += 1;
                } else {
                    let error = r["error"].as_str().unwrap_or_default();
                    assert!(
                        error.contains("1000 messages are already waiting"),
                        "{error}"
                    );
                    refused += 1;
                }
            }
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(queued + refused, FLOOD, "every command is answered");
    assert!(queued >= MAX_QUEUED, "{queued} queued");
    assert_eq!(state["success"], true, "{state}");
    assert_eq!(state["data"]["isStreaming"], true, "{state}");
    let peak = peak.max(peak_rss_mib(pid));
    let stdin = writer.join().unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let written = reader.join().unwrap();
    eprintln!(
        "{kind} flood at {pace:?}: {queued} queued, {refused} refused in {:.1} s; peak RSS {peak} \
         MiB; {} MiB written",
        elapsed.as_secs_f64(),
        written >> 20
    );
    peak
}

fn assert_bounded(kind: &str, pace: Pace, peak: u64) {
    assert!(
        peak < RSS_BOUND_MIB,
        "{kind} flood at a {pace:?} client: nova grew to {peak} MiB"
    );
}

/// The follow_up flood at a fast and at a slow client, at once.
#[test]
fn a_follow_up_flood_is_answered_within_bounded_memory() {
    let slow = std::thread::spawn(|| flood("follow_up", Pace::Slow));
    assert_bounded("follow_up", Pace::Fast, flood("follow_up", Pace::Fast));
    assert_bounded("follow_up", Pace::Slow, slow.join().unwrap());
}

/// The steer flood at the slow client only: the queues and snapshots are the same as
/// follow_up's, and the slow client is where they pile up.
#[test]
fn a_steer_flood_is_answered_within_bounded_memory() {
    assert_bounded("steer", Pace::Slow, flood("steer", Pace::Slow));
}
