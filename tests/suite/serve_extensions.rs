//! Pi extensions in `nova serve`: a served session with extensions configured (the user's
//! `extensions` setting, Pi's examples loaded unchanged) runs its host; its dialogs reach every
//! attached client and any client answers; the host stops when the session closes.

use super::extensions::{descendants_named, example, hello_then_sudo, pi_modules, with_pi};
use super::serve::{WAIT, serve_from};
use crate::support::mock_llm::MockLlm;
use crate::support::nova_proc::{Nova, ollama_models};
use serde_json::{Value, json};

/// Records up to the first that `pred` accepts, which is the last.
async fn until(client: &mut super::serve::Client, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut records = Vec::new();
    loop {
        let record = client.next().await;
        let done = pred(&record);
        records.push(record);
        if done {
            return records;
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_served_sessions_extensions_ask_every_client_and_stop_with_it() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    hello_then_sudo(&mock);
    let builder = Nova::builder()
        .models_json(ollama_models(&mock))
        .settings(json!({
            "extensions": [example(&modules, "hello.ts"), example(&modules, "permission-gate.ts")]
        }));
    let served = serve_from(with_pi(builder, &modules), None, &[]);
    let pid = served.nova.pid();
    assert!(
        descendants_named(pid, "node").is_empty(),
        "no session, no host"
    );
    let id = served.open(&served.nova.cwd()).await;
    assert_eq!(descendants_named(pid, "node").len(), 1);
    let mut a = served.attach(&id, "").await;
    let mut b = served.attach(&id, "").await;

    a.send(json!({"id": "p", "type": "prompt", "message": "go"}))
        .await;
    let is_select = |r: &Value| r["type"] == "extension_ui_request" && r["method"] == "select";
    let asked = until(&mut a, is_select).await.pop().unwrap();
    let seen_by_b = until(&mut b, is_select).await.pop().unwrap();
    assert_eq!(asked["id"], seen_by_b["id"]);
    assert!(
        asked["title"].as_str().unwrap().contains("sudo ls"),
        "{asked}"
    );
    // The client that did not prompt answers.
    b.send(json!({"type": "extension_ui_response", "id": asked["id"], "value": "No"}))
        .await;
    let records = tokio::time::timeout(WAIT * 3, until(&mut a, |r| r["type"] == "agent_settled"))
        .await
        .unwrap();
    let ends: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["result"]["content"][0]["text"], "Hello, Pi!");
    assert_eq!(ends[1]["result"]["content"][0]["text"], "Blocked by user");

    let (status, _) = served
        .http("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 204);
    let deadline = std::time::Instant::now() + WAIT;
    while !descendants_named(pid, "node").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the host outlived its session"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
