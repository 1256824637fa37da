//! nova against the mock LLM's OpenAI Responses endpoint (`/v1/responses`): text and usage with
//! cached and reasoning tokens, reasoning summaries whose encrypted items go back on the next
//! turn, parallel tool calls, and error events and HTTP errors mapped and classified.

use super::providers::{assert_error_turn, deltas, labels, last_assistant, of_type, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};

/// A models.json whose `mock-openai` provider serves `test-model` over Responses.
fn models(mock: &MockLlm, extra: Value) -> Value {
    let mut model = json!({"id": "test-model", "contextWindow": 400000, "maxTokens": 128000,
        "cost": {"input": 1.25, "output": 10, "cacheRead": 0.125, "cacheWrite": 0}});
    for (k, v) in extra.as_object().unwrap() {
        model[k] = v.clone();
    }
    json!({"providers": {"mock-openai": {
        "baseUrl": mock.base_url_openai(), "api": "openai-responses",
        "apiKey": "sk-mock-responses", "models": [model],
    }}})
}

fn nova(mock: &MockLlm, extra: Value, settings: Value) -> Nova {
    Nova::builder()
        .models_json(models(mock, extra))
        .settings(settings)
        .spawn()
}

#[test]
fn text_and_usage_with_cached_and_reasoning_tokens() {
    let mock = MockLlm::start();
    let text = "Hello from Responses — ✓";
    mock.push(
        Reply::text(text)
            .text_chunks(4)
            .usage(1000, 200)
            .cache_usage(3000, 50)
            .split_writes(),
    );
    let mut nova = nova(&mock, json!({}), json!({}));
    let events = nova.run_prompt("say hello");
    assert_eq!(deltas(&events, "text_delta"), text);
    let m = last_assistant(&events);
    assert_eq!(m["api"], "openai-responses");
    assert_eq!(m["stopReason"], "stop");
    assert_eq!(m["responseId"], "resp_mock_0");
    assert_eq!(text_of(&m), text);
    assert_eq!(
        m["content"][0]["textSignature"], r#"{"v":1,"id":"msg_0"}"#,
        "the message item's id is kept to send back"
    );
    let u = &m["usage"];
    assert_eq!(
        [
            &u["input"],
            &u["output"],
            &u["cacheRead"],
            &u["totalTokens"]
        ],
        [1000, 200, 3000, 4200]
    );
    let close = |v: &Value, want: f64| {
        let got = v.as_f64().unwrap();
        assert!((got - want).abs() < 1e-9, "{got} != {want}");
    };
    close(&u["cost"]["total"], 0.00125 + 0.002 + 0.000375);

    let reqs = mock.chat_requests();
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/responses");
    assert_eq!(r.header("authorization"), Some("Bearer sk-mock-responses"));
    assert_eq!(r.body["store"], false);
    assert_eq!(
        r.body["input"][0],
        json!({"role": "system", "content": r.body["input"][0]["content"]})
    );
    assert!(r.body.get("reasoning").is_none(), "not a reasoning model");
    mock.assert_no_violations();
}

#[test]
fn encrypted_reasoning_goes_back_on_the_next_turn() {
    let mock = MockLlm::start();
    let thought = "The user wants a greeting.";
    mock.push(Reply::text("Hi!").thinking(thought).thinking_chunks(3));
    mock.push(Reply::text("Bye!"));
    let mut nova = nova(&mock, json!({"reasoning": true}), json!({}));
    nova.request_ok(json!({"type": "set_thinking_level", "level": "high"}));
    let events = nova.run_prompt("greet me");
    assert_eq!(deltas(&events, "thinking_delta"), thought);
    let m = last_assistant(&events);
    let item: Value =
        serde_json::from_str(m["content"][0]["thinkingSignature"].as_str().unwrap()).unwrap();
    assert_eq!(item["type"], "reasoning");
    assert_eq!(item["encrypted_content"], Reply::encrypted_of(thought));
    nova.run_prompt("bye");

    let reqs = mock.chat_requests();
    assert_eq!(
        reqs[0].body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(
        reqs[0].body["include"],
        json!(["reasoning.encrypted_content"])
    );
    assert!(reqs[0].body.get("previous_response_id").is_none());
    let input = reqs[1].body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["developer", "user", "reasoning", "message", "user"],
        "{input:?}"
    );
    assert_eq!(input[2], item, "the reasoning item goes back as it came");
    assert_eq!(input[3]["id"], "msg_1");

    // Off asks for no reasoning.
    nova.request_ok(json!({"type": "set_thinking_level", "level": "off"}));
    mock.push(Reply::text("ok"));
    nova.run_prompt("plain");
    let last = mock.chat_requests().pop().unwrap();
    assert_eq!(last.body["reasoning"], json!({"effort": "none"}));
    mock.assert_no_violations();
}

#[test]
fn parallel_tool_calls_round_trip() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("Let me look.")
            .tool_call("call_a", "bash", json!({"command": "echo one"}))
            .tool_call("call_b", "bash", json!({"command": "echo two"}))
            .arg_fragments(4),
    );
    mock.push(Reply::text("Both ran."));
    let mut nova = nova(&mock, json!({}), json!({}));
    let events = nova.run_prompt("run two commands");
    let first = &of_type(&events, "message_end")
        .into_iter()
        .find(|v| v["message"]["role"] == "assistant")
        .unwrap()["message"];
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(
        first["content"][1],
        json!({"type": "toolCall", "id": "call_a|fc_call_a", "name": "bash",
               "arguments": {"command": "echo one"}})
    );
    let ends = of_type(&events, "tool_execution_end");
    assert_eq!(ends.len(), 2);
    assert!(ends.iter().all(|e| e["isError"] == false), "{ends:?}");
    assert_eq!(text_of(&last_assistant(&events)), "Both ran.");
    let l = labels(&events);
    assert_eq!(l.iter().filter(|s| *s == "toolcall_start").count(), 2);

    let reqs = mock.chat_requests();
    let input = reqs[1].body["input"].as_array().unwrap();
    let calls: Vec<&Value> = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .collect();
    assert_eq!(
        calls[0],
        &json!({"type": "function_call", "id": "fc_call_a", "call_id": "call_a",
                "name": "bash", "arguments": "{\"command\":\"echo one\"}"})
    );
    let outputs: Vec<&Value> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .collect();
    assert_eq!(outputs.len(), 2);
    assert_eq!(outputs[0]["call_id"], "call_a");
    assert!(
        outputs[1]["output"].as_str().unwrap().contains("two"),
        "{}",
        outputs[1]
    );
    let tools = reqs[0].body["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["type"] == "function" && t["name"] == "bash")
    );
    mock.assert_no_violations();
}

#[test]
fn errors_are_classified_and_the_session_recovers() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, json!({}), json!({"retry": {"enabled": false}}));
    mock.push(
        Reply::text("partial answer")
            .text_chunks(2)
            .error_event_after(3, "server_error", "The server had an error."),
    );
    let events = nova.run_prompt("one");
    let msg = assert_error_turn(&events);
    assert_eq!(
        msg,
        "provider error: Error Code server_error: The server had an error."
    );
    assert_eq!(text_of(&last_assistant(&events)), "partial");

    mock.push(Reply::http_error(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    ));
    let msg = assert_error_turn(&nova.run_prompt("two"));
    assert!(msg.starts_with("HTTP 401 from "), "{msg}");
    assert!(msg.contains("/v1/responses"), "{msg}");

    mock.push(Reply::text("cut short").finish("length"));
    let events = nova.run_prompt("three");
    assert_eq!(last_assistant(&events)["stopReason"], "length");

    mock.push(Reply::text("back"));
    let events = nova.run_prompt("four");
    assert_eq!(text_of(&last_assistant(&events)), "back");
    mock.assert_no_violations();
}

#[test]
fn a_retryable_error_event_is_retried_after_retry_after() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, json!({}), json!({"retry": {"baseDelayMs": 10}}));
    mock.push(Reply::text("x").error_event_after(2, "rate_limit_exceeded", "Slow down."));
    mock.push(
        Reply::http_error(429, r#"{"error":{"message":"Rate limit reached"}}"#)
            .header("retry-after-ms", "20"),
    );
    mock.push(Reply::text("made it"));
    let events = nova.run_prompt("one");
    assert_eq!(of_type(&events, "auto_retry_start").len(), 2, "{events:?}");
    assert_eq!(text_of(&last_assistant(&events)), "made it");
    mock.assert_no_violations();
}

#[test]
fn a_context_overflow_event_reads_as_overflow() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, json!({}), json!({}));
    mock.push(Reply::text("first answer"));
    nova.run_prompt("one");
    mock.push(Reply::new().error_event_after(
        1,
        "context_length_exceeded",
        "Your input exceeds the context window of this model.",
    ));
    nova.request_ok(json!({"type": "prompt", "message": "two"}));
    let first = nova.events_until("agent_end");
    assert_eq!(first.last().unwrap()["willRetry"], true, "{first:?}");
    // The agent compacts for an overflow (here there is too little to compact).
    let rest = nova.events_until("agent_settled");
    let compaction = rest
        .iter()
        .find(|e| e["type"] == "compaction_start")
        .expect("compaction_start");
    assert_eq!(compaction["reason"], "overflow");
    mock.assert_no_violations();
}

#[test]
fn the_builtin_catalog_lists_only_providers_with_a_key() {
    let mock = MockLlm::start();
    let override_only = json!({"providers": {"openai": {"baseUrl": mock.base_url_openai()}}});
    let providers = |nova: &mut Nova| {
        let list = nova.request_ok(json!({"type": "get_available_models"}));
        let mut names: Vec<String> = list["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["provider"].as_str().unwrap().to_owned())
            .collect();
        names.dedup();
        names
    };
    let mut without = Nova::builder().models_json(override_only.clone()).spawn();
    assert_eq!(
        providers(&mut without),
        Vec::<String>::new(),
        "no key, no models"
    );

    let mut nova = Nova::builder()
        .models_json(override_only.clone())
        .env("OPENAI_API_KEY", "sk-openai-env")
        .env("GROQ_API_KEY", "gsk-env")
        .env("META_API_KEY", "meta-env")
        .args(["--model", "openai/gpt-5.5", "--thinking", "low"])
        .spawn();
    assert_eq!(providers(&mut nova), ["openai", "groq", "meta"]);
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["api"], "openai-responses");
    assert_eq!(state["model"]["baseUrl"], mock.base_url_openai());
    assert_eq!(state["model"]["contextWindow"], 272000);

    mock.push(Reply::text("from the catalog"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "from the catalog");
    let r = &mock.chat_requests()[0];
    assert_eq!(r.path, "/v1/responses");
    assert_eq!(r.header("authorization"), Some("Bearer sk-openai-env"));
    assert_eq!(r.body["model"], "gpt-5.5");
    assert_eq!(r.body["reasoning"]["effort"], "low");
    mock.assert_no_violations();
}

/// Azure OpenAI (`azure-openai-responses`): the built-in `azure` provider, enabled by
/// `AZURE_OPENAI_API_KEY`, sends the key as `api-key` to `<base>/responses?api-version=…` and
/// names the deployment as the model; the reply is the Responses stream.
#[test]
fn azure_sends_the_deployment_and_its_api_key() {
    let mock = MockLlm::start();
    let base = format!("http://127.0.0.1:{}/openai/v1", mock.port());
    mock.push(
        Reply::text("Hello from Azure")
            .thinking("plan")
            .usage(30, 7),
    );
    mock.push(Reply::text("again"));
    let mut nova = Nova::builder()
        .env("AZURE_OPENAI_API_KEY", "azure-secret-key")
        .env("AZURE_OPENAI_BASE_URL", &base)
        .env("AZURE_OPENAI_API_VERSION", "2025-04-01-preview")
        .env(
            "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
            "gpt-5=other, gpt-5.5=prod-55",
        )
        .args(["--model", "azure/gpt-5.5", "--thinking", "high"])
        .spawn();
    let events = nova.run_prompt("hi");
    let m = last_assistant(&events);
    assert_eq!(m["api"], "azure-openai-responses");
    assert_eq!(m["provider"], "azure");
    assert_eq!(m["model"], "gpt-5.5");
    assert_eq!(text_of(&m), "Hello from Azure");
    nova.run_prompt("again");
    let reqs = mock.chat_requests();
    let r = &reqs[0];
    assert_eq!(
        r.path,
        "/openai/v1/responses?api-version=2025-04-01-preview"
    );
    assert_eq!(r.header("api-key"), Some("azure-secret-key"));
    assert!(r.header("authorization").is_none());
    assert_eq!(r.body["model"], "prod-55");
    assert_eq!(r.body["reasoning"]["effort"], "high");
    // The reasoning item goes back to the same deployment on the next turn.
    let kinds: Vec<&str> = reqs[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    assert!(kinds.contains(&"reasoning"), "{kinds:?}");
    mock.assert_no_violations();

    // Without an address, the turn fails naming what to set.
    let mut lost = Nova::builder()
        .env("AZURE_OPENAI_API_KEY", "azure-secret-key")
        .args(["--model", "azure/gpt-5.5"])
        .spawn();
    let msg = assert_error_turn(&lost.run_prompt("hi"));
    assert!(msg.contains("AZURE_OPENAI_RESOURCE_NAME"), "{msg}");
}
