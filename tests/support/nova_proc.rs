//! Drives the real `nova` binary in RPC mode over pipes, with a temp agent dir and cwd.
//!
//! A reader thread parses every stdout line as JSON (a line that is not JSON fails the test) and
//! hands it over a channel; each line is also decoded into the [`wire`] mirror types, so a shape
//! drift fails wherever it appears. Each line is checked against the published schema too, on a
//! thread of its own, so that the check (slow in a debug build) does not delay the lines a test
//! waits for and times; a rejected line fails the test at the next line read, or when the
//! [`Nova`] is dropped. Stderr is collected into a buffer. Every wait has a timeout and panics
//! with a readable list of what was received.

use super::mock_llm::MockLlm;
use super::wire::{self, Out};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long `request` waits for its response.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The default wait for events.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// A models.json with one Ollama-native provider `mock-ollama` serving `test-model` from `mock`.
pub fn ollama_models(mock: &MockLlm) -> Value {
    models_json("mock-ollama", "ollama", &mock.base_url_ollama())
}

/// A models.json with one OpenAI-compatible provider `mock-openai` serving `test-model`.
pub fn openai_models(mock: &MockLlm) -> Value {
    models_json("mock-openai", "openai-completions", &mock.base_url_openai())
}

/// A models.json with one Anthropic Messages provider `mock-anthropic` serving `test-model`.
pub fn anthropic_models(mock: &MockLlm) -> Value {
    models_json(
        "mock-anthropic",
        "anthropic-messages",
        &mock.base_url_anthropic(),
    )
}

/// A models.json with one Gemini provider `mock-google` serving `gemini-3-flash-preview`, a
/// model id that makes nova send call ids as Gemini 3 wants them.
pub fn google_models(mock: &MockLlm) -> Value {
    let mut models = models_json(
        "mock-google",
        "google-generative-ai",
        &mock.base_url_google(),
    );
    models["providers"]["mock-google"]["models"][0]["id"] = json!("gemini-3-flash-preview");
    models
}

fn models_json(provider: &str, api: &str, base_url: &str) -> Value {
    json!({
        "providers": {
            provider: {
                "baseUrl": base_url,
                "api": api,
                "apiKey": "mock-key",
                "models": [{
                    "id": "test-model",
                    "name": "test-model",
                    "api": api,
                    "reasoning": false,
                    "input": ["text"],
                    "contextWindow": 128000,
                    "maxTokens": 4096,
                }],
            },
        },
    })
}

/// Peak resident set (`VmHWM`) of process `pid`, in KiB; 0 once the process is gone.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// nova in RPC mode (no session file) on `mock`'s OpenAI-compatible endpoint with its pipes
/// left to the test, for tests that read stdout at their own pace. The agent dir and cwd
/// returned must outlive the child.
pub fn spawn_raw(mock: &MockLlm) -> (Child, [TempDir; 2]) {
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(
        agent.path().join("models.json"),
        openai_models(mock).to_string(),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(["--mode", "rpc", "--no-session"])
        .current_dir(cwd.path())
        .env("NOVA_AGENT_DIR", agent.path())
        .env("HOME", cwd.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, [agent, cwd])
}

/// One stdout line: the raw text, its JSON and its decoded form.
#[derive(Debug, Clone)]
pub struct Line {
    pub raw: String,
    pub value: Value,
    pub out: Out,
}

enum FromReader {
    Line(String),
    Eof,
}

pub struct NovaBuilder {
    agent_dir: TempDir,
    cwd: TempDir,
    home: TempDir,
    models_json: Option<Value>,
    settings: Option<Value>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    program: Option<(String, Vec<String>)>,
    /// Given agent dir and cwd used instead of the temp ones (to restart on the same session).
    dirs: Option<(PathBuf, PathBuf)>,
}

impl NovaBuilder {
    /// Use this agent dir and cwd (owned by the caller, kept after the process ends) instead of
    /// fresh temp dirs, so that several processes in turn can share sessions.
    pub fn dirs(mut self, agent_dir: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        self.dirs = Some((agent_dir.into(), cwd.into()));
        self
    }

    /// Run this program with these arguments instead of `nova --mode rpc <args>` (for testing
    /// the driver itself against a scripted stand-in).
    pub fn program<I, S>(mut self, program: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.program = Some((program.into(), args.into_iter().map(Into::into).collect()));
        self
    }

    /// `<agent>/models.json`.
    pub fn models_json(mut self, v: Value) -> Self {
        self.models_json = Some(v);
        self
    }

    /// `<agent>/settings.json`.
    pub fn settings(mut self, v: Value) -> Self {
        self.settings = Some(v);
        self
    }

    /// Extra CLI arguments after `--mode rpc`.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Use the mock's Ollama endpoint: [`ollama_models`] plus `--provider mock-ollama --model
    /// test-model`.
    pub fn ollama(self, mock: &MockLlm) -> Self {
        self.models_json(ollama_models(mock)).args([
            "--provider",
            "mock-ollama",
            "--model",
            "test-model",
        ])
    }

    /// Use the mock's Anthropic endpoint: [`anthropic_models`] plus `--provider mock-anthropic
    /// --model test-model`.
    pub fn anthropic(self, mock: &MockLlm) -> Self {
        self.models_json(anthropic_models(mock)).args([
            "--provider",
            "mock-anthropic",
            "--model",
            "test-model",
        ])
    }

    /// Use the mock's OpenAI endpoint: [`openai_models`] plus `--provider mock-openai --model
    /// test-model`.
    pub fn openai(self, mock: &MockLlm) -> Self {
        self.models_json(openai_models(mock)).args([
            "--provider",
            "mock-openai",
            "--model",
            "test-model",
        ])
    }

    /// The HOME nova runs with (a fresh directory per test): where `~/.aws` goes.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    pub fn agent_dir(&self) -> &Path {
        match &self.dirs {
            Some((agent, _)) => agent,
            None => self.agent_dir.path(),
        }
    }

    pub fn cwd(&self) -> &Path {
        match &self.dirs {
            Some((_, cwd)) => cwd,
            None => self.cwd.path(),
        }
    }

    /// Write a file relative to the cwd before spawning (parents created).
    pub fn file(self, rel: &str, contents: impl AsRef<[u8]>) -> Self {
        write_file(&self.cwd().join(rel), contents.as_ref());
        self
    }

    /// Write a file relative to the agent dir before spawning (parents created).
    pub fn agent_file(self, rel: &str, contents: impl AsRef<[u8]>) -> Self {
        write_file(&self.agent_dir().join(rel), contents.as_ref());
        self
    }

    /// Run `nova --mode rpc <args>` in the temp cwd with `NOVA_AGENT_DIR` set.
    pub fn spawn(self) -> Nova {
        let agent_path = self.agent_dir().to_path_buf();
        let cwd_path = self.cwd().to_path_buf();
        let agent = agent_path.as_path();
        if let Some(m) = &self.models_json {
            write_file(
                &agent.join("models.json"),
                &serde_json::to_vec_pretty(m).unwrap(),
            );
        }
        if let Some(s) = &self.settings {
            write_file(
                &agent.join("settings.json"),
                &serde_json::to_vec_pretty(s).unwrap(),
            );
        }
        let mut cmd = match &self.program {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args);
                cmd
            }
            None => {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_nova"));
                cmd.arg("--mode").arg("rpc").args(&self.args);
                cmd
            }
        };
        cmd.current_dir(&cwd_path)
            .env("NOVA_AGENT_DIR", agent)
            .env("HOME", self.home.path())
            .env_remove("PI_CODING_AGENT_DIR")
            .env_remove("OLLAMA_HOST")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Every built-in provider's key, from the catalog itself, so a developer's real keys
        // never reach a test (nor enable providers it does not expect).
        for builtin in nova::config::builtin::CATALOG {
            for var in builtin.key_vars.iter().chain(builtin.address_vars) {
                cmd.env_remove(var);
            }
        }
        // AWS credentials and settings enable and steer Bedrock without a catalog variable;
        // Azure's settings say where its requests go.
        for var in [
            "AZURE_OPENAI_BASE_URL",
            "AZURE_OPENAI_RESOURCE_NAME",
            "AZURE_OPENAI_API_VERSION",
            "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
            "AWS_BEDROCK_SKIP_AUTH",
            // Pi's switches nova also reads: a developer's own must not steer a test.
            "PI_CODING_AGENT_SESSION_DIR",
            "PI_CACHE_RETENTION",
        ] {
            cmd.env_remove(var);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn the nova binary");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr_pipe = child.stderr.take().unwrap();

        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("nova-stdout".into())
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match reader.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            if buf.last() == Some(&b'\n') {
                                buf.pop();
                            }
                            let line = String::from_utf8_lossy(&buf).into_owned();
                            if tx.send(FromReader::Line(line)).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = tx.send(FromReader::Eof);
            })
            .unwrap();

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let stderr_thread = std::thread::Builder::new()
            .name("nova-stderr".into())
            .spawn(move || {
                let mut chunk = [0u8; 4096];
                loop {
                    match stderr_pipe.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => sink
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .extend_from_slice(&chunk[..n]),
                    }
                }
            })
            .unwrap();

        Nova {
            child,
            stdin: Some(stdin),
            rx,
            eof: false,
            pending: VecDeque::new(),
            log: Vec::new(),
            stderr,
            stderr_thread: Some(stderr_thread),
            schema: SchemaCheck::start(),
            next_id: 0,
            _agent_dir: self.agent_dir,
            _cwd: self.cwd,
            _home: self.home,
            agent_path,
            cwd_path,
        }
    }
}

fn write_file(path: &Path, contents: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, contents).unwrap();
}

/// A running `nova --mode rpc`. Killed when dropped.
pub struct Nova {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<FromReader>,
    eof: bool,
    /// Lines received but not consumed by a wait yet.
    pending: VecDeque<Line>,
    /// Every line received, in order.
    log: Vec<Line>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    schema: SchemaCheck,
    next_id: u64,
    _agent_dir: TempDir,
    _cwd: TempDir,
    _home: TempDir,
    agent_path: PathBuf,
    cwd_path: PathBuf,
}

impl Nova {
    pub fn builder() -> NovaBuilder {
        let agent_dir = tempfile::Builder::new()
            .prefix("nova-agent-")
            .tempdir()
            .unwrap();
        let cwd = tempfile::Builder::new()
            .prefix("nova-cwd-")
            .tempdir()
            .unwrap();
        let home = tempfile::Builder::new()
            .prefix("nova-home-")
            .tempdir()
            .unwrap();
        NovaBuilder {
            agent_dir,
            cwd,
            home,
            models_json: None,
            settings: None,
            args: Vec::new(),
            env: Vec::new(),
            program: None,
            dirs: None,
        }
    }

    pub fn agent_dir(&self) -> PathBuf {
        self.agent_path.clone()
    }

    pub fn cwd(&self) -> PathBuf {
        self.cwd_path.clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write one command as a JSON line.
    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Write raw bytes to stdin (no newline added).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin already closed");
        if let Err(e) = stdin.write_all(bytes).and_then(|_| stdin.flush()) {
            panic!("writing to nova's stdin failed: {e}\n{}", self.report());
        }
    }

    /// Send a command with a fresh string `id` (unless it has one) and wait up to 10 s for the
    /// response with that id; other lines stay buffered for later waits. Returns the response.
    pub fn request(&mut self, mut cmd: Value) -> Value {
        let id = match cmd.get("id") {
            Some(id) => id.clone(),
            None => {
                self.next_id += 1;
                let id = json!(format!("req-{}", self.next_id));
                cmd["id"] = id.clone();
                id
            }
        };
        self.send(&cmd);
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            if let Some(pos) = self
                .pending
                .iter()
                .position(|l| l.value["type"] == "response" && l.value.get("id") == Some(&id))
            {
                return self.pending.remove(pos).unwrap().value;
            }
            if !self.receive(deadline) {
                panic!(
                    "no response to {cmd} within {REQUEST_TIMEOUT:?}\n{}",
                    self.report()
                );
            }
        }
    }

    /// [`Nova::request`] that asserts `success: true` and returns `data` (`null` when absent).
    /// Answers the `permission_request` event `request`.
    pub fn answer_permission(&mut self, request: &Value, approved: bool) {
        self.request_ok(json!({
            "type": "permission_response",
            "requestId": request["requestId"],
            "approved": approved,
        }));
    }

    pub fn request_ok(&mut self, cmd: Value) -> Value {
        let r = self.request(cmd.clone());
        assert_eq!(
            r["success"],
            json!(true),
            "command {cmd} failed: {r}\n{}",
            self.report()
        );
        r.get("data").cloned().unwrap_or(Value::Null)
    }

    /// Send `prompt` (asserting it is accepted) and return every line up to and including the
    /// run's `agent_settled`.
    pub fn run_prompt(&mut self, message: &str) -> Vec<Value> {
        self.request_ok(json!({"type": "prompt", "message": message}));
        self.events_until("agent_settled")
    }

    /// The next line (event or response) in arrival order; panics after `timeout`.
    pub fn next_event(&mut self, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.pending.pop_front() {
                return l.value;
            }
            if !self.receive(deadline) {
                panic!("no line from nova within {timeout:?}\n{}", self.report());
            }
        }
    }

    /// Consume lines until one satisfies `pred`; returns it. Skipped lines stay in [`Nova::log`].
    pub fn wait_for(&mut self, mut pred: impl FnMut(&Value) -> bool, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            while let Some(l) = self.pending.pop_front() {
                if pred(&l.value) {
                    return l.value;
                }
            }
            if !self.receive(deadline) {
                panic!(
                    "no matching line from nova within {timeout:?}\n{}",
                    self.report()
                );
            }
        }
    }

    /// Wait for the first line whose `type` is `ty`.
    pub fn wait_for_type(&mut self, ty: &str, timeout: Duration) -> Value {
        self.wait_for(|v| v["type"] == ty, timeout)
    }

    /// Consume lines up to and including the first whose `type` is `ty` (10 s); returns them.
    pub fn events_until(&mut self, ty: &str) -> Vec<Value> {
        self.events_until_timeout(ty, EVENT_TIMEOUT)
    }

    pub fn events_until_timeout(&mut self, ty: &str, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            while let Some(l) = self.pending.pop_front() {
                let done = l.value["type"] == ty;
                out.push(l.value);
                if done {
                    return out;
                }
            }
            if !self.receive(deadline) {
                let seen: Vec<String> = out.iter().map(|v| short(&v.to_string())).collect();
                panic!(
                    "no {ty:?} line within {timeout:?}; consumed while waiting:\n  {}\n{}",
                    seen.join("\n  "),
                    self.report()
                );
            }
        }
    }

    /// Every line received so far (consumed or not), with its decoded form.
    pub fn log(&self) -> &[Line] {
        &self.log
    }

    /// Lines received but not consumed yet (without waiting).
    pub fn drain_pending(&mut self) -> Vec<Value> {
        while let Ok(FromReader::Line(l)) = self.rx.try_recv() {
            self.accept(l);
        }
        self.pending.drain(..).map(|l| l.value).collect()
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Wait for the process to exit; panics after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.settle_stderr(deadline);
                return status;
            }
            if Instant::now() >= deadline {
                panic!("nova did not exit within {timeout:?}\n{}", self.report());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// After exit: let the stderr thread collect the last bytes (bounded: a grandchild may still
    /// hold the pipe open).
    fn settle_stderr(&mut self, deadline: Instant) {
        let deadline = deadline.max(Instant::now() + Duration::from_secs(2));
        while let Some(t) = self.stderr_thread.take() {
            if t.is_finished() {
                let _ = t.join();
            } else if Instant::now() < deadline {
                self.stderr_thread = Some(t);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Everything nova wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Waits (10 s at most) until stderr, collected by its own thread, contains `needle`;
    /// returns all of it.
    pub fn stderr_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + EVENT_TIMEOUT;
        loop {
            let s = self.stderr();
            if s.contains(needle) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "stderr never contained {needle:?}:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Take one line from the reader into `pending`; false on timeout. Panics when stdout closed
    /// (nothing more can arrive).
    fn receive(&mut self, deadline: Instant) -> bool {
        if self.eof {
            panic!("nova closed stdout\n{}", self.report());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(FromReader::Line(l)) => {
                self.accept(l);
                true
            }
            Ok(FromReader::Eof) | Err(RecvTimeoutError::Disconnected) => {
                self.eof = true;
                // Give the stderr thread a moment to collect the last words.
                let _ = self.child.try_wait();
                panic!("nova closed stdout\n{}", self.report());
            }
            Err(RecvTimeoutError::Timeout) => false,
        }
    }

    fn accept(&mut self, raw: String) {
        let raw = raw.strip_suffix('\r').map(str::to_string).unwrap_or(raw);
        let value: Value = match serde_json::from_str(&raw) {
            Ok(v) => v,
            Err(e) => panic!(
                "nova wrote a stdout line that is not JSON ({e}):\n  {}\n{}",
                short(&raw),
                self.report()
            ),
        };
        let out = wire::decode_mirror(&value);
        self.schema.check(&value);
        let line = Line { raw, value, out };
        self.log.push(line.clone());
        self.pending.push_back(line);
    }

    /// The last lines received and the stderr tail, for panic messages.
    pub fn report(&self) -> String {
        const LAST: usize = 40;
        let skip = self.log.len().saturating_sub(LAST);
        let lines: Vec<String> = self.log[skip..]
            .iter()
            .map(|l| format!("  {}", short(&l.raw)))
            .collect();
        let stderr = self.stderr();
        let tail: String = {
            let chars: Vec<char> = stderr.chars().collect();
            chars[chars.len().saturating_sub(4000)..].iter().collect()
        };
        format!(
            "--- stdout ({} line(s), last {}):\n{}\n--- stderr (tail):\n{}",
            self.log.len(),
            lines.len(),
            lines.join("\n"),
            tail
        )
    }
}

impl Drop for Nova {
    fn drop(&mut self) {
        self.stdin = None;
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        // Every line read must have passed the schema by the end of the test.
        if let Some(rejection) = self.schema.finish()
            && !std::thread::panicking()
        {
            panic!("{rejection}");
        }
    }
}

/// Checks stdout lines against the published schema on a thread of its own, in order.
struct SchemaCheck {
    tx: Option<mpsc::Sender<Value>>,
    thread: Option<JoinHandle<()>>,
    /// The first rejection, with its line.
    rejected: Arc<Mutex<Option<String>>>,
}

impl SchemaCheck {
    fn start() -> SchemaCheck {
        let (tx, rx) = mpsc::channel::<Value>();
        let rejected = Arc::new(Mutex::new(None));
        let first = Arc::clone(&rejected);
        let thread = std::thread::Builder::new()
            .name("nova-schema".into())
            .spawn(move || {
                for line in rx {
                    if let Some(e) = wire::schema_rejection(&line) {
                        first
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                }
            })
            .unwrap();
        SchemaCheck {
            tx: Some(tx),
            thread: Some(thread),
            rejected,
        }
    }

    /// Queues `line`, and fails the test if a line before it was rejected.
    fn check(&self, line: &Value) {
        if let Some(rejection) = self
            .rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            panic!("{rejection}");
        }
        if let Some(tx) = &self.tx {
            let _ = tx.send(line.clone());
        }
    }

    /// Waits for every queued line to be checked; the first rejection, if any.
    fn finish(&mut self) -> Option<String> {
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

fn short(s: &str) -> String {
    const MAX: usize = 400;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head}… ({} chars)", s.chars().count())
    }
}

/// Waits for a child whose stderr goes to `stderr_path`; past `timeout` it is killed and the
/// test fails naming `what` and showing that stderr.
pub fn wait_or_kill(
    child: &mut Child,
    timeout: Duration,
    what: &str,
    stderr_path: &Path,
) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} still running after {timeout:?}; stderr:\n{}",
                std::fs::read_to_string(stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
