//! Automatic retry of transient provider failures (Pi 1.6's `retry` settings): the events and
//! their order around a retry, `Retry-After`, running out of retries, cancelling the wait with
//! `abort` or `abort_retry`, `set_auto_retry`, and the failures that are never retried. The
//! order asserted here is what Pi 1.6 itself emits against a server that fails with 503 and
//! then succeeds.

use crate::suite::providers::{labels, of_type};
use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(20);

/// nova on the OpenAI-compatible mock with short retry delays.
fn start(mock: &MockLlm, retry: Value) -> Nova {
    Nova::builder()
        .openai(mock)
        .settings(json!({"retry": retry}))
        .spawn()
}

fn fast() -> Value {
    json!({"baseDelayMs": 20, "maxAgentDelayMs": 2000})
}

/// The labels of `events` without the streaming updates, which are not what is asserted here.
fn outline(events: &[Value]) -> Vec<String> {
    labels(events)
        .into_iter()
        .filter(|l| !l.starts_with("text_"))
        .collect()
}

fn roles_and_stops(nova: &mut Nova) -> Vec<String> {
    let data = nova.request_ok(json!({"type": "get_messages"}));
    data["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m["stopReason"].as_str() {
            Some(stop) => format!("{}:{stop}", m["role"].as_str().unwrap()),
            None => m["role"].as_str().unwrap().to_owned(),
        })
        .collect()
}

#[test]
fn a_503_is_retried_with_pi_s_events_and_the_failed_reply_leaves_the_context() {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(503, "overloaded, try later"));
    mock.push(Reply::text("hello after retry"));
    let dirs = tempfile::tempdir().unwrap();
    let (agent, cwd) = (dirs.path().join("agent"), dirs.path().join("cwd"));
    std::fs::create_dir_all(&cwd).unwrap();
    let builder = || {
        Nova::builder()
            .openai(&mock)
            .dirs(&agent, &cwd)
            .settings(json!({"retry": fast()}))
    };
    let mut nova = builder().spawn();
    let events = nova.run_prompt("hi");
    assert_eq!(
        outline(&events),
        [
            "agent_start",
            "turn_start",
            "message_start(user)",
            "message_end(user)",
            "message_start(assistant)",
            "message_end(assistant)",
            "turn_end",
            "agent_end",
            "auto_retry_start",
            "entry_appended",
            "agent_start",
            "turn_start",
            "message_start(assistant)",
            "message_end(assistant)",
            "auto_retry_end",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    let ends = of_type(&events, "agent_end");
    assert_eq!(
        (ends[0]["willRetry"].clone(), ends[1]["willRetry"].clone()),
        (json!(true), json!(false))
    );
    let start = of_type(&events, "auto_retry_start")[0];
    assert_eq!(
        (&start["attempt"], &start["maxAttempts"], &start["delayMs"]),
        (&json!(1), &json!(3), &json!(20))
    );
    assert!(
        start["errorMessage"].as_str().unwrap().contains("HTTP 503"),
        "{start}"
    );
    assert_eq!(
        *of_type(&events, "auto_retry_end")[0],
        json!({"type": "auto_retry_end", "success": true, "attempt": 1})
    );
    assert_eq!(of_type(&events, "agent_settled")[0]["aborted"], false);
    // The retry sends the same conversation: the failed reply is not in it.
    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].messages(), requests[1].messages());
    assert_eq!(roles_and_stops(&mut nova), ["user", "assistant:stop"]);

    // The session file keeps the failed reply with a `context_edit` omitting it, so a resumed
    // session has the same conversation.
    let file = nova.request_ok(json!({"type": "get_state"}))["sessionFile"]
        .as_str()
        .unwrap()
        .to_owned();
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed = lines
        .iter()
        .find(|l| l["message"]["stopReason"] == "error")
        .expect("the failed reply is in the file");
    let edit = lines
        .iter()
        .find(|l| l["type"] == "context_edit")
        .expect("a context_edit");
    assert_eq!(edit["targetId"], failed["id"]);
    assert_eq!(edit["parentId"], failed["id"]);
    assert_eq!(edit["replacement"], Value::Null);
    drop(nova);
    let mut resumed = builder().args(["--session", file.as_str()]).spawn();
    assert_eq!(roles_and_stops(&mut resumed), ["user", "assistant:stop"]);
}

#[test]
fn retry_after_is_honoured_and_a_longer_request_than_the_cap_is_not_retried() {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(429, "slow down").header("retry-after", "1"));
    mock.push(Reply::text("done"));
    let mut nova = start(&mock, fast());
    let started = Instant::now();
    let events = nova.run_prompt("hi");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(of_type(&events, "auto_retry_start")[0]["delayMs"], 1000);
    assert_eq!(of_type(&events, "auto_retry_end")[0]["success"], true);

    let mock = MockLlm::start();
    mock.push(Reply::http_error(429, "slow down").header("retry-after", "2"));
    let mut nova = start(&mock, json!({"baseDelayMs": 20, "maxAgentDelayMs": 1500}));
    let events = nova.run_prompt("hi");
    assert!(of_type(&events, "auto_retry_start").is_empty());
    assert!(of_type(&events, "auto_retry_end").is_empty());
    assert_eq!(of_type(&events, "agent_end")[0]["willRetry"], false);
    let error = of_type(&events, "message_end")[1]["message"]["errorMessage"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.starts_with("Server requested 2s retry delay (max: 1.5s, retry.maxAgentDelayMs); not retried. HTTP 429"),
        "{error}"
    );
    assert_eq!(mock.chat_requests().len(), 1);
}

#[test]
fn when_retries_run_out_the_last_error_ends_them() {
    let mock = MockLlm::start();
    for n in 1..=3 {
        mock.push(Reply::http_error(502, format!("bad gateway {n}")));
    }
    let mut nova = start(&mock, json!({"baseDelayMs": 10, "maxRetries": 2}));
    let events = nova.run_prompt("hi");
    let tail: Vec<String> = outline(&events).into_iter().rev().take(3).collect();
    assert_eq!(tail, ["agent_settled", "auto_retry_end", "agent_end"]);
    let starts = of_type(&events, "auto_retry_start");
    let delays: Vec<&Value> = starts.iter().map(|s| &s["delayMs"]).collect();
    assert_eq!(delays, [&json!(10), &json!(20)]);
    assert_eq!(starts[1]["maxAttempts"], 2);
    let will_retry: Vec<&Value> = of_type(&events, "agent_end")
        .iter()
        .map(|e| &e["willRetry"])
        .collect();
    assert_eq!(will_retry, [&json!(true), &json!(true), &json!(false)]);
    let end = of_type(&events, "auto_retry_end")[0];
    assert_eq!(
        (&end["success"], &end["attempt"]),
        (&json!(false), &json!(2))
    );
    assert!(
        end["finalError"]
            .as_str()
            .unwrap()
            .contains("bad gateway 3"),
        "{end}"
    );
    assert_eq!(of_type(&events, "agent_settled")[0]["aborted"], false);
    assert_eq!(mock.chat_requests().len(), 3);
    // Only the last failure stays in the conversation, as in Pi.
    assert_eq!(roles_and_stops(&mut nova), ["user", "assistant:error"]);
}

#[test]
fn abort_ends_the_wait_and_answers_once_settled() {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(503, "busy"));
    let mut nova = start(&mock, json!({"baseDelayMs": 30_000}));
    nova.request_ok(json!({"type": "prompt", "message": "hi"}));
    nova.wait_for_type("auto_retry_start", LONG);
    // The failed reply leaves the context through an entry, reported as Pi reports it.
    let appended = nova.wait_for_type("entry_appended", LONG);
    assert_eq!(appended["entry"]["type"], "context_edit", "{appended}");
    let started = Instant::now();
    nova.send(&json!({"id": "a", "type": "abort"}));
    let rest = nova.events_until("response");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        labels(&rest),
        ["auto_retry_end", "agent_settled"],
        "{rest:#?}"
    );
    assert_eq!(
        rest[0],
        json!({"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "Retry cancelled"})
    );
    assert_eq!(rest[1]["aborted"], true);
    assert_eq!(rest[2]["success"], true);
    assert_eq!(mock.chat_requests().len(), 1);
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["isStreaming"],
        false
    );
}

/// Pi 1.6 reports `success: true` here (the aborted reply is not an error to it); nova says the
/// retries were cancelled, which is what happened.
#[test]
fn abort_during_the_retried_reply_ends_the_retries_as_cancelled() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::http_error(503, "busy"));
    mock.push(
        Reply::text("never finished")
            .text_chunks(3)
            .gate_after(1, &gate),
    );
    let mut nova = start(&mock, fast());
    nova.request_ok(json!({"type": "prompt", "message": "hi"}));
    gate.wait_reached(LONG);
    let answer = nova.request_ok(json!({"type": "abort"}));
    assert_eq!(answer, Value::Null);
    let events: Vec<Value> = nova.log().iter().map(|l| l.value.clone()).collect();
    let tail: Vec<String> = outline(&events).into_iter().rev().take(3).collect();
    assert_eq!(tail, ["agent_settled", "auto_retry_end", "agent_end"]);
    let end = of_type(&events, "auto_retry_end")[0];
    assert_eq!(
        *end,
        json!({"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "Retry cancelled"})
    );
    assert_eq!(of_type(&events, "agent_settled")[0]["aborted"], true);
}

#[test]
fn abort_retry_ends_the_wait_without_aborting_the_run() {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(503, "busy"));
    let mut nova = start(&mock, json!({"baseDelayMs": 30_000}));
    // With nothing to cancel it answers at once.
    nova.request_ok(json!({"type": "abort_retry"}));
    nova.request_ok(json!({"type": "prompt", "message": "hi"}));
    nova.wait_for_type("auto_retry_start", LONG);
    nova.wait_for_type("entry_appended", LONG);
    nova.send(&json!({"id": "r", "type": "abort_retry"}));
    let until_answer = nova.events_until("response");
    assert_eq!(labels(&until_answer)[0], "auto_retry_end");
    assert_eq!(until_answer[0]["finalError"], "Retry cancelled");
    assert_eq!(until_answer.last().unwrap()["command"], "abort_retry");
    assert_eq!(until_answer.last().unwrap()["success"], true);
    // `agent_settled` comes around the same time as the answer, before or after it.
    let settled = match of_type(&until_answer, "agent_settled").first() {
        Some(settled) => (*settled).clone(),
        None => nova.wait_for_type("agent_settled", LONG),
    };
    assert_eq!(settled["aborted"], false);
    assert_eq!(mock.chat_requests().len(), 1);
    // Pi leaves the failed reply out of the context once its retry was scheduled.
    assert_eq!(roles_and_stops(&mut nova), ["user"]);
}

#[test]
fn set_auto_retry_false_turns_retry_off_and_true_back_on() {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(503, "busy"));
    let mut nova = start(&mock, fast());
    nova.request_ok(json!({"type": "set_auto_retry", "enabled": false}));
    let events = nova.run_prompt("hi");
    assert!(of_type(&events, "auto_retry_start").is_empty());
    assert_eq!(of_type(&events, "agent_end")[0]["willRetry"], false);
    assert_eq!(mock.chat_requests().len(), 1);

    mock.push(Reply::http_error(503, "busy"));
    mock.push(Reply::text("ok"));
    nova.request_ok(json!({"type": "set_auto_retry", "enabled": true}));
    let events = nova.run_prompt("again");
    assert_eq!(of_type(&events, "auto_retry_end")[0]["success"], true);

    // `retry.enabled: false` in settings starts with it off.
    let mock = MockLlm::start();
    mock.push(Reply::http_error(503, "busy"));
    let mut nova = start(&mock, json!({"enabled": false, "baseDelayMs": 20}));
    let events = nova.run_prompt("hi");
    assert!(of_type(&events, "auto_retry_start").is_empty());
}

#[test]
fn refused_credentials_bad_requests_and_overflow_are_never_retried() {
    for reply in [
        Reply::http_error(401, r#"{"error":"invalid api key"}"#),
        Reply::http_error(400, r#"{"error":"unknown parameter"}"#),
        Reply::http_error(
            400,
            r#"{"error":"This model's maximum context length is 4096 tokens, you requested 9000"}"#,
        ),
    ] {
        let mock = MockLlm::start();
        mock.push(reply);
        let mut nova = Nova::builder()
            .openai(&mock)
            .settings(json!({"retry": fast(), "compaction": {"enabled": false}}))
            .spawn();
        let events = nova.run_prompt("hi");
        assert!(
            of_type(&events, "auto_retry_start").is_empty(),
            "{events:#?}"
        );
        assert_eq!(of_type(&events, "agent_end")[0]["willRetry"], false);
        assert_eq!(mock.chat_requests().len(), 1);
    }
}

#[test]
fn a_stream_cut_after_some_text_is_retried_as_pi_does() {
    let mock = MockLlm::start();
    mock.push(Reply::text("partial answer").text_chunks(4).cut_after(2));
    mock.push(Reply::text("whole answer"));
    let mut nova = start(&mock, fast());
    let events = nova.run_prompt("hi");
    let ends: Vec<&Value> = of_type(&events, "message_end")
        .into_iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .collect();
    assert_eq!(ends[0]["message"]["stopReason"], "error");
    assert!(!ends[0]["message"]["content"].as_array().unwrap().is_empty());
    assert_eq!(ends[1]["message"]["stopReason"], "stop");
    assert_eq!(of_type(&events, "auto_retry_end")[0]["success"], true);
    let requests = mock.chat_requests();
    assert_eq!(requests[0].messages(), requests[1].messages());
    assert_eq!(roles_and_stops(&mut nova), ["user", "assistant:stop"]);
}

/// Issue 30 item 6: a server (or proxy) that reads the whole request and hangs up without
/// answering may have acted on it. The prompt reaches it once with retry off, and once per
/// attempt of the retry policy with retry on (1 + `maxRetries`), never more.
#[test]
fn a_request_read_and_hung_up_on_is_sent_once_per_attempt() {
    for (retry, attempts) in [
        (json!({"enabled": false}), 1),
        (json!({"baseDelayMs": 10, "maxRetries": 2}), 3),
    ] {
        let mock = MockLlm::start();
        for _ in 0..attempts {
            mock.push(Reply::hang_up());
        }
        let mut nova = start(&mock, retry.clone());
        nova.run_prompt("bill me once");
        assert_eq!(
            roles_and_stops(&mut nova),
            ["user", "assistant:error"],
            "{retry}"
        );
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            mock.chat_requests().len(),
            attempts,
            "{retry}: the prompt reached the server this many times"
        );
        assert_eq!(mock.pending_replies(), 0);
    }
}
