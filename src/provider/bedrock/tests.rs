use super::*;
use crate::protocol::{Message, StopReason};
use crate::provider::ErrorKind;
use crate::provider::prepare::tests::{assistant, model, result, user_text};
use crate::provider::test_support::{Outcome, all_splits_agree};
use ProviderEvent::*;
use aws_smithy_types::event_stream::Header;
use serde_json::json;
use std::sync::Arc;

fn claude() -> Model {
    Model {
        id: "global.anthropic.claude-sonnet-4-5-20250929-v1:0".into(),
        name: "Claude Sonnet 4.5".into(),
        reasoning: true,
        provider: "amazon-bedrock".into(),
        ..model("bedrock-converse-stream", true)
    }
}

/// One event frame as Bedrock sends it, built with AWS's own encoder.
fn event(kind: &str, payload: Value) -> Vec<u8> {
    frame(
        vec![
            Header::new(":event-type", HeaderValue::String(kind.to_owned().into())),
            Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
            Header::new(":message-type", HeaderValue::String("event".into())),
        ],
        payload,
    )
}

fn exception_frame(kind: &str, message: &str) -> Vec<u8> {
    frame(
        vec![
            Header::new(
                ":exception-type",
                HeaderValue::String(kind.to_owned().into()),
            ),
            Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
            Header::new(":message-type", HeaderValue::String("exception".into())),
        ],
        json!({"message": message}),
    )
}

fn frame(headers: Vec<Header>, payload: Value) -> Vec<u8> {
    let message = aws_smithy_types::event_stream::Message::new_from_parts(
        headers,
        serde_json::to_vec(&payload).unwrap(),
    );
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

fn run(chunks: &[&[u8]]) -> Outcome {
    let mut acc = Accumulator::with_id_prefix(&claude(), "t".into());
    let mut events = Vec::new();
    for c in chunks {
        if let Err(e) = acc.push(c, &mut events) {
            return (events, Some(e));
        }
    }
    let err = acc.finish(&mut events).err();
    (events, err)
}

fn check(frames: &[Vec<u8>]) -> Outcome {
    all_splits_agree(&frames.concat(), run)
}

fn delta(index: u64, delta: Value) -> Vec<u8> {
    event(
        "contentBlockDelta",
        json!({"contentBlockIndex": index, "delta": delta, "p": "abcdefgh"}),
    )
}

fn stop(index: u64) -> Vec<u8> {
    event(
        "contentBlockStop",
        json!({"contentBlockIndex": index, "p": "ab"}),
    )
}

fn message_stop(reason: &str) -> Vec<u8> {
    event("messageStop", json!({"stopReason": reason, "p": "abc"}))
}

fn metadata() -> Vec<u8> {
    event(
        "metadata",
        json!({"usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 170,
                          "cacheReadInputTokens": 40, "cacheWriteInputTokens": 10},
               "metrics": {"latencyMs": 812}, "p": "abcdef"}),
    )
}

#[test]
fn thinking_text_and_parallel_tool_calls_at_every_split() {
    let frames = vec![
        event("messageStart", json!({"role": "assistant", "p": "abcd"})),
        delta(0, json!({"reasoningContent": {"text": "Let me "}})),
        delta(0, json!({"reasoningContent": {"text": "think ✓"}})),
        delta(0, json!({"reasoningContent": {"signature": "sig-1"}})),
        stop(0),
        delta(1, json!({"text": "Reading "})),
        delta(1, json!({"text": "both."})),
        stop(1),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_a", "name": "read"}}}),
        ),
        delta(2, json!({"toolUse": {"input": "{\"path\":"}})),
        delta(2, json!({"toolUse": {"input": "\"a.txt\"}"}})),
        stop(2),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 3, "start": {"toolUse": {"toolUseId": "tooluse_b", "name": "read"}}}),
        ),
        delta(3, json!({"toolUse": {"input": "{\"path\":\"b.txt\"}"}})),
        stop(3),
        message_stop("tool_use"),
        metadata(),
    ];
    let (events, err) = check(&frames);
    assert_eq!(err, None);
    let call = |index, id: Option<&str>, name: Option<&str>, arguments: &str| ToolCall {
        index,
        id: id.map(Into::into),
        name: name.map(Into::into),
        arguments: arguments.into(),
    };
    assert_eq!(
        events[..11],
        [
            Thinking("Let me ".into()),
            Thinking("think ✓".into()),
            ThinkingSignature("sig-1".into()),
            Text("Reading ".into()),
            Text("both.".into()),
            call(0, Some("tooluse_a"), Some("read"), ""),
            call(0, None, None, "{\"path\":"),
            call(0, None, None, "\"a.txt\"}"),
            call(1, Some("tooluse_b"), Some("read"), ""),
            call(1, None, None, "{\"path\":\"b.txt\"}"),
            match &events[10] {
                Usage(u) => Usage(u.clone()),
                other => panic!("{other:?}"),
            },
        ]
    );
    let Usage(u) = &events[10] else { panic!() };
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens
        ),
        (100, 20, 40, 10, 170)
    );
    // $3 in, $15 out, $0.30 cached per million.
    assert!((u.cost.total - (100.0 * 3.0 + 20.0 * 15.0 + 40.0 * 0.3) / 1e6).abs() < 1e-12);
    assert_eq!(events[11], Finish(StopReason::ToolUse));
    assert_eq!(events.len(), 12);
}

#[test]
fn encrypted_reasoning_comes_whole_and_stop_reasons_map() {
    let frames = vec![
        delta(0, json!({"reasoningContent": {"redactedContent": "AAEC"}})),
        delta(0, json!({"reasoningContent": {"redactedContent": "AwQF"}})),
        stop(0),
        delta(1, json!({"text": "ok"})),
        message_stop("max_tokens"),
    ];
    let (events, err) = check(&frames);
    assert_eq!(err, None);
    assert_eq!(
        events,
        [
            RedactedThinking("AAECAwQF".into()),
            Text("ok".into()),
            Finish(StopReason::Length)
        ]
    );
    for (reason, expected) in [
        ("end_turn", Some(StopReason::Stop)),
        ("stop_sequence", Some(StopReason::Stop)),
        ("model_context_window_exceeded", Some(StopReason::Length)),
        ("guardrail_intervened", None),
        ("something_new", None),
    ] {
        let (events, err) = run(&[&message_stop(reason)]);
        match expected {
            Some(stop) => assert_eq!((events, err), (vec![Finish(stop)], None)),
            None => assert!(err.is_some(), "{reason}"),
        }
    }
}

#[test]
fn exceptions_are_classified_and_bad_frames_fail_cleanly() {
    let text = [delta(0, json!({"text": "Hi"}))];
    for (kind, message, expected) in [
        (
            "throttlingException",
            "Too many requests, please wait",
            ErrorKind::Retryable,
        ),
        ("serviceUnavailableException", "busy", ErrorKind::Retryable),
        ("internalServerException", "oops", ErrorKind::Retryable),
        (
            "validationException",
            "Input is too long for requested model.",
            ErrorKind::Overflow,
        ),
        ("validationException", "messages.0: bad", ErrorKind::Other),
    ] {
        let mut frames = text.to_vec();
        frames.push(exception_frame(kind, message));
        let (events, err) = check(&frames);
        assert_eq!(events, [Text("Hi".into())]);
        let err = err.unwrap();
        assert_eq!(err.kind(), expected, "{kind}: {err}");
        assert!(err.to_string().contains(message), "{err}");
    }
    // A frame whose checksum does not match, a cut stream, a stream without a stop.
    let mut bad = delta(0, json!({"text": "Hi"}));
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert!(run(&[&bad]).1.is_some());
    let whole = delta(0, json!({"text": "Hi"}));
    assert_eq!(
        run(&[&whole[..whole.len() - 3]]).1,
        Some(ProviderError::EndedEarly)
    );
    assert_eq!(run(&[&whole]).1, Some(ProviderError::EndedEarly));
    // A frame that claims to be huge is refused before it is buffered whole.
    let mut huge = 0x7fff_ffffu32.to_be_bytes().to_vec();
    huge.extend(vec![0u8; MAX_FRAME_BYTES + 16]);
    assert!(run(&[&huge]).1.is_some());
}

#[test]
fn http_errors_are_worded_like_the_stream_s() {
    let text = http_error_text(
        Some("ThrottlingException:http://internal.amazon.com/coral/"),
        r#"{"message":"Too many tokens, please wait before trying again."}"#,
    );
    assert_eq!(
        text,
        "Throttling error: Too many tokens, please wait before trying again."
    );
    let e = ProviderError::http(429, "u", &text);
    assert_eq!(e.kind(), ErrorKind::Retryable);
    assert_eq!(http_error_text(None, "plain"), "plain");
}

#[test]
fn the_request_body_is_converse_s() {
    let m = claude();
    let mut reply = assistant(
        vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                thinking_signature: Some("sig".into()),
                redacted: None,
            },
            ContentBlock::Thinking {
                thinking: "[Reasoning redacted]".into(),
                thinking_signature: Some("AAEC".into()),
                redacted: Some(true),
            },
            ContentBlock::Text {
                text: "reading".into(),
                text_signature: None,
            },
            ContentBlock::ToolCall {
                id: "call|1".into(),
                name: "read".into(),
                arguments: json!({"path": "a", "": 1}),
                thought_signature: None,
            },
        ],
        StopReason::ToolUse,
    );
    if let Message::Assistant(a) = &mut reply {
        a.api = "bedrock-converse-stream".into();
        a.provider = m.provider.clone();
        a.model = m.id.clone();
    }
    let image = ContentBlock::Image {
        data: "iVBORw0KGgo=".into(),
        mime_type: "image/png".into(),
    };
    let messages: Vec<Arc<Message>> = vec![
        Arc::new(user_text("hi")),
        Arc::new(reply),
        Arc::new(result("call|1", vec![image])),
    ];
    let tools = [ToolSpec {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object"}),
    }];
    let req = Request {
        model: &m,
        system_prompt: "sys",
        messages: &messages,
        tools: &tools,
        max_tokens: None,
        thinking: Some(ThinkingLevel::Medium),
        session_id: None,
    };
    let body: Value =
        serde_json::from_slice(&build_body(&req, crate::provider::body::Buffer).unwrap()).unwrap();
    assert_eq!(
        body["system"],
        json!([{"text": "sys"}, {"cachePoint": {"type": "default"}}])
    );
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "sig"}}},
            {"reasoningContent": {"redactedContent": "AAEC"}},
            {"text": "reading"},
            {"toolUse": {"toolUseId": "call_1", "name": "read", "input": {"path": "a"}}},
        ])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([
            {"toolResult": {"toolUseId": "call_1", "status": "success", "content": [
                {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}]}},
            {"cachePoint": {"type": "default"}},
        ])
    );
    assert_eq!(
        body["toolConfig"]["tools"][0],
        json!({"toolSpec": {"name": "read", "description": "Read a file",
                            "inputSchema": {"json": {"type": "object"}}}})
    );
    let fields = &body["additionalModelRequestFields"];
    assert_eq!(fields["thinking"]["type"], "enabled");
    assert_eq!(fields["thinking"]["budget_tokens"], 8192);
    assert!(body["inferenceConfig"]["maxTokens"].as_u64().unwrap() > 8192);
    // Another model's reasoning is not sent back to this one; an adaptive model gets an effort.
    let opus = Model {
        id: "global.anthropic.claude-opus-5-5".into(),
        ..claude()
    };
    let req = Request {
        model: &opus,
        ..req
    };
    let body: Value =
        serde_json::from_slice(&build_body(&req, crate::provider::body::Buffer).unwrap()).unwrap();
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"text": "reading"})
    );
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"thinking": {"type": "adaptive", "display": "summarized"},
               "output_config": {"effort": "medium"}})
    );
    assert_eq!(
        endpoint(
            "http://h/",
            "arn:aws:bedrock:us-east-1:1:inference-profile/x"
        ),
        "http://h/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse-stream"
    );
}
