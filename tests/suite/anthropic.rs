//! nova against the mock LLM's Anthropic Messages endpoint (`/v1/messages`): streaming, tool
//! calls, thinking with signatures, images, usage and cost with prompt caching, auth headers,
//! error mapping, and the built-in `anthropic` provider.

use super::providers::{
    PNG_1X1, assert_error_turn, deltas, labels, last_assistant, of_type, text_of, updates,
};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};

/// A models.json whose `mock-anthropic` provider serves `test-model` with `extra` fields.
fn models(mock: &MockLlm, extra: Value) -> Value {
    let mut model = json!({"id": "test-model", "contextWindow": 200000, "maxTokens": 64000,
        "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}});
    for (k, v) in extra.as_object().unwrap() {
        model[k] = v.clone();
    }
    json!({"providers": {"mock-anthropic": {
        "baseUrl": mock.base_url_anthropic(), "api": "anthropic-messages",
        "apiKey": "sk-ant-mock", "headers": {"X-Proxy-Tag": "nova-test"},
        "models": [model],
    }}})
}

fn nova(mock: &MockLlm, extra: Value) -> Nova {
    Nova::builder().models_json(models(mock, extra)).spawn()
}

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap();
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

#[test]
fn text_usage_cost_and_headers() {
    let mock = MockLlm::start();
    let text = "Hello from Claude — ✓";
    mock.push(
        Reply::text(text)
            .text_chunks(4)
            .usage(1000, 200)
            .cache_usage(5000, 400),
    );
    let mut nova = nova(&mock, json!({}));
    let events = nova.run_prompt("say hello");
    assert_eq!(
        labels(&events),
        [
            "agent_start",
            "turn_start",
            "message_start(user)",
            "message_end(user)",
            "message_start(assistant)",
            "text_start",
            "text_delta",
            "text_end",
            "message_end(assistant)",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(deltas(&events, "text_delta"), text);
    let m = last_assistant(&events);
    assert_eq!(m["api"], "anthropic-messages");
    assert_eq!(m["stopReason"], "stop");
    assert_eq!(text_of(&m), text);
    let u = &m["usage"];
    assert_eq!(
        [
            &u["input"],
            &u["output"],
            &u["cacheRead"],
            &u["cacheWrite"],
            &u["totalTokens"]
        ],
        [1000, 200, 5000, 400, 6600]
    );
    // $3, $15, $0.30 and $3.75 per million tokens.
    close(&u["cost"]["input"], 0.003);
    close(&u["cost"]["output"], 0.003);
    close(&u["cost"]["cacheRead"], 0.0015);
    close(&u["cost"]["cacheWrite"], 0.0015);
    close(&u["cost"]["total"], 0.009);

    mock.push(Reply::text("again").usage(10, 5).cache_usage(6000, 0));
    nova.run_prompt("once more");
    let stats = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(
        stats["tokens"],
        json!({"input": 1010, "output": 205, "cacheRead": 11000, "cacheWrite": 400, "total": 12615})
    );
    close(&stats["cost"], 0.009 + 0.00003 + 0.000075 + 0.0018);

    let reqs = mock.chat_requests();
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("sk-ant-mock"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("x-proxy-tag"), Some("nova-test"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.body["model"], "test-model");
    // The model's whole output budget, as Pi 1.6 asks for it (the conversation leaves room).
    assert_eq!(r.body["max_tokens"], 64000);
    assert_eq!(
        r.body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(r.body.get("thinking").is_none(), "not a reasoning model");
    // The second request marks only its newest user message for the cache.
    let msgs = reqs[1].messages();
    assert_eq!(msgs.len(), 3);
    assert!(msgs[0]["content"][0].get("cache_control").is_none());
    assert_eq!(
        msgs[2]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    mock.assert_no_violations();
}

#[test]
fn tool_call_round_trip() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("Let me run it.")
            .tool_call("toolu_01A", "bash", json!({"command": "echo hi"}))
            .arg_fragments(4),
    );
    mock.push(Reply::text("It printed hi."));
    let mut nova = nova(&mock, json!({}));
    let events = nova.run_prompt("run echo hi");
    let first = &of_type(&events, "message_end")
        .into_iter()
        .find(|v| v["message"]["role"] == "assistant")
        .unwrap()["message"];
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(
        first["content"][1],
        json!({"type": "toolCall", "id": "toolu_01A", "name": "bash",
               "arguments": {"command": "echo hi"}})
    );
    let end = of_type(&events, "tool_execution_end")[0];
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(text_of(&last_assistant(&events)), "It printed hi.");

    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].messages();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(
        msgs[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_01A", "name": "bash",
               "input": {"command": "echo hi"}})
    );
    let result = &msgs[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01A");
    assert_eq!(result["is_error"], false);
    assert!(
        result["content"].as_str().unwrap().contains("hi"),
        "{result}"
    );
    assert_eq!(result["cache_control"], json!({"type": "ephemeral"}));
    let tools = reqs[0].body["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "bash" && t["input_schema"]["type"] == "object")
    );
    mock.assert_no_violations();
}

#[test]
fn thinking_signatures_go_back() {
    let mock = MockLlm::start();
    let thought = "The user wants a greeting.";
    mock.push(
        Reply::text("Hi!")
            .thinking(thought)
            .thinking_chunks(3)
            .redacted_thinking("EmwKAhgBEgy3vaOpaque"),
    );
    mock.push(Reply::text("Bye!"));
    let mut nova = nova(&mock, json!({"reasoning": true}));
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
            "thinking_start",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
        ]
    );
    assert_eq!(deltas(&events, "thinking_delta"), thought);
    assert_eq!(
        updates(&events, "thinking_end")[1]["content"],
        "[Reasoning redacted]"
    );
    let m = last_assistant(&events);
    assert_eq!(
        m["content"],
        json!([
            {"type": "thinking", "thinking": thought, "thinkingSignature": Reply::signature_of(thought)},
            {"type": "thinking", "thinking": "[Reasoning redacted]",
             "thinkingSignature": "EmwKAhgBEgy3vaOpaque", "redacted": true},
            {"type": "text", "text": "Hi!"},
        ])
    );
    nova.run_prompt("bye");

    let reqs = mock.chat_requests();
    assert_eq!(
        reqs[0].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384, "display": "summarized"})
    );
    // The thinking budget fits inside the model's output budget, as in Pi 1.6.
    assert_eq!(reqs[0].body["max_tokens"], 64000);
    assert_eq!(
        reqs[1].messages()[1]["content"],
        json!([
            {"type": "thinking", "thinking": thought, "signature": Reply::signature_of(thought)},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3vaOpaque"},
            {"type": "text", "text": "Hi!"},
        ])
    );
    nova.request_ok(json!({"type": "set_thinking_level", "level": "off"}));
    mock.push(Reply::text("ok"));
    nova.run_prompt("no thinking");
    assert_eq!(
        mock.chat_requests()[2].body["thinking"],
        json!({"type": "disabled"})
    );
    mock.assert_no_violations();
}

#[test]
fn split_writes_match_unsplit() {
    let mock = MockLlm::start();
    let reply = || {
        Reply::text("héllo wörld — ✓ 日本語 🎉")
            .thinking("ünïcode thöughts")
            .tool_call("toolu_9", "bash", json!({"command": "true"}))
            .text_chunks(5)
            .usage(31, 17)
            .cache_usage(3, 4)
    };
    mock.push(reply());
    mock.push(Reply::text("done"));
    mock.push(reply().split_writes());
    mock.push(Reply::text("done"));
    let mut nova = nova(&mock, json!({"reasoning": true}));
    let whole = nova.run_prompt("one");
    let split = nova.run_prompt("two");
    let first = |events: &[Value]| {
        of_type(events, "message_end")
            .into_iter()
            .find(|v| v["message"]["role"] == "assistant")
            .unwrap()["message"]
            .clone()
    };
    let (a, b) = (first(&whole), first(&split));
    assert_eq!(a["stopReason"], "toolUse");
    for key in ["content", "usage", "stopReason"] {
        assert_eq!(a[key], b[key], "{key} differs");
    }
    mock.assert_no_violations();
}

#[test]
fn images_are_base64_blocks() {
    let mock = MockLlm::start();
    mock.push(Reply::text("a pixel"));
    let mut nova = nova(&mock, json!({"input": ["text", "image"]}));
    nova.request_ok(json!({
        "type": "prompt",
        "message": "what is this?",
        "images": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}],
    }));
    nova.events_until("agent_settled");
    let requests = mock.chat_requests();
    let content = &requests[0].messages()[0]["content"];
    assert_eq!(content[0], json!({"type": "text", "text": "what is this?"}));
    assert_eq!(
        content[1],
        json!({"type": "image", "cache_control": {"type": "ephemeral"},
               "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1}})
    );
    mock.assert_no_violations();
}

#[test]
fn errors_name_the_problem_and_the_session_recovers() {
    let mock = MockLlm::start();
    // Retry off: this test is about the error texts (retry has its own test below).
    let mut nova = Nova::builder()
        .models_json(models(&mock, json!({})))
        .settings(json!({"retry": {"enabled": false}}))
        .spawn();
    mock.push(
        Reply::text("partial answer")
            .text_chunks(2)
            .error_event_after(4, "overloaded_error", "Overloaded"),
    );
    let events = nova.run_prompt("one");
    let msg = assert_error_turn(&events);
    assert_eq!(msg, "provider error: Overloaded (overloaded_error)");
    assert_eq!(text_of(&last_assistant(&events)), "partial");

    mock.push(Reply::http_error(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    let msg = assert_error_turn(&nova.run_prompt("two"));
    assert!(msg.starts_with("HTTP 529 from "), "{msg}");
    assert!(msg.contains("/v1/messages"), "{msg}");

    mock.push(Reply::http_error(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let msg = assert_error_turn(&nova.run_prompt("three"));
    assert!(msg.contains("invalid x-api-key"), "{msg}");

    mock.push(Reply::text("fine").finish("refusal"));
    let msg = assert_error_turn(&nova.run_prompt("four"));
    assert!(msg.contains("refused"), "{msg}");

    mock.push(Reply::text("back"));
    let events = nova.run_prompt("five");
    assert_eq!(text_of(&last_assistant(&events)), "back");
    // Failed replies are not sent back; the user prompts are.
    let last = mock.chat_requests().pop().unwrap();
    assert!(
        last.messages().iter().all(|m| m["role"] == "user"),
        "{}",
        last.body
    );
    mock.assert_no_violations();
}

#[test]
fn overloaded_is_retried_and_the_retry_succeeds() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(models(&mock, json!({})))
        .settings(json!({"retry": {"baseDelayMs": 10}}))
        .spawn();
    mock.push(
        Reply::text("partial answer")
            .text_chunks(2)
            .error_event_after(4, "overloaded_error", "Overloaded"),
    );
    mock.push(Reply::http_error(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    mock.push(Reply::text("made it"));
    let events = nova.run_prompt("one");
    let starts: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "auto_retry_start")
        .collect();
    assert_eq!(starts.len(), 2, "{events:?}");
    assert_eq!(starts[0]["attempt"], 1);
    assert_eq!(starts[1]["attempt"], 2);
    let end = events
        .iter()
        .find(|e| e["type"] == "auto_retry_end")
        .expect("auto_retry_end");
    assert_eq!(end["success"], true);
    assert_eq!(text_of(&last_assistant(&events)), "made it");
    assert_eq!(mock.chat_requests().len(), 3);
    mock.assert_no_violations();
}

#[test]
fn builtin_provider_needs_a_key_and_follows_models_json() {
    let mock = MockLlm::start();
    let override_only = json!({"providers": {"anthropic": {"baseUrl": mock.base_url_anthropic()}}});
    let mut without = Nova::builder().models_json(override_only.clone()).spawn();
    let list = without.request_ok(json!({"type": "get_available_models"}));
    assert_eq!(list["models"], json!([]), "no key, no built-in models");

    let mut nova = Nova::builder()
        .models_json(override_only)
        .env("ANTHROPIC_API_KEY", "sk-ant-env")
        .args(["--model", "claude-opus-4-6", "--thinking", "medium"])
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let ids: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"claude-sonnet-4-5") && ids.contains(&"claude-opus-5-5"),
        "{ids:?}"
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["provider"], "anthropic");
    assert_eq!(state["model"]["contextWindow"], 1_000_000);
    assert_eq!(state["model"]["baseUrl"], mock.base_url_anthropic());

    mock.push(Reply::text("adaptive"));
    nova.run_prompt("hi");
    let r = &mock.chat_requests()[0];
    assert_eq!(r.header("x-api-key"), Some("sk-ant-env"));
    assert_eq!(r.body["model"], "claude-opus-4-6");
    assert_eq!(
        r.body["thinking"],
        json!({"type": "adaptive", "display": "summarized"})
    );
    assert_eq!(r.body["output_config"], json!({"effort": "medium"}));

    nova.request_ok(
        json!({"type": "set_model", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}),
    );
    mock.push(Reply::text("budget"));
    let events = nova.run_prompt("again");
    let u = &last_assistant(&events)["usage"];
    close(&u["cost"]["total"], (10.0 * 3.0 + 5.0 * 15.0) / 1e6);
    let r = &mock.chat_requests()[1];
    assert_eq!(r.body["thinking"]["type"], "enabled");
    assert_eq!(r.body["thinking"]["budget_tokens"], 8192);
    mock.assert_no_violations();
}

/// A Claude Pro/Max token (`ANTHROPIC_OAUTH_TOKEN`, read before `ANTHROPIC_API_KEY` as Pi reads
/// it) goes as Claude Code, as Pi sends it: a bearer token, Claude Code's headers and betas, its
/// identity first in the system prompt, and its tool names, which the reply's calls use and
/// nova maps back to its own tools.
#[test]
fn a_subscription_token_is_sent_as_claude_code() {
    let mock = MockLlm::start();
    let token = "sk-ant-oat01-nova-test-token";
    mock.push(Reply::text("Running it.").tool_call(
        "toolu_01",
        "Bash",
        json!({"command": "echo via-claude-code"}),
    ));
    mock.push(Reply::text("Done."));
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"anthropic": {"baseUrl": mock.base_url_anthropic()}}}))
        .env("ANTHROPIC_OAUTH_TOKEN", token)
        .env("ANTHROPIC_API_KEY", "sk-ant-api-not-used")
        .args(["--model", "claude-sonnet-4-5", "--thinking", "low"])
        .spawn();
    let events = nova.run_prompt("run it");
    let end = of_type(&events, "tool_execution_end")[0];
    assert_eq!(end["toolName"], "bash", "{end}");
    assert_eq!(end["isError"], false, "{end}");
    assert!(
        end["result"].to_string().contains("via-claude-code"),
        "{end}"
    );
    assert_eq!(text_of(&last_assistant(&events)), "Done.");

    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), 2);
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("authorization"), Some(&*format!("Bearer {token}")));
    assert_eq!(r.header("x-api-key"), None);
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        r.header("anthropic-beta"),
        Some("claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14")
    );
    assert_eq!(r.header("user-agent"), Some("claude-cli/2.1.322"));
    assert_eq!(r.header("x-app"), Some("cli"));
    assert_eq!(r.header("accept"), Some("application/json"));
    assert_eq!(
        r.header("anthropic-dangerous-direct-browser-access"),
        Some("true")
    );
    let system = r.body["system"].as_array().unwrap();
    assert_eq!(system.len(), 2, "{system:?}");
    assert_eq!(
        system[0]["text"],
        "You are Claude Code, Anthropic's official CLI for Claude."
    );
    assert!(system[1]["text"].as_str().unwrap().len() > 100);
    let names: Vec<&str> = r.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in ["Read", "Bash", "Edit", "Write"] {
        assert!(names.contains(&name), "{names:?}");
    }
    assert!(!names.contains(&"bash"), "{names:?}");
    // The call goes back under Claude Code's name.
    assert_eq!(reqs[1].messages()[1]["content"][1]["name"], "Bash");
    // The token is a secret like any key: not on stdout, nor in the session file.
    assert!(!nova.stderr().contains(token));
    for line in nova.log() {
        assert!(!line.raw.contains(token), "{}", line.raw);
    }
    mock.assert_no_violations();
}
