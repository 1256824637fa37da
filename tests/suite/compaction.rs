//! Context compaction end to end: manual `compact`, the threshold after a run, recovery from a
//! context-overflow error, abort, and what the next request carries.

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, ollama_models};
use serde_json::{Value, json};

/// A nova whose compaction keeps only ~50 tokens of recent conversation verbatim.
fn nova(mock: &MockLlm, context_window: u64, extra: Value) -> Nova {
    let mut models = ollama_models(mock);
    models["providers"]["mock-ollama"]["models"][0]["contextWindow"] = json!(context_window);
    let mut compaction = json!({"keepRecentTokens": 50});
    if let (Some(c), Some(e)) = (compaction.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    Nova::builder()
        .models_json(models)
        .settings(json!({"compaction": compaction}))
        .args(["--provider", "mock-ollama", "--model", "test-model"])
        .spawn()
}

fn roles(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// Two exchanges with long prompts, so the older one can be summarised.
fn two_exchanges(nova: &mut Nova, mock: &MockLlm) {
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    nova.run_prompt(&"a".repeat(400));
    nova.run_prompt(&"b".repeat(400));
}

#[test]
fn manual_compact_summarises_the_old_part_and_the_next_request_carries_exactly_that() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, 128_000, json!({}));
    two_exchanges(&mut nova, &mock);
    mock.push(Reply::text("SUMMARY OF THE EARLY WORK"));
    let r = nova.request(json!({"type": "compact", "customInstructions": "focus on the a's"}));
    assert_eq!(r["success"], true, "{r}");
    let result = &r["data"];
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("SUMMARY OF THE EARLY WORK")
    );
    assert_eq!(result["firstKeptEntryId"].as_str().unwrap().len(), 8);
    // Both are measured elsewhere: tokensBefore from the replies' usage, estimatedTokensAfter
    // with the system prompt and tools, as Pi counts them.
    assert!(result["tokensBefore"].as_u64().unwrap() > 0, "{result}");
    assert!(
        result["estimatedTokensAfter"].as_u64().unwrap() > 0,
        "{result}"
    );
    let events: Vec<Value> = nova.log().iter().map(|l| l.value.clone()).collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "compaction_start")
        .unwrap();
    assert_eq!(start["reason"], "manual");
    let end = events
        .iter()
        .find(|e| e["type"] == "compaction_end")
        .unwrap();
    assert_eq!(
        (end["aborted"].clone(), end["willRetry"].clone()),
        (json!(false), json!(false))
    );
    assert_eq!(&end["result"], result);

    let summary_request = &mock.chat_requests()[2];
    let prompt = summary_request.messages().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        prompt.contains("<conversation>") && prompt.contains(&"a".repeat(400)),
        "{prompt}"
    );
    assert!(prompt.contains("focus on the a's"));
    assert!(
        summary_request
            .body
            .get("tools")
            .is_none_or(|t| t == &json!([]))
    );

    let messages = nova.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(roles(&messages), ["compactionSummary", "user", "assistant"]);
    assert_eq!(messages[1]["content"][0]["text"], "b".repeat(400));

    mock.push(Reply::text("carry on"));
    nova.run_prompt("next");
    let next = &mock.chat_requests()[3];
    let sent: Vec<(&str, String)> = next
        .messages()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(sent.len(), 5, "{sent:?}");
    assert_eq!(sent[0].0, "system");
    assert!(
        sent[1].0 == "user" && sent[1].1.contains("SUMMARY OF THE EARLY WORK"),
        "{sent:?}"
    );
    assert_eq!(sent[2], ("user", "b".repeat(400)));
    assert_eq!(sent[3], ("assistant", "second answer".to_owned()));
    assert_eq!(sent[4], ("user", "next".to_owned()));
    mock.assert_no_violations();

    // The file keeps the whole history plus the compaction entry.
    let file = nova.request_ok(json!({"type": "get_state"}))["sessionFile"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(&"a".repeat(400)) && text.contains("\"type\":\"compaction\""));
}

/// Pi's count: the last reply's reported usage (input 1,500 + output 62) plus an estimate of
/// what follows it (a user `bash` command: 7 + 3 characters, 3 tokens), not the text alone; and
/// no size at all in `get_session_stats` until a reply after the compaction reports one.
#[test]
fn tokens_before_is_the_last_reported_usage_plus_an_estimate_of_what_follows() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, 128_000, json!({}));
    mock.push(Reply::text("first answer").usage(1000, 50));
    mock.push(Reply::text("second answer").usage(1500, 62));
    nova.run_prompt(&"a".repeat(400));
    nova.run_prompt(&"b".repeat(400));
    let bash = nova.request(json!({"type": "bash", "command": "echo hi"}));
    assert_eq!(bash["data"]["output"], "hi\n", "{bash}");
    mock.push(Reply::text("SUMMARY"));
    let r = nova.request(json!({"type": "compact"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["tokensBefore"], 1565, "{r}");
    let entries = nova.request(json!({"type": "get_entries"}));
    let compaction = entries["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "compaction")
        .unwrap();
    assert_eq!(compaction["tokensBefore"], 1565, "{compaction}");

    // The replies' usage measured the context before the compaction: until a new reply has
    // measured it again its size is unknown, as Pi reports it.
    let stats = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(
        stats["contextUsage"],
        json!({"tokens": null, "contextWindow": 128_000, "percent": null}),
        "{stats}"
    );
    mock.push(Reply::text("third answer").usage(700, 9));
    nova.run_prompt("go on");
    let stats = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(stats["contextUsage"]["tokens"], 709, "{stats}");
}

/// A summary request that fails transiently is sent again under the `retry` settings, each
/// retry announced as Pi 1.6 announces it.
#[test]
fn a_summary_request_that_fails_transiently_is_retried_and_announced() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, 128_000, json!({}));
    two_exchanges(&mut nova, &mock);
    mock.push(Reply::http_error(
        503,
        r#"{"error":{"message":"overloaded"}}"#,
    ));
    mock.push(Reply::text("SUMMARY AFTER A RETRY"));
    let r = nova.request(json!({"type": "compact"}));
    assert_eq!(r["success"], true, "{r}");
    assert!(
        r["data"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("SUMMARY AFTER A RETRY"),
        "{r}"
    );
    let events: Vec<Value> = nova.log().iter().map(|l| l.value.clone()).collect();
    let retry: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["type"].as_str().is_some_and(|t| {
                t.starts_with("summarization_retry") || t.starts_with("compaction")
            })
        })
        .collect();
    let kinds: Vec<&str> = retry.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "compaction_start",
            "summarization_retry_scheduled",
            "summarization_retry_attempt_start",
            "summarization_retry_finished",
            "compaction_end"
        ]
    );
    let scheduled = retry[1];
    assert_eq!(
        (&scheduled["attempt"], &scheduled["maxAttempts"]),
        (&json!(1), &json!(3)),
        "{scheduled}"
    );
    assert!(
        scheduled["errorMessage"].as_str().unwrap().contains("503"),
        "{scheduled}"
    );
    assert_eq!(
        retry[2],
        &json!({"type": "summarization_retry_attempt_start", "source": "compaction",
                "reason": "manual"})
    );
    assert_eq!(retry[3], &json!({"type": "summarization_retry_finished"}));
}

#[test]
fn nothing_to_compact_is_a_clear_failure() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, 128_000, json!({}));
    mock.push(Reply::text("hi"));
    nova.run_prompt("hello");
    let r = nova.request(json!({"type": "compact"}));
    assert_eq!(r["success"], false);
    assert!(
        r["error"].as_str().unwrap().contains("Nothing to compact"),
        "{r}"
    );
    let end = nova
        .log()
        .iter()
        .map(|l| &l.value)
        .find(|e| e["type"] == "compaction_end")
        .unwrap()
        .clone();
    assert_eq!(end["result"], Value::Null);
    assert!(
        end["errorMessage"]
            .as_str()
            .unwrap()
            .contains("Nothing to compact")
    );
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["isCompacting"],
        false
    );
}

#[test]
fn passing_the_threshold_compacts_after_agent_end_once() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, 20_000, json!({"reserveTokens": 16_384}));
    mock.push(Reply::text("first answer"));
    nova.run_prompt(&"a".repeat(400));
    // Past 20,000 − 5,000: the reserve is scaled down to a quarter of the window.
    mock.push(Reply::text("second answer").usage(15_100, 10));
    mock.push(Reply::text("THRESHOLD SUMMARY"));
    let events = nova.run_prompt(&"b".repeat(400));
    let tail: Vec<&str> = types(&events)
        .into_iter()
        .skip_while(|t| *t != "agent_end")
        .collect();
    assert_eq!(
        tail,
        [
            "agent_end",
            "compaction_start",
            "compaction_end",
            "agent_settled"
        ]
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "compaction_end")
        .unwrap();
    assert_eq!(end["reason"], "threshold");
    assert!(
        end["result"]["summary"]
            .as_str()
            .unwrap()
            .contains("THRESHOLD SUMMARY")
    );

    // The session's totals keep every reply, from before the compaction too, and the summary's
    // own usage, as Pi counts them.
    let stats = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(
        (&stats["tokens"]["input"], &stats["tokens"]["output"]),
        (&json!(10 + 15_100 + 10), &json!(5 + 10 + 5))
    );
    assert_eq!(stats["assistantMessages"], 2);

    // The kept reply's usage measured the old context: it does not trigger another compaction.
    mock.push(Reply::text("third answer"));
    let events = nova.run_prompt("c");
    assert!(!types(&events).contains(&"compaction_start"), "{events:#?}");
    assert_eq!(mock.chat_requests().len(), 4);

    nova.request_ok(json!({"type": "set_auto_compaction", "enabled": false}));
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["autoCompactionEnabled"],
        false
    );
    mock.push(Reply::text("fourth answer").usage(19_000, 10));
    let events = nova.run_prompt(&"d".repeat(400));
    assert!(!types(&events).contains(&"compaction_start"));
}

#[test]
fn a_context_overflow_compacts_and_retries_the_turn_once() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, 128_000, json!({}));
    two_exchanges(&mut nova, &mock);
    mock.push(Reply::http_error(
        400,
        r#"{"error":"This model's maximum context length is 4096 tokens, you requested 9000"}"#,
    ));
    mock.push(Reply::text("OVERFLOW SUMMARY"));
    mock.push(Reply::text("recovered"));
    nova.request_ok(json!({"type": "prompt", "message": "c".repeat(400)}));
    let first = nova.events_until("agent_end");
    assert_eq!(first.last().unwrap()["willRetry"], true);
    let failed = first
        .iter()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(failed["message"]["stopReason"], "error");
    let rest = nova.events_until("agent_settled");
    let kinds: Vec<String> = rest
        .iter()
        .filter(|e| e["type"] != "message_update")
        .map(|e| match e["type"].as_str().unwrap() {
            t @ ("message_start" | "message_end") => {
                format!("{t}:{}", e["message"]["role"].as_str().unwrap())
            }
            t => t.to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "compaction_start",
            "compaction_end",
            "agent_start",
            "turn_start",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    assert_eq!(rest[0]["reason"], "overflow");
    assert_eq!(rest[1]["willRetry"], true);
    let retry = &mock.chat_requests()[4];
    let users: Vec<&str> = retry
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users.len(), 2, "{users:?}");
    assert!(users[0].contains("OVERFLOW SUMMARY"));
    assert_eq!(users[1], "c".repeat(400));
    mock.assert_no_violations();
}

#[test]
fn abort_cancels_a_running_compaction() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, 128_000, json!({}));
    two_exchanges(&mut nova, &mock);
    let gate = Gate::new();
    mock.push(
        Reply::text("never finished")
            .text_chunks(2)
            .gate_after(1, &gate),
    );
    nova.send(&json!({"id": "c", "type": "compact"}));
    gate.wait_reached(EVENT_TIMEOUT);
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(
        (state["isCompacting"].clone(), state["isStreaming"].clone()),
        (json!(true), json!(false))
    );
    let r = nova.request(json!({"type": "prompt", "message": "now?"}));
    assert_eq!(r["success"], false, "{r}");
    nova.send(&json!({"id": "stop", "type": "abort"}));
    let end = nova.wait_for_type("compaction_end", EVENT_TIMEOUT);
    assert_eq!(
        (end["aborted"].clone(), end["result"].clone()),
        (json!(true), Value::Null)
    );
    let compact = nova.wait_for(|v| v["id"] == "c", EVENT_TIMEOUT);
    assert_eq!(compact["success"], false);
    nova.wait_for(|v| v["id"] == "stop", EVENT_TIMEOUT);
    let messages = nova.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(roles(&messages), ["user", "assistant", "user", "assistant"]);
    gate.open();
}

#[test]
fn a_small_window_compacts_only_when_it_can_cut() {
    let mock = MockLlm::start();
    let mut models = ollama_models(&mock);
    models["providers"]["mock-ollama"]["models"][0]["contextWindow"] = json!(8192);
    // Pi's default budgets (reserve 16,384, keep 20,000): larger than the whole window.
    let mut nova = Nova::builder()
        .models_json(models)
        .args(["--provider", "mock-ollama", "--model", "test-model"])
        .spawn();

    // Past the scaled threshold (8,192 − 2,048), but one exchange cannot be cut.
    mock.push(Reply::text("one").usage(7_000, 10));
    let events = nova.run_prompt(&"a".repeat(28_000));
    assert!(!types(&events).contains(&"compaction_start"), "{events:#?}");
    // Still nothing before the kept tail: the old, huge message is all there is to keep.
    mock.push(Reply::text("two").usage(7_100, 10));
    let events = nova.run_prompt("short");
    assert!(!types(&events).contains(&"compaction_start"), "{events:#?}");

    // Ordinary turns below the threshold never compact.
    let mut nova = {
        let mut models = ollama_models(&mock);
        models["providers"]["mock-ollama"]["models"][0]["contextWindow"] = json!(8192);
        Nova::builder()
            .models_json(models)
            .args(["--provider", "mock-ollama", "--model", "test-model"])
            .spawn()
    };
    for (i, used) in [1_500, 3_000, 4_500].into_iter().enumerate() {
        mock.push(Reply::text(format!("answer {i}")).usage(used, 10));
        let events = nova.run_prompt(&"m".repeat(6_000));
        assert!(!types(&events).contains(&"compaction_start"), "{events:#?}");
    }
    // Past it, with older turns to summarise: a compaction that works.
    mock.push(Reply::text("answer 3").usage(6_500, 10));
    mock.push(Reply::text("SMALL SUMMARY"));
    let events = nova.run_prompt(&"m".repeat(6_000));
    let end = events
        .iter()
        .find(|e| e["type"] == "compaction_end")
        .unwrap_or_else(|| panic!("no compaction: {events:#?}"));
    assert_eq!(end["reason"], "threshold");
    assert!(end.get("errorMessage").is_none_or(Value::is_null), "{end}");
    // The summary was asked for within the scaled reserve (0.8 × 2,048), and within what the
    // window leaves after the conversation it summarises (Pi's margins).
    let summary_request = mock.chat_requests().pop().unwrap();
    let asked = summary_request.body["options"]["num_predict"]
        .as_u64()
        .unwrap();
    assert!((1..=1638).contains(&asked), "{asked}");
    assert!(
        asked < 1638,
        "an 8,192-token window full of conversation leaves less: {asked}"
    );
    mock.assert_no_violations();
}
