//! nova against the mock LLM as ChatGPT's Codex backend (`openai-codex`, Pi's
//! `openai-codex-responses`): the address, the headers and the account taken from the token,
//! the body fields Pi sends, reasoning and calls going back on the next turn, the catalog, and
//! clear errors for a token without an account and for a used-up subscription.

use super::providers::{assert_error_turn, last_assistant, of_type, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use base64::Engine;
use serde_json::{Value, json};

/// An access token shaped as ChatGPT's: a JWT whose auth claim names the account.
fn token(account: &str) -> String {
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": account},
                        "exp": 4_000_000_000u64});
    format!(
        "{}.{}.{}",
        b64(br#"{"alg":"RS256","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes()),
        b64(b"nova-test-signature")
    )
}

/// The built-in `openai-codex` provider, moved to the mock and given `key`.
fn models(mock: &MockLlm, key: &str) -> Value {
    json!({"providers": {"openai-codex": {
        "baseUrl": format!("{}/backend-api", mock.base_url_ollama()), "apiKey": key,
    }}})
}

#[test]
fn a_subscription_token_reaches_the_codex_backend_as_pi_sends_it() {
    let mock = MockLlm::start();
    let token = token("acct-nova-1");
    mock.push(
        Reply::new()
            .thinking("look first")
            .and_text("Running it.")
            .tool_call("call_1", "bash", json!({"command": "echo via-codex"}))
            .usage(1200, 80),
    );
    mock.push(Reply::text("Done."));
    let mut nova = Nova::builder()
        .models_json(models(&mock, &token))
        .args(["--model", "openai-codex/gpt-6.2-sol", "--thinking", "high"])
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let codex: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "openai-codex")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        codex.contains(&"gpt-6.2-sol") && codex.contains(&"gpt-6-luna"),
        "{codex:?}"
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["api"], "openai-codex-responses");
    assert_eq!(state["model"]["contextWindow"], 500_000);
    assert_eq!(state["model"]["maxTokens"], 128_000);

    let events = nova.run_prompt("run it");
    let end = of_type(&events, "tool_execution_end")[0];
    assert_eq!(end["isError"], false, "{end}");
    assert!(end["result"].to_string().contains("via-codex"), "{end}");
    let m = last_assistant(&events);
    assert_eq!(text_of(&m), "Done.");
    assert_eq!(m["api"], "openai-codex-responses");
    assert_eq!(m["provider"], "openai-codex");

    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), 2);
    let r = &reqs[0];
    assert_eq!(r.path, "/backend-api/codex/responses");
    assert_eq!(r.header("authorization"), Some(&*format!("Bearer {token}")));
    assert_eq!(r.header("chatgpt-account-id"), Some("acct-nova-1"));
    assert_eq!(r.header("openai-beta"), Some("responses=experimental"));
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    assert_eq!(r.header("originator"), Some("pi"));
    let b = &r.body;
    assert_eq!(b["model"], "gpt-6.2-sol");
    assert_eq!(b["store"], false);
    assert_eq!(b["stream"], true);
    assert_eq!(b["text"], json!({"verbosity": "low"}));
    assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(b["tool_choice"], "auto");
    assert_eq!(b["parallel_tool_calls"], true);
    assert_eq!(b["reasoning"], json!({"effort": "high", "summary": "auto"}));
    assert!(b["max_output_tokens"].as_u64().unwrap() >= 16);
    assert_eq!(b["input"][0]["role"], "developer");
    let bash = b["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "bash")
        .unwrap();
    assert_eq!(bash["type"], "function");
    assert_eq!(bash.get("strict"), Some(&Value::Null), "{bash}");

    // The reasoning item, encrypted content and all, and the call go back on the next turn.
    let input = reqs[1].body["input"].as_array().unwrap();
    let reasoning = input.iter().find(|i| i["type"] == "reasoning").unwrap();
    assert_eq!(
        reasoning["encrypted_content"],
        Reply::encrypted_of("look first")
    );
    let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!(call["call_id"], "call_1");
    assert_eq!(call["id"], "fc_call_1");
    let output = input
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(output["call_id"], "call_1");

    // Thinking off is asked for as Pi asks it: no effort, summaries still on.
    nova.request_ok(
        json!({"type": "set_model", "provider": "openai-codex", "modelId": "gpt-6-luna"}),
    );
    nova.request_ok(json!({"type": "set_thinking_level", "level": "off"}));
    mock.push(Reply::text("quiet"));
    nova.run_prompt("again");
    let r = &mock.chat_requests()[2];
    assert_eq!(
        r.body["reasoning"],
        json!({"effort": "none", "summary": "auto"})
    );

    // The token is a secret: not on stdout, stderr, nor in the session file.
    let session = std::fs::read_to_string(
        nova.request_ok(json!({"type": "get_state"}))["sessionFile"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let stdout: String = nova.log().iter().map(|l| l.raw.clone() + "\n").collect();
    for (what, text) in [
        ("stdout", &stdout),
        ("stderr", &nova.stderr()),
        ("session", &session),
    ] {
        assert!(!text.contains(&token), "the token in {what}");
    }
    mock.assert_no_violations();
}

#[test]
fn a_key_without_an_account_or_a_used_up_plan_is_a_clear_error() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(models(&mock, "sk-not-a-chatgpt-token"))
        .args(["--model", "openai-codex/gpt-6.2-sol"])
        .spawn();
    let events = nova.run_prompt("hi");
    let error = assert_error_turn(&events);
    assert!(error.contains("nova login openai-codex"), "{error}");
    assert!(!error.contains("sk-not-a-chatgpt-token"), "{error}");
    assert!(mock.chat_requests().is_empty(), "nothing was sent");

    let mut nova = Nova::builder()
        .models_json(models(&mock, &token("acct-2")))
        .args(["--model", "openai-codex/gpt-6.2-sol"])
        .settings(json!({"retry": {"enabled": false}}))
        .spawn();
    mock.push(Reply::http_error(
        429,
        r#"{"error":{"code":"usage_limit_reached","plan_type":"PLUS"}}"#,
    ));
    let events = nova.run_prompt("hi");
    let error = assert_error_turn(&events);
    assert!(
        error.contains("You have hit your ChatGPT usage limit (plus plan)."),
        "{error}"
    );
}
