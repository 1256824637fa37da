//! Run semantics against the real binary: steering, follow-ups, abort, tool batches and
//! commands answered mid-run. Gates in the mock hold a reply at a known point, so nothing here
//! depends on timing.

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["type"].as_str().unwrap_or("?") {
            "message_start" | "message_end" => {
                format!(
                    "{}:{}",
                    e["type"].as_str().unwrap(),
                    e["message"]["role"].as_str().unwrap()
                )
            }
            "message_update" => format!(
                "update:{}",
                e["assistantMessageEvent"]["type"].as_str().unwrap()
            ),
            t => t.to_owned(),
        })
        .collect()
}

fn user_texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn steering_mid_stream_is_delivered_as_a_new_turn_in_the_same_run() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(
        Reply::text("first answer")
            .text_chunks(3)
            .gate_after(1, &gate),
    );
    mock.push(Reply::text("after steer"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    gate.wait_reached(EVENT_TIMEOUT);

    // Commands are answered while the reply is held mid-stream.
    let started = Instant::now();
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(state["isStreaming"], true);
    let r = nova.request(json!({"type": "prompt", "message": "again"}));
    assert_eq!(r["success"], false);
    assert!(
        r["error"].as_str().unwrap().contains("streamingBehavior"),
        "{r}"
    );
    nova.request_ok(json!({"type": "steer", "message": "change course"}));
    let update = nova.wait_for_type("queue_update", EVENT_TIMEOUT);
    assert_eq!(update["steering"], json!(["change course"]));
    assert_eq!(update["pendingMessageCount"], 1);
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["pendingMessageCount"],
        1
    );

    gate.open();
    let events = nova.events_until("agent_settled");
    let kinds = types(&events);
    let first_turn_end = kinds.iter().position(|k| k == "turn_end").unwrap();
    assert_eq!(
        &kinds[first_turn_end..first_turn_end + 5],
        // Pi reports the queue change as the message it took is delivered, after `turn_start`.
        [
            "turn_end",
            "turn_start",
            "queue_update",
            "message_start:user",
            "message_end:user"
        ]
    );
    assert_eq!(kinds.iter().filter(|k| *k == "agent_end").count(), 1);
    assert!(
        !kinds.contains(&"agent_start".to_owned()),
        "one run only: {kinds:?}"
    );
    let turn_ends: Vec<&Value> = events.iter().filter(|e| e["type"] == "turn_end").collect();
    assert_eq!(turn_ends[0]["turnIndex"], 0);
    assert_eq!(turn_ends[1]["turnIndex"], 1);
    assert_eq!(turn_ends[1]["message"]["content"][0]["text"], "after steer");
    let end = events.iter().find(|e| e["type"] == "agent_end").unwrap();
    assert_eq!(end["messages"].as_array().unwrap().len(), 4);
    assert_eq!(events.last().unwrap()["aborted"], false);

    let second = &mock.wait_requests(2, EVENT_TIMEOUT)[1];
    assert_eq!(user_texts(second.messages()), ["go", "change course"]);
    mock.assert_no_violations();
    assert_eq!(
        nova.request_ok(json!({"type": "get_last_assistant_text"})),
        json!({"text": "after steer"})
    );
}

#[test]
fn follow_ups_wait_until_the_agent_would_stop_one_at_a_time() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::text("one").gate_after(1, &gate));
    mock.push(Reply::text("two"));
    mock.push(Reply::text("three"));
    let mut nova = Nova::builder().openai(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "start"}));
    gate.wait_reached(EVENT_TIMEOUT);
    let queued = nova
        .request_ok(json!({"type": "prompt", "message": "f1", "streamingBehavior": "followUp"}));
    assert_eq!(queued, json!({"disposition": "queued"}));
    nova.request_ok(json!({"type": "follow_up", "message": "f2"}));
    gate.open();
    let events = nova.events_until("agent_settled");
    let turn_texts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "turn_end")
        .map(|e| e["message"]["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(turn_texts, ["one", "two", "three"]);
    let requests = mock.wait_requests(3, EVENT_TIMEOUT);
    assert_eq!(user_texts(requests[2].messages()), ["start", "f1", "f2"]);
    mock.assert_no_violations();
}

#[test]
fn abort_mid_stream_keeps_the_partial_reply_clears_the_queue_and_answers_last() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(
        Reply::text("partial text")
            .text_chunks(2)
            .gate_after(1, &gate),
    );
    mock.push(Reply::text("fresh"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let delta = nova.wait_for(
        |v| v["assistantMessageEvent"]["type"] == "text_delta",
        EVENT_TIMEOUT,
    );
    let partial = delta["assistantMessageEvent"]["delta"].clone();
    nova.request_ok(json!({"type": "follow_up", "message": "never delivered"}));
    nova.send(&json!({"id": "stop", "type": "abort"}));
    let events = nova.events_until("response");
    let kinds = types(&events);
    let tail: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|k| !k.starts_with("update:"))
        .collect();
    assert_eq!(
        tail,
        [
            "queue_update",
            "queue_update",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
            "response"
        ],
        "{events:#?}"
    );
    let end = events.iter().find(|e| e["type"] == "message_end").unwrap();
    assert_eq!(end["message"]["stopReason"], "aborted");
    assert_eq!(end["message"]["errorMessage"], "Request was aborted");
    assert_eq!(end["message"]["content"][0]["text"], partial);
    assert_eq!(events[events.len() - 2]["aborted"], true);
    assert_eq!(events.last().unwrap()["id"], "stop");
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(
        (
            state["isStreaming"].clone(),
            state["pendingMessageCount"].clone()
        ),
        (json!(false), json!(0))
    );
    assert_eq!(state["messageCount"], 2);

    // The aborted reply stays in the conversation but is never sent to the model again.
    let events = nova.run_prompt("again");
    assert!(types(&events).contains(&"agent_end".to_owned()));
    let second = &mock.wait_requests(2, EVENT_TIMEOUT)[1];
    assert!(
        second.messages().iter().all(|m| m["role"] != "assistant"),
        "{:?}",
        second.messages()
    );
    mock.assert_no_violations();
    gate.open();
}

#[test]
fn abort_while_idle_answers_at_once() {
    let mut nova = Nova::builder().spawn();
    nova.request_ok(json!({"type": "abort"}));
}

#[test]
fn abort_during_bash_kills_the_process_group_and_ends_the_run() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "c1",
        "bash",
        json!({"command": "sleep 60 & echo $! > child.pid; wait"}),
    ));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "run it"}));
    nova.wait_for_type("tool_execution_start", EVENT_TIMEOUT);
    let pid_file = nova.cwd().join("child.pid");
    let deadline = Instant::now() + EVENT_TIMEOUT;
    let child_pid = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse::<u32>()
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "bash never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    nova.send(&json!({"id": "stop", "type": "abort"}));
    let events = nova.events_until("response");
    let tool_end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(tool_end["isError"], true);
    let text = tool_end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.ends_with("Command aborted"), "{text}");
    let kinds = types(&events);
    let after_tool: Vec<&str> = kinds
        .iter()
        .skip_while(|k| *k != "tool_execution_end")
        .map(String::as_str)
        .collect();
    assert_eq!(
        after_tool,
        [
            "tool_execution_end",
            "message_start:toolResult",
            "message_end:toolResult",
            "turn_end",
            "turn_start",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
            "response"
        ]
    );
    let deadline = Instant::now() + EVENT_TIMEOUT;
    while std::path::Path::new(&format!("/proc/{child_pid}")).exists() {
        let stat = std::fs::read_to_string(format!("/proc/{child_pid}/stat")).unwrap_or_default();
        if stat.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "background child {child_pid} survived the abort"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn parallel_tool_calls_end_in_call_order() {
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("slow", "bash", json!({"command": "sleep 0.4; echo slow"}))
            .tool_call("fast", "bash", json!({"command": "echo fast"})),
    );
    mock.push(Reply::text("done"));
    let mut nova = Nova::builder().openai(&mock).spawn();
    let events = nova.run_prompt("both");
    let tool_events: Vec<(String, String)> = events
        .iter()
        .filter(|e| {
            e["type"].as_str().unwrap().starts_with("tool_execution_")
                && e["type"] != "tool_execution_update"
        })
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["toolCallId"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("tool_execution_start", "slow"),
        ("tool_execution_start", "fast"),
        ("tool_execution_end", "slow"),
        ("tool_execution_end", "fast"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(tool_events, expected);
    let turn_end = events.iter().find(|e| e["type"] == "turn_end").unwrap();
    let ids: Vec<&str> = turn_end["toolResults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["slow", "fast"]);
    let second = &mock.wait_requests(2, EVENT_TIMEOUT)[1];
    let tool_msgs: Vec<&Value> = second
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_msgs[0]["content"], "slow\n");
    assert_eq!(tool_msgs[1]["content"], "fast\n");
    mock.assert_no_violations();
}

#[test]
fn a_steer_queued_before_tools_run_skips_them() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(
        Reply::new()
            .tool_call("c1", "bash", json!({"command": "touch ran.txt"}))
            .tool_call("c2", "read", json!({"path": "x"}))
            .gate_after(1, &gate),
    );
    mock.push(Reply::text("ok, stopping"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "do things"}));
    gate.wait_reached(EVENT_TIMEOUT);
    nova.request_ok(json!({"type": "steer", "message": "stop that"}));
    gate.open();
    let events = nova.events_until("agent_settled");
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 2);
    for end in &ends {
        assert_eq!(end["isError"], true);
        assert_eq!(
            end["result"]["content"][0]["text"],
            "Skipped due to queued user message."
        );
    }
    assert!(!nova.cwd().join("ran.txt").exists());
    let second = &mock.wait_requests(2, EVENT_TIMEOUT)[1];
    assert_eq!(user_texts(second.messages()), ["do things", "stop that"]);
    mock.assert_no_violations();
}

#[test]
fn unknown_tools_and_bad_arguments_become_error_results() {
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "teleport", json!({}))
            .tool_call("c2", "read", json!({"limit": "many"})),
    );
    mock.push(Reply::text("sorry"));
    let mut nova = Nova::builder().openai(&mock).spawn();
    let events = nova.run_prompt("go");
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(
        ends[0]["result"]["content"][0]["text"],
        "Tool teleport not found"
    );
    let invalid = ends[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        invalid.starts_with("Validation failed for tool \"read\""),
        "{invalid}"
    );
    assert!(
        invalid.contains("path") && invalid.contains("limit"),
        "{invalid}"
    );
    assert!(ends.iter().all(|e| e["isError"] == true));
    mock.assert_no_violations();
}

#[test]
fn bash_streams_updates_with_the_whole_output_so_far() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "c1",
        "bash",
        json!({"command": "echo one; sleep 0.3; echo two"}),
    ));
    mock.push(Reply::text("done"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    let events = nova.run_prompt("go");
    let updates: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update")
        .filter_map(|e| e["partialResult"]["content"][0]["text"].as_str())
        .collect();
    assert!(!updates.is_empty());
    assert!(updates.last().unwrap().contains("one\ntwo"), "{updates:?}");
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["isError"], false);
    assert_eq!(end["result"]["content"][0]["text"], "one\ntwo\n");
}
