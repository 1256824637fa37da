//! What servers disagree about, end to end against the mock: the OpenAI-compatible `compat`
//! dialects, token counts and cost in both wire formats, counts a server left out, and a prompt
//! Ollama cut.

use super::providers::{Format, last_assistant, provider_entry};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};

/// Per-million prices: $3 input, $15 output.
fn priced_model(extra: Value) -> Value {
    let mut model = json!({"id": "test-model", "contextWindow": 128_000, "maxTokens": 4096,
                           "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 0}});
    if let (Some(m), Some(e)) = (model.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    model
}

fn nova_with(f: Format, provider: Value) -> Nova {
    Nova::builder()
        .models_json(json!({"providers": {f.provider(): provider}}))
        .args(["--provider", f.provider(), "--model", "test-model"])
        .spawn()
}

fn stats(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_session_stats"}))
}

#[test]
fn compat_shapes_openai_requests() {
    let mock = MockLlm::start();
    let f = Format::OpenAi;
    let mut provider = provider_entry(
        f,
        &f.base_url(&mock),
        json!([priced_model(json!({
            "reasoning": true,
            "compat": {"supportsDeveloperRole": true, "thinkingFormat": "qwen"},
        }))]),
    );
    provider["compat"] = json!({
        "maxTokensField": "max_tokens", "supportsStore": false, "supportsDeveloperRole": false,
        "supportsUsageInStreaming": false, "requiresToolResultName": true,
        "supportsStrictMode": true,
    });
    let mut nova = nova_with(f, provider);

    // The merged object is echoed on the model, as Pi does.
    let model = &nova.request_ok(json!({"type": "get_state"}))["model"];
    assert_eq!(model["compat"]["supportsDeveloperRole"], true);
    assert_eq!(model["compat"]["maxTokensField"], "max_tokens");

    mock.push(Reply::new().tool_call("c1", "ls", json!({})));
    mock.push(Reply::text("done"));
    let events = nova.run_prompt("list the files");
    let chat = mock.chat_requests();
    let first = &chat[0].body;
    assert_eq!(first["messages"][0]["role"], "developer");
    assert_eq!(first["max_tokens"], 4096);
    assert_eq!(first["enable_thinking"], true);
    assert_eq!(first["reasoning_effort"], "medium");
    for absent in ["max_completion_tokens", "store", "stream_options"] {
        assert!(first.get(absent).is_none(), "{absent} in {first}");
    }
    assert_eq!(first["tools"][0]["function"]["strict"], false);
    let tool = chat[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(
        (&tool["name"], &tool["tool_call_id"]),
        (&json!("ls"), &json!("c1"))
    );

    // Without a usage chunk the reply is counted with nova's estimate, never 0.
    let usage = &last_assistant(&events)["usage"];
    assert!(usage["input"].as_u64().unwrap() > 100, "{usage}");
    assert_eq!(usage["output"], 1);
    let stats = stats(&mut nova);
    assert!(stats["tokens"]["total"].as_u64().unwrap() > 200, "{stats}");
    assert!(
        stats["contextUsage"]["tokens"].as_u64().unwrap() > 100,
        "{stats}"
    );
    mock.assert_no_violations();
}

#[test]
fn openai_defaults_for_a_local_server() {
    let mock = MockLlm::start();
    let f = Format::OpenAi;
    let provider = provider_entry(f, &f.base_url(&mock), json!([priced_model(json!({}))]));
    let mut nova = nova_with(f, provider);
    mock.push(Reply::text("hi"));
    nova.run_prompt("hello");
    let body = &mock.chat_requests()[0].body;
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["store"], false);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_completion_tokens"], 4096);
    assert!(
        body["tools"][0]["function"].get("strict").is_none(),
        "{body}"
    );
}

/// Every reply priced from the model's per-million costs, and the session's totals.
fn tokens_and_cost(f: Format) {
    let mock = MockLlm::start();
    let provider = provider_entry(f, &f.base_url(&mock), json!([priced_model(json!({}))]));
    let mut nova = nova_with(f, provider);
    for _ in 0..2 {
        mock.push(Reply::text("answer").usage(1000, 200));
        let events = nova.run_prompt("question");
        let usage = &last_assistant(&events)["usage"];
        assert_eq!(
            (
                &usage["input"],
                &usage["output"],
                &usage["cacheRead"],
                &usage["cacheWrite"],
                &usage["totalTokens"]
            ),
            (
                &json!(1000),
                &json!(200),
                &json!(0),
                &json!(0),
                &json!(1200)
            )
        );
        let cost = &usage["cost"];
        assert!(
            (cost["input"].as_f64().unwrap() - 0.003).abs() < 1e-12,
            "{cost}"
        );
        assert!(
            (cost["output"].as_f64().unwrap() - 0.003).abs() < 1e-12,
            "{cost}"
        );
        assert!(
            (cost["total"].as_f64().unwrap() - 0.006).abs() < 1e-12,
            "{cost}"
        );
    }
    let stats = stats(&mut nova);
    assert_eq!(
        stats["tokens"],
        json!({"input": 2000, "output": 400, "cacheRead": 0, "cacheWrite": 0, "total": 2400})
    );
    assert!(
        (stats["cost"].as_f64().unwrap() - 0.012).abs() < 1e-12,
        "{stats}"
    );
    assert_eq!(stats["contextUsage"]["tokens"], 1200);
}

#[test]
fn tokens_and_cost_ollama() {
    tokens_and_cost(Format::Ollama);
}

#[test]
fn tokens_and_cost_openai() {
    tokens_and_cost(Format::OpenAi);
}

#[test]
fn ollama_without_counts_is_estimated() {
    let mock = MockLlm::start();
    let f = Format::Ollama;
    let provider = provider_entry(f, &f.base_url(&mock), json!([priced_model(json!({}))]));
    let mut nova = nova_with(f, provider);
    mock.push(Reply::text("twelve chars").usage(0, 0));
    let events = nova.run_prompt("hello");
    let usage = &last_assistant(&events)["usage"];
    assert!(usage["input"].as_u64().unwrap() > 100, "{usage}");
    assert_eq!(usage["output"], 3);
    assert!(usage["cost"]["total"].as_f64().unwrap() > 0.0, "{usage}");
    let stats = stats(&mut nova);
    assert_eq!(stats["tokens"]["total"], usage["totalTokens"]);
    assert!(
        stats["contextUsage"]["tokens"].as_u64().unwrap() > 100,
        "{stats}"
    );
}

#[test]
fn a_prompt_ollama_cut_is_reported() {
    let mock = MockLlm::start();
    let f = Format::Ollama;
    let provider = provider_entry(f, &f.base_url(&mock), json!([priced_model(json!({}))]));
    let mut nova = nova_with(f, provider);

    // About 10,000 tokens sent, 2,048 read, and nothing came back: the turn fails saying why.
    mock.push(Reply::new().usage(2048, 0));
    let events = nova.run_prompt(&"word ".repeat(8_000));
    let reply = last_assistant(&events);
    assert_eq!(reply["stopReason"], "error");
    let error = reply["errorMessage"].as_str().unwrap();
    assert!(
        error.contains("Ollama read only 2048 prompt tokens"),
        "{error}"
    );
    assert!(error.contains("contextWindow"), "{error}");
    nova.stderr_with("nova: warning: Ollama read only 2048 prompt tokens");

    // A reply that did come back stands; the warning is not repeated.
    mock.push(Reply::text("partial").usage(2048, 3));
    let events = nova.run_prompt("again");
    assert_eq!(last_assistant(&events)["stopReason"], "stop");
    assert_eq!(nova.stderr().matches("Ollama read only").count(), 1);
}
