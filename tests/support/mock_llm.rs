//! A scripted LLM server that speaks Ollama's native `/api/chat` (NDJSON) and the
//! OpenAI-compatible `/v1/chat/completions` (SSE) byte for byte, on 127.0.0.1.
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

/// `created_at` in every Ollama frame; fixed so captured streams are reproducible.
const CREATED_AT: &str = "2026-01-01T00:00:00.000000000Z";
/// `created` in every OpenAI chunk.
const CREATED: u64 = 1_767_225_600;
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
// Reply
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Segment {
    Thinking(String),
    Text(String),
    ToolCall {
        id: String,
        name: String,
        args: Value,
    },
}

/// One scripted answer to one chat request. Build with [`Reply::text`], [`Reply::new`] or
/// [`Reply::http_error`], then chain content and faults.
///
/// Frame counting (for `cut_after`, `stall_after`, `invalid_json_after`, `gate_after`): every
/// NDJSON line / SSE event is one frame, including Ollama's final `done` line and OpenAI's
/// finish chunk, usage chunk and `[DONE]`. `n` means "after the first n frames were written";
/// an `n` at or beyond the frame count acts after the last frame, before the terminating chunk.
#[derive(Debug, Clone)]
pub struct Reply {
    segments: Vec<Segment>,
    text_chunks: usize,
    thinking_chunks: usize,
    arg_fragments: usize,
    usage: (u64, u64),
    finish: Option<String>,
    reasoning_field: String,
    split_writes: bool,
    cut_after: Option<usize>,
    cut_inside_frame: bool,
    stall_after: Option<usize>,
    invalid_json_after: Option<usize>,
    delay_per_frame: Option<Duration>,
    gates: Vec<(usize, Gate)>,
    http_error: Option<(u16, String)>,
    headers: Vec<(String, String)>,
}

impl Default for Reply {
    fn default() -> Self {
        Self::new()
    }
}

impl Reply {
    /// An empty streamed reply (only the terminating frames); add content with the builders.
    pub fn new() -> Self {
        Reply {
            segments: Vec::new(),
            text_chunks: 1,
            thinking_chunks: 1,
            arg_fragments: 3,
            usage: (10, 5),
            finish: None,
            reasoning_field: "reasoning_content".into(),
            split_writes: false,
            cut_after: None,
            cut_inside_frame: false,
            stall_after: None,
            invalid_json_after: None,
            delay_per_frame: None,
            gates: Vec::new(),
            http_error: None,
            headers: Vec::new(),
        }
    }

    /// A streamed reply whose text is `text` (one frame unless [`Reply::text_chunks`]).
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().and_text(text)
    }

    /// A reply of `n` text deltas, each `piece` (the benchmark shape: `many_chunks(20_000, "x")`).
    pub fn many_chunks(n: usize, piece: &str) -> Self {
        Self::text(piece.repeat(n)).text_chunks(n)
    }

    /// An answer that is an HTTP error with this status and body (JSON content type when the body
    /// parses as JSON, text otherwise).
    pub fn http_error(status: u16, body: impl Into<String>) -> Self {
        let mut r = Self::new();
        r.http_error = Some((status, body.into()));
        r
    }

    /// Append another text segment (it follows earlier text/tool-call segments in order).
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.segments.push(Segment::Text(text.into()));
        self
    }

    /// Add reasoning. Thinking is streamed before any text or tool call, whatever the order of
    /// the builder calls.
    pub fn thinking(mut self, thinking: impl Into<String>) -> Self {
        let at = self
            .segments
            .iter()
            .position(|s| !matches!(s, Segment::Thinking(_)))
            .unwrap_or(self.segments.len());
        self.segments.insert(at, Segment::Thinking(thinking.into()));
        self
    }

    /// Add a tool call; several calls make a parallel batch. OpenAI arguments are streamed as
    /// several fragments of the JSON text; Ollama sends all calls of a run in one frame with the
    /// arguments as an object.
    pub fn tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        args: Value,
    ) -> Self {
        self.segments.push(Segment::ToolCall {
            id: id.into(),
            name: name.into(),
            args,
        });
        self
    }

    /// Stream every text segment as `n` deltas (split on char boundaries; fewer when the text
    /// has fewer chars).
    pub fn text_chunks(mut self, n: usize) -> Self {
        self.text_chunks = n.max(1);
        self
    }

    /// Stream every thinking segment as `n` deltas.
    pub fn thinking_chunks(mut self, n: usize) -> Self {
        self.thinking_chunks = n.max(1);
        self
    }

    /// How many fragments each OpenAI tool call's argument text is cut into (default 3).
    pub fn arg_fragments(mut self, n: usize) -> Self {
        self.arg_fragments = n.max(1);
        self
    }

    /// Reported usage: Ollama `prompt_eval_count`/`eval_count`, OpenAI
    /// `prompt_tokens`/`completion_tokens` (default 10, 5).
    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.usage = (input, output);
        self
    }

    /// Override the finish reason: OpenAI `finish_reason` as given; Ollama `done_reason` as
    /// given except `tool_calls`, which Ollama reports as `stop`.
    pub fn finish(mut self, reason: impl Into<String>) -> Self {
        self.finish = Some(reason.into());
        self
    }

    /// The OpenAI delta field carrying reasoning (default `reasoning_content`; Ollama's
    /// OpenAI-compatible endpoint uses `reasoning`).
    pub fn reasoning_field(mut self, field: impl Into<String>) -> Self {
        self.reasoning_field = field.into();
        self
    }

    /// Write every frame in small pieces (1–13 bytes, split inside the JSON and inside UTF-8
    /// sequences), each its own HTTP chunk, flushed separately.
    pub fn split_writes(mut self) -> Self {
        self.split_writes = true;
        self
    }

    /// After `n` frames, close the socket without the terminating chunk.
    pub fn cut_after(mut self, n: usize) -> Self {
        self.cut_after = Some(n);
        self
    }

    /// After `n` frames, write the first half of the next frame, then close the socket without
    /// the terminating chunk.
    pub fn cut_inside_frame(mut self, n: usize) -> Self {
        self.cut_after = Some(n);
        self.cut_inside_frame = true;
        self
    }

    /// After `n` frames, send nothing more but keep the connection open until the client closes
    /// it (or the mock is dropped).
    pub fn stall_after(mut self, n: usize) -> Self {
        self.stall_after = Some(n);
        self
    }

    /// After `n` frames, send one frame that is not valid JSON, then carry on.
    pub fn invalid_json_after(mut self, n: usize) -> Self {
        self.invalid_json_after = Some(n);
        self
    }

    /// Sleep this long before every frame.
    pub fn delay_per_frame(mut self, delay: Duration) -> Self {
        self.delay_per_frame = Some(delay);
        self
    }

    /// After `n` frames (written and flushed), wait until `gate` is opened. If the client goes
    /// away meanwhile, the stream ends there.
    pub fn gate_after(mut self, n: usize, gate: &Gate) -> Self {
        self.gates.push((n, gate.clone()));
        self
    }

    /// An extra response header (for example `retry-after`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn tool_calls(&self) -> bool {
        self.segments
            .iter()
            .any(|s| matches!(s, Segment::ToolCall { .. }))
    }

    /// The frames of this reply in Ollama's NDJSON format.
    fn ollama_frames(&self, model: &str) -> Vec<Vec<u8>> {
        let frame = |message: Value| {
            ndjson(&json!({
                "model": model,
                "created_at": CREATED_AT,
                "message": message,
                "done": false,
            }))
        };
        let mut frames = Vec::new();
        let mut calls: Vec<Value> = Vec::new();
        for seg in &self.segments {
            if !matches!(seg, Segment::ToolCall { .. }) && !calls.is_empty() {
                frames.push(frame(ollama_calls_message(std::mem::take(&mut calls))));
            }
            match seg {
                Segment::Thinking(t) => {
                    for piece in split_even(t, self.thinking_chunks) {
                        frames.push(frame(json!({
                            "role": "assistant", "content": "", "thinking": piece,
                        })));
                    }
                }
                Segment::Text(t) => {
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(frame(json!({"role": "assistant", "content": piece})));
                    }
                }
                Segment::ToolCall { name, args, .. } => {
                    calls.push(json!({"function": {"name": name, "arguments": args}}));
                }
            }
        }
        if !calls.is_empty() {
            frames.push(frame(ollama_calls_message(calls)));
        }
        let done_reason = match self.finish.as_deref() {
            None | Some("tool_calls") => "stop",
            Some(other) => other,
        };
        frames.push(ndjson(&json!({
            "model": model,
            "created_at": CREATED_AT,
            "message": {"role": "assistant", "content": ""},
            "done": true,
            "done_reason": done_reason,
            "total_duration": 1_000_000u64,
            "load_duration": 1_000u64,
            "prompt_eval_count": self.usage.0,
            "prompt_eval_duration": 1_000u64,
            "eval_count": self.usage.1,
            "eval_duration": 1_000u64,
        })));
        frames
    }

    /// The frames of this reply in the OpenAI chat-completions SSE format.
    fn openai_frames(&self, model: &str, id: &str, include_usage: bool) -> Vec<Vec<u8>> {
        let chunk = |delta: Value, finish: Value| {
            sse(&json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }))
        };
        let mut first = true;
        let mut delta = |mut d: Value| {
            if first {
                first = false;
                d["role"] = json!("assistant");
            }
            chunk(d, Value::Null)
        };
        let mut frames = Vec::new();
        let mut call_index = 0;
        for seg in &self.segments {
            match seg {
                Segment::Thinking(t) => {
                    for piece in split_even(t, self.thinking_chunks) {
                        let mut d = json!({});
                        d[self.reasoning_field.as_str()] = json!(piece);
                        frames.push(delta(d));
                    }
                }
                Segment::Text(t) => {
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(delta(json!({"content": piece})));
                    }
                }
                Segment::ToolCall { id, name, args } => {
                    frames.push(delta(json!({"tool_calls": [{
                        "index": call_index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }]})));
                    let text = serde_json::to_string(args).unwrap();
                    for frag in split_even(&text, self.arg_fragments) {
                        frames.push(delta(json!({"tool_calls": [{
                            "index": call_index, "function": {"arguments": frag},
                        }]})));
                    }
                    call_index += 1;
                }
            }
        }
        let finish = self.finish.clone().unwrap_or_else(|| {
            if self.tool_calls() {
                "tool_calls".into()
            } else {
                "stop".into()
            }
        });
        frames.push(chunk(json!({}), json!(finish)));
        if include_usage {
            frames.push(sse(&json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": self.usage.0,
                    "completion_tokens": self.usage.1,
                    "total_tokens": self.usage.0 + self.usage.1,
                },
            })));
        }
        frames.push(b"data: [DONE]\n\n".to_vec());
        frames
    }
}

fn ollama_calls_message(calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": "", "tool_calls": calls})
}

fn ndjson(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(v).unwrap();
    out.push(b'\n');
    out
}

fn sse(v: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(v).unwrap());
    out.extend(b"\n\n");
    out
}

/// `s` cut into `n` pieces of nearly equal char count (fewer if `s` is shorter; one if empty).
fn split_even(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let n = n.min(chars.len()).max(1);
    let (base, extra) = (chars.len() / n, chars.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        out.push(chars[at..at + len].iter().collect());
        at += len;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Recording and invariants
// ---------------------------------------------------------------------------------------------

/// Which wire format a chat request used (chosen by its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    Ollama,
    OpenAi,
}

/// One request as the mock received it. Header names are lower-cased. `body` is the parsed JSON
/// (a string holding the raw text when it did not parse; `null` when empty).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The request's `messages` array (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn is_chat(&self) -> bool {
        route_format(&self.path).is_some()
    }
}

fn route_format(path: &str) -> Option<WireFormat> {
    let path = path.split('?').next().unwrap_or(path);
    if path == "/api/chat" {
        Some(WireFormat::Ollama)
    } else if path.ends_with("/chat/completions") {
        Some(WireFormat::OpenAi)
    } else {
        None
    }
}

fn content_is_empty(content: &Value) -> bool {
    match content {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(parts) => parts.iter().all(|p| match p.get("text") {
            Some(Value::String(t)) => t.is_empty() && p.get("image_url").is_none(),
            _ => p.get("image_url").is_none() && p.get("type").is_none(),
        }),
        _ => false,
    }
}

fn role(m: &Value) -> &str {
    m["role"].as_str().unwrap_or("")
}

fn calls_of(m: &Value) -> &[Value] {
    m["tool_calls"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Check a chat request body against the conversation invariants; returns one line per problem.
///
/// Both formats: a `messages` array; streaming requested; no empty assistant message (no
/// content and no tool calls); no tool message that answers nothing. Ollama: each assistant
/// `tool_calls` entry is answered by exactly one `role:"tool"` message before the next
/// user/assistant message (and a `tool_name`, when given, names one of those calls). OpenAI: each
/// `tool_calls[].id` is answered by exactly one `role:"tool"` message with that `tool_call_id`
/// directly after the assistant message; a user message (for example carrying the tools'
/// images) may follow them.
pub fn check_conversation(format: WireFormat, body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(msgs) = body["messages"].as_array() else {
        return vec!["request has no `messages` array".into()];
    };
    match format {
        WireFormat::Ollama => {
            if body.get("stream") == Some(&Value::Bool(false)) {
                out.push("request has `stream: false`; the mock only streams".into());
            }
        }
        WireFormat::OpenAi => {
            if body.get("stream") != Some(&Value::Bool(true)) {
                out.push("request does not set `stream: true`".into());
            }
        }
    }
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        match role(m) {
            "assistant" => {
                let calls = calls_of(m);
                if calls.is_empty() && content_is_empty(&m["content"]) {
                    out.push(format!(
                        "message {i}: empty assistant message (no content, no tool calls)"
                    ));
                }
                let mut j = i + 1;
                while j < msgs.len() && role(&msgs[j]) == "tool" {
                    j += 1;
                }
                let results = &msgs[i + 1..j];
                if calls.is_empty() {
                    for k in i + 1..j {
                        out.push(format!(
                            "message {k}: tool message without a preceding tool call"
                        ));
                    }
                } else {
                    match format {
                        WireFormat::Ollama => check_ollama_results(i, calls, results, &mut out),
                        WireFormat::OpenAi => check_openai_results(i, calls, results, &mut out),
                    }
                }
                i = j;
                continue;
            }
            "tool" => out.push(format!(
                "message {i}: tool message without a preceding tool call"
            )),
            "user" | "system" | "developer" => {}
            other => out.push(format!("message {i}: unknown role {other:?}")),
        }
        i += 1;
    }
    out
}

fn check_ollama_results(i: usize, calls: &[Value], results: &[Value], out: &mut Vec<String>) {
    if results.len() != calls.len() {
        out.push(format!(
            "message {i}: assistant made {} tool call(s) but {} tool message(s) follow before the \
             next user/assistant message",
            calls.len(),
            results.len()
        ));
    }
    let mut names: Vec<&str> = calls
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap_or(""))
        .collect();
    for (k, r) in results.iter().enumerate() {
        if let Some(name) = r.get("tool_name").and_then(Value::as_str) {
            match names.iter().position(|n| *n == name) {
                Some(p) => {
                    names.remove(p);
                }
                None => out.push(format!(
                    "message {}: tool message for {name:?} answers none of the calls of message {i}",
                    i + 1 + k
                )),
            }
        }
    }
}

fn check_openai_results(i: usize, calls: &[Value], results: &[Value], out: &mut Vec<String>) {
    let mut ids: Vec<&str> = Vec::new();
    for c in calls {
        match c["id"].as_str() {
            Some(id) if !id.is_empty() => {
                if ids.contains(&id) {
                    out.push(format!("message {i}: duplicate tool call id {id:?}"));
                } else {
                    ids.push(id);
                }
            }
            _ => out.push(format!("message {i}: tool call without an id: {c}")),
        }
    }
    let mut answered: Vec<&str> = Vec::new();
    for (k, r) in results.iter().enumerate() {
        let at = i + 1 + k;
        match r["tool_call_id"].as_str() {
            None => out.push(format!("message {at}: tool message without `tool_call_id`")),
            Some(id) if !ids.contains(&id) => out.push(format!(
                "message {at}: tool message answers unknown tool call id {id:?}"
            )),
            Some(id) if answered.contains(&id) => out.push(format!(
                "message {at}: second tool message for tool call id {id:?}"
            )),
            Some(id) => answered.push(id),
        }
    }
    for id in ids {
        if !answered.contains(&id) {
            out.push(format!(
                "message {i}: tool call {id:?} has no tool message directly after the assistant \
                 message"
            ));
        }
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
        st.requests.push(Recorded {
            method: req.method.clone(),
            path: req.path.clone(),
            headers: req.headers,
            body: body.clone(),
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
            ("POST", _, Some(format)) => {
                for v in check_conversation(format, &body) {
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
            let garbage: &[u8] = match format {
                WireFormat::Ollama => b"{\"model\":\"test-model\",\"message\":{oops, not json\n",
                WireFormat::OpenAi => b"data: {\"id\":\"chatcmpl-mock\",oops, not json\n\n",
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
        _ => "Status",
    }
}
