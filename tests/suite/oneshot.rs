//! nova from the shell: print mode (`-p`) and JSON mode (`--mode json`) through the real
//! binary — what reaches stdout and stderr, exit codes, piped stdin, `@file` attachments,
//! continuing a session, the permission gate with no one to ask, and SIGINT.

use super::providers::{LONG, PNG_1X1};
use super::skills::user_texts;
use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{ollama_models, wait_or_kill};
use crate::support::wire::{self, Out};
use base64::Engine;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A temp agent dir (with models.json), cwd and home for one-shot runs.
struct Shell {
    dir: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
}

/// What a finished run left behind.
#[derive(Debug)]
struct Done {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Done {
    /// stdout as JSON lines; every line must be JSON.
    fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

impl Shell {
    fn new(mock: &MockLlm) -> Shell {
        Shell::with_models(ollama_models(mock))
    }

    fn with_models(models: Value) -> Shell {
        let dir = tempfile::tempdir().unwrap();
        let (agent, cwd) = (dir.path().join("agent"), dir.path().join("cwd"));
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
        Shell { dir, agent, cwd }
    }

    fn file(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.cwd.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn settings(&self, settings: Value) {
        std::fs::write(self.agent.join("settings.json"), settings.to_string()).unwrap();
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nova"));
        cmd.args(args)
            .current_dir(&self.cwd)
            .env("NOVA_AGENT_DIR", &self.agent)
            .env("HOME", self.dir.path())
            .env_remove("OLLAMA_HOST")
            .env_remove("NOVA_LOG");
        cmd
    }

    /// Runs `nova <args>` to the end with `stdin` piped in (nothing, not even a pipe, when
    /// empty).
    fn run(&self, args: &[&str], stdin: &str) -> Done {
        let (out, err) = (
            self.dir.path().join("stdout"),
            self.dir.path().join("stderr"),
        );
        let mut child = self
            .command(args)
            .stdin(if stdin.is_empty() {
                Stdio::null()
            } else {
                Stdio::piped()
            })
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.as_bytes()).unwrap();
        }
        let status = wait_or_kill(&mut child, LONG, &format!("nova {args:?}"), &err);
        Done {
            code: status.code(),
            stdout: std::fs::read_to_string(&out).unwrap(),
            stderr: std::fs::read_to_string(&err).unwrap(),
        }
    }

    /// The session files of the cwd, oldest first.
    fn session_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.agent.join("sessions"))
            .unwrap()
            .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
            .map(|f| f.unwrap().path())
            .collect();
        files.sort();
        files
    }
}

fn session_messages(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Print mode
// ---------------------------------------------------------------------------------------------

#[test]
fn print_mode_prints_only_the_final_answer() {
    let mock = MockLlm::start();
    mock.push(Reply::text("Hello").and_text(" there").text_chunks(3));
    let shell = Shell::new(&mock);
    let done = shell.run(&["-p", "hi"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "Hello there\n");
    assert_eq!(done.stderr, "");

    // Several prompts run in turn, in one conversation; only the last answer is printed.
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    let done = shell.run(&["one", "two"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "second answer\n");
    let requests = mock.chat_requests();
    assert_eq!(user_texts(&requests[2]), ["one", "two"]);
    mock.assert_no_violations();
}

#[test]
fn a_run_without_a_session_writes_nothing_into_the_project() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo hi"})));
    mock.push(Reply::text("done"));
    let shell = Shell::new(&mock);
    let done = shell.run(&["-p", "--no-session", "run it"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "done\n");
    let left: Vec<_> = std::fs::read_dir(&shell.cwd).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn verbose_reports_tool_calls_on_stderr() {
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "bash", json!({"command": "echo hi"}))
            .tool_call("c2", "bash", json!({"command": "exit 3"})),
    );
    mock.push(Reply::text("done"));
    let shell = Shell::new(&mock);
    let done = shell.run(&["-p", "--verbose", "run them"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "done\n");
    let lines: Vec<&str> = done.stderr.lines().collect();
    assert_eq!(lines[..2], ["nova: bash echo hi", "nova: bash exit 3"]);
    assert!(
        lines[2].starts_with("nova: bash failed: ") && lines.len() == 3,
        "{}",
        done.stderr
    );
}

#[test]
fn a_provider_error_exits_1_with_the_reason_on_stderr() {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(500, "the model server fell over"));
    let shell = Shell::new(&mock);
    // Fail at once rather than after automatic retries.
    std::fs::write(
        shell.agent.join("settings.json"),
        r#"{"retry":{"enabled":false}}"#,
    )
    .unwrap();
    let done = shell.run(&["-p", "one", "two"], "");
    assert_eq!(done.code, Some(1), "{done:?}");
    assert_eq!(done.stdout, "");
    assert!(
        done.stderr.starts_with("nova: ") && done.stderr.contains("the model server fell over"),
        "{}",
        done.stderr
    );
    assert_eq!(
        mock.chat_requests().len(),
        1,
        "the run stops at the failure"
    );

    mock.push(Reply::http_error(500, "again"));
    let done = shell.run(&["--mode", "json", "x"], "");
    assert_eq!(done.code, Some(1), "{done:?}");
    let last = done.lines().pop().unwrap();
    assert_eq!(last, json!({"type": "agent_settled", "aborted": false}));
}

#[test]
fn usage_errors_exit_2_and_write_nothing_on_stdout() {
    let mock = MockLlm::start();
    let shell = Shell::new(&mock);
    for (args, needle) in [
        (&[][..], "give a prompt"),
        (&["-p"][..], "nothing to run"),
        (&["--mode", "json"][..], "nothing to run"),
        (
            &["-p", "look", "@missing.txt"][..],
            "cannot attach @missing.txt",
        ),
        (&["--mode", "rpc", "hi"][..], "--mode rpc takes its prompts"),
        (&["--mode", "text"][..], "nothing to run"),
    ] {
        let done = shell.run(args, "");
        assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
        assert_eq!(done.stdout, "", "{args:?}");
        assert!(done.stderr.contains(needle), "{args:?}: {}", done.stderr);
    }
    assert!(mock.chat_requests().is_empty());
}

#[test]
fn piped_stdin_goes_before_the_first_prompt() {
    let mock = MockLlm::start();
    mock.push(Reply::text("a review"));
    mock.push(Reply::text("a summary"));
    let shell = Shell::new(&mock);
    let done = shell.run(&["-p", "Review this change"], "--- a/x\n+++ b/x\n\n");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "a review\n");
    // Stdin alone is a prompt too, and makes print mode the default.
    let done = shell.run(&[], "Summarise the news.\n");
    assert_eq!(done.stdout, "a summary\n", "{done:?}");
    let requests = mock.chat_requests();
    assert_eq!(
        user_texts(&requests[0]),
        ["--- a/x\n+++ b/x\n\nReview this change"]
    );
    assert_eq!(user_texts(&requests[1]), ["Summarise the news."]);
}

#[test]
fn at_files_attach_text_and_images() {
    let mock = MockLlm::start();
    mock.push(Reply::text("seen"));
    let mut models = ollama_models(&mock);
    models["providers"]["mock-ollama"]["models"][0]["input"] = json!(["text", "image"]);
    let shell = Shell::with_models(models);
    let notes = shell.file("docs/notes.txt", "line one\nline two");
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG_1X1)
        .unwrap();
    let picture = shell.file("shot.png", &png);
    let done = shell.run(&["-p", "@docs/notes.txt", "What is this?", "@shot.png"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    let request = &mock.chat_requests()[0];
    assert_eq!(
        user_texts(request),
        [format!(
            "<file name=\"{}\">\nline one\nline two\n</file>\n<file name=\"{}\"></file>\n\
             What is this?",
            notes.display(),
            picture.display()
        )]
    );
    let user = request
        .messages()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(user["images"], json!([PNG_1X1]), "{user}");
}

#[test]
fn continue_picks_up_the_last_conversation_of_the_directory() {
    let mock = MockLlm::start();
    mock.push(Reply::text("The test fails because of a typo."));
    mock.push(Reply::text("Fixed."));
    let shell = Shell::new(&mock);
    let done = shell.run(&["-p", "why does the test fail?"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    let done = shell.run(&["-c", "-p", "and now fix it"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stdout, "Fixed.\n");
    let second = &mock.chat_requests()[1];
    assert_eq!(
        user_texts(second),
        ["why does the test fail?", "and now fix it"]
    );
    let files = shell.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(session_messages(&files[0]).len(), 4);

    // --no-session writes nothing.
    mock.push(Reply::text("ok"));
    shell.run(&["--no-session", "-p", "x"], "");
    assert_eq!(shell.session_files().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// JSON mode
// ---------------------------------------------------------------------------------------------

#[test]
fn json_mode_writes_the_header_then_every_event() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo hi"})));
    mock.push(Reply::text("done"));
    let shell = Shell::new(&mock);
    let done = shell.run(&["--mode", "json", "run echo"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.stderr, "");
    let lines = done.lines();
    let header = &lines[0];
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 3);
    assert_eq!(header["cwd"], json!(shell.cwd.to_str().unwrap()));
    assert!(header["id"].as_str().unwrap().len() == 36, "{header}");
    assert!(header["timestamp"].is_string(), "{header}");
    let file = &shell.session_files()[0];
    assert!(
        file.to_str()
            .unwrap()
            .contains(header["id"].as_str().unwrap()),
        "the header is the session file's"
    );
    for line in &lines[1..] {
        assert!(
            matches!(wire::decode_line(line), Out::Event(_)),
            "not an event: {line}"
        );
    }
    let types: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["type"].as_str().unwrap())
        .filter(|t| !t.ends_with("_update"))
        .collect();
    assert_eq!(
        types,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "tool_execution_start",
            "tool_execution_end",
            "message_start",
            "message_end",
            "turn_end",
            "turn_start",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// The permission gate with no one to ask
// ---------------------------------------------------------------------------------------------

/// Runs a model that wants `rm -rf build` in JSON mode; returns the run and the bash result.
fn flagged_run(settings: Option<Value>, extra: &[&str]) -> (Done, Value, bool) {
    flagged_run_of("rm -rf build", settings, extra)
}

/// Runs a model that wants `command` in JSON mode; returns the run and the bash result.
fn flagged_run_of(command: &str, settings: Option<Value>, extra: &[&str]) -> (Done, Value, bool) {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": command})));
    mock.push(Reply::text("understood"));
    let shell = Shell::new(&mock);
    shell.file("build/out.o", "x");
    if let Some(s) = settings {
        shell.settings(s);
    }
    let mut args = vec!["--mode", "json"];
    args.extend_from_slice(extra);
    args.push("clean up");
    let done = shell.run(&args, "");
    let end = done
        .lines()
        .into_iter()
        .find(|l| l["type"] == "tool_execution_end")
        .expect("a tool_execution_end");
    assert!(
        !done.stdout.contains("permission_request"),
        "nobody could answer one"
    );
    (done, end, shell.cwd.join("build").exists())
}

#[test]
fn a_flagged_command_is_refused_with_an_error_result_the_model_sees() {
    let (done, end, build_exists) = flagged_run(None, &[]);
    assert_eq!(done.code, Some(0), "the run itself goes on: {done:?}");
    assert!(build_exists, "the command must not run");
    assert_eq!(end["isError"], true, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("without anyone to ask") && text.contains("--approve-flagged"),
        "{text}"
    );
    assert!(
        done.stderr.contains("nova: refused a flagged command")
            && done.stderr.contains("rm -rf build"),
        "{}",
        done.stderr
    );
}

/// No allow rule lets a command leave the sandbox, so the advice names only `--approve-flagged`.
#[test]
fn a_command_refused_for_leaving_the_sandbox_is_not_told_an_allow_rule_would_do() {
    let mock = MockLlm::start();
    let call = json!({"command": "rm -rf build", "sandbox": false});
    mock.push(Reply::new().tool_call("c1", "bash", call));
    mock.push(Reply::text("understood"));
    let shell = Shell::new(&mock);
    shell.file("build/out.o", "x");
    shell.settings(json!({"permissions": {"bash": {"allow": ["rm -rf build"]}}}));
    let done = shell.run(&["--mode", "json", "clean up"], "");
    let end = done
        .lines()
        .into_iter()
        .find(|l| l["type"] == "tool_execution_end")
        .expect("a tool_execution_end");
    assert_eq!(end["isError"], true, "{end}");
    assert!(shell.cwd.join("build").exists(), "the command must not run");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("without the sandbox") && text.contains("--approve-flagged."),
        "{text}"
    );
    assert!(!text.contains("allow rule"), "{text}");
    assert!(
        done.stderr.contains("refused a flagged command")
            && done.stderr.contains("--approve-flagged)")
            && !done.stderr.contains("allow rule"),
        "{}",
        done.stderr
    );
}

#[test]
fn approve_flagged_and_allow_rules_let_it_run_but_deny_rules_win() {
    let (done, end, build_exists) = flagged_run(None, &["--approve-flagged"]);
    assert_eq!(end["isError"], false, "{end}");
    assert!(!build_exists);
    assert!(
        done.stderr.contains("running a flagged command") && done.stderr.contains("rm -rf build"),
        "{}",
        done.stderr
    );

    let allow = json!({"permissions": {"bash": {"allow": ["rm -rf build"]}}});
    let (done, end, build_exists) = flagged_run(Some(allow), &[]);
    assert_eq!(end["isError"], false, "{end}");
    assert!(!build_exists);
    assert_eq!(done.stderr, "", "an allowed command is not flagged");

    let deny = json!({"permissions": {"bash": {"deny": ["rm *"]}}});
    let (_, end, build_exists) = flagged_run(Some(deny), &["--approve-flagged"]);
    assert_eq!(end["isError"], true, "{end}");
    assert!(build_exists);
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("deny rule `rm *`"), "{text}");

    // Nor does it run what the deny rules cannot be checked against.
    let deny = json!({"permissions": {"bash": {"deny": ["rm *"]}}});
    let (done, end, build_exists) =
        flagged_run_of("r=rm; $r -rf build", Some(deny), &["--approve-flagged"]);
    assert_eq!(end["isError"], true, "{end}");
    assert!(build_exists);
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("deny rule (`rm *`) exists") && text.contains("without anyone to ask"),
        "{text}"
    );
    assert!(
        done.stderr.contains("refused a command") && done.stderr.contains("$r -rf build"),
        "{}",
        done.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------------------------

fn kill(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn sigint_aborts_the_run_keeps_the_partial_reply_and_exits_1() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::text("abcd").text_chunks(4).gate_after(2, &gate));
    let shell = Shell::new(&mock);
    let err = shell.dir.path().join("stderr");
    let mut child = shell
        .command(&["-p", "write four letters"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    gate.wait_reached(LONG);
    kill(&child, "INT");
    let status = wait_or_kill(&mut child, LONG, "nova after SIGINT", &err);
    gate.open();
    assert_eq!(status.code(), Some(1));
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(stdout, "");
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(stderr.contains("aborted"), "{stderr}");
    let messages = session_messages(&shell.session_files()[0]);
    let reply = messages.last().unwrap();
    assert_eq!(reply["stopReason"], "aborted", "{reply}");
    // What had arrived when the signal came: the gate holds back the last two letters. On a
    // loaded machine the signal can beat nova to the two frames the mock already sent, so
    // nothing may have arrived yet; the reply is still recorded, as aborted.
    let partial = reply["content"][0]["text"].as_str().unwrap_or("");
    assert!(["", "a", "ab"].contains(&partial), "{reply}");
}

#[test]
fn a_second_sigint_exits_at_once_even_when_stdout_is_stalled() {
    let mock = MockLlm::start();
    mock.push(Reply::many_chunks(20_000, "xxxxxxxx"));
    let shell = Shell::new(&mock);
    let err = shell.dir.path().join("stderr");
    // stdout is a pipe nobody reads: nova blocks writing events once it is full.
    let mut child = shell
        .command(&["--mode", "json", "stream a lot"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    mock.wait_requests(1, LONG);
    std::thread::sleep(Duration::from_millis(500));
    kill(&child, "INT");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first SIGINT waits for the run to end"
    );
    let t0 = Instant::now();
    kill(&child, "INT");
    let status = wait_or_kill(&mut child, LONG, "nova after two SIGINTs", &err);
    assert_eq!(status.code(), Some(130));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

#[test]
fn an_mcp_call_a_rule_asks_about_is_refused_when_nobody_can_answer() {
    let Some(server) = crate::support::mcp::test_server() else {
        return;
    };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "mcp__faulty__echo", json!({"text": "hi"})));
    mock.push(Reply::text("understood"));
    let shell = Shell::new(&mock);
    let log = shell.cwd.join("server.log");
    std::fs::write(
        shell.agent.join("mcp.json"),
        crate::support::mcp::mcp_json(
            json!({"faulty": {"command": server, "env": {"MCP_TEST_LOG": log}}}),
        ),
    )
    .unwrap();
    shell.settings(json!({"permissions": {"mcp": {"ask": ["mcp__faulty__echo"]}}}));
    // Before the one permission path this run waited for ever for an answer.
    let done = shell.run(&["--mode", "json", "echo it"], "");
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        !done.stdout.contains("permission_request"),
        "{}",
        done.stdout
    );
    let end = done
        .lines()
        .into_iter()
        .find(|l| l["type"] == "tool_execution_end")
        .expect("a tool_execution_end");
    assert_eq!(end["isError"], true, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("without anyone to ask") && text.contains("permissions.mcp allow rule"),
        "{text}"
    );
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!calls.contains("call echo"), "the tool ran: {calls}");
}

/// A model that runs the same command turn after turn, as a small model stuck in a loop does.
fn looping_model(mock: &MockLlm, turns: usize) {
    for i in 0..turns {
        mock.push(Reply::new().tool_call(format!("c{i}"), "bash", json!({"command": "true"})));
    }
}

#[test]
fn max_turns_ends_a_looping_run_with_an_error_and_exit_1() {
    let mock = MockLlm::start();
    looping_model(&mock, 5);
    let shell = Shell::new(&mock);
    let done = shell.run(&["-p", "--max-turns", "2", "run true"], "");
    assert_eq!(done.code, Some(1), "{done:?}");
    assert_eq!(done.stdout, "");
    assert!(
        done.stderr
            .contains("turn limit was reached after 2 replies"),
        "{}",
        done.stderr
    );
    assert_eq!(mock.chat_requests().len(), 2, "no request past the limit");

    // JSON mode: the limit is an error reply, as a failed request is; `maxTurns` in settings
    // does the same, and the flag wins over it.
    shell.settings(json!({"maxTurns": 1}));
    let done = shell.run(&["--mode", "json", "run true"], "");
    assert_eq!(done.code, Some(1), "{done:?}");
    let ends: Vec<Value> = done
        .lines()
        .into_iter()
        .filter(|l| l["type"] == "message_end" && l["message"]["role"] == "assistant")
        .map(|l| l["message"].clone())
        .collect();
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends[1]["stopReason"], "error");
    assert!(
        ends[1]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("after 1 reply"),
        "{}",
        ends[1]
    );
    assert_eq!(mock.chat_requests().len(), 3);

    let usage = shell.run(&["-p", "--max-turns", "0", "x"], "");
    assert_eq!(usage.code, Some(2), "{usage:?}");
    assert!(usage.stderr.contains("--max-turns"), "{}", usage.stderr);
}
