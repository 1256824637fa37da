//! The session's id on the wire, where Pi 1.6 sends it: the Responses API's `prompt_cache_key`
//! and session headers, the affinity headers of a chat completions server whose compat asks for
//! them (Baseten's catalog row), and OpenCode's routing header; a compaction summary caches
//! nothing and routes by an id of its own.

use super::providers::{last_assistant, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use nova::config::builtin::CATALOG;
use serde_json::json;

fn session_id(nova: &mut Nova) -> String {
    let state = nova.request_ok(json!({"type": "get_state"}));
    state["sessionId"].as_str().unwrap().to_owned()
}

#[test]
fn responses_keys_the_cache_and_the_route_by_the_session() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"mock-openai": {
            "baseUrl": mock.base_url_openai(), "api": "openai-responses",
            "apiKey": "sk-mock-responses", "models": [{"id": "test-model"}],
        }}}))
        .spawn();
    let id = session_id(&mut nova);
    mock.push(Reply::text("one"));
    nova.run_prompt("hi");
    mock.push(Reply::text("two"));
    nova.run_prompt("again");
    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.body["prompt_cache_key"], id.as_str());
        assert_eq!(r.header("session-id"), Some(id.as_str()));
        assert_eq!(r.header("x-client-request-id"), Some(id.as_str()));
        assert!(r.header("x-session-affinity").is_none());
    }
    mock.assert_no_violations();
}

/// The first catalog model of `provider`, started against the mock with `models` as the
/// provider's models.json entry (its `baseUrl` is added).
fn catalog_on_mock(
    mock: &MockLlm,
    provider: &str,
    var: &str,
    mut entry: serde_json::Value,
) -> Nova {
    let model = CATALOG
        .iter()
        .find(|b| b.name == provider)
        .unwrap()
        .provider_and_models()
        .unwrap()
        .1
        .remove(0)
        .id;
    entry["baseUrl"] = json!(mock.base_url_openai());
    Nova::builder()
        .models_json(json!({"providers": {provider: entry}}))
        .env(var, "catalog-secret")
        .args(["--model", &format!("{provider}/{model}")])
        .spawn()
}

fn one_request(mock: &MockLlm, nova: &mut Nova) -> crate::support::mock_llm::Recorded {
    mock.push(Reply::text("ok"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "ok");
    mock.assert_no_violations();
    mock.chat_requests().remove(0)
}

#[test]
fn a_compat_with_session_affinity_sends_the_affinity_headers() {
    let mock = MockLlm::start();
    let mut nova = catalog_on_mock(&mock, "baseten", "BASETEN_API_KEY", json!({}));
    let id = session_id(&mut nova);
    let r = one_request(&mock, &mut nova);
    assert_eq!(r.path, "/v1/chat/completions");
    for name in ["session_id", "x-client-request-id", "x-session-affinity"] {
        assert_eq!(r.header(name), Some(id.as_str()), "{name}");
    }
    assert!(
        r.body.get("prompt_cache_key").is_none(),
        "not OpenAI's server"
    );

    // Without the flag a chat completions server gets none of them.
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"local": {
            "baseUrl": mock.base_url_openai(), "api": "openai-completions",
            "apiKey": "sk-local", "models": [{"id": "test-model"}],
        }}}))
        .spawn();
    let r = one_request(&mock, &mut nova);
    assert!(r.header("x-session-affinity").is_none());
    assert!(r.header("session_id").is_none());
    assert!(r.header("x-opencode-session").is_none());
}

#[test]
fn opencode_gets_its_session_header_unless_one_is_configured() {
    let mock = MockLlm::start();
    let mut nova = catalog_on_mock(&mock, "opencode", "OPENCODE_API_KEY", json!({}));
    let id = session_id(&mut nova);
    let r = one_request(&mock, &mut nova);
    assert_eq!(r.header("x-opencode-session"), Some(id.as_str()));
    assert!(r.header("x-session-affinity").is_none());

    let mock = MockLlm::start();
    let mut nova = catalog_on_mock(
        &mock,
        "opencode",
        "OPENCODE_API_KEY",
        json!({"headers": {"X-OpenCode-Session": "mine"}}),
    );
    let r = one_request(&mock, &mut nova);
    assert_eq!(r.header("x-opencode-session"), Some("mine"));
    let all: Vec<_> = r
        .headers
        .iter()
        .filter(|(k, _)| k == "x-opencode-session")
        .collect();
    assert_eq!(all.len(), 1, "{all:?}");
}

#[test]
fn a_summary_caches_nothing_and_routes_by_its_own_id() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"mock-openai": {
            "baseUrl": mock.base_url_openai(), "api": "openai-responses",
            "apiKey": "sk-mock-responses", "models": [{"id": "test-model"}],
        }}}))
        .settings(json!({"compaction": {"keepRecentTokens": 50}}))
        .spawn();
    let id = session_id(&mut nova);
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    nova.run_prompt(&"a".repeat(400));
    nova.run_prompt(&"b".repeat(400));
    mock.push(Reply::text("SUMMARY"));
    let r = nova.request(json!({"type": "compact"}));
    assert_eq!(r["success"], true, "{r}");
    let reqs = mock.chat_requests();
    let summary = reqs.last().unwrap();
    assert!(
        summary.body.get("prompt_cache_key").is_none(),
        "{}",
        summary.body
    );
    assert!(summary.header("session-id").is_none());
    assert!(summary.header("x-client-request-id").is_none());
    assert_eq!(reqs[0].body["prompt_cache_key"], id.as_str());
}
