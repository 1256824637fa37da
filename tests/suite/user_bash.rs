//! The user's own shell commands (`bash`, `abort_bash`): Pi's `BashResult`, the streamed
//! `bash_execution_update`s, the `bashExecution` message and how the next request shows it, the
//! deny rules (and commands they cannot be checked against), and `abort` waiting for a running
//! command.

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, REQUEST_TIMEOUT};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn finish(mut nova: Nova) {
    nova.close_stdin();
    assert!(nova.wait_exit(Duration::from_secs(10)).success());
}

fn messages(nova: &mut Nova) -> Vec<Value> {
    nova.request_ok(json!({"type": "get_messages"}))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// Waits for the response to the command sent with `id`.
fn response(nova: &mut Nova, id: &str) -> Value {
    nova.wait_for(
        |l| l["type"] == "response" && l["id"] == id,
        REQUEST_TIMEOUT,
    )
}

#[test]
fn bash_answers_with_pis_result_streams_and_is_kept_for_the_next_request() {
    let mock = MockLlm::start();
    mock.push(Reply::text("seen"));
    let mut nova = Nova::builder()
        .ollama(&mock)
        .file("note.txt", "hello from the cwd\n")
        .spawn();
    nova.send(&json!({"id": "b1", "type": "bash", "command": "cat note.txt; echo second"}));
    let mut streamed = String::new();
    let done = loop {
        let line = nova.next_event(EVENT_TIMEOUT);
        match line["type"].as_str() {
            Some("bash_execution_update") => {
                assert_eq!(line["id"], "b1");
                streamed.push_str(line["delta"].as_str().unwrap());
            }
            Some("response") => break line,
            other => panic!("unexpected {other:?}: {line}"),
        }
    };
    assert_eq!(streamed, "hello from the cwd\nsecond\n");
    assert_eq!(
        done["data"],
        json!({"output": "hello from the cwd\nsecond\n", "exitCode": 0,
               "cancelled": false, "truncated": false})
    );

    let r = nova.request(json!({"type": "bash", "command": "echo secret; exit 3",
                                "excludeFromContext": true}));
    assert_eq!(r["data"]["exitCode"], 3);
    assert_eq!(r["data"]["output"], "secret\n");

    let msgs = messages(&mut nova);
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["role"], "bashExecution");
    assert_eq!(msgs[0]["command"], "cat note.txt; echo second");
    assert!(msgs[0].get("excludeFromContext").is_none(), "{}", msgs[0]);
    assert_eq!(msgs[1]["excludeFromContext"], true);
    assert_eq!(msgs[1]["exitCode"], 3);

    nova.run_prompt("what did I run?");
    let request = mock.chat_requests()[0].body.clone();
    let sent: Vec<&Value> = request["messages"].as_array().unwrap().iter().collect();
    let users: Vec<&str> = sent
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        [
            "Ran `cat note.txt; echo second`\n```\nhello from the cwd\nsecond\n\n```",
            "what did I run?"
        ]
    );
    mock.assert_no_violations();
    // The file keeps both commands, the excluded one included.
    let entries = nova.request_ok(json!({"type": "get_entries"}));
    let kept = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["message"]["role"] == "bashExecution")
        .count();
    assert_eq!(kept, 2);
    finish(nova);
}

#[test]
fn long_output_is_truncated_with_the_full_output_in_a_file() {
    let mut nova = Nova::builder().spawn();
    let r = nova.request(json!({"type": "bash", "command": "seq 1 5000"}));
    let data = &r["data"];
    assert_eq!(data["truncated"], true, "{r}");
    // The last 2000 lines, as the bash tool keeps.
    let output = data["output"].as_str().unwrap();
    assert!(output.starts_with("3001\n") && output.trim_end().ends_with("4999\n5000"));
    let path = data["fullOutputPath"].as_str().unwrap();
    let full = std::fs::read_to_string(path).unwrap();
    assert!(full.starts_with("1\n2\n") && full.ends_with("5000\n"));
    finish(nova);
}

#[test]
fn a_deny_rule_refuses_a_user_command_naming_the_rule() {
    let mut nova = Nova::builder()
        .settings(json!({"permissions": {"bash": {"deny": ["rm *"]}}}))
        .spawn();
    let r = nova.request(json!({"type": "bash", "command": "echo hi && rm -rf stuff"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("`rm *`"), "{r}");
    // Flagged commands are not asked about: the client is the user.
    let r =
        nova.request(json!({"type": "bash", "command": "git reset --hard 2>/dev/null; echo ran"}));
    assert_eq!(r["data"]["output"], "ran\n", "{r}");
    assert!(messages(&mut nova).len() == 1);
    finish(nova);
}

#[test]
fn a_deny_rule_refuses_a_user_command_whose_program_is_known_only_at_run_time() {
    let mut nova = Nova::builder()
        .settings(json!({"permissions": {"bash": {"deny": ["rm *"]}}}))
        .file("stuff/keep.txt", "x")
        .spawn();
    for command in [
        "r=rm; $r -rf stuff",
        "$(echo rm) -rf stuff",
        "x='rm -rf stuff'; eval \"$x\"",
        "a=(rm -rf stuff); \"${a[@]}\"",
        "echo 'rm -rf stuff' | bash",
    ] {
        let r = nova.request(json!({"type": "bash", "command": command}));
        assert_eq!(r["success"], false, "{command}: {r}");
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains("deny rule (`rm *`) exists") && error.contains("known only at run time"),
            "{command}: {error}"
        );
    }
    assert!(nova.cwd().join("stuff/keep.txt").exists());
    // Without a name known only at run time the command runs, flagged or not.
    let r = nova.request(json!({"type": "bash", "command": "f(){ ls \"$@\"; }; f stuff"}));
    assert_eq!(r["data"]["output"], "keep.txt\n", "{r}");
    assert!(messages(&mut nova).len() == 1);
    finish(nova);
}

#[test]
fn abort_bash_cancels_a_running_command_and_is_harmless_when_none_runs() {
    let mut nova = Nova::builder().spawn();
    assert_eq!(nova.request_ok(json!({"type": "abort_bash"})), Value::Null);

    nova.send(&json!({"id": "slow", "type": "bash", "command": "echo started; sleep 30"}));
    nova.wait_for_type("bash_execution_update", EVENT_TIMEOUT);
    let started = Instant::now();
    nova.request_ok(json!({"type": "abort_bash"}));
    let r = response(&mut nova, "slow");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        r["data"],
        json!({"output": "started\n", "cancelled": true, "truncated": false})
    );
    let msgs = messages(&mut nova);
    assert_eq!(msgs[0]["cancelled"], true);
    assert!(msgs[0].get("exitCode").is_none());
    finish(nova);
}

#[test]
fn abort_answers_once_the_user_command_has_stopped() {
    let mut nova = Nova::builder().spawn();
    nova.send(&json!({"id": "slow", "type": "bash", "command": "echo started; sleep 30"}));
    nova.wait_for_type("bash_execution_update", EVENT_TIMEOUT);
    nova.send(&json!({"id": "stop", "type": "abort"}));
    // The bash answer comes first: abort waits until nothing runs.
    let first = nova.wait_for(|l| l["type"] == "response", REQUEST_TIMEOUT);
    assert_eq!(first["id"], "slow", "{first}");
    assert_eq!(first["data"]["cancelled"], true);
    let abort = response(&mut nova, "stop");
    assert_eq!(abort["success"], true);
    finish(nova);
}

#[test]
fn a_command_run_mid_stream_joins_the_conversation_after_the_run() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(
        Reply::text("reading")
            .tool_call("c1", "bash", json!({"command": "echo tool"}))
            .gate_after(1, &gate),
    );
    mock.push(Reply::text("done"));
    mock.push(Reply::text("again"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    gate.wait_reached(EVENT_TIMEOUT);
    let r = nova.request(json!({"type": "bash", "command": "echo mine"}));
    assert_eq!(r["data"]["output"], "mine\n");
    gate.open();
    let events = nova.events_until("agent_settled");
    let end = events.iter().find(|e| e["type"] == "agent_end").unwrap();
    let roles: Vec<&str> = end["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "bashExecution"
        ]
    );
    nova.run_prompt("next");
    mock.assert_no_violations();
    finish(nova);
}
