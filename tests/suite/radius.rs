//! nova against the mock LLM speaking Pi's own messages protocol (`pi-messages`, the Radius
//! gateway's): the built-in `radius` provider from `RADIUS_API_KEY`, thinking with signatures,
//! streamed tool calls run and sent back in Pi's shapes, usage priced by nova, and errors mid-stream
//! classified and retried.

use super::providers::{assert_error_turn, deltas, last_assistant, of_type, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::json;

fn nova(mock: &MockLlm, settings: serde_json::Value) -> Nova {
    Nova::builder()
        .models_json(json!({"providers": {"radius": {"baseUrl": mock.base_url_pi()}}}))
        .env("RADIUS_API_KEY", "rad-env-key")
        .settings(settings)
        .args(["--model", "radius/balanced", "--thinking", "high"])
        .spawn()
}

#[test]
fn builtin_radius_streams_thinking_text_and_tool_calls() {
    let mock = MockLlm::start();
    let mut without = Nova::builder()
        .models_json(json!({"providers": {"radius": {"baseUrl": mock.base_url_pi()}}}))
        .spawn();
    let list = without.request_ok(json!({"type": "get_available_models"}));
    assert_eq!(list["models"], json!([]), "no key, no built-in models");

    let thought = "Plan: list the files — ✓";
    mock.push(
        Reply::text("Looking")
            .thinking(thought)
            .thinking_chunks(3)
            .tool_call("call-1", "ls", json!({"path": "."}))
            .usage(1000, 200)
            .cache_usage(4000, 0),
    );
    mock.push(Reply::text("Done: héllo").text_chunks(4));
    let mut nova = nova(&mock, json!({}));
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["provider"], "radius");
    assert_eq!(state["model"]["api"], "pi-messages");
    let events = nova.run_prompt("list files");
    assert_eq!(deltas(&events, "thinking_delta"), thought);
    assert_eq!(text_of(&last_assistant(&events)), "Done: héllo");
    let replies: Vec<_> = of_type(&events, "message_end")
        .into_iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .collect();
    let first = &replies[0]["message"];
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(first["responseId"], "pi-mock-0");
    assert_eq!(
        first["content"][0],
        json!({"type": "thinking", "thinking": thought,
               "thinkingSignature": Reply::signature_of(thought)})
    );
    assert_eq!(first["content"][2]["arguments"], json!({"path": "."}));
    // Priced from the catalog's rates for `balanced`: $3 in, $15 out, $0.3 cached.
    let cost = first["usage"]["cost"]["total"].as_f64().unwrap();
    assert!((cost - (0.003 + 0.003 + 0.0012)).abs() < 1e-9, "{cost}");

    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 2);
    let r = &requests[1];
    assert_eq!(r.path, "/pi/v1/messages");
    assert_eq!(r.header("authorization"), Some("Bearer rad-env-key"));
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    assert_eq!(r.body["model"], "balanced");
    assert_eq!(r.body["options"]["reasoning"], "high");
    let sent = r.body["context"]["messages"].as_array().unwrap();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[2]["role"], "toolResult");
    assert_eq!(sent[2]["toolCallId"], "call-1");
    assert!(
        r.body["context"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "bash")
    );
    mock.assert_no_violations();
}

#[test]
fn gateway_errors_are_named_classified_and_retried() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, json!({"retry": {"baseDelayMs": 10}}));
    mock.push(
        Reply::text("partial answer")
            .text_chunks(2)
            .error_event_after(3, "", "503 Service Unavailable: upstream overloaded"),
    );
    mock.push(Reply::text("made it"));
    let events = nova.run_prompt("one");
    assert_eq!(of_type(&events, "auto_retry_start").len(), 1, "{events:?}");
    assert_eq!(text_of(&last_assistant(&events)), "made it");

    mock.push(Reply::text("x").error_event_after(1, "", "the model refused: policy"));
    let msg = assert_error_turn(&nova.run_prompt("two"));
    assert!(msg.contains("the model refused: policy"), "{msg}");

    mock.push(Reply::http_error(
        401,
        r#"{"error":{"message":"Invalid Radius API key","code":"unauthorized"}}"#,
    ));
    let msg = assert_error_turn(&nova.run_prompt("three"));
    assert!(msg.contains("Invalid Radius API key"), "{msg}");

    mock.push(Reply::text("back"));
    assert_eq!(text_of(&last_assistant(&nova.run_prompt("four"))), "back");
    mock.assert_no_violations();
}

#[test]
fn a_stored_gateway_catalog_replaces_the_baseline_offline() {
    let mock = MockLlm::start();
    let store = json!({"radius": {"checkedAt": 1, "models": [
        {"id": "org-only", "name": "Org Only", "reasoning": false, "input": ["text"],
         "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
         "contextWindow": 100000, "maxTokens": 8000, "api": "pi-messages",
         "provider": "radius", "baseUrl": "https://gw.radius.example/v1"}]}});
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"radius": {"baseUrl": mock.base_url_pi()}}}))
        .agent_file("models-store.json", store.to_string())
        .env("RADIUS_API_KEY", "rad-env-key")
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let radius: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "radius")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(radius, ["org-only"]);
    mock.push(Reply::text("from the org model"));
    nova.request_ok(json!({"type": "set_model", "provider": "radius", "modelId": "org-only"}));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "from the org model");
    assert_eq!(mock.chat_requests()[0].body["model"], "org-only");
}
