//! Sessions against the real binary and real files: where the file appears and what it holds,
//! and the tolerant loader. Each test owns an agent dir and a cwd that outlive the nova
//! processes started in them ([`Dirs`]); these helpers serve `session_resume` (`--session`,
//! `--continue`, `switch_session`, `new_session`) and `session_commands` (Pi's stats, name, fork,
//! clone, entries, tree, export) too.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, ollama_models};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
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
    pub(super) fn nova_two_models(&self, mock: &MockLlm, model: &str, extra: &[&str]) -> Nova {
        Nova::builder()
            .dirs(&self.agent, &self.cwd)
            .models_json(two_models(mock))
            .args(["--provider", "mock-ollama", "--model", model])
            .args(extra.iter().copied())
            .spawn()
    }
}

/// [`ollama_models`] plus `other-model` (64k context) from the same provider.
pub(super) fn two_models(mock: &MockLlm) -> Value {
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

pub(super) fn state(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_state"}))
}

pub(super) fn messages(nova: &mut Nova) -> Vec<Value> {
    nova.request_ok(json!({"type": "get_messages"}))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

pub(super) fn session_file(nova: &mut Nova) -> PathBuf {
    let st = state(nova);
    PathBuf::from(st["sessionFile"].as_str().expect("a sessionFile"))
}

/// Ends nova by closing stdin and checks it exited 0.
pub(super) fn finish(mut nova: Nova) {
    nova.close_stdin();
    let status = nova.wait_exit(EVENT_TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}", nova.report());
}

/// Every line of a JSONL file, parsed (panics on a line that is not JSON).
pub(super) fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `message` of every `message` entry in the file.
pub(super) fn file_messages(path: &Path) -> Vec<Value> {
    lines(path)
        .into_iter()
        .filter(|l| l["type"] == "message")
        .map(|l| l["message"].clone())
        .collect()
}

/// Every file under `dir`, recursively, sorted.
pub(super) fn all_files(dir: &Path) -> Vec<PathBuf> {
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

pub(super) fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    all_files(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect()
}

/// The text of a message: a string content, or its text blocks joined.
pub(super) fn text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

pub(super) fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| format!("{}:{}", m["role"].as_str().unwrap_or("?"), text(m)))
        .collect()
}

/// Asserts that `needles` occur in `haystack` in this order.
pub(super) fn assert_in_order(haystack: &str, needles: &[&str]) {
    let mut at = 0;
    for n in needles {
        match haystack[at..].find(n) {
            Some(p) => at += p + n.len(),
            None => panic!("{n:?} missing (or out of order) after byte {at} in:\n{haystack}"),
        }
    }
}

/// The last chat request's `messages`, as JSON text.
pub(super) fn last_request(mock: &MockLlm) -> String {
    let reqs = mock.chat_requests();
    serde_json::to_string(reqs.last().expect("a chat request").messages()).unwrap()
}

pub(super) fn is_hex8(id: &Value) -> bool {
    id.as_str().is_some_and(|s| {
        s.len() == 8
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

pub(super) fn is_uuid_v7(id: &str) -> bool {
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
pub(super) fn assert_linear_chain(lines: &[Value]) {
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
pub(super) fn make_session(dirs: &Dirs, mock: &MockLlm) -> (String, PathBuf, Vec<Value>) {
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
            "bashExecution:",
            // An extension's custom_message is in the context, as Pi builds it.
            "custom:injected",
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
        &[
            "List the files.",
            "Cargo.toml and src.",
            "Ran `git status`",
            "Thanks",
            "bye",
        ],
    );
    finish(nova);
    let now = fs::read_to_string(&path).unwrap();
    assert!(now.starts_with(PI_SESSION), "Pi's lines kept byte for byte");
    let lines = lines(&path);
    assert_eq!(lines.len(), 16);
    assert_eq!(lines[14]["parentId"], "a3b4c5d6");
    assert_eq!(text(&lines[15]["message"]), "You're welcome");
}
