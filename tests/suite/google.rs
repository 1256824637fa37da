//! nova against the mock LLM's Gemini endpoint (`/v1beta/models/<model>:streamGenerateContent`):
//! streaming, thought summaries with their signatures, parallel function calls with ids, usage,
//! the API key header, error mapping and retry, and the built-in `google` provider.

use super::providers::{assert_error_turn, deltas, labels, last_assistant, of_type, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{Nova, google_models};
use serde_json::{Value, json};

/// A models.json whose Gemini 3 model thinks and is priced ($0.5 in, $3 out, $0.05 cached).
fn models(mock: &MockLlm) -> Value {
    let mut models = google_models(mock);
    let model = &mut models["providers"]["mock-google"]["models"][0];
    model["reasoning"] = json!(true);
    model["cost"] = json!({"input": 0.5, "output": 3, "cacheRead": 0.05, "cacheWrite": 0});
    models
}

fn nova(mock: &MockLlm, settings: Value) -> Nova {
    Nova::builder()
        .models_json(models(mock))
        .settings(settings)
        .spawn()
}

const PATH: &str = "/v1beta/models/gemini-3-flash-preview:streamGenerateContent";

#[test]
fn thoughts_text_usage_and_the_key_header() {
    let mock = MockLlm::start();
    let thought = "The user wants a greeting — ✓";
    mock.push(
        Reply::text("Hello from Gemini")
            .thinking(thought)
            .thinking_chunks(3)
            .text_chunks(4)
            .usage(1000, 200)
            .cache_usage(400, 50),
    );
    mock.push(Reply::text("Bye"));
    let mut nova = nova(&mock, json!({}));
    nova.request_ok(json!({"type": "set_thinking_level", "level": "high"}));
    let events = nova.run_prompt("greet me");
    let inner: Vec<String> = labels(&events)
        .into_iter()
        .filter(|s| s.starts_with("text_") || s.starts_with("thinking_"))
        .filter(|s| s != "thinking_level_changed")
        .collect();
    assert_eq!(
        inner,
        [
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
        ]
    );
    assert_eq!(deltas(&events, "thinking_delta"), thought);
    let m = last_assistant(&events);
    assert_eq!(m["api"], "google-generative-ai");
    assert_eq!(m["stopReason"], "stop");
    assert_eq!(m["responseId"], "gemini-mock-0");
    assert_eq!(
        m["content"],
        json!([
            {"type": "thinking", "thinking": thought,
             "thinkingSignature": Reply::google_signature_of(thought)},
            {"type": "text", "text": "Hello from Gemini"},
        ])
    );
    // Cached tokens are not input; thought tokens are output.
    let u = &m["usage"];
    assert_eq!(
        [
            &u["input"],
            &u["output"],
            &u["cacheRead"],
            &u["totalTokens"]
        ],
        [1000, 250, 400, 1650]
    );
    nova.run_prompt("bye");

    let reqs = mock.chat_requests();
    let r = &reqs[0];
    assert_eq!(r.path, format!("{PATH}?alt=sse"));
    assert_eq!(r.header("x-goog-api-key"), Some("mock-key"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(
        r.body["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingLevel": "HIGH"})
    );
    assert!(
        r.body["systemInstruction"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(r.body["contents"][0]["role"], "user");
    // The thought goes back to the model that wrote it, signed (the mock checks the signature).
    let turn = &reqs[1].body["contents"][1];
    assert_eq!(turn["role"], "model");
    assert_eq!(turn["parts"][0]["thought"], true);
    assert_eq!(turn["parts"][1], json!({"text": "Hello from Gemini"}));
    mock.assert_no_violations();
}

#[test]
fn parallel_function_calls_round_trip_with_ids_and_the_step_s_signature() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("Reading both.")
            .tool_call("fc_1", "read", json!({"path": "a.txt"}))
            .tool_call("fc_2", "read", json!({"path": "b.txt"})),
    );
    mock.push(Reply::text("Both read."));
    let mut nova = nova(&mock, json!({}));
    std::fs::write(nova.cwd().join("a.txt"), "alpha").unwrap();
    std::fs::write(nova.cwd().join("b.txt"), "beta").unwrap();
    let events = nova.run_prompt("read a and b");
    let first = &of_type(&events, "message_end")
        .into_iter()
        .find(|v| v["message"]["role"] == "assistant")
        .unwrap()["message"];
    assert_eq!(first["stopReason"], "toolUse");
    let calls: Vec<&Value> = first["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "toolCall")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["id"], "fc_1");
    assert_eq!(calls[0]["arguments"], json!({"path": "a.txt"}));
    assert_eq!(
        calls[0]["thoughtSignature"],
        Reply::google_signature_of("fc_1")
    );
    assert_eq!(calls[1]["id"], "fc_2");
    assert!(calls[1].get("thoughtSignature").is_none(), "{}", calls[1]);
    assert_eq!(of_type(&events, "tool_execution_end").len(), 2);
    assert_eq!(text_of(&last_assistant(&events)), "Both read.");

    let reqs = mock.chat_requests();
    let contents = reqs[1].body["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    let responses: Vec<&Value> = contents[2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["functionResponse"])
        .collect();
    assert_eq!(responses[0]["id"], "fc_1");
    assert_eq!(responses[0]["name"], "read");
    assert!(
        responses[0]["response"]["output"]
            .as_str()
            .unwrap()
            .contains("alpha"),
        "{}",
        responses[0]
    );
    assert_eq!(responses[1]["id"], "fc_2");
    let decls = reqs[0].body["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap();
    assert!(decls.iter().any(|d| d["name"] == "bash"), "{decls:?}");
    mock.assert_no_violations();
}

#[test]
fn errors_name_the_problem_and_the_session_recovers() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, json!({"retry": {"enabled": false}}));
    mock.push(
        Reply::text("partial answer")
            .text_chunks(2)
            .error_event_after(
                1,
                "INVALID_ARGUMENT",
                "Request contains an invalid argument.",
            ),
    );
    let events = nova.run_prompt("one");
    let msg = assert_error_turn(&events);
    assert!(
        msg.contains("Request contains an invalid argument. (INVALID_ARGUMENT)"),
        "{msg}"
    );
    assert_eq!(text_of(&last_assistant(&events)), "partial");

    mock.push(Reply::text("unsafe").finish("SAFETY"));
    let msg = assert_error_turn(&nova.run_prompt("two"));
    assert!(
        msg.contains("SAFETY") && msg.contains("safety filters"),
        "{msg}"
    );

    mock.push(Reply::http_error(
        400,
        r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#,
    ));
    let msg = assert_error_turn(&nova.run_prompt("three"));
    assert!(msg.contains("API key not valid"), "{msg}");

    mock.push(Reply::text("back"));
    let events = nova.run_prompt("four");
    assert_eq!(text_of(&last_assistant(&events)), "back");
    mock.assert_no_violations();
}

#[test]
fn unavailable_mid_stream_and_a_429_with_a_retry_delay_are_retried() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, json!({"retry": {"baseDelayMs": 10}}));
    mock.push(
        Reply::text("partial answer")
            .text_chunks(2)
            .error_event_after(1, "UNAVAILABLE", "The model is overloaded."),
    );
    mock.push(Reply::http_error(
        429,
        r#"{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.05s"}]}}"#,
    ));
    mock.push(Reply::text("made it"));
    let events = nova.run_prompt("one");
    let starts = of_type(&events, "auto_retry_start");
    assert_eq!(starts.len(), 2, "{events:?}");
    assert_eq!(text_of(&last_assistant(&events)), "made it");
    assert_eq!(mock.chat_requests().len(), 3);
    mock.assert_no_violations();
}

#[test]
fn builtin_provider_needs_gemini_api_key_and_follows_models_json() {
    let mock = MockLlm::start();
    let override_only = json!({"providers": {"google": {"baseUrl": mock.base_url_google()}}});
    let mut without = Nova::builder().models_json(override_only.clone()).spawn();
    let list = without.request_ok(json!({"type": "get_available_models"}));
    assert_eq!(list["models"], json!([]), "no key, no built-in models");

    let mut nova = Nova::builder()
        .models_json(override_only)
        .env("GEMINI_API_KEY", "gm-env-key")
        .args(["--model", "gemini-2.5-flash", "--thinking", "medium"])
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let ids: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"gemini-2.5-pro") && ids.contains(&"gemini-3-flash-preview"),
        "{ids:?}"
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["provider"], "google");
    assert_eq!(state["model"]["api"], "google-generative-ai");

    mock.push(Reply::text("budget"));
    nova.run_prompt("hi");
    let r = &mock.chat_requests()[0];
    assert_eq!(
        r.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(r.header("x-goog-api-key"), Some("gm-env-key"));
    // Gemini 2.5 thinks in token budgets: Pi's 8192 for medium on Flash.
    assert_eq!(
        r.body["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingBudget": 8192})
    );
    mock.assert_no_violations();
}
