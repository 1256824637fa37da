//! `cargo bench --bench serve`: `nova serve`'s figures, printed, not asserted.
//!
//! - idle sessions: 1,000 sessions opened over the Unix socket in one `nova serve`; the time to
//!   open one (mean and slowest) and the RSS after the first and after all, so the cost of each
//!   session beyond the first
//! - reattach: a client that leaves as a 4,000-chunk reply starts and comes back after it ended,
//!   with the last `seq` it saw; how many records it missed and how long the replay takes to
//!   arrive
//! - stalled client: 100 sessions stream a 2,000-chunk reply at once, each read by its own
//!   client; the same again with one more client on the first session that stops reading.
//!   The other sessions' settle times (prompt sent to `agent_settled` read) with and without it
//!
//! `NOVA_BENCH_BIN=<path>` measures another build of nova instead; arguments pick figures by
//! name (`cargo bench --bench serve -- idle`).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mock_llm/mod.rs"]
#[allow(dead_code)]
mod mock_llm;
mod support;

use futures_util::{SinkExt, StreamExt};
use mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{Figures, mib, rss_of};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const IDLE_SESSIONS: usize = 1_000;
const REPLAY_CHUNKS: usize = 4_000;
const STREAMING_SESSIONS: usize = 100;
const STREAM_CHUNKS: usize = 2_000;

/// `nova serve --socket` in a temp dir (also its agent dir and root) on the mock's model.
struct Served {
    child: Child,
    socket: PathBuf,
    dir: tempfile::TempDir,
}

impl Served {
    fn start(mock: &MockLlm) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let models = json!({"providers": {"mock": {"baseUrl": mock.base_url_ollama(),
            "api": "ollama", "models": [{"id": "bench-model"}]}}});
        std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
        let socket = dir.path().join("nova.sock");
        let bin =
            std::env::var_os("NOVA_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_nova").into());
        let mut child = Command::new(bin)
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--root")
            .arg(dir.path())
            .env("NOVA_AGENT_DIR", dir.path())
            .env("OLLAMA_HOST", "127.0.0.1:9")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("listening on") {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "nova serve ended");
        }
        // Keep draining stderr so nova never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Served { child, socket, dir }
    }

    fn cwd(&self) -> &Path {
        self.dir.path()
    }

    /// One HTTP request over the socket; the JSON body of the answer.
    fn http(&self, method: &str, path: &str, body: &Value) -> Value {
        let body = body.to_string();
        let mut io = UnixStream::connect(&self.socket).unwrap();
        write!(
            io,
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        io.read_to_string(&mut answer).unwrap();
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or("null")).unwrap()
    }

    fn open(&self) -> String {
        let opened = self.http(
            "POST",
            "/v1/sessions",
            &json!({"cwd": self.cwd(), "model": "mock/bench-model"}),
        );
        opened["id"].as_str().expect("a session id").to_owned()
    }

    async fn attach(
        &self,
        id: &str,
        query: &str,
    ) -> tokio_tungstenite::WebSocketStream<tokio::net::UnixStream> {
        let request = format!("ws://localhost/v1/sessions/{id}/rpc{query}")
            .into_client_request()
            .unwrap();
        let io = tokio::net::UnixStream::connect(&self.socket).await.unwrap();
        tokio_tungstenite::client_async(request, io)
            .await
            .unwrap()
            .0
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn idle(mock: &MockLlm) {
    let served = Served::start(mock);
    let mut times = Vec::with_capacity(IDLE_SESSIONS);
    let started = Instant::now();
    served.open();
    times.push(started.elapsed());
    let (first, _) = rss_of(served.child.id());
    for _ in 1..IDLE_SESSIONS {
        let started = Instant::now();
        served.open();
        times.push(started.elapsed());
    }
    let (all, peak) = rss_of(served.child.id());
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    let slowest = times.iter().max().unwrap();
    println!(
        "idle sessions: {IDLE_SESSIONS} in one process: RSS {} with one, {} with all (peak {}), \
         {:.1} KiB per session beyond the first; opening one (HTTP request included) took \
         {mean:?} on average, {slowest:?} at the slowest",
        mib(first),
        mib(all),
        mib(peak),
        (all.saturating_sub(first)) as f64 / (IDLE_SESSIONS - 1) as f64,
    );
}

async fn next_record<S>(ws: &mut S) -> String
where
    S: futures_util::Stream<Item = tokio_tungstenite::tungstenite::Result<Message>> + Unpin,
{
    loop {
        match ws.next().await.unwrap().unwrap() {
            Message::Text(text) => return text.to_string(),
            _ => continue,
        }
    }
}

async fn reattach(mock: &MockLlm) {
    mock.push(Reply::many_chunks(REPLAY_CHUNKS, "x"));
    let served = Served::start(mock);
    let id = served.open();
    let mut witness = served.attach(&id, "").await;
    let mut client = served.attach(&id, "?client=me").await;
    client
        .send(Message::Text(
            json!({"id": "p", "type": "prompt", "message": "go"})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    let response: Value = serde_json::from_str(&next_record(&mut client).await).unwrap();
    let last = response["seq"].as_u64().unwrap();
    drop(client);
    let newest = loop {
        let record: Value = serde_json::from_str(&next_record(&mut witness).await).unwrap();
        if record["type"] == "agent_settled" {
            break record["seq"].as_u64().unwrap();
        }
    };
    let started = Instant::now();
    let mut back = served
        .attach(&id, &format!("?client=me&since={last}"))
        .await;
    let mut records = 0;
    loop {
        let line = next_record(&mut back).await;
        records += 1;
        if line.contains("\"type\":\"agent_settled\"") {
            break;
        }
    }
    let took = started.elapsed();
    println!(
        "reattach: {records} missed records (a {REPLAY_CHUNKS}-chunk reply; seq {last} to \
         {newest}) replayed in {took:?}, connecting included"
    );
}

/// One run of the stalled-client figure: every session's settle time, in session order, the
/// first (the one the stalled client is on, when there is one) included.
async fn stream_all(mock: &MockLlm, stalled: bool) -> Vec<Duration> {
    let served = Served::start(mock);
    let ids: Vec<String> = (0..STREAMING_SESSIONS).map(|_| served.open()).collect();
    for _ in 0..STREAMING_SESSIONS {
        mock.push(Reply::many_chunks(STREAM_CHUNKS, "x"));
    }
    let mut clients = Vec::new();
    for id in &ids {
        clients.push(served.attach(id, "").await);
    }
    // Attached, then never read again.
    let _stalled = if stalled {
        Some(served.attach(&ids[0], "").await)
    } else {
        None
    };
    let started = Instant::now();
    let mut runs = tokio::task::JoinSet::new();
    for (i, mut client) in clients.into_iter().enumerate() {
        runs.spawn(async move {
            client
                .send(Message::Text(
                    json!({"id": "p", "type": "prompt", "message": "go"})
                        .to_string()
                        .into(),
                ))
                .await
                .unwrap();
            while !next_record(&mut client)
                .await
                .starts_with("{\"type\":\"agent_settled\"")
            {}
            (i, started.elapsed())
        });
    }
    let mut settled = vec![Duration::ZERO; STREAMING_SESSIONS];
    while let Some(done) = runs.join_next().await {
        let (i, took) = done.unwrap();
        settled[i] = took;
    }
    settled
}

fn summary(times: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
    (mean, sorted[sorted.len() / 2], sorted[sorted.len() - 1])
}

async fn stalled(mock: &MockLlm) {
    let without = stream_all(mock, false).await;
    let with = stream_all(mock, true).await;
    // The first session is the stalled client's; the figure is about the others.
    let (mean0, median0, max0) = summary(&without[1..]);
    let (mean1, median1, max1) = summary(&with[1..]);
    let change = |a: Duration, b: Duration| (b.as_secs_f64() / a.as_secs_f64() - 1.0) * 100.0;
    println!(
        "stalled client: {STREAMING_SESSIONS} sessions streaming a {STREAM_CHUNKS}-chunk reply \
         at once; the other sessions settled in {mean0:.2?} mean, {median0:.2?} median, \
         {max0:.2?} slowest without a stalled client, and {mean1:.2?} mean ({:+.1} %), \
         {median1:.2?} median ({:+.1} %), {max1:.2?} slowest ({:+.1} %) with one that stopped \
         reading (its own session settled in {:.2?})",
        change(mean0, mean1),
        change(median0, median1),
        change(max0, max1),
        with[0],
    );
}

fn main() {
    let figures = Figures::from_args(&["idle", "reattach", "stalled"]);
    let wanted = |name: &str| figures.wanted(name);
    let mock = MockLlm::start();
    if wanted("idle") {
        idle(&mock);
    }
    if wanted("reattach") {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(reattach(&mock));
    }
    if wanted("stalled") {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(stalled(&mock));
    }
}
