//! Resuming sessions through the real binary: `--session` and `--continue` on the command line,
//! `switch_session` and `new_session` over RPC, where a session id is looked for, and the model
//! and thinking level a resumed session brings back.

use super::sessions::{
    Dirs, assert_in_order, assert_linear_chain, file_messages, finish, is_uuid_v7, jsonl_files,
    last_request, lines, make_session, messages, session_file, state, texts, two_models,
};
use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, ollama_models};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tempfile::TempDir;

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
fn continue_on_a_newest_file_with_a_damaged_header_resumes_its_entries_and_says_so() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    write_session(
        &dirs.session_dir(),
        "01900000-0000-7000-8000-00000000000a",
        "older",
    );
    let damaged = write_session(
        &dirs.session_dir(),
        "01900000-0000-7000-8000-00000000000b",
        "kept",
    );
    let original = fs::read_to_string(&damaged).unwrap();
    let (_, entries) = original.split_once('\n').unwrap();
    fs::write(&damaged, format!("{{\"type\":\"sess\u{0}\n{entries}")).unwrap();
    let torn = fs::read(&damaged).unwrap();
    let future = SystemTime::now() + Duration::from_secs(60);
    fs::File::options()
        .write(true)
        .open(&damaged)
        .unwrap()
        .set_modified(future)
        .unwrap();

    let mut nova = dirs.nova(&mock, &["--continue"]);
    assert_eq!(texts(&messages(&mut nova)), ["user:kept", "assistant:ok"]);
    let resumed = session_file(&mut nova);
    assert_ne!(resumed, damaged);
    let stderr = nova.stderr_with("no valid session header");
    assert!(stderr.contains(&damaged.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("resumed its 2 readable entries"),
        "{stderr}"
    );
    assert!(stderr.contains(&resumed.display().to_string()), "{stderr}");
    // The new file is a valid session pointing back at the damaged one, left as it was.
    let header = lines_header(&resumed);
    assert_eq!(header["parentSession"], damaged.display().to_string());
    assert_eq!(fs::read(&damaged).unwrap(), torn);
    finish(nova);

    // Nothing readable at all: a new session, and stderr says why.
    let empty = Dirs::new();
    fs::create_dir_all(empty.session_dir()).unwrap();
    let garbage = empty.session_dir().join("2026-01-05T10-00-00-000Z_x.jsonl");
    fs::write(&garbage, "\u{0}\u{1}garbage\n{broken\n").unwrap();
    let mut nova = empty.nova(&mock, &["-c"]);
    assert!(messages(&mut nova).is_empty());
    let stderr = nova.stderr_with("no readable entries");
    assert!(stderr.contains(&garbage.display().to_string()), "{stderr}");
    assert!(stderr.contains("a new session starts"), "{stderr}");
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
// Where a session is looked for, and what it brings back
// ---------------------------------------------------------------------------------------------

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

/// Issue 30 item 8: `--tools`/`--no-tools` bound the tool set. A session that recorded
/// `set_active_tools [read, bash, write]`, resumed under `--tools read` (or `--no-tools`),
/// offers only what the command line allows, a `bash` call the model makes anyway is not run,
/// and `set_active_tools` cannot widen the set either.
#[test]
fn the_command_line_tool_set_bounds_a_resumed_sessions_recorded_set() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    mock.push(Reply::text("noted"));
    let mut nova = dirs.nova(&mock, &[]);
    nova.request_ok(json!({"type": "set_active_tools", "tools": ["read", "bash", "write"]}));
    nova.run_prompt("remember the tools");
    let file = session_file(&mut nova);
    finish(nova);

    let offered = |mock: &MockLlm| -> Vec<String> {
        let mut names: Vec<String> = mock.chat_requests().last().unwrap().body["tools"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    for (flags, allowed) in [
        (&["--tools", "read"][..], &["read"][..]),
        (&["--no-tools"], &[]),
    ] {
        let marker = dirs.cwd().join("bash-ran");
        mock.push(Reply::text("").tool_call(
            "c1",
            "bash",
            json!({"command": format!("touch {}", marker.display())}),
        ));
        mock.push(Reply::text("done"));
        let mut args = flags.to_vec();
        let path = file.to_str().unwrap();
        args.extend(["--session", path]);
        let mut nova = dirs.nova(&mock, &args);
        let events = nova.run_prompt("run bash");
        assert_eq!(offered(&mock), allowed, "{flags:?}");
        let result = events
            .iter()
            .find(|e| e["type"] == "tool_execution_end")
            .unwrap();
        assert_eq!(result["isError"], true, "{flags:?}: {result}");
        assert!(!marker.exists(), "{flags:?}: bash ran");

        let widen = nova.request(json!({"type": "set_active_tools", "tools": ["read", "bash"]}));
        assert_eq!(widen["success"], false, "{flags:?}: {widen}");
        let error = widen["error"].as_str().unwrap();
        assert!(
            error.contains("bash") && error.contains("--tools"),
            "{error}"
        );
        let active: Vec<Value> = nova.request_ok(json!({"type": "get_tools"}))["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["active"] == true)
            .map(|t| t["name"].clone())
            .collect();
        assert_eq!(active, allowed, "{flags:?}");
        finish(nova);
    }
}
