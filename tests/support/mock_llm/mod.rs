//! A scripted LLM server that speaks Ollama's native `/api/chat` (NDJSON), the
//! OpenAI-compatible `/v1/chat/completions` (SSE), OpenAI's `/v1/responses` (SSE),
//! Anthropic's `/v1/messages` (SSE), Gemini's
//! `/v1beta/models/<model>:streamGenerateContent?alt=sse` (SSE) and Bedrock's
//! `/model/<modelId>/converse-stream` (AWS's binary event stream) and Pi's own messages protocol
//! (`/pi/v1/messages`, SSE) byte for byte, on 127.0.0.1.
//!
//! Hand-written on `tokio::net::TcpListener` so that it can misbehave the way real servers do:
//! split a frame across many writes, cut a stream without the terminating chunk, stall, send a
//! garbage frame, or hold the rest of a reply behind a [`Gate`] the test opens. Every response
//! body uses `Transfer-Encoding: chunked` and `Connection: close`, so a cut stream is visible to
//! the client as an incomplete body.
//!
//! The server runs on its own thread with its own current-thread runtime, so tests stay plain
//! `#[test]` functions; it stops when the [`MockLlm`] is dropped. Replies are consumed one per
//! chat request from a FIFO ([`MockLlm::push`]); an empty script answers HTTP 500 with
//! `mock: no scripted reply`. Every request is recorded, and every chat request's conversation
//! is checked against the invariants in [`check_conversation`].
//!
//! The script of a reply and its frames live in `reply`, the recorded requests and the
//! invariants in `requests`, the server here; tests import all of it from this module.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{oneshot, watch};

mod anthropic_checks;
mod bedrock_checks;
mod google_checks;
mod pi_checks;
mod reply;
mod requests;
mod responses_checks;

pub use reply::Reply;
use requests::route_format;
pub use requests::{Recorded, WireFormat, check_conversation};

/// The body of the 500 answer when the script is empty.
pub const NO_REPLY_BODY: &str = "mock: no scripted reply";

// ---------------------------------------------------------------------------------------------
// Gate
// ---------------------------------------------------------------------------------------------

/// A handle that holds a streaming reply at a chosen frame until the test calls [`Gate::open`].
/// Clones share state. Once open it stays open.
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

struct GateInner {
    open: watch::Sender<bool>,
    reached: Mutex<usize>,
    cond: Condvar,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("open", &self.is_open())
            .field("reached", &self.times_reached())
            .finish()
    }
}

impl Gate {
    pub fn new() -> Self {
        Gate {
            inner: Arc::new(GateInner {
                open: watch::Sender::new(false),
                reached: Mutex::new(0),
                cond: Condvar::new(),
            }),
        }
    }

    /// Let every stream held at this gate (now or later) continue.
    pub fn open(&self) {
        self.inner.open.send_replace(true);
    }

    pub fn is_open(&self) -> bool {
        *self.inner.open.borrow()
    }

    /// How many times a stream has arrived at this gate.
    pub fn times_reached(&self) -> usize {
        *lock(&self.inner.reached)
    }

    /// Block until a stream has arrived at this gate (its earlier frames are written and
    /// flushed); panics after `timeout`.
    pub fn wait_reached(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut reached = lock(&self.inner.reached);
        while *reached == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "mock: gate was not reached within {timeout:?}"
            );
            reached = self
                .inner
                .cond
                .wait_timeout(reached, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    async fn pass(&self) {
        *lock(&self.inner.reached) += 1;
        self.inner.cond.notify_all();
        let mut rx = self.inner.open.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
    models: Vec<String>,
    /// What `POST /api/show` reports as each model's trained context length.
    context_lengths: std::collections::HashMap<String, u64>,
    /// Record requests without their bodies (a bench whose conversation runs to GBs).
    forget_bodies: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    cond: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The scripted server. See the module docs.
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MockLlm {
    /// Bind 127.0.0.1 on a free port and start serving. `/api/tags` lists `test-model`.
    pub fn start() -> MockLlm {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        lock(&shared.state).models = vec!["test-model".into()];
        let (tx, rx) = oneshot::channel();
        let server_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mock-llm-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(serve(listener, server_shared, rx));
                // Dropping the runtime cancels every connection task, closing stalled sockets.
            })
            .unwrap();
        MockLlm {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT` (Ollama's base URL: requests go to `/api/chat`).
    pub fn base_url_ollama(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1` (requests go to `/v1/chat/completions`).
    pub fn base_url_openai(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT` (Anthropic's base URL: requests go to `/v1/messages`).
    pub fn base_url_anthropic(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1beta` (Gemini's base URL: requests go to
    /// `/v1beta/models/<model>:streamGenerateContent?alt=sse`).
    pub fn base_url_google(&self) -> String {
        format!("http://{}/v1beta", self.addr)
    }

    /// `http://127.0.0.1:PORT/pi/v1` (the pi-messages base URL: requests go to
    /// `/pi/v1/messages`, a path apart from Anthropic's).
    pub fn base_url_pi(&self) -> String {
        format!("http://{}/pi/v1", self.addr)
    }

    /// Queue a reply for the next chat request.
    pub fn push(&self, reply: Reply) -> &Self {
        lock(&self.shared.state).replies.push_back(reply);
        self
    }

    /// Replies not consumed yet.
    pub fn pending_replies(&self) -> usize {
        lock(&self.shared.state).replies.len()
    }

    /// The model names `GET /api/tags` lists.
    pub fn set_models(&self, names: &[&str]) {
        lock(&self.shared.state).models = names.iter().map(|s| s.to_string()).collect();
    }

    /// The trained context length `POST /api/show` reports for `model`.
    pub fn set_context_length(&self, model: &str, tokens: u64) {
        lock(&self.shared.state)
            .context_lengths
            .insert(model.to_string(), tokens);
    }

    /// From now on, requests are recorded without their bodies, so a bench that sends a huge
    /// conversation many times does not measure the mock's memory.
    pub fn forget_bodies(&self) {
        lock(&self.shared.state).forget_bodies = true;
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.state).requests.clone()
    }

    /// The chat requests (`/api/chat`, `…/chat/completions`) received so far.
    pub fn chat_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_chat())
            .collect()
    }

    /// Wait until at least `n` requests have arrived; returns all of them. Panics after
    /// `timeout` listing what did arrive.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.shared.state);
        while st.requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let seen: Vec<String> = st
                    .requests
                    .iter()
                    .map(|r| format!("  {} {}", r.method, r.path))
                    .collect();
                panic!(
                    "mock: expected {n} request(s) within {timeout:?}, got {}:\n{}",
                    st.requests.len(),
                    seen.join("\n")
                );
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        st.requests.clone()
    }

    /// Conversation-invariant violations found in the chat requests so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared.state).violations.clone()
    }

    pub fn assert_no_violations(&self) {
        let v = self.violations();
        assert!(
            v.is_empty(),
            "mock: conversation invariants violated:\n  {}",
            v.join("\n  ")
        );
    }

    /// Record a request and decide the answer.
    fn route(shared: &Shared, req: RawRequest) -> Action {
        let body = if req.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&req.body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&req.body).into()))
        };
        let mut st = lock(&shared.state);
        let index = st.requests.len();
        let kept = if st.forget_bodies {
            Value::Null
        } else {
            body.clone()
        };
        st.requests.push(Recorded {
            method: req.method.clone(),
            path: req.path.clone(),
            headers: req.headers,
            body: kept,
        });
        shared.cond.notify_all();
        let format = route_format(&req.path);
        let bare = req.path.split('?').next().unwrap_or("");
        match (req.method.as_str(), bare, format) {
            ("GET", "/api/tags", _) => {
                let models: Vec<Value> = st
                    .models
                    .iter()
                    .map(|m| json!({"name": m, "model": m}))
                    .collect();
                Action::Plain {
                    status: 200,
                    content_type: "application/json",
                    body: json!({ "models": models }).to_string(),
                    headers: Vec::new(),
                }
            }
            ("POST", "/api/show", _) => {
                let length = body["model"]
                    .as_str()
                    .and_then(|m| st.context_lengths.get(m));
                let info = match length {
                    Some(n) => json!({"general.architecture": "llama", "llama.context_length": n}),
                    None => json!({"general.architecture": "llama"}),
                };
                Action::Plain {
                    status: 200,
                    content_type: "application/json",
                    body: json!({ "model_info": info }).to_string(),
                    headers: Vec::new(),
                }
            }
            ("POST", _, Some(format)) => {
                let mut problems = check_conversation(format, &body);
                if format == WireFormat::Bedrock {
                    problems.extend(bedrock_checks::check_auth(&st.requests[index]));
                }
                for v in problems {
                    st.violations
                        .push(format!("request #{index} ({}): {v}", req.path));
                }
                let Some(reply) = st.replies.pop_front() else {
                    return Action::Plain {
                        status: 500,
                        content_type: "text/plain",
                        body: NO_REPLY_BODY.into(),
                        headers: Vec::new(),
                    };
                };
                if let Some((status, text)) = &reply.http_error {
                    let content_type = if serde_json::from_str::<Value>(text).is_ok() {
                        "application/json"
                    } else {
                        "text/plain"
                    };
                    return Action::Plain {
                        status: *status,
                        content_type,
                        body: text.clone(),
                        headers: reply.headers.clone(),
                    };
                }
                let model = body["model"].as_str().unwrap_or("test-model");
                let (frames, content_type) = match format {
                    WireFormat::Ollama => (reply.ollama_frames(model), "application/x-ndjson"),
                    WireFormat::OpenAi => {
                        let usage = body["stream_options"]["include_usage"] == json!(true);
                        let id = format!("chatcmpl-mock-{index}");
                        (reply.openai_frames(model, &id, usage), "text/event-stream")
                    }
                    WireFormat::Anthropic => {
                        let id = format!("msg_mock_{index}");
                        (reply.anthropic_frames(model, &id), "text/event-stream")
                    }
                    WireFormat::Responses => {
                        let id = format!("resp_mock_{index}");
                        (reply.responses_frames(model, &id), "text/event-stream")
                    }
                    WireFormat::Google => {
                        // Gemini names the model in the path, not the body.
                        let model = req
                            .path
                            .split('?')
                            .next()
                            .and_then(|p| p.rsplit_once("/models/"))
                            .and_then(|(_, m)| m.strip_suffix(":streamGenerateContent"))
                            .unwrap_or(model);
                        let id = format!("gemini-mock-{index}");
                        (reply.google_frames(model, &id), "text/event-stream")
                    }
                    WireFormat::Bedrock => {
                        (reply.bedrock_frames(), "application/vnd.amazon.eventstream")
                    }
                    WireFormat::PiMessages => {
                        let id = format!("pi-mock-{index}");
                        (reply.pi_frames(&id), "text/event-stream")
                    }
                };
                Action::Stream {
                    reply: Box::new(reply),
                    format,
                    frames,
                    content_type,
                }
            }
            (method, path, _) => Action::Plain {
                status: 404,
                content_type: "text/plain",
                body: format!("mock: no route for {method} {path}"),
                headers: Vec::new(),
            },
        }
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

enum Action {
    Plain {
        status: u16,
        content_type: &'static str,
        body: String,
        headers: Vec<(String, String)>,
    },
    Stream {
        reply: Box<Reply>,
        format: WireFormat,
        frames: Vec<Vec<u8>>,
        content_type: &'static str,
    },
}

async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(handle(stream, shared.clone()));
                }
            }
        }
    }
}

struct RawRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// The read side of a connection with its buffer.
struct Reader {
    rd: OwnedReadHalf,
    buf: Vec<u8>,
}

impl Reader {
    /// Read more bytes into the buffer; false at EOF or error.
    async fn fill(&mut self) -> bool {
        let mut tmp = [0u8; 8192];
        match self.rd.read(&mut tmp).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
        }
    }

    /// Take bytes up to and including the first `delim`.
    async fn take_until(&mut self, delim: &[u8], limit: usize) -> Option<Vec<u8>> {
        loop {
            if let Some(p) = self.buf.windows(delim.len()).position(|w| w == delim) {
                return Some(self.buf.drain(..p + delim.len()).collect());
            }
            if self.buf.len() > limit || !self.fill().await {
                return None;
            }
        }
    }

    async fn take_exact(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill().await {
                return None;
            }
        }
        Some(self.buf.drain(..n).collect())
    }

    async fn request(&mut self) -> Option<RawRequest> {
        let head = self.take_until(b"\r\n\r\n", 1 << 20).await?;
        let head = String::from_utf8_lossy(&head);
        let mut lines = head.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let method = first.next()?.to_string();
        let path = first.next()?.to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let get = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        let body = if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            let mut body = Vec::new();
            loop {
                let line = self.take_until(b"\r\n", 1 << 10).await?;
                let size = String::from_utf8_lossy(&line[..line.len() - 2]).to_string();
                let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
                if size == 0 {
                    self.take_until(b"\r\n", 1 << 16).await?;
                    break body;
                }
                body.extend(self.take_exact(size).await?);
                self.take_exact(2).await?;
            }
        } else {
            let len = get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            self.take_exact(len).await?
        };
        Some(RawRequest {
            method,
            path,
            headers,
            body,
        })
    }

    /// Wait until the client closes its side (or the connection fails).
    async fn until_gone(&mut self) {
        while self.fill().await {
            self.buf.clear();
        }
    }
}

async fn handle(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut reader = Reader {
        rd,
        buf: Vec::new(),
    };
    let Some(req) = reader.request().await else {
        return;
    };
    match MockLlm::route(&shared, req) {
        Action::Plain {
            status,
            content_type,
            body,
            headers,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n",
                reason_phrase(status),
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            head.push_str(&body);
            let _ = wr.write_all(head.as_bytes()).await;
            let _ = wr.shutdown().await;
        }
        Action::Stream { reply, .. } if reply.hang_up => {}
        Action::Stream {
            reply,
            format,
            frames,
            content_type,
        } => {
            if stream_frames(&mut reader, &mut wr, &reply, format, &frames, content_type)
                .await
                .is_some()
            {
                let _ = wr.shutdown().await;
            }
        }
    }
}

/// Write a streamed reply; `None` when the stream ended without its terminating chunk (cut,
/// stall or client gone).
async fn stream_frames(
    reader: &mut Reader,
    wr: &mut OwnedWriteHalf,
    reply: &Reply,
    format: WireFormat,
    frames: &[Vec<u8>],
    content_type: &str,
) -> Option<()> {
    let mut head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\
         Cache-Control: no-cache\r\nConnection: close\r\n"
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    wr.write_all(head.as_bytes()).await.ok()?;
    wr.flush().await.ok()?;
    // A fault placed beyond the last frame acts just before the terminating chunk.
    let at = |n: Option<usize>| n.map(|n| n.min(frames.len()));
    let (cut_after, stall_after) = (at(reply.cut_after), at(reply.stall_after));
    for i in 0..=frames.len() {
        if cut_after == Some(i) {
            if reply.cut_inside_frame
                && let Some(f) = frames.get(i)
            {
                write_chunk(wr, &f[..f.len() / 2]).await?;
            }
            return None;
        }
        if stall_after == Some(i) {
            reader.until_gone().await;
            return None;
        }
        for (_, gate) in reply
            .gates
            .iter()
            .filter(|(n, _)| (*n).min(frames.len()) == i)
        {
            tokio::select! {
                _ = gate.pass() => {}
                _ = reader.until_gone() => return None,
            }
        }
        if reply.invalid_json_after == Some(i) {
            let bedrock_garbage = reply::bedrock_message(
                &[
                    (":message-type", "event"),
                    (":event-type", "contentBlockDelta"),
                ],
                b"{\"contentBlockIndex\":oops, not json".to_vec(),
            );
            let garbage: &[u8] = match format {
                WireFormat::Ollama => b"{\"model\":\"test-model\",\"message\":{oops, not json\n",
                WireFormat::OpenAi => b"data: {\"id\":\"chatcmpl-mock\",oops, not json\n\n",
                WireFormat::Anthropic => {
                    b"event: content_block_delta\ndata: {\"type\":oops, not json\n\n"
                }
                WireFormat::Responses => {
                    b"event: response.output_text.delta\ndata: {\"type\":oops, not json\n\n"
                }
                WireFormat::Google => b"data: {\"candidates\":oops, not json\r\n\r\n",
                WireFormat::Bedrock => &bedrock_garbage,
                WireFormat::PiMessages => b"data: {\"type\":\"text_delta\",oops, not json\n\n",
            };
            write_frame(wr, garbage, reply.split_writes).await?;
        }
        let Some(frame) = frames.get(i) else { break };
        if let Some(d) = reply.delay_per_frame {
            tokio::time::sleep(d).await;
        }
        write_frame(wr, frame, reply.split_writes).await?;
    }
    wr.write_all(b"0\r\n\r\n").await.ok()?;
    wr.flush().await.ok()
}

async fn write_frame(wr: &mut OwnedWriteHalf, frame: &[u8], split: bool) -> Option<()> {
    if !split {
        return write_chunk(wr, frame).await;
    }
    const SIZES: [usize; 6] = [1, 2, 3, 5, 8, 13];
    let mut at = 0;
    let mut k = 0;
    while at < frame.len() {
        let end = (at + SIZES[k % SIZES.len()]).min(frame.len());
        write_chunk(wr, &frame[at..end]).await?;
        tokio::task::yield_now().await;
        at = end;
        k += 1;
    }
    Some(())
}

async fn write_chunk(wr: &mut OwnedWriteHalf, data: &[u8]) -> Option<()> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    wr.write_all(&out).await.ok()?;
    wr.flush().await.ok()
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}
