//! Bounded resources through the binary: the message queues' limit, and the reader's handling
//! of records at the edges (bad UTF-8, lone surrogates, the record limit).

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova};
use base64::Engine;
use serde_json::{Value, json};

/// nova's documented bounds (README, "Bounded resources").
const MAX_QUEUED: usize = 1000;
const MAX_QUEUED_BYTES: usize = 32 * 1024 * 1024;

/// A run held mid-stream at a gate that stays shut, so everything sent meanwhile is queued.
fn streaming(mock: &MockLlm, gate: &Gate) -> Nova {
    mock.push(Reply::text("held").text_chunks(2).gate_after(1, gate));
    let mut nova = Nova::builder().ollama(mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    gate.wait_reached(EVENT_TIMEOUT);
    nova
}

fn error_of(r: &Value) -> &str {
    assert_eq!(r["success"], false, "{r}");
    r["error"].as_str().unwrap_or_default()
}

#[test]
fn queues_refuse_messages_past_the_count_limit() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    let mut nova = streaming(&mock, &gate);
    // One write for the lot, steering and follow-ups mixed: both count toward one limit.
    let mut batch = Vec::new();
    for i in 0..MAX_QUEUED {
        let kind = if i % 10 == 0 { "steer" } else { "follow_up" };
        batch.extend(
            json!({"id": i, "type": kind, "message": format!("m{i}")})
                .to_string()
                .bytes(),
        );
        batch.push(b'\n');
    }
    nova.send_raw(&batch);
    let last = nova.request(json!({"id": MAX_QUEUED - 1, "type": "get_state"}));
    assert_eq!(last["success"], true, "{last}");
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["pendingMessageCount"], MAX_QUEUED);

    for cmd in [
        json!({"type": "follow_up", "message": "one too many"}),
        json!({"type": "steer", "message": "one too many"}),
        json!({"type": "prompt", "message": "one too many", "streamingBehavior": "followUp"}),
    ] {
        let r = nova.request(cmd);
        let e = error_of(&r);
        assert!(e.contains("1000 messages are already waiting"), "{e}");
    }
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["pendingMessageCount"], MAX_QUEUED);

    // Taking messages off the queue makes room again.
    nova.request_ok(json!({"type": "clear_queue"}));
    nova.request_ok(json!({"type": "follow_up", "message": "room again"}));
    nova.request_ok(json!({"type": "abort"}));
}

#[test]
fn queues_refuse_messages_past_the_byte_limit() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    let mut nova = streaming(&mock, &gate);
    // Images count toward the limit though queue_update shows only texts, so the test's output
    // stays small; 5 MiB is the largest attachment.
    let data = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 5 * 1024 * 1024]);
    let image = json!([{"type": "image", "data": data, "mimeType": "image/png"}]);
    let per_message = "img".len() + data.len() + "image/png".len();
    let fit = MAX_QUEUED_BYTES / per_message;
    for _ in 0..fit {
        nova.request_ok(json!({"type": "follow_up", "message": "img", "images": image}));
    }
    let r = nova.request(json!({"type": "steer", "message": "img", "images": image}));
    let e = error_of(&r);
    assert!(e.contains("over the 32 MiB"), "{e}");
    assert!(e.contains(&format!("this message {per_message}")), "{e}");
    // A small message still fits.
    nova.request_ok(json!({"type": "steer", "message": "short"}));
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["pendingMessageCount"], fit + 1);
    nova.request_ok(json!({"type": "abort"}));
}
