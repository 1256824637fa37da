//! nova against the mock LLM's Bedrock endpoint (`/model/<modelId>/converse-stream`, AWS's
//! binary event stream): reasoning with its signature sent back, parallel tool calls, usage
//! with cache counts, SigV4 signatures from access keys or a profile and the bearer token,
//! exceptions classified and retried, and the built-in `amazon-bedrock` provider.

use super::providers::{assert_error_turn, deltas, last_assistant, of_type, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};

const MODEL: &str = "global.anthropic.claude-sonnet-4-5-20250929-v1:0";
const PATH: &str = "/model/global.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream";

/// A models.json whose Claude model on Bedrock thinks and is priced ($3 in, $15 out, $0.30
/// cache read, $3.75 cache write).
fn models(mock: &MockLlm) -> Value {
    json!({"providers": {"mock-bedrock": {
        "baseUrl": format!("http://127.0.0.1:{}", mock.port()),
        "api": "bedrock-converse-stream",
        "models": [{"id": MODEL, "name": "Claude Sonnet 4.5", "reasoning": true,
                    "input": ["text", "image"], "contextWindow": 200000, "maxTokens": 64000,
                    "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]
    }}})
}

fn nova(mock: &MockLlm, settings: Value) -> Nova {
    Nova::builder()
        .models_json(models(mock))
        .settings(settings)
        .env("AWS_ACCESS_KEY_ID", "AKIDNOVATEST")
        .env("AWS_SECRET_ACCESS_KEY", "nova-secret-access-key")
        .env("AWS_SESSION_TOKEN", "nova-session-token")
        .env("AWS_REGION", "eu-west-3")
        .spawn()
}

#[test]
fn reasoning_text_usage_and_a_sigv4_signature() {
    let mock = MockLlm::start();
    let thought = "The user wants a greeting — ✓";
    mock.push(
        Reply::text("Hello from Bedrock")
            .thinking(thought)
            .thinking_chunks(3)
            .text_chunks(4)
            .usage(1000, 200)
            .cache_usage(400, 50)
            .split_writes(),
    );
    mock.push(Reply::text("Bye"));
    let mut nova = nova(&mock, json!({}));
    nova.request_ok(json!({"type": "set_thinking_level", "level": "medium"}));
    let events = nova.run_prompt("greet me");
    assert_eq!(deltas(&events, "thinking_delta"), thought);
    assert_eq!(deltas(&events, "text_delta"), "Hello from Bedrock");
    let m = last_assistant(&events);
    assert_eq!(m["api"], "bedrock-converse-stream");
    assert_eq!(m["stopReason"], "stop");
    assert_eq!(m["rawStopReason"], "end_turn");
    assert_eq!(
        m["content"],
        json!([
            {"type": "thinking", "thinking": thought, "thinkingSignature": Reply::signature_of(thought)},
            {"type": "text", "text": "Hello from Bedrock"},
        ])
    );
    let u = &m["usage"];
    assert_eq!(
        [
            &u["input"],
            &u["output"],
            &u["cacheRead"],
            &u["cacheWrite"],
            &u["totalTokens"]
        ],
        [1000, 200, 400, 50, 1650]
    );
    let cost = (1000.0 * 3.0 + 200.0 * 15.0 + 400.0 * 0.3 + 50.0 * 3.75) / 1e6;
    assert!(
        (u["cost"]["total"].as_f64().unwrap() - cost).abs() < 1e-9,
        "{u}"
    );

    nova.run_prompt("bye");
    let reqs = mock.chat_requests();
    let r = &reqs[0];
    assert_eq!(r.path, PATH);
    let auth = r.header("authorization").unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDNOVATEST/")
            && auth.contains("/eu-west-3/bedrock/aws4_request"),
        "{auth}"
    );
    assert_eq!(r.header("x-amz-security-token"), Some("nova-session-token"));
    assert_eq!(
        r.body["additionalModelRequestFields"]["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192, "display": "summarized"})
    );
    // The signed reasoning goes back on the next turn, as the mock gave it.
    let replayed = &reqs[1].body["messages"][1]["content"][0]["reasoningContent"]["reasoningText"];
    assert_eq!(replayed["signature"], Reply::signature_of(thought));
    mock.assert_no_violations();
    let stderr = nova.stderr();
    assert!(!stderr.contains("nova-secret-access-key"), "{stderr}");
}

#[test]
fn parallel_tool_calls_round_trip() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("Reading both.")
            .tool_call("tooluse_1", "read", json!({"path": "a.txt"}))
            .tool_call("tooluse_2", "read", json!({"path": "b.txt"}))
            .arg_fragments(4),
    );
    mock.push(Reply::text("Both read."));
    let mut nova = nova(&mock, json!({}));
    std::fs::write(nova.cwd().join("a.txt"), "alpha").unwrap();
    std::fs::write(nova.cwd().join("b.txt"), "beta").unwrap();
    let events = nova.run_prompt("read a and b");
    assert_eq!(of_type(&events, "tool_execution_end").len(), 2);
    assert_eq!(text_of(&last_assistant(&events)), "Both read.");
    let reqs = mock.chat_requests();
    let results = reqs[1].body["messages"][2]["content"].as_array().unwrap();
    assert_eq!(results[0]["toolResult"]["toolUseId"], "tooluse_1");
    assert_eq!(results[1]["toolResult"]["toolUseId"], "tooluse_2");
    assert!(
        results[0]["toolResult"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );
    let specs = reqs[0].body["toolConfig"]["tools"].as_array().unwrap();
    assert!(specs.iter().any(|t| t["toolSpec"]["name"] == "bash"));
    mock.assert_no_violations();
}

#[test]
fn exceptions_are_classified_retried_and_named() {
    let mock = MockLlm::start();
    let mut nova = nova(&mock, json!({"retry": {"baseDelayMs": 10}}));
    mock.push(
        Reply::text("partial answer")
            .text_chunks(2)
            .error_event_after(2, "throttlingException", "Too many requests, please wait."),
    );
    mock.push(
        Reply::http_error(503, r#"{"message":"Bedrock is unavailable"}"#).header(
            "x-amzn-ErrorType",
            "ServiceUnavailableException:http://internal/",
        ),
    );
    mock.push(Reply::text("made it"));
    let events = nova.run_prompt("one");
    assert_eq!(of_type(&events, "auto_retry_start").len(), 2, "{events:?}");
    assert_eq!(text_of(&last_assistant(&events)), "made it");

    mock.push(
        Reply::http_error(
            403,
            r#"{"message":"The security token included in the request is invalid."}"#,
        )
        .header(
            "x-amzn-ErrorType",
            "UnrecognizedClientException:http://internal/",
        ),
    );
    let msg = assert_error_turn(&nova.run_prompt("two"));
    assert!(
        msg.contains("UnrecognizedClientException: The security token"),
        "{msg}"
    );
    mock.assert_no_violations();
}

#[test]
fn builtin_provider_from_a_profile_or_a_bearer_token() {
    let mock = MockLlm::start();
    let base = format!("http://127.0.0.1:{}", mock.port());
    let override_only = json!({"providers": {"amazon-bedrock": {"baseUrl": base}}});
    let mut without = Nova::builder().models_json(override_only.clone()).spawn();
    let list = without.request_ok(json!({"type": "get_available_models"}));
    assert_eq!(
        list["models"],
        json!([]),
        "no AWS credentials, no Bedrock models"
    );

    // A named profile in the shared credentials file under HOME.
    let builder = Nova::builder()
        .models_json(override_only.clone())
        .env("AWS_PROFILE", "work")
        .args(["--model", "amazon-bedrock/amazon.nova-pro-v1:0"]);
    let aws = builder.home().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = x\n\
         [work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = y\n",
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile work]\nregion = ap-southeast-2\n",
    )
    .unwrap();
    let mut nova = builder.spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let ids: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"global.anthropic.claude-opus-5-5"), "{ids:?}");
    mock.push(Reply::text("from a profile"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "from a profile");
    let r = &mock.chat_requests()[0];
    assert_eq!(r.path, "/model/amazon.nova-pro-v1%3A0/converse-stream");
    let auth = r.header("authorization").unwrap();
    assert!(
        auth.contains("Credential=AKIDWORK/") && auth.contains("/ap-southeast-2/bedrock/"),
        "{auth}"
    );

    // A bearer token, from Bedrock's own variable.
    let mut nova = Nova::builder()
        .models_json(override_only)
        .env("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key")
        .args(["--model", "amazon-bedrock/amazon.nova-pro-v1:0"])
        .spawn();
    mock.push(Reply::text("from a token"));
    nova.run_prompt("hi");
    let r = &mock.chat_requests()[1];
    assert_eq!(r.header("authorization"), Some("Bearer bedrock-api-key"));
    assert!(r.header("x-amz-date").is_none());
    mock.assert_no_violations();
}
