//! Framing and the command envelope, against the real binary: every bad input gets one clear
//! error response (with the id when there was one) and the session goes on.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova};
use base64::Engine;
use serde_json::{Value, json};
use std::time::Duration;

fn idle_nova() -> Nova {
    Nova::builder().spawn()
}

fn error_text(r: &Value) -> &str {
    assert_eq!(r["success"], json!(false), "{r}");
    r["error"].as_str().unwrap_or_default()
}

#[test]
fn malformed_lines_get_parse_errors_without_id_and_the_session_goes_on() {
    let mut nova = idle_nova();
    nova.send_raw(b"{not json\nnull\n[1,2]\n42\n\"str\"\n\n   \r\n");
    for needle in [
        "Failed to parse command",
        "got null",
        "got an array",
        "got a number",
        "got a string",
    ] {
        let r = nova.next_event(EVENT_TIMEOUT);
        assert_eq!(r["type"], "response");
        assert_eq!(r["command"], "parse", "{r}");
        assert!(r.get("id").is_none(), "{r}");
        assert!(error_text(&r).contains(needle), "{needle}: {r}");
    }
    // Blank lines produce nothing: the next line is the answer to this request.
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["messageCount"], 0);
}

#[test]
fn command_errors_echo_the_id_and_name_the_problem() {
    let mut nova = idle_nova();
    let r = nova.request(json!({"type": "dance"}));
    assert_eq!(r["command"], "dance");
    assert_eq!(error_text(&r), "Unknown command: dance");

    let r = nova.request(json!({"type": 7}));
    assert_eq!(r["command"], "parse");
    assert!(error_text(&r).contains("\"type\" must be a string"), "{r}");

    let r = nova.request(json!({"no_type": true}));
    assert!(error_text(&r).contains("missing the \"type\""), "{r}");

    let r = nova.request(json!({"type": "prompt", "message": 5}));
    assert_eq!(r["command"], "prompt");
    let e = error_text(&r);
    assert!(
        e.contains("\"message\"") && e.contains("expected a string"),
        "{e}"
    );

    let r = nova.request(json!({"type": "set_model", "provider": "x"}));
    assert!(error_text(&r).contains("missing field `modelId`"), "{r}");

    let r = nova.request(json!({"type": "set_follow_up_mode", "mode": "sometimes"}));
    assert!(error_text(&r).contains("one-at-a-time"), "{r}");

    // Numeric ids are echoed as numbers.
    let r = nova.request(json!({"id": 17, "type": "get_commands"}));
    assert_eq!(r["id"], json!(17));
    assert_eq!(r["data"], json!({"commands": []}));
}

#[test]
fn crlf_and_line_separators_inside_strings_are_not_record_breaks() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    nova.send_raw(
        "{\"id\":\"a\",\"type\":\"prompt\",\"message\":\"one\u{2028}two\u{2029}three\"}\r\n"
            .as_bytes(),
    );
    let r = nova.wait_for(|v| v["id"] == "a", EVENT_TIMEOUT);
    assert_eq!(r["success"], json!(true), "{r}");
    nova.events_until("agent_settled");
    let sent = &mock.chat_requests()[0];
    let user = sent
        .messages()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(user["content"], "one\u{2028}two\u{2029}three");
}

#[test]
fn an_oversized_record_is_skipped_with_one_error() {
    let mut nova = idle_nova();
    let mut big = b"{\"type\":\"prompt\",\"message\":\"".to_vec();
    big.resize(9 * 1024 * 1024, b'x');
    big.extend_from_slice(b"\"}\n");
    nova.send_raw(&big);
    let r = nova.next_event(EVENT_TIMEOUT);
    assert_eq!(r["command"], "parse");
    assert!(error_text(&r).contains("8 MiB"), "{r}");
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["messageCount"], 0);
    // Nothing else was produced for the oversized record.
    assert!(nova.drain_pending().is_empty());
}

#[test]
fn bad_images_are_refused_by_index_and_change_nothing() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder().ollama(&mock).spawn();
    let png = "iVBORw0KGgo=";
    let good = json!({"type": "image", "data": png, "mimeType": "image/png"});
    let cases = [
        (
            json!([good, {"type":"image","data":"@@@","mimeType":"image/png"}]),
            "images[1]: data is not valid base64",
        ),
        (
            json!([{"type":"image","data":png,"mimeType":"text/plain"}]),
            "images[0]: mimeType \"text/plain\"",
        ),
        (json!(vec![good.clone(); 17]), "images[16]: too many images"),
        (
            json!([{"type":"image","data":"A".repeat(7_200_000),"mimeType":"image/png"}]),
            "images[0]: image is too large: 5400000 bytes",
        ),
        (
            json!([{"type":"image","data":png}]),
            "missing field `mimeType`",
        ),
    ];
    for command in ["prompt", "steer", "follow_up"] {
        for (images, needle) in &cases {
            let r = nova.request(json!({"type": command, "message": "look", "images": images}));
            assert_eq!(r["command"], command);
            assert!(error_text(&r).contains(needle), "{command} {needle}: {r}");
        }
    }
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(
        (
            state["messageCount"].as_u64(),
            state["pendingMessageCount"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert!(mock.chat_requests().is_empty());

    // The snake_case alias is accepted.
    nova.request_ok(json!({"type": "steer", "message": "s", "images": [{"data": png, "mime_type": "image/png"}]}));
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["pendingMessageCount"], 1);
}

/// The one attachment policy, as an RPC client meets it: the bytes decide the type, and an image
/// larger than a model takes is shrunk as `read` shrinks it rather than refused.
#[test]
fn attached_images_are_typed_by_their_bytes_and_shrunk_to_fit() {
    let mock = MockLlm::start();
    mock.push(Reply::text("seen"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    let wide = image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(
        3000,
        1000,
        image::Rgb([30, 140, 200]),
    ));
    let mut png = Vec::new();
    wide.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let tiny = super::providers::PNG_1X1;
    nova.request_ok(json!({"type": "prompt", "message": "look", "images": [
        {"type": "image", "data": b64(&png), "mimeType": "image/jpeg"},
        {"type": "image", "data": tiny, "mimeType": "image/webp"},
    ]}));
    nova.events_until("agent_settled");
    let messages = nova.request_ok(json!({"type": "get_messages"}));
    let user = &messages["messages"][0];
    assert_eq!(user["role"], "user", "{user}");
    let images: Vec<&Value> = user["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "image")
        .collect();
    assert_eq!(images.len(), 2, "{user}");
    assert_eq!(images[0]["mimeType"], "image/png");
    let sent = base64::engine::general_purpose::STANDARD
        .decode(images[0]["data"].as_str().unwrap())
        .unwrap();
    let sent = image::load_from_memory(&sent).unwrap();
    assert_eq!((sent.width(), sent.height()), (2000, 667));
    assert_eq!(
        images[1],
        &json!({"type": "image", "data": tiny, "mimeType": "image/png"})
    );
}

/// RPC.md: attachments are not downscaled past 5 MiB; one over it is refused with its size,
/// even when nova could decode and shrink it, and the conversation is left as it was.
#[test]
fn an_attachment_over_five_mib_is_refused_not_shrunk() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder().ollama(&mock).spawn();
    let noisy = image::RgbImage::from_fn(1350, 1350, |x, y| {
        let v = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) as u8;
        image::Rgb([v, v.rotate_left(3), v.rotate_left(5)])
    });
    let mut png = Vec::new();
    image::DynamicImage::ImageRgb8(noisy)
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    // Over 5 MiB decoded, yet within the 8 MiB record once in base64.
    assert!(png.len() > 5 << 20, "{} bytes", png.len());
    assert!(png.len() / 3 * 4 < 8 << 20, "{} bytes", png.len());
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    let r = nova.request(json!({"type": "prompt", "message": "look", "images": [
        {"type": "image", "data": data, "mimeType": "image/png"},
    ]}));
    let text = error_text(&r);
    assert!(text.contains("images[0]"), "{r}");
    assert!(text.contains(&format!("{} bytes", png.len())), "{r}");
    assert!(text.contains("not downscaled"), "{r}");
    let messages = nova.request_ok(json!({"type": "get_messages"}));
    assert_eq!(messages["messages"], json!([]));
    assert!(mock.chat_requests().is_empty());
}

#[test]
fn unknown_sessions_and_requests_say_so() {
    let mut nova = idle_nova();
    let r = nova.request(json!({"type": "switch_session", "sessionId": "abc"}));
    assert!(error_text(&r).contains("abc"), "{r}");
    let r = nova.request(json!({"type": "permission_response", "requestId": 1, "approved": true}));
    assert!(
        error_text(&r).contains("Unknown permission request 1"),
        "{r}"
    );
}

#[test]
fn idle_commands_answer_with_pi_shapes() {
    let mut nova = idle_nova();
    let state = nova.request_ok(json!({"type": "get_state"}));
    for key in [
        "isStreaming",
        "isCompacting",
        "messageCount",
        "pendingMessageCount",
        "sessionId",
        "thinkingLevel",
        "steeringMode",
        "followUpMode",
        "autoCompactionEnabled",
    ] {
        assert!(state.get(key).is_some(), "get_state lacks {key}: {state}");
    }
    assert_eq!(state["model"], Value::Null);
    assert_eq!(state["steeringMode"], "one-at-a-time");
    assert_eq!(
        nova.request_ok(json!({"type": "get_messages"})),
        json!({"messages": []})
    );
    assert_eq!(
        nova.request_ok(json!({"type": "get_last_assistant_text"})),
        json!({"text": null})
    );
    nova.request_ok(json!({"type": "set_steering_mode", "mode": "all"}));
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["steeringMode"], "all");
    let before = state["sessionId"].clone();
    assert_eq!(
        nova.request_ok(json!({"type": "new_session"})),
        json!({"cancelled": false})
    );
    let after = nova.request_ok(json!({"type": "get_state"}))["sessionId"].clone();
    assert_ne!(before, after);
    let r = nova.request(json!({"type": "prompt", "message": "hi"}));
    assert!(error_text(&r).contains("No model selected"), "{r}");
    nova.close_stdin();
    assert!(nova.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn get_capabilities_names_the_protocol_its_commands_events_and_features() {
    let mut nova = idle_nova();
    let caps = nova.request_ok(json!({"type": "get_capabilities"}));
    assert_eq!(caps["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(caps["protocol"], "pi-1.6");
    let names = |key: &str| -> Vec<String> {
        caps[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let commands = names("commands");
    for c in [
        "prompt",
        "get_state",
        "bash",
        "get_mcp_servers",
        "get_capabilities",
    ] {
        assert!(commands.iter().any(|n| n == c), "{c} in {commands:?}");
    }
    // Every command it lists is one it answers (an unknown one is refused by name).
    for c in &commands {
        let r = nova.request(json!({"type": c}));
        let error = r["error"].as_str().unwrap_or_default();
        assert!(!error.contains("Unknown command"), "{c}: {r}");
    }
    let events = names("events");
    for e in [
        "agent_start",
        "message_update",
        "entry_appended",
        "permission_request",
    ] {
        assert!(events.iter().any(|n| n == e), "{e} in {events:?}");
    }
    let features = &caps["features"];
    assert!(features["sandbox"]["enforced"].is_boolean(), "{features}");
    assert_eq!(features["mcp"], true);
    assert_eq!(features["extensions"], true);
}

/// A burst of commands with ids, `tag`-prefixed: reads, a setter, a prompt the busy agent
/// refuses, an unknown command and one with a bad field, over and over.
fn flood(nova: &mut Nova, tag: &str, n: usize) -> Vec<Value> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = if i % 7 == 3 {
            json!(i + 100_000 * tag.len())
        } else {
            json!(format!("{tag}-{i}"))
        };
        let mut cmd = match i % 6 {
            0 => json!({"type": "get_state"}),
            1 => json!({"type": "get_messages"}),
            2 => json!({"type": "set_thinking_level", "level": "low"}),
            3 => json!({"type": "prompt", "message": "while busy"}),
            4 => json!({"type": "no_such_command"}),
            _ => json!({"type": "set_auto_retry", "enabled": "yes"}),
        };
        cmd["id"] = id.clone();
        nova.send(&cmd);
        ids.push(id);
    }
    ids
}

#[test]
fn every_id_gets_exactly_one_response_while_a_run_streams_aborts_and_retries() {
    let mock = MockLlm::start();
    mock.push(Reply::many_chunks(3000, "x ").delay_per_frame(Duration::from_millis(1)));
    let mut nova = Nova::builder()
        .ollama(&mock)
        .settings(json!({"retry": {"baseDelayMs": 300}}))
        .spawn();
    let mut ids = vec![json!("p1")];
    nova.send(&json!({"type": "prompt", "message": "stream", "id": "p1"}));
    nova.wait_for_type("message_update", EVENT_TIMEOUT);
    ids.extend(flood(&mut nova, "a", 150));
    nova.send(&json!({"type": "abort", "id": "abort-1"}));
    ids.push(json!("abort-1"));
    ids.extend(flood(&mut nova, "bb", 60));
    nova.events_until("agent_settled");

    // A 503 is retried after a wait; commands keep coming through the stream and the wait.
    mock.push(Reply::http_error(503, "busy"));
    mock.push(Reply::many_chunks(200, "y").delay_per_frame(Duration::from_millis(1)));
    nova.send(&json!({"type": "prompt", "message": "again", "id": 7}));
    ids.push(json!(7));
    ids.extend(flood(&mut nova, "ccc", 150));
    let events = nova.events_until("agent_settled");
    assert!(
        events.iter().any(|e| e["type"] == "auto_retry_start"),
        "the second run retried"
    );
    nova.request_ok(json!({"type": "get_state", "id": "last"}));
    ids.push(json!("last"));

    let mut counts = std::collections::HashMap::new();
    for line in nova.log() {
        if line.value["type"] == "response" {
            *counts.entry(line.value["id"].to_string()).or_insert(0) += 1;
        }
    }
    for id in &ids {
        assert_eq!(counts.remove(&id.to_string()), Some(1), "responses to {id}");
    }
    assert!(counts.is_empty(), "responses to ids never sent: {counts:?}");
}
