use super::*;
use crate::protocol::{ContentBlock, Message};
use crate::provider::ErrorKind;
use crate::provider::prepare::tests::{assistant, call, model, result, user_text};
use crate::provider::test_support::{Outcome, all_splits_agree};
use ProviderEvent::*;
use serde_json::json;
use std::sync::Arc;

fn radius() -> Model {
    Model {
        reasoning: true,
        provider: "radius".into(),
        ..model("pi-messages", true)
    }
}

fn run(chunks: &[&[u8]]) -> Outcome {
    let mut acc = Accumulator::with_id_prefix(&radius(), "t".into());
    let mut events = Vec::new();
    for c in chunks {
        if let Err(e) = acc.push(c, &mut events) {
            return (events, Some(e));
        }
    }
    let err = acc.finish(&mut events).err();
    (events, err)
}

fn check(events: &[Value]) -> Outcome {
    let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    all_splits_agree(body.as_bytes(), run)
}

fn done(reason: &str) -> Value {
    json!({"type": "done", "reason": reason, "responseId": "r-1",
           "usage": {"input": 100, "output": 20, "cacheRead": 1000, "cacheWrite": 0,
                     "totalTokens": 1120, "cost": {"total": 9}}})
}

#[test]
fn text_thinking_and_a_streamed_call_become_events() {
    let (events, err) = check(&[
        json!({"type": "start", "partial": {}}),
        json!({"type": "thinking_start", "contentIndex": 0}),
        json!({"type": "thinking_delta", "contentIndex": 0, "delta": "hm"}),
        json!({"type": "thinking_end", "contentIndex": 0, "content": "hm", "contentSignature": "sig"}),
        json!({"type": "text_start", "contentIndex": 1}),
        json!({"type": "text_delta", "contentIndex": 1, "delta": "héllo "}),
        json!({"type": "text_delta", "contentIndex": 1, "delta": "world"}),
        json!({"type": "text_end", "contentIndex": 1, "content": "héllo world"}),
        json!({"type": "toolcall_start", "contentIndex": 2, "id": "c1", "toolName": "read"}),
        json!({"type": "toolcall_delta", "contentIndex": 2, "delta": "{\"path\""}),
        json!({"type": "toolcall_delta", "contentIndex": 2, "delta": ":\"a\"}"}),
        json!({"type": "toolcall_end", "contentIndex": 2,
               "toolCall": {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}}),
        done("toolUse"),
    ]);
    assert_eq!(err, None);
    let call = |id: Option<&str>, name: Option<&str>, args: &str| ToolCall {
        index: 0,
        id: id.map(Into::into),
        name: name.map(Into::into),
        arguments: args.into(),
    };
    assert_eq!(
        events[..8],
        [
            Thinking("hm".into()),
            ThinkingSignature("sig".into()),
            Text("héllo ".into()),
            Text("world".into()),
            call(Some("c1"), Some("read"), ""),
            call(None, None, "{\"path\""),
            call(None, None, ":\"a\"}"),
            match &events[7] {
                Usage(u) => Usage(u.clone()),
                other => panic!("expected usage, got {other:?}"),
            },
        ]
    );
    let Usage(usage) = &events[7] else {
        unreachable!()
    };
    // Priced by nova from the model's rates ($3 in, $15 out, $0.3 cached), not the gateway's.
    assert_eq!(
        (usage.input, usage.output, usage.cache_read),
        (100, 20, 1000)
    );
    assert!((usage.cost.total - (300.0 + 300.0 + 300.0) / 1_000_000.0).abs() < 1e-12);
    assert_eq!(events[8], Finish(StopReason::ToolUse));
    assert_eq!(events.len(), 9);
}

#[test]
fn whole_blocks_sent_only_at_their_end_are_kept_and_ids_invented() {
    let (events, err) = check(&[
        json!({"type": "text_start", "contentIndex": 0}),
        json!({"type": "text_end", "contentIndex": 0, "content": "all at once", "contentSignature": "msg_1"}),
        json!({"type": "thinking_start", "contentIndex": 1}),
        json!({"type": "thinking_end", "contentIndex": 1, "content": "", "contentSignature": "opaque", "redacted": true}),
        json!({"type": "toolcall_start", "contentIndex": 2, "toolName": "ls"}),
        json!({"type": "toolcall_end", "contentIndex": 2, "toolCall": {"arguments": {"path": "."}}}),
        done("stop"),
    ]);
    assert_eq!(err, None);
    assert_eq!(
        events[..5],
        [
            Text("all at once".into()),
            TextSignature("msg_1".into()),
            RedactedThinking("opaque".into()),
            ToolCall {
                index: 0,
                id: Some("call_t_0".into()),
                name: Some("ls".into()),
                arguments: String::new()
            },
            ToolCall {
                index: 0,
                id: None,
                name: None,
                arguments: "{\"path\":\".\"}".into()
            },
        ]
    );
    assert_eq!(events.last(), Some(&Finish(StopReason::Stop)));
}

#[test]
fn errors_are_classified_and_bad_streams_named() {
    let (events, err) = check(&[
        json!({"type": "text_start", "contentIndex": 0}),
        json!({"type": "text_delta", "contentIndex": 0, "delta": "par"}),
        json!({"type": "error", "reason": "error", "errorMessage": "429 Too Many Requests: rate limit"}),
    ]);
    assert_eq!(events, [Text("par".into())]);
    assert_eq!(
        err.as_ref().map(ProviderError::kind),
        Some(ErrorKind::Retryable)
    );

    let (_, err) = check(&[json!({"type": "error", "reason": "error",
        "errorMessage": "prompt is too long: 250000 tokens > 200000 maximum"})]);
    assert_eq!(
        err.as_ref().map(ProviderError::kind),
        Some(ErrorKind::Overflow)
    );

    let (_, err) = check(&[json!({"type": "error", "reason": "error"})]);
    assert_eq!(
        err,
        Some(ProviderError::Api(
            "the gateway ended the reply with an error".into()
        ))
    );

    // Cut before its terminal event.
    let (_, err) = check(&[json!({"type": "text_start", "contentIndex": 0})]);
    assert_eq!(err, Some(ProviderError::EndedEarly));

    for bad in [json!(5), json!(-1), json!("__proto__"), json!(1e300)] {
        let (_, err) = check(&[json!({"type": "text_start", "contentIndex": bad})]);
        let text = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("invalid contentIndex"), "{text}");
    }
    let (_, err) = check(&[done("exploded")]);
    assert!(err.is_some_and(|e| e.to_string().contains("\"exploded\"")));

    let (_, err) = all_splits_agree(b"data: {\"type\": oops\n\n", run);
    assert!(matches!(err, Some(ProviderError::InvalidJson { .. })));
}

#[test]
fn body_carries_the_conversation_in_pis_shapes() {
    let mut m = radius();
    m.id = "balanced".into();
    let messages: Vec<Arc<Message>> = [
        user_text("hi"),
        assistant(
            vec![ContentBlock::text("reading"), call("c1", "read")],
            StopReason::ToolUse,
        ),
        result("c1", vec![ContentBlock::text("file text")]),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let tools = [ToolSpec {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object"}),
    }];
    let req = Request {
        model: &m,
        system_prompt: "be brief",
        messages: &messages,
        tools: &tools,
        max_tokens: None,
        thinking: Some(ThinkingLevel::High),
        session_id: None,
    };
    let body: Value =
        serde_json::from_slice(&build_body(&req, crate::provider::body::Buffer).unwrap()).unwrap();
    assert_eq!(body["model"], "balanced");
    assert_eq!(body["context"]["systemPrompt"], "be brief");
    assert_eq!(body["context"]["tools"][0]["name"], "read");
    let sent = &body["context"]["messages"];
    assert_eq!(
        sent[0],
        json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    );
    assert_eq!(sent[1]["role"], "assistant");
    assert_eq!(sent[1]["stopReason"], "toolUse");
    assert_eq!(sent[1]["content"][1]["type"], "toolCall");
    assert_eq!(
        sent[2],
        json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
               "content": [{"type": "text", "text": "file text"}], "isError": false})
    );
    assert_eq!(body["options"]["reasoning"], "high");
    assert!(body["options"]["maxTokens"].as_u64().is_some_and(|n| n > 0));

    let off = Request {
        thinking: Some(ThinkingLevel::Off),
        tools: &[],
        system_prompt: "",
        ..req
    };
    let body: Value =
        serde_json::from_slice(&build_body(&off, crate::provider::body::Buffer).unwrap()).unwrap();
    assert_eq!(body["options"].get("reasoning"), None);
    assert_eq!(body["context"].get("tools"), None);
    assert_eq!(body["context"].get("systemPrompt"), None);
    assert_eq!(
        endpoint("https://radius.pi.dev/v1/"),
        "https://radius.pi.dev/v1/messages"
    );
}
