//! Sessions against the real binary and real files: where the file appears and what it holds,
//! resuming (`--session`, `--continue`), `switch_session`, `new_session`, the tolerant loader, and
//! Pi's session commands (stats, name, fork, clone, entries, tree, export). Each test owns an
//! agent dir and a cwd that outlive the nova processes started in them ([`Dirs`]).

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, ollama_models};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tempfile::TempDir;

const PI_SESSION: &str = include_str!("../../src/session/testdata/pi-session.jsonl");
const PI_SESSION_ID: &str = "019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b";

/// An agent dir and a cwd that outlive the nova processes run in them.
pub(super) struct Dirs {
    _agent: TempDir,
    _cwd: TempDir,
    agent: PathBuf,
    cwd: PathBuf,
}

impl Dirs {
    pub(super) fn new() -> Self {
        let agent = tempfile::Builder::new()
            .prefix("nova-agent-")
            .tempdir()
            .unwrap();
        let cwd = tempfile::Builder::new()
            .prefix("nova-cwd-")
            .tempdir()
            .unwrap();
        Dirs {
            agent: fs::canonicalize(agent.path()).unwrap(),
            cwd: fs::canonicalize(cwd.path()).unwrap(),
            _agent: agent,
            _cwd: cwd,
        }
    }

    pub(super) fn agent(&self) -> &Path {
        &self.agent
    }

    pub(super) fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// `<agent>/sessions/--<cwd slug>--`, by Pi's rule, computed here independently of nova.
    pub(super) fn session_dir(&self) -> PathBuf {
        let cwd = self.cwd.to_str().unwrap();
        let slug = cwd.trim_start_matches('/').replace(['/', '\\', ':'], "-");
        self.agent.join("sessions").join(format!("--{slug}--"))
    }

    /// `nova --mode rpc --provider mock-ollama --model test-model <args>` in these dirs.
    pub(super) fn nova(&self, mock: &MockLlm, args: &[&str]) -> Nova {
        Nova::builder()
            .dirs(&self.agent, &self.cwd)
            .ollama(mock)
            .args(args.iter().copied())
            .spawn()
    }

    /// As [`Dirs::nova`] with a models.json declaring `test-model` and `other-model`, starting
    /// on `model`.
    fn nova_two_models(&self, mock: &MockLlm, model: &str, extra: &[&str]) -> Nova {
        Nova::builder()
            .dirs(&self.agent, &self.cwd)
            .models_json(two_models(mock))
            .args(["--provider", "mock-ollama", "--model", model])
            .args(extra.iter().copied())
            .spawn()
    }
}

/// [`ollama_models`] plus `other-model` (64k context) from the same provider.
fn two_models(mock: &MockLlm) -> Value {
    let mut models = ollama_models(mock);
    let mut other = models["providers"]["mock-ollama"]["models"][0].clone();
    other["id"] = json!("other-model");
    other["name"] = json!("other-model");
    other["contextWindow"] = json!(64000);
    models["providers"]["mock-ollama"]["models"]
        .as_array_mut()
        .unwrap()
        .push(other);
    models
}

fn state(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_state"}))
}

fn messages(nova: &mut Nova) -> Vec<Value> {
    nova.request_ok(json!({"type": "get_messages"}))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn session_file(nova: &mut Nova) -> PathBuf {
    let st = state(nova);
    PathBuf::from(st["sessionFile"].as_str().expect("a sessionFile"))
}

/// Ends nova by closing stdin and checks it exited 0.
fn finish(mut nova: Nova) {
    nova.close_stdin();
    let status = nova.wait_exit(EVENT_TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}", nova.report());
}

/// Every line of a JSONL file, parsed (panics on a line that is not JSON).
fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `message` of every `message` entry in the file.
fn file_messages(path: &Path) -> Vec<Value> {
    lines(path)
        .into_iter()
        .filter(|l| l["type"] == "message")
        .map(|l| l["message"].clone())
        .collect()
}

/// Every file under `dir`, recursively, sorted.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(read) = fs::read_dir(&d) else { continue };
        for e in read.flatten() {
            let p = e.path();
            if p.is_dir() {
                pending.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    all_files(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect()
}

/// The text of a message: a string content, or its text blocks joined.
fn text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| format!("{}:{}", m["role"].as_str().unwrap_or("?"), text(m)))
        .collect()
}

/// Asserts that `needles` occur in `haystack` in this order.
fn assert_in_order(haystack: &str, needles: &[&str]) {
    let mut at = 0;
    for n in needles {
        match haystack[at..].find(n) {
            Some(p) => at += p + n.len(),
            None => panic!("{n:?} missing (or out of order) after byte {at} in:\n{haystack}"),
        }
    }
}

/// The last chat request's `messages`, as JSON text.
fn last_request(mock: &MockLlm) -> String {
    let reqs = mock.chat_requests();
    serde_json::to_string(reqs.last().expect("a chat request").messages()).unwrap()
}

fn is_hex8(id: &Value) -> bool {
    id.as_str().is_some_and(|s| {
        s.len() == 8
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn is_uuid_v7(id: &str) -> bool {
    let b = id.as_bytes();
    id.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && id
            .bytes()
            .enumerate()
            .all(|(i, c)| [8, 13, 18, 23].contains(&i) || c.is_ascii_hexdigit())
        && b[14] == b'7'
        && b"89abAB".contains(&b[19])
}

/// Checks the entries after the header: 8-hex ids, unique, each the child of the line before.
fn assert_linear_chain(lines: &[Value]) {
    let mut seen = std::collections::HashSet::new();
    for (i, e) in lines.iter().enumerate().skip(1) {
        assert!(is_hex8(&e["id"]), "line {i}: {e}");
        assert!(seen.insert(e["id"].as_str().unwrap().to_owned()), "dup {e}");
        let want = if i == 1 {
            Value::Null
        } else {
            lines[i - 1]["id"].clone()
        };
        assert_eq!(e["parentId"], want, "line {i}: {e}");
    }
}

/// A session with a tool call and two prompts: "first question" (bash, then "first answer") and
/// "second question" ("second answer"). Returns its id, file and messages; nova has exited.
fn make_session(dirs: &Dirs, mock: &MockLlm) -> (String, PathBuf, Vec<Value>) {
    mock.push(Reply::text("let me look").tool_call(
        "call_1",
        "bash",
        json!({"command": "echo tool-output-1"}),
    ));
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer").text_chunks(3));
    let mut nova = dirs.nova(mock, &[]);
    nova.run_prompt("first question");
    nova.run_prompt("second question");
    let st = state(&mut nova);
    let id = st["sessionId"].as_str().unwrap().to_owned();
    let path = PathBuf::from(st["sessionFile"].as_str().unwrap());
    let msgs = messages(&mut nova);
    assert_eq!(
        texts(&msgs),
        [
            "user:first question",
            "assistant:let me look",
            "toolResult:tool-output-1\n",
            "assistant:first answer",
            "user:second question",
            "assistant:second answer",
        ]
    );
    finish(nova);
    assert_eq!(file_messages(&path), msgs);
    (id, path, msgs)
}

/// A hand-written Pi v3 session file `<dir>/<ts>_<id>.jsonl` with one exchange.
fn write_session(dir: &Path, id: &str, question: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("2026-01-05T10-00-00-000Z_{id}.jsonl"));
    let lines = [
        json!({"type": "session", "version": 3, "id": id,
               "timestamp": "2026-01-05T10:00:00.000Z", "cwd": "/elsewhere"}),
        json!({"type": "message", "id": "aa000001", "parentId": null,
               "timestamp": "2026-01-05T10:00:01.000Z",
               "message": {"role": "user", "content": question, "timestamp": 1_767_607_201_000i64}}),
        json!({"type": "message", "id": "aa000002", "parentId": "aa000001",
               "timestamp": "2026-01-05T10:00:02.000Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                           "api": "ollama", "provider": "mock-ollama", "model": "test-model",
                           "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                     "totalTokens": 2,
                                     "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                              "cacheWrite": 0, "total": 0}},
                           "stopReason": "stop", "timestamp": 1_767_607_202_000i64}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&path, text).unwrap();
    path
}

/// Runs nova with `args` expecting a usage error: exit 2 and stderr naming `needle`.
fn assert_usage_error(dirs: &Dirs, mock: &MockLlm, args: &[&str], needle: &str) -> String {
    let mut nova = dirs.nova(mock, args);
    let status = nova.wait_exit(EVENT_TIMEOUT);
    let stderr = nova.stderr();
    assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {needle:?} not in {stderr}"
    );
    stderr
}

// ---------------------------------------------------------------------------------------------
// The file
// ---------------------------------------------------------------------------------------------

#[test]
fn the_file_appears_with_the_first_user_message_header_first() {
    let mock = MockLlm::start();
    mock.push(Reply::text("hi there").text_chunks(2));
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    let st = state(&mut nova);
    let id = st["sessionId"].as_str().unwrap().to_owned();
    assert!(is_uuid_v7(&id), "{id}");
    let file = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_eq!(file.parent().unwrap(), dirs.session_dir());
    let name = file.file_name().unwrap().to_str().unwrap();
    let ts = name
        .strip_suffix(&format!("_{id}.jsonl"))
        .unwrap_or_else(|| panic!("{name}"));
    // `2026-01-05T10:00:00.000Z` with `:` and `.` turned into `-`.
    assert_eq!(ts.len(), 24, "{ts}");
    assert!(
        ts.bytes().enumerate().all(|(i, c)| match i {
            10 => c == b'T',
            23 => c == b'Z',
            4 | 7 | 13 | 16 | 19 => c == b'-',
            _ => c.is_ascii_digit(),
        }),
        "{ts}"
    );

    // Nothing after startup nor after commands that change nothing.
    assert_eq!(state(&mut nova)["sessionId"], json!(id));
    assert!(messages(&mut nova).is_empty());
    assert_eq!(all_files(dirs.agent()), [dirs.agent().join("models.json")]);
    assert!(all_files(dirs.cwd()).is_empty());

    nova.request_ok(json!({"type": "prompt", "message": "hello"}));
    nova.wait_for(
        |e| e["type"] == "message_end" && e["message"]["role"] == "user",
        EVENT_TIMEOUT,
    );
    assert!(
        file.is_file(),
        "the file exists once the user message is out"
    );
    nova.events_until("agent_settled");

    let lines = lines(&file);
    let header = &lines[0];
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 3);
    assert_eq!(header["id"], json!(id));
    assert_eq!(header["cwd"], json!(dirs.cwd().to_str().unwrap()));
    assert!(header["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(header.get("parentSession").is_none(), "{header}");
    let kinds: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "model_change",
            "thinking_level_change",
            "message",
            "message"
        ]
    );
    assert_eq!(lines[1]["provider"], "mock-ollama");
    assert_eq!(lines[1]["modelId"], "test-model");
    assert_eq!(lines[2]["thinkingLevel"], "off");
    assert_eq!(
        texts(&file_messages(&file)),
        ["user:hello", "assistant:hi there"]
    );
    assert_linear_chain(&lines);
    assert_eq!(file_messages(&file), messages(&mut nova));
    assert_eq!(jsonl_files(dirs.agent()), std::slice::from_ref(&file));
    assert_eq!(session_file(&mut nova), file);
    finish(nova);
}

#[test]
fn session_dir_puts_the_file_directly_there() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let dirs = Dirs::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let sdir = elsewhere.path().join("my sessions");
    let mut nova = dirs.nova(&mock, &["--session-dir", sdir.to_str().unwrap()]);
    let file = session_file(&mut nova);
    assert_eq!(file.parent().unwrap(), sdir);
    nova.run_prompt("hello");
    assert!(file.is_file());
    assert_eq!(jsonl_files(&sdir), std::slice::from_ref(&file));
    assert!(!dirs.agent().join("sessions").exists());
    assert_eq!(lines(&file)[0]["type"], "session");
    finish(nova);
}

#[test]
fn no_session_writes_nothing_anywhere() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo ran"})));
    mock.push(Reply::text("done"));
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &["--no-session"]);
    let st = state(&mut nova);
    assert!(st.get("sessionFile").is_none(), "{st}");
    assert!(is_uuid_v7(st["sessionId"].as_str().unwrap()));
    let (agent_before, cwd_before) = (all_files(dirs.agent()), all_files(dirs.cwd()));
    nova.run_prompt("run something");
    nova.request_ok(json!({"type": "set_session_name", "name": "kept in memory"}));
    assert_eq!(messages(&mut nova).len(), 4);
    let st = state(&mut nova);
    assert!(st.get("sessionFile").is_none(), "{st}");
    assert_eq!(st["sessionName"], "kept in memory");
    let stats = nova.request_ok(json!({"type": "get_session_stats"}));
    assert!(stats.get("sessionFile").is_none(), "{stats}");
    finish(nova);
    assert_eq!(all_files(dirs.agent()), agent_before);
    assert_eq!(all_files(dirs.cwd()), cwd_before);
    assert_eq!(agent_before, [dirs.agent().join("models.json")]);
    assert!(cwd_before.is_empty());
}

#[test]
fn every_message_end_the_client_sees_is_already_in_the_file() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("checking")
            .text_chunks(4)
            .tool_call("c1", "bash", json!({"command": "echo one"}))
            .tool_call("c2", "bash", json!({"command": "echo two"})),
    );
    mock.push(Reply::text("all done").text_chunks(4));
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    let file = session_file(&mut nova);
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let mut ends = 0;
    loop {
        let ev = nova.next_event(EVENT_TIMEOUT);
        if ev["type"] == "message_end" {
            ends += 1;
            // Read the file right now, before consuming anything else.
            let on_disk = file_messages(&file);
            assert!(
                on_disk.contains(&ev["message"]),
                "message_end #{ends} not on disk yet: {}\nfile: {on_disk:?}",
                ev["message"]
            );
        }
        if ev["type"] == "agent_settled" {
            break;
        }
    }
    assert_eq!(ends, 5, "user, assistant, 2 tool results, assistant");
    assert_eq!(file_messages(&file), messages(&mut nova));
    mock.assert_no_violations();
    finish(nova);
}

// ---------------------------------------------------------------------------------------------
// Resuming from the command line
// ---------------------------------------------------------------------------------------------

#[test]
fn resume_by_id_prefix_path_and_continue_restores_the_conversation() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, mut expected) = make_session(&dirs, &mock);
    let path_arg = path.to_str().unwrap().to_owned();
    let variants: Vec<Vec<&str>> = vec![
        vec!["--session", &id],
        vec!["--session", &id[..8]],
        vec!["--session", &path_arg],
        vec!["-c"],
        vec!["--continue"],
    ];
    for (k, args) in variants.iter().enumerate() {
        let mut nova = dirs.nova(&mock, args);
        let st = state(&mut nova);
        assert_eq!(st["sessionId"], json!(id), "{args:?}");
        assert_eq!(st["sessionFile"], json!(path_arg), "{args:?}");
        assert_eq!(st["messageCount"], expected.len(), "{args:?}");
        assert_eq!(messages(&mut nova), expected, "{args:?}");

        let (question, answer) = (format!("question {k}"), format!("answer {k}"));
        mock.push(Reply::text(answer.as_str()));
        nova.run_prompt(&question);
        assert_in_order(
            &last_request(&mock),
            &[
                "first question",
                "tool-output-1",
                "first answer",
                "second question",
                "second answer",
                &question,
            ],
        );
        expected = messages(&mut nova);
        assert_eq!(
            texts(&expected[expected.len() - 2..]),
            [format!("user:{question}"), format!("assistant:{answer}")]
        );
        finish(nova);
        assert_eq!(file_messages(&path), expected, "{args:?}");
        assert_eq!(
            jsonl_files(dirs.agent()),
            std::slice::from_ref(&path),
            "{args:?}"
        );
    }
    assert_linear_chain(&lines(&path));
    mock.assert_no_violations();
}

#[test]
fn continue_picks_the_newest_session_of_the_cwd() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let older = write_session(
        &dirs.session_dir(),
        "01900000-0000-7000-8000-00000000000a",
        "A",
    );
    let newer = write_session(
        &dirs.session_dir(),
        "01900000-0000-7000-8000-00000000000b",
        "B",
    );
    // By modification time, not by name: make the one that sorts last the older.
    let past = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&newer)
        .unwrap()
        .set_modified(past)
        .unwrap();
    let mut nova = dirs.nova(&mock, &["--continue"]);
    assert_eq!(session_file(&mut nova), older);
    assert_eq!(texts(&messages(&mut nova)), ["user:A", "assistant:ok"]);
    finish(nova);

    // With no session for this cwd, `-c` starts a new one.
    let other = Dirs::new();
    let mut nova = other.nova(&mock, &["-c"]);
    assert!(messages(&mut nova).is_empty());
    assert!(!session_file(&mut nova).exists());
    finish(nova);
}

#[test]
fn unknown_or_ambiguous_session_on_the_command_line_is_exit_2() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    write_session(
        &dirs.session_dir(),
        "0badcafe-0000-7000-8000-000000000001",
        "one",
    );
    write_session(
        &dirs.session_dir(),
        "0badcafe-0000-7000-8000-000000000002",
        "two",
    );
    assert_usage_error(&dirs, &mock, &["--session", "f00dfeed"], "f00dfeed");
    let stderr = assert_usage_error(&dirs, &mock, &["--session", "0badcafe"], "0badcafe");
    assert!(stderr.contains("ambiguous"), "{stderr}");
    assert_usage_error(
        &dirs,
        &mock,
        &["--session", "nowhere/missing.jsonl"],
        "missing.jsonl",
    );
    // A unique prefix among them still works.
    let mut nova = dirs.nova(
        &mock,
        &["--session", "0badcafe-0000-7000-8000-000000000002"],
    );
    assert_eq!(texts(&messages(&mut nova)), ["user:two", "assistant:ok"]);
    finish(nova);
}

// ---------------------------------------------------------------------------------------------
// switch_session, new_session
// ---------------------------------------------------------------------------------------------

#[test]
fn switch_session_restores_messages_and_model() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    mock.push(Reply::text("alpha answer"));
    let mut nova = dirs.nova_two_models(&mock, "other-model", &[]);
    nova.run_prompt("alpha question");
    let st = state(&mut nova);
    let (a_id, a_path) = (
        st["sessionId"].as_str().unwrap().to_owned(),
        st["sessionFile"].as_str().unwrap().to_owned(),
    );
    let a_msgs = messages(&mut nova);
    finish(nova);

    mock.push(Reply::text("beta answer"));
    let mut nova = dirs.nova_two_models(&mock, "test-model", &[]);
    nova.run_prompt("beta question");
    let b_id = state(&mut nova)["sessionId"].as_str().unwrap().to_owned();
    let b_msgs = messages(&mut nova);

    let r = nova.request_ok(json!({"type": "switch_session", "sessionId": a_id}));
    assert_eq!(r, json!({"cancelled": false}));
    let st = state(&mut nova);
    assert_eq!(st["sessionId"], json!(a_id));
    assert_eq!(st["sessionFile"], json!(a_path));
    assert_eq!(st["model"]["id"], "other-model");
    assert_eq!(messages(&mut nova), a_msgs);

    // A unique prefix.
    let prefix = &b_id[..b_id.len() - 4];
    let r = nova.request_ok(json!({"type": "switch_session", "sessionId": prefix}));
    assert_eq!(r, json!({"cancelled": false}));
    let st = state(&mut nova);
    assert_eq!(st["sessionId"], json!(b_id));
    assert_eq!(st["model"]["id"], "test-model");
    assert_eq!(messages(&mut nova), b_msgs);

    // Pi's sessionPath.
    let r = nova.request_ok(json!({"type": "switch_session", "sessionPath": a_path}));
    assert_eq!(r, json!({"cancelled": false}));
    assert_eq!(state(&mut nova)["sessionId"], json!(a_id));
    assert_eq!(messages(&mut nova), a_msgs);

    // The next prompt goes on in A, with A's model and history.
    mock.push(Reply::text("alpha again"));
    nova.run_prompt("alpha follow-up");
    let req = mock.chat_requests().pop().unwrap();
    assert_eq!(req.body["model"], "other-model");
    assert_in_order(
        &last_request(&mock),
        &["alpha question", "alpha answer", "alpha follow-up"],
    );
    assert!(!last_request(&mock).contains("beta"));
    assert_eq!(
        texts(&file_messages(Path::new(&a_path))),
        [
            "user:alpha question",
            "assistant:alpha answer",
            "user:alpha follow-up",
            "assistant:alpha again"
        ]
    );

    // Unknown and ambiguous ids.
    let r = nova.request(json!({"type": "switch_session", "sessionId": "f00dfeed"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("f00dfeed"), "{r}");
    write_session(
        &dirs.session_dir(),
        "0badcafe-0000-7000-8000-000000000001",
        "x",
    );
    write_session(
        &dirs.session_dir(),
        "0badcafe-0000-7000-8000-000000000002",
        "y",
    );
    let r = nova.request(json!({"type": "switch_session", "sessionId": "0badcafe"}));
    assert_eq!(r["success"], false, "{r}");
    let err = r["error"].as_str().unwrap();
    assert!(err.contains("0badcafe") && err.contains("ambiguous"), "{r}");
    let r = nova.request(json!({"type": "switch_session"}));
    assert_eq!(r["success"], false, "{r}");
    // Failures leave the current session alone.
    assert_eq!(state(&mut nova)["sessionId"], json!(a_id));
    mock.assert_no_violations();
    finish(nova);
}

#[test]
fn session_changing_commands_are_rejected_while_streaming() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let other = write_session(
        &dirs.session_dir(),
        "01900000-0000-7000-8000-0000000000cc",
        "x",
    );
    mock.push(Reply::text("first"));
    let gate = Gate::new();
    mock.push(
        Reply::text("held reply")
            .text_chunks(2)
            .gate_after(1, &gate),
    );
    let mut nova = dirs.nova(&mock, &[]);
    nova.run_prompt("one");
    let fork_id =
        nova.request_ok(json!({"type": "get_fork_messages"}))["messages"][0]["entryId"].clone();
    let before = state(&mut nova);
    nova.request_ok(json!({"type": "prompt", "message": "two"}));
    gate.wait_reached(EVENT_TIMEOUT);
    let attempts = [
        json!({"type": "switch_session", "sessionId": "01900000-0000-7000-8000-0000000000cc"}),
        json!({"type": "switch_session", "sessionPath": other.to_str().unwrap()}),
        json!({"type": "new_session"}),
        json!({"type": "fork", "entryId": fork_id}),
        json!({"type": "clone"}),
    ];
    for cmd in attempts {
        let r = nova.request(cmd.clone());
        assert_eq!(r["success"], false, "{cmd} → {r}");
        assert!(r["error"].as_str().unwrap().contains("streaming"), "{r}");
    }
    assert_eq!(state(&mut nova)["sessionId"], before["sessionId"]);
    gate.open();
    nova.events_until("agent_settled");
    let file = PathBuf::from(before["sessionFile"].as_str().unwrap());
    assert_eq!(
        texts(&file_messages(&file)),
        [
            "user:one",
            "assistant:first",
            "user:two",
            "assistant:held reply"
        ]
    );
    assert_eq!(jsonl_files(dirs.agent()).len(), 2, "no new file was made");
    finish(nova);
}

#[test]
fn new_session_starts_a_new_file_at_the_next_user_message() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    mock.push(Reply::text("old answer"));
    mock.push(Reply::text("new answer"));
    mock.push(Reply::text("child answer"));
    let mut nova = dirs.nova(&mock, &[]);
    nova.run_prompt("old question");
    let old = state(&mut nova);
    let old_file = PathBuf::from(old["sessionFile"].as_str().unwrap());
    let old_bytes = fs::read(&old_file).unwrap();

    let r = nova.request_ok(json!({"type": "new_session"}));
    assert_eq!(r, json!({"cancelled": false}));
    let st = state(&mut nova);
    assert_ne!(st["sessionId"], old["sessionId"]);
    assert!(is_uuid_v7(st["sessionId"].as_str().unwrap()));
    let new_file = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(new_file, old_file);
    assert_eq!(new_file.parent().unwrap(), dirs.session_dir());
    assert!(!new_file.exists(), "no file before the first user message");
    assert!(messages(&mut nova).is_empty());
    assert_eq!(st["messageCount"], 0);

    nova.run_prompt("new question");
    assert!(!last_request(&mock).contains("old question"));
    let lines = lines(&new_file);
    assert_eq!(lines[0]["id"], st["sessionId"]);
    assert!(lines[0].get("parentSession").is_none());
    assert_eq!(lines[1]["type"], "model_change");
    assert_eq!(lines[2]["type"], "thinking_level_change");
    assert_linear_chain(&lines);
    assert_eq!(
        texts(&file_messages(&new_file)),
        ["user:new question", "assistant:new answer"]
    );
    assert_eq!(
        fs::read(&old_file).unwrap(),
        old_bytes,
        "old file untouched"
    );

    // With parentSession.
    let parent = new_file.to_str().unwrap();
    nova.request_ok(json!({"type": "new_session", "parentSession": parent}));
    let child_file = session_file(&mut nova);
    nova.run_prompt("child question");
    assert_eq!(lines_header(&child_file)["parentSession"], json!(parent));
    assert_eq!(jsonl_files(dirs.agent()).len(), 3);
    finish(nova);
}

fn lines_header(path: &Path) -> Value {
    lines(path).swap_remove(0)
}

// ---------------------------------------------------------------------------------------------
// The tolerant loader
// ---------------------------------------------------------------------------------------------

#[test]
fn torn_and_malformed_lines_are_skipped_once_and_the_session_goes_on() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, expected) = make_session(&dirs, &mock);
    // A malformed line in the middle and half a JSON line at the end (no newline).
    let original = fs::read_to_string(&path).unwrap();
    let mut text_lines: Vec<&str> = original.lines().collect();
    text_lines.insert(4, "{\"type\":\"message\",\"id\":\"zz\", not json at all");
    let last = text_lines.pop().unwrap();
    let torn = &last[..last.len() / 2];
    let mut damaged = text_lines.join("\n");
    damaged.push('\n');
    damaged.push_str(torn);
    fs::write(&path, &damaged).unwrap();

    let mut nova = dirs.nova(&mock, &["--session", &id]);
    // The torn last line was the final assistant message: it is lost, the rest restored.
    assert_eq!(messages(&mut nova), expected[..expected.len() - 1]);
    let stderr = nova.stderr_with("malformed");
    assert_eq!(
        stderr.matches("malformed").count(),
        1,
        "said once: {stderr}"
    );
    assert!(stderr.contains("skipped 2"), "{stderr}");
    mock.push(Reply::text("continuing"));
    nova.run_prompt("go on");
    assert_in_order(
        &last_request(&mock),
        &["first question", "second question", "go on"],
    );
    finish(nova);

    let now = fs::read_to_string(&path).unwrap();
    assert!(now.starts_with(&damaged), "what was there stays");
    let appended: Vec<Value> = now[damaged.len()..]
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        now[damaged.len()..].starts_with('\n'),
        "new entries start on a new line"
    );
    assert_eq!(
        texts(
            &appended
                .iter()
                .map(|l| l["message"].clone())
                .collect::<Vec<_>>()
        ),
        ["user:go on", "assistant:continuing"]
    );
    // The new entries hang off the last intact entry.
    let intact: Vec<Value> = text_lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let leaf = &intact.last().unwrap()["id"];
    assert_eq!(appended[0]["parentId"], *leaf);
    assert_eq!(appended[1]["parentId"], appended[0]["id"]);

    // And it loads again: once more with the same warning, the new exchange included.
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let msgs = messages(&mut nova);
    assert_eq!(
        texts(&msgs[msgs.len() - 2..]),
        ["user:go on", "assistant:continuing"]
    );
    let stderr = nova.stderr();
    assert_eq!(stderr.matches("malformed").count(), 1, "{stderr}");
    finish(nova);
}

#[test]
fn unknown_entry_types_stay_in_the_file_and_out_of_the_conversation() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, expected) = make_session(&dirs, &mock);
    let last_id = lines(&path).last().unwrap()["id"].clone();
    let custom = json!({"type": "custom", "customType": "my-ext", "data": {"n": 1},
                        "id": "cc000001", "parentId": last_id,
                        "timestamp": "2026-01-05T10:00:00.000Z"});
    let system = json!({"type": "message", "id": "cc000002", "parentId": "cc000001",
                        "timestamp": "2026-01-05T10:00:01.000Z",
                        "message": {"role": "system", "content": "You are Pi 1.6.",
                                    "timestamp": 1_767_607_201_000i64}});
    let added = format!("{custom}\n{system}\n");
    let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, added.as_bytes()).unwrap();
    drop(file);

    let mut nova = dirs.nova(&mock, &["--session", &id]);
    assert_eq!(messages(&mut nova), expected);
    assert!(
        !nova.stderr().contains("malformed"),
        "known-unknown entries are not malformed: {}",
        nova.stderr()
    );
    mock.push(Reply::text("fine"));
    nova.run_prompt("and now");
    let req = last_request(&mock);
    assert!(!req.contains("You are Pi 1.6."), "{req}");
    assert!(!req.contains("my-ext"), "{req}");
    finish(nova);

    let lines = lines(&path);
    assert!(lines.contains(&custom), "custom entry kept");
    assert!(lines.contains(&system), "system message entry kept");
    let n = lines.len();
    assert_eq!(lines[n - 2]["parentId"], "cc000002");
    assert_eq!(
        texts(&[
            lines[n - 2]["message"].clone(),
            lines[n - 1]["message"].clone()
        ]),
        ["user:and now", "assistant:fine"]
    );
}

#[test]
fn a_session_file_written_by_pi_loads() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let path = dirs
        .session_dir()
        .join(format!("2026-01-05T10-00-00-000Z_{PI_SESSION_ID}.jsonl"));
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, PI_SESSION).unwrap();
    let mut nova = dirs.nova(&mock, &["--session", &PI_SESSION_ID[..13]]);
    let st = state(&mut nova);
    assert_eq!(st["sessionId"], PI_SESSION_ID);
    assert_eq!(st["sessionName"], "File listing");
    let msgs = messages(&mut nova);
    assert_eq!(
        texts(&msgs),
        [
            "compactionSummary:",
            "assistant:There are two entries: Cargo.toml and src.",
            "user:Thanks"
        ]
    );
    assert_eq!(msgs[0]["summary"], "## Goal\nList the files.");
    assert_eq!(msgs[0]["tokensBefore"], 332);
    assert!(nova.stderr().is_empty(), "{}", nova.stderr());

    let entries = nova.request_ok(json!({"type": "get_entries"}));
    assert_eq!(entries["entries"].as_array().unwrap().len(), 13);
    assert_eq!(entries["leafId"], "a3b4c5d6");
    let forks = nova.request_ok(json!({"type": "get_fork_messages"}));
    assert_eq!(
        forks["messages"],
        json!([{"entryId": "c3d4e5f6", "text": "List the files"},
               {"entryId": "a3b4c5d6", "text": "Thanks"}])
    );

    mock.push(Reply::text("You're welcome"));
    nova.run_prompt("bye");
    assert_in_order(
        &last_request(&mock),
        &["List the files.", "Cargo.toml and src.", "Thanks", "bye"],
    );
    finish(nova);
    let now = fs::read_to_string(&path).unwrap();
    assert!(now.starts_with(PI_SESSION), "Pi's lines kept byte for byte");
    let lines = lines(&path);
    assert_eq!(lines.len(), 16);
    assert_eq!(lines[14]["parentId"], "a3b4c5d6");
    assert_eq!(text(&lines[15]["message"]), "You're welcome");
}

// ---------------------------------------------------------------------------------------------
// Pi's session commands
// ---------------------------------------------------------------------------------------------

#[test]
fn session_stats_count_the_conversation() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("looking")
            .tool_call("c1", "bash", json!({"command": "echo a"}))
            .usage(100, 20),
    );
    mock.push(Reply::text("done").usage(150, 30));
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    let empty = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(empty["totalMessages"], 0);
    nova.run_prompt("count");
    let st = state(&mut nova);
    let stats = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(
        stats,
        json!({
            "sessionId": st["sessionId"],
            "sessionFile": st["sessionFile"],
            "userMessages": 1,
            "assistantMessages": 2,
            "toolCalls": 1,
            "toolResults": 1,
            "totalMessages": 4,
            "tokens": {"input": 250, "output": 50, "cacheRead": 0, "cacheWrite": 0, "total": 300},
            "cost": 0.0,
            "contextUsage": {
                "tokens": 180,
                "contextWindow": 128000,
                "percent": 180.0 * 100.0 / 128000.0,
            },
        })
    );
    finish(nova);
}

#[test]
fn set_session_name_is_trimmed_stored_and_shown() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    nova.run_prompt("hi");
    assert!(state(&mut nova).get("sessionName").is_none());
    let r = nova.request(json!({"type": "set_session_name", "name": "   "}));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Session name cannot be empty");
    assert_eq!(r["command"], "set_session_name");
    let r = nova.request(json!({"type": "set_session_name", "name": "  Refactor parser \n"}));
    assert_eq!(r["success"], true, "{r}");
    assert!(r.get("data").is_none(), "{r}");
    assert_eq!(state(&mut nova)["sessionName"], "Refactor parser");
    let file = session_file(&mut nova);
    let last = lines(&file).pop().unwrap();
    assert_eq!(last["type"], "session_info");
    assert_eq!(last["name"], "Refactor parser");
    assert!(is_hex8(&last["id"]));
    let id = state(&mut nova)["sessionId"].as_str().unwrap().to_owned();
    finish(nova);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    assert_eq!(state(&mut nova)["sessionName"], "Refactor parser");
    // The name entry is no message.
    assert_eq!(messages(&mut nova).len(), 2);
    finish(nova);
}

#[test]
fn fork_messages_and_fork() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, expected) = make_session(&dirs, &mock);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let forks = nova.request_ok(json!({"type": "get_fork_messages"}));
    let user_entries: Vec<Value> = lines(&path)
        .into_iter()
        .filter(|l| l["type"] == "message" && l["message"]["role"] == "user")
        .collect();
    assert_eq!(
        forks,
        json!({"messages": [
            {"entryId": user_entries[0]["id"], "text": "first question"},
            {"entryId": user_entries[1]["id"], "text": "second question"},
        ]})
    );
    let before = fs::read(&path).unwrap();

    let r = nova.request(json!({"type": "fork", "entryId": "nope1234"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("nope1234"), "{r}");
    // Not a user message.
    let model_change = lines(&path)[1]["id"].clone();
    let r = nova.request(json!({"type": "fork", "entryId": model_change}));
    assert_eq!(r["success"], false, "{r}");

    let r = nova.request_ok(json!({"type": "fork", "entryId": user_entries[1]["id"]}));
    assert_eq!(r, json!({"text": "second question", "cancelled": false}));
    let st = state(&mut nova);
    assert_ne!(st["sessionId"], json!(id));
    let forked = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(forked, path);
    assert_eq!(forked.parent().unwrap(), dirs.session_dir());
    assert_eq!(messages(&mut nova), expected[..4]);
    let flines = lines(&forked);
    assert_eq!(flines[0]["id"], st["sessionId"]);
    assert_eq!(flines[0]["parentSession"], json!(path.to_str().unwrap()));
    assert_eq!(file_messages(&forked), expected[..4]);
    // The entries keep their ids: the path up to the fork point.
    let originals = lines(&path);
    assert_eq!(flines[1..], originals[1..flines.len()]);
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "the original is untouched"
    );

    mock.push(Reply::text("another way"));
    nova.run_prompt("different second question");
    let req = last_request(&mock);
    assert!(!req.contains("\"second question"), "{req}");
    assert_in_order(
        &req,
        &["first question", "first answer", "different second"],
    );
    assert_eq!(
        texts(&file_messages(&forked)[4..]),
        ["user:different second question", "assistant:another way"]
    );
    finish(nova);
}

#[test]
fn clone_copies_the_conversation_into_a_new_file() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, expected) = make_session(&dirs, &mock);
    let before = fs::read(&path).unwrap();
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let r = nova.request_ok(json!({"type": "clone"}));
    assert_eq!(r, json!({"cancelled": false}));
    let st = state(&mut nova);
    assert_ne!(st["sessionId"], json!(id));
    let cloned = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(cloned, path);
    assert!(cloned.is_file());
    assert_eq!(messages(&mut nova), expected);
    let clines = lines(&cloned);
    assert_eq!(clines[0]["id"], st["sessionId"]);
    assert_eq!(clines[0]["parentSession"], json!(path.to_str().unwrap()));
    assert_eq!(clines[1..], lines(&path)[1..]);
    mock.push(Reply::text("in the clone"));
    nova.run_prompt("clone question");
    finish(nova);
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "the original is untouched"
    );
    assert_eq!(file_messages(&cloned).len(), expected.len() + 2);
}

#[test]
fn get_entries_since_a_cursor_and_get_tree() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, _) = make_session(&dirs, &mock);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let file_entries: Vec<Value> = lines(&path).split_off(1);
    let leaf = file_entries.last().unwrap()["id"].clone();
    let all = nova.request_ok(json!({"type": "get_entries"}));
    assert_eq!(all, json!({"entries": file_entries, "leafId": leaf}));

    let cursor = file_entries[3]["id"].clone();
    let since = nova.request_ok(json!({"type": "get_entries", "since": cursor}));
    assert_eq!(since, json!({"entries": file_entries[4..], "leafId": leaf}));
    let at_leaf = nova.request_ok(json!({"type": "get_entries", "since": leaf}));
    assert_eq!(at_leaf, json!({"entries": [], "leafId": leaf}));
    let r = nova.request(json!({"type": "get_entries", "since": "feedf00d"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("feedf00d"), "{r}");

    // New entries show up after the old leaf as a cursor.
    mock.push(Reply::text("later"));
    nova.run_prompt("later question");
    let newer = nova.request_ok(json!({"type": "get_entries", "since": leaf}));
    let newer = newer["entries"].as_array().unwrap();
    assert_eq!(newer.len(), 2);
    assert_eq!(newer[0]["parentId"], leaf);
    assert_eq!(text(&newer[0]["message"]), "later question");

    // A linear session is a chain of single children, in file order.
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    let file_entries: Vec<Value> = lines(&path).split_off(1);
    assert_eq!(tree["leafId"], file_entries.last().unwrap()["id"]);
    let roots = tree["tree"].as_array().unwrap();
    assert_eq!(roots.len(), 1, "{tree}");
    let mut node = &roots[0];
    let mut walked = Vec::new();
    loop {
        walked.push(node["entry"].clone());
        let children = node["children"].as_array().unwrap();
        match children.len() {
            0 => break,
            1 => node = &children[0],
            n => panic!("{n} children in a linear session: {tree}"),
        }
    }
    assert_eq!(walked, file_entries);
    finish(nova);
}

#[test]
fn export_html_writes_a_self_contained_page() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, _) = make_session(&dirs, &mock);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let r = nova.request_ok(json!({"type": "export_html"}));
    let default = PathBuf::from(r["path"].as_str().unwrap());
    assert_eq!(default.parent().unwrap(), dirs.cwd());
    let name = default.file_name().unwrap().to_str().unwrap();
    let stem = path.file_stem().unwrap().to_str().unwrap();
    assert!(
        name.ends_with(".html") && name.contains(stem),
        "named after the session file: {name}"
    );
    let out = tempfile::tempdir().unwrap();
    let given = out.path().join("conversation.html");
    let r = nova.request_ok(json!({"type": "export_html", "outputPath": given.to_str().unwrap()}));
    assert_eq!(r, json!({"path": given.to_str().unwrap()}));
    let r = nova.request_ok(json!({"type": "export_html", "outputPath": "relative.html"}));
    assert_eq!(
        r,
        json!({"path": dirs.cwd().join("relative.html").to_str().unwrap()})
    );
    for page in [&default, &given] {
        let html = fs::read_to_string(page).unwrap();
        assert!(html.starts_with("<!DOCTYPE html") || html.starts_with("<!doctype html"));
        for needle in [
            "first question",
            "first answer",
            "second question",
            "second answer",
            "tool-output-1",
            "echo tool-output-1",
        ] {
            assert!(
                html.contains(needle),
                "{needle:?} not in {}",
                page.display()
            );
        }
        assert_no_fetch(&html);
    }
    let r = nova.request(json!({"type": "export_html", "outputPath": "no/such/dir/x.html"}));
    assert_eq!(r["success"], false, "{r}");
    finish(nova);
}

/// No URL the browser would fetch: every `http://`/`https://` is an XML namespace.
fn assert_no_fetch(html: &str) {
    for (at, _) in html.match_indices("http") {
        let rest = &html[at..];
        if !(rest.starts_with("http://") || rest.starts_with("https://")) {
            continue;
        }
        let before = &html[at.saturating_sub(7)..at];
        assert!(
            before.ends_with("xmlns=\"") || before.ends_with("xmlns='"),
            "a network URL in the export: …{}…",
            &html[at.saturating_sub(40)..(at + 60).min(html.len())]
        );
    }
}

#[test]
fn lookups_search_the_cwd_first_then_everywhere_or_only_the_session_dir() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let elsewhere = dirs.agent().join("sessions").join("--srv-other-project--");
    let far = "0cafe000-0000-7000-8000-0000000000f1";
    let near = "0cafe000-0000-7000-8000-0000000000f2";
    write_session(&elsewhere, far, "far question");
    write_session(&dirs.session_dir(), near, "near question");

    // A prefix matching in both: the cwd's directory decides, no ambiguity.
    let mut nova = dirs.nova(&mock, &["--session", "0cafe000"]);
    assert_eq!(state(&mut nova)["sessionId"], near);
    // Another cwd's session is found by id, from the CLI and by switch_session.
    let r = nova.request_ok(json!({"type": "switch_session", "sessionId": far}));
    assert_eq!(r, json!({"cancelled": false}));
    assert_eq!(
        texts(&messages(&mut nova)),
        ["user:far question", "assistant:ok"]
    );
    finish(nova);
    let mut nova = dirs.nova(&mock, &["--session", far]);
    assert_eq!(state(&mut nova)["sessionId"], far);
    finish(nova);

    // With --session-dir, only that directory is searched, by both.
    let own = tempfile::tempdir().unwrap();
    let own_id = "0cafe000-0000-7000-8000-0000000000f3";
    let own_path = write_session(own.path(), own_id, "own question");
    let sdir = own.path().to_str().unwrap();
    assert_usage_error(
        &dirs,
        &mock,
        &["--session-dir", sdir, "--session", far],
        far,
    );
    let mut nova = dirs.nova(&mock, &["--session-dir", sdir, "--session", "0cafe000"]);
    assert_eq!(state(&mut nova)["sessionId"], own_id);
    let r = nova.request(json!({"type": "switch_session", "sessionId": near}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains(near), "{r}");
    finish(nova);
    let mut nova = dirs.nova(&mock, &["--session-dir", sdir, "-c"]);
    assert_eq!(session_file(&mut nova), own_path);
    finish(nova);
}

#[test]
fn get_entries_and_tree_of_a_fresh_session() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    // Nothing is on disk yet, but the session already records the model and thinking level.
    let entries = nova.request_ok(json!({"type": "get_entries"}));
    let list = entries["entries"].as_array().unwrap();
    let kinds: Vec<&str> = list.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change"]);
    assert_eq!(entries["leafId"], list[1]["id"]);
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    assert_eq!(tree["leafId"], list[1]["id"]);
    assert_eq!(tree["tree"][0]["entry"], list[0]);
    assert_eq!(tree["tree"][0]["children"][0]["entry"], list[1]);
    assert_eq!(
        nova.request_ok(json!({"type": "get_fork_messages"})),
        json!({"messages": []})
    );
    assert!(all_files(dirs.cwd()).is_empty());
    assert!(!dirs.agent().join("sessions").exists());
    finish(nova);
}

#[test]
fn resume_brings_the_sessions_model_unless_the_command_line_names_one() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    mock.push(Reply::text("from other"));
    let mut nova = dirs.nova_two_models(&mock, "other-model", &[]);
    nova.run_prompt("which model?");
    let id = state(&mut nova)["sessionId"].as_str().unwrap().to_owned();
    let models = nova.request_ok(json!({"type": "get_available_models"}));
    finish(nova);
    assert_eq!(models["models"].as_array().unwrap().len(), 2);

    // No model on the command line: the session's.
    let mut nova = Nova::builder()
        .dirs(dirs.agent(), dirs.cwd())
        .models_json(two_models(&mock))
        .args(["--session", &id])
        .spawn();
    assert_eq!(state(&mut nova)["model"]["id"], "other-model");
    mock.push(Reply::text("still other"));
    nova.run_prompt("again");
    assert_eq!(
        mock.chat_requests().pop().unwrap().body["model"],
        "other-model"
    );
    finish(nova);

    // A model on the command line wins.
    let mut nova = dirs.nova_two_models(&mock, "test-model", &["--session", &id]);
    assert_eq!(state(&mut nova)["model"]["id"], "test-model");
    assert_eq!(messages(&mut nova).len(), 4);
    finish(nova);
}

#[test]
fn the_recorded_thinking_level_comes_back_with_the_session() {
    let mock = MockLlm::start();
    let mut models = ollama_models(&mock);
    models["providers"]["mock-ollama"]["models"][0]["reasoning"] = json!(true);
    let dir = TempDir::new().unwrap();
    let path = write_session(
        dir.path(),
        "01a2b3c4-0000-7000-8000-000000000001",
        "think hard",
    );
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str(
        &json!({"type": "thinking_level_change", "id": "aa000003", "parentId": "aa000002",
                "timestamp": "2026-01-05T10:00:03.000Z", "thinkingLevel": "high"})
        .to_string(),
    );
    text.push('\n');
    fs::write(&path, text).unwrap();

    let mut nova = Nova::builder()
        .models_json(models)
        .args(["--session", path.to_str().unwrap()])
        .spawn();
    assert_eq!(state(&mut nova)["thinkingLevel"], "high");
    nova.request_ok(json!({"type": "new_session"}));
    assert_eq!(state(&mut nova)["thinkingLevel"], "high");
    nova.request_ok(json!({"type": "switch_session", "sessionPath": path.to_str().unwrap()}));
    assert_eq!(state(&mut nova)["thinkingLevel"], "high");
}
