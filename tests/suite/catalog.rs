//! The built-in catalog as a client sees it: each variable offers exactly the providers Pi
//! enables with it and their catalog models, and providers with their own wiring (MiniMax over
//! Anthropic's API; z.ai's, Qwen's and Moonshot's thinking fields, per model where Pi sets them
//! per model) reach the server as Pi reaches them, through a models.json `baseUrl` that points
//! them at the mock.

use super::providers::{last_assistant, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use nova::config::builtin::CATALOG;
use serde_json::{Value, json};

fn listed(nova: &mut Nova) -> Vec<(String, String)> {
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let field = |k: &str| m[k].as_str().unwrap().to_owned();
            (field("provider"), field("id"))
        })
        .collect()
}

#[test]
fn each_variable_lists_its_providers_models_and_nothing_else() {
    let mut vars: Vec<&str> = CATALOG
        .iter()
        .flat_map(|b| b.key_vars.iter().copied())
        .collect();
    vars.sort_unstable();
    vars.dedup();
    assert!(vars.len() > 30, "{vars:?}");
    for var in vars {
        let expected: Vec<(String, String)> = CATALOG
            .iter()
            .filter(|b| b.key_vars.contains(&var))
            .flat_map(|b| {
                let (provider, models) = b.provider_and_models();
                models
                    .into_iter()
                    .map(move |m| (provider.name.clone(), m.id))
            })
            .collect();
        let mut nova = Nova::builder().env(var, "key-from-the-environment").spawn();
        assert_eq!(listed(&mut nova), expected, "with only {var} set");
    }
}

/// Points `provider` at `base` and starts nova on `model` with `var` set.
fn on_mock(provider: &str, base: String, var: &str, model: &str, thinking: &str) -> Nova {
    Nova::builder()
        .models_json(json!({"providers": {provider: {"baseUrl": base}}}))
        .env(var, "catalog-secret")
        .args(["--model", model, "--thinking", thinking])
        .spawn()
}

#[test]
fn minimax_speaks_anthropic_messages_with_budget_or_adaptive_thinking() {
    let mock = MockLlm::start();
    let mut nova = on_mock(
        "minimax",
        mock.base_url_anthropic(),
        "MINIMAX_API_KEY",
        "minimax/MiniMax-M3",
        "medium",
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["api"], "anthropic-messages");
    assert_eq!(state["model"]["contextWindow"], 1_000_000);
    mock.push(Reply::text("from MiniMax"));
    let events = nova.run_prompt("hi");
    let m = last_assistant(&events);
    assert_eq!(text_of(&m), "from MiniMax");
    assert_eq!(m["provider"], "minimax");
    let r = &mock.chat_requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("catalog-secret"));
    assert_eq!(r.body["model"], "MiniMax-M3");
    assert_eq!(r.body["thinking"]["type"], "enabled");
    assert!(r.body["thinking"]["budget_tokens"].as_u64().unwrap() > 0);

    nova.request_ok(
        json!({"type": "set_model", "provider": "minimax", "modelId": "MiniMax-M3.1-Flash"}),
    );
    mock.push(Reply::text("adaptive"));
    nova.run_prompt("again");
    let r = &mock.chat_requests()[1];
    assert_eq!(r.body["model"], "MiniMax-M3.1-Flash");
    assert_eq!(r.body["thinking"]["type"], "adaptive");
    mock.assert_no_violations();
}

/// The fields a chat completions request carries beside the conversation.
fn completions_request(
    provider: &str,
    var: &str,
    model: &str,
    thinking: &str,
) -> (Value, Option<String>) {
    let mock = MockLlm::start();
    let mut nova = on_mock(provider, mock.base_url_openai(), var, model, thinking);
    mock.push(Reply::text("ok"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "ok");
    let r = mock.chat_requests().remove(0);
    assert_eq!(r.path, "/v1/chat/completions");
    mock.assert_no_violations();
    let auth = r.header("authorization").map(str::to_owned);
    (r.body, auth)
}

#[test]
fn completions_providers_ask_for_thinking_in_their_own_fields() {
    let (body, auth) = completions_request("zai", "ZAI_API_KEY", "zai/glm-5.3", "high");
    assert_eq!(auth.as_deref(), Some("Bearer catalog-secret"));
    assert_eq!(body["model"], "glm-5.3");
    assert_eq!(body["thinking"]["type"], "enabled");
    assert_eq!(body["reasoning_effort"], "high");
    assert!(body["max_tokens"].is_u64(), "{body}");
    assert!(body.get("max_completion_tokens").is_none());
    assert!(body.get("store").is_none());

    let (body, _) = completions_request(
        "qwen-token-plan-individual-cn",
        "QWEN_TOKEN_PLAN_CN_API_KEY",
        "qwen-token-plan-individual-cn/qwen3.8-max",
        "low",
    );
    assert_eq!(body["model"], "qwen3.8-max");
    assert_eq!(body["enable_thinking"], true);
    assert_eq!(body["reasoning_effort"], "low");
    assert!(body.get("thinking").is_none());

    // A model whose compat is its own: Kimi K2.7 Code thinks as DeepSeek's API asks, without
    // the effort field the provider's Kimi K3 takes.
    let (body, _) = completions_request(
        "moonshotai-cn",
        "MOONSHOT_API_KEY",
        "moonshotai-cn/kimi-k2.7-code",
        "high",
    );
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    assert!(body.get("reasoning_effort").is_none(), "{body}");
    let (body, _) = completions_request(
        "moonshotai-cn",
        "MOONSHOT_API_KEY",
        "moonshotai-cn/kimi-k3",
        "high",
    );
    assert_eq!(body["reasoning_effort"], "high");
    assert!(body.get("thinking").is_none(), "{body}");
}

/// NVIDIA's gateway is told to hold a long request open, as Pi tells it; a models.json entry
/// for the provider adds its own headers and can replace that one.
#[test]
fn nvidia_requests_carry_pi_s_poll_header_beside_configured_ones() {
    let mock = MockLlm::start();
    let provider = |headers: Value| json!({"providers": {"nvidia": {"baseUrl": mock.base_url_openai(), "headers": headers}}});
    let run = |models: Value| {
        let mut nova = Nova::builder()
            .models_json(models)
            .env("NVIDIA_API_KEY", "nvapi-secret")
            .args(["--model", "nvidia/nvidia/nemotron-3-ultra-550b-a55b"])
            .spawn();
        mock.push(Reply::text("ok"));
        nova.run_prompt("hi");
        mock.chat_requests().pop().unwrap()
    };
    let r = run(provider(json!({"X-Team": "nova"})));
    assert_eq!(r.body["model"], "nvidia/nemotron-3-ultra-550b-a55b");
    assert_eq!(r.header("authorization"), Some("Bearer nvapi-secret"));
    assert_eq!(r.header("nvcf-poll-seconds"), Some("3600"));
    assert_eq!(r.header("x-team"), Some("nova"));
    let r = run(provider(json!({"NVCF-POLL-SECONDS": "60"})));
    assert_eq!(r.header("nvcf-poll-seconds"), Some("60"));
    mock.assert_no_violations();
}
