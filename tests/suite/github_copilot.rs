//! nova against the mock LLM as GitHub Copilot (`github-copilot`): one token for models on three
//! APIs (Responses, Anthropic Messages, chat completions), each sent Copilot's editor headers,
//! who started the request and whether it carries images, as Pi 1.6 sends them.

use super::providers::{PNG_1X1, last_assistant, of_type, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::json;

const TOKEN: &str = "ghu_nova-test-copilot-token";

#[test]
fn one_token_three_apis_with_copilot_s_headers() {
    let mock = MockLlm::start();
    // A models.json entry moves the provider to the mock; the token names no address of its own.
    let models = json!({"providers": {"github-copilot": {"baseUrl": mock.base_url_ollama()}}});
    let mut without = Nova::builder().models_json(models.clone()).spawn();
    let list = without.request_ok(json!({"type": "get_available_models"}));
    assert_eq!(list["models"], json!([]), "no token, no Copilot models");

    let mut nova = Nova::builder()
        .models_json(models)
        .env("COPILOT_GITHUB_TOKEN", TOKEN)
        .args(["--model", "github-copilot/gpt-6-luna", "--thinking", "off"])
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    assert_eq!(
        list["models"][0]["id"], "gpt-6.1-sol",
        "Pi's default comes first"
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["provider"], "github-copilot");
    assert_eq!(state["model"]["api"], "openai-responses");
    assert_eq!(state["thinkingLevel"], "off");

    mock.push(Reply::text("Running.").tool_call(
        "call_1",
        "bash",
        json!({"command": "echo copilot"}),
    ));
    mock.push(Reply::text("Done."));
    let events = nova.run_prompt("run it");
    assert_eq!(of_type(&events, "tool_execution_end")[0]["isError"], false);
    assert_eq!(text_of(&last_assistant(&events)), "Done.");
    let reqs = mock.chat_requests();
    let (first, second) = (&reqs[0], &reqs[1]);
    assert_eq!(first.path, "/responses");
    for r in [first, second] {
        assert_eq!(r.header("authorization"), Some(&*format!("Bearer {TOKEN}")));
        assert_eq!(r.header("user-agent"), Some("GitHubCopilotChat/0.35.0"));
        assert_eq!(r.header("editor-version"), Some("vscode/1.107.0"));
        assert_eq!(
            r.header("editor-plugin-version"),
            Some("copilot-chat/0.35.0")
        );
        assert_eq!(r.header("copilot-integration-id"), Some("vscode-chat"));
        assert_eq!(r.header("openai-intent"), Some("conversation-edits"));
        assert_eq!(r.header("copilot-vision-request"), None);
    }
    // The prompt is the user's; the request after the tool ran is the agent's.
    assert_eq!(first.header("x-initiator"), Some("user"));
    assert_eq!(second.header("x-initiator"), Some("agent"));
    // Thinking off sends no reasoning field to Copilot, as Pi leaves it out there.
    assert!(first.body.get("reasoning").is_none(), "{}", first.body);

    // A Claude model goes over Anthropic's API with the same bearer token, not as Claude Code.
    nova.request_ok(
        json!({"type": "set_model", "provider": "github-copilot", "modelId": "claude-opus-5.5"}),
    );
    mock.push(Reply::text("From Claude."));
    nova.send(&json!({"type": "prompt", "message": "look",
        "images": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]}));
    let events = nova.events_until("agent_settled");
    assert_eq!(text_of(&last_assistant(&events)), "From Claude.");
    let r = &mock.chat_requests()[2];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("authorization"), Some(&*format!("Bearer {TOKEN}")));
    assert_eq!(r.header("x-api-key"), None);
    assert_eq!(r.header("accept"), Some("application/json"));
    assert_eq!(
        r.header("anthropic-dangerous-direct-browser-access"),
        Some("true")
    );
    assert_eq!(r.header("copilot-vision-request"), Some("true"));
    assert_eq!(r.header("x-initiator"), Some("user"));
    assert_eq!(r.body["system"].as_array().unwrap().len(), 1);

    // A Gemini model goes over chat completions.
    nova.request_ok(
        json!({"type": "set_model", "provider": "github-copilot", "modelId": "gemini-4-argon"}),
    );
    mock.push(Reply::text("From Gemini."));
    let events = nova.run_prompt("and you?");
    assert_eq!(text_of(&last_assistant(&events)), "From Gemini.");
    let r = &mock.chat_requests()[3];
    assert_eq!(r.path, "/chat/completions");
    assert_eq!(r.header("authorization"), Some(&*format!("Bearer {TOKEN}")));
    assert_eq!(r.header("editor-version"), Some("vscode/1.107.0"));

    let stdout: String = nova.log().iter().map(|l| l.raw.clone() + "\n").collect();
    assert!(!stdout.contains(TOKEN) && !nova.stderr().contains(TOKEN));
    mock.assert_no_violations();
}

/// A Copilot login that names the models its account may use (`availableModelIds`, as Pi
/// stores it) lists only those, as Pi does; its token is the bearer key.
#[test]
fn a_login_lists_only_the_models_its_account_may_use() {
    let mock = MockLlm::start();
    let auth = json!({"github-copilot": {"type": "oauth", "access": "tid=1;copilot-login",
        "refresh": "ghu_login", "expires": 4_000_000_000_000u64,
        "availableModelIds": ["claude-sonnet-5", "gpt-6.1-sol", "not-in-the-catalog"]}});
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"github-copilot": {"baseUrl": mock.base_url_ollama()}}}))
        .agent_file("auth.json", auth.to_string())
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let ids: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["gpt-6.1-sol", "claude-sonnet-5"]);
    mock.push(Reply::text("listed"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "listed");
    let r = &mock.chat_requests()[0];
    assert_eq!(
        r.header("authorization"),
        Some("Bearer tid=1;copilot-login")
    );
}
