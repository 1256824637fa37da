//! The wire mirror types against nova's own protocol types: every event and response shape that
//! `src/protocol.rs` can produce must decode, and drift (extra fields, `null` optionals) must not.

use crate::support::wire::{
    AssistantMessageEvent, Event, Out, ResponseData, StopReason, decode_line, try_decode_line,
};
use nova::protocol::{self as p, ContentBlock};
use serde_json::{Value, json};

fn assistant() -> p::Message {
    p::Message::Assistant(p::AssistantMessage {
        content: vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                thinking_signature: Some("reasoning_content".into()),
                redacted: None,
            },
            ContentBlock::text("hello"),
            ContentBlock::ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: json!({"path": "a"}),
                thought_signature: None,
            },
        ],
        api: "ollama".into(),
        provider: "mock-ollama".into(),
        model: "test-model".into(),
        usage: p::Usage::default(),
        stop_reason: p::StopReason::ToolUse,
        error_message: None,
        response_id: None,
        thinking_level: None,
        raw_stop_reason: None,
        duration_ms: None,
        timestamp: 1,
    })
}

fn tool_result() -> p::Message {
    p::Message::ToolResult(p::ToolResultMessage {
        tool_call_id: "c1".into(),
        tool_name: "read".into(),
        content: vec![
            ContentBlock::text("x"),
            ContentBlock::image("AAAA", "image/png"),
        ],
        details: Some(json!({}).into()),
        is_error: false,
        duration_ms: None,
        timestamp: 2,
    })
}

fn user() -> p::Message {
    p::Message::User(p::UserMessage {
        content: p::UserContent::Text("hi".into()),
        timestamp: 0,
    })
}

fn all_events() -> Vec<p::Event> {
    use p::AssistantMessageEvent as A;
    let payload = p::ToolResultPayload {
        content: vec![ContentBlock::text("out")],
        details: None,
        structured_content: Some(Box::new(p::StructuredContent::Command(p::CommandOutcome {
            output: "out".into(),
            truncated: false,
            full_output_path: None,
            exit_code: 0,
            wall_time_seconds: 0.1,
        }))),
    };
    let updates = [
        A::TextStart { content_index: 0 },
        A::TextDelta {
            content_index: 0,
            delta: "a".into(),
        },
        A::TextEnd {
            content_index: 0,
            content: "a".into(),
        },
        A::ThinkingStart { content_index: 1 },
        A::ThinkingDelta {
            content_index: 1,
            delta: "t".into(),
        },
        A::ThinkingEnd {
            content_index: 1,
            content: "t".into(),
        },
        A::ToolcallStart {
            content_index: 2,
            id: "c1".into(),
            tool_name: "read".into(),
        },
        A::ToolcallDelta {
            content_index: 2,
            delta: "{".into(),
        },
        A::ToolcallEnd {
            content_index: 2,
            tool_call: ContentBlock::ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: json!({}),
                thought_signature: None,
            },
        },
    ];
    let mut events = vec![
        p::Event::AgentStart,
        p::Event::AgentEnd {
            messages: vec![user().into(), assistant().into(), tool_result().into()],
            will_retry: false,
        },
        p::Event::AgentSettled { aborted: true },
        p::Event::TurnStart,
        p::Event::TurnEnd {
            turn_index: 0,
            message: assistant(),
            tool_results: vec![tool_result()],
        },
        p::Event::MessageStart { message: user() },
        p::Event::MessageEnd {
            message: assistant(),
        },
        p::Event::ToolExecutionStart {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            args: json!("{not json"),
        },
        p::Event::ToolExecutionUpdate {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            args: json!({"command": "ls"}),
            partial_result: payload.clone(),
        },
        p::Event::ToolExecutionEnd {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            result: payload,
            is_error: true,
            duration_ms: Some(12),
        },
        p::Event::QueueUpdate {
            steering: vec!["s".into()],
            follow_up: vec![],
            pending_message_count: 1,
        },
        p::Event::PermissionRequest {
            request_id: 1,
            tool_call_id: "call_1".into(),
            tool_name: "bash".into(),
            command: "rm -rf x".into(),
            reason: "a recursive or forced rm".into(),
        },
    ];
    events.extend(updates.into_iter().map(|e| p::Event::MessageUpdate {
        assistant_message_event: e,
        usage: p::Usage::default(),
    }));
    events
}

#[test]
fn every_protocol_event_decodes() {
    for e in all_events() {
        let v = serde_json::to_value(&e).unwrap();
        let out = decode_line(&v);
        assert!(out.event().is_some(), "{v}");
        // The mirror re-encodes to the same JSON: nothing was dropped or renamed.
        let Out::Event(mirror) = out else {
            unreachable!()
        };
        assert_eq!(serde_json::to_value(&*mirror).unwrap(), v);
    }
}

#[test]
fn assistant_message_helpers() {
    let v = serde_json::to_value(p::Event::MessageEnd {
        message: assistant(),
    })
    .unwrap();
    let Out::Event(e) = decode_line(&v) else {
        panic!()
    };
    let Event::MessageEnd { message } = *e else {
        panic!()
    };
    let a = message.as_assistant().unwrap();
    assert_eq!(a.text(), "hello");
    assert_eq!(a.thinking(), "hmm");
    assert_eq!(a.tool_calls()[0].name, "read");
    assert_eq!(a.stop_reason, StopReason::ToolUse);
}

#[test]
fn responses_decode_with_their_data() {
    let state = p::State {
        model: None,
        thinking_level: p::ThinkingLevel::Off,
        is_streaming: false,
        is_compacting: false,
        steering_mode: p::QueueMode::OneAtATime,
        follow_up_mode: p::QueueMode::All,
        session_file: None,
        session_id: "s".into(),
        session_name: None,
        auto_compaction_enabled: true,
        message_count: 0,
        pending_message_count: 0,
        pending_permission_requests: 0,
        sandbox: p::SandboxState {
            mode: "workspace-write",
            enforced: true,
            network: true,
            unavailable: None,
        },
        mcp_servers: Vec::new(),
    };
    let r = p::Response::ok(
        Some(json!("req-1")),
        "get_state",
        Some(p::ResponseData::State(Box::new(state))),
    );
    let out = decode_line(&serde_json::to_value(&r).unwrap());
    let resp = out.response().unwrap();
    assert!(matches!(
        resp.decoded_data().unwrap(),
        ResponseData::State(_)
    ));

    let model = p::Model {
        id: "test-model".into(),
        name: "test-model".into(),
        api: nova::protocol::Api::Ollama,
        provider: "mock-ollama".into(),
        base_url: "http://127.0.0.1:1".into(),
        reasoning: false,
        input: vec!["text".into()],
        cost: p::ModelCost::default(),
        context_window: 128000,
        max_tokens: 4096,
        thinking_level_map: None,
        compat: None,
        load: Default::default(),
    };
    let r = p::Response::ok(
        None,
        "set_model",
        Some(p::ResponseData::Model(Box::new(model))),
    );
    decode_line(&serde_json::to_value(&r).unwrap());

    let r = p::Response::ok(
        Some(json!(7)),
        "prompt",
        Some(p::ResponseData::Prompt {
            disposition: p::Disposition::Started,
        }),
    );
    decode_line(&serde_json::to_value(&r).unwrap());
    let r = p::Response::error(None, "parse", "Failed to parse command: x");
    decode_line(&serde_json::to_value(&r).unwrap());
    let r = p::Response::ok(None, "abort", None);
    decode_line(&serde_json::to_value(&r).unwrap());
}

#[test]
fn drift_is_rejected() {
    let bad: [Value; 8] = [
        json!({"type": "agent_start", "extra": 1}),
        json!({"type": "agent_settled"}),
        json!({"type": "no_such_event"}),
        json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x", "partial": {}}}),
        json!({"type": "message_start", "message": {"role": "user", "content": "hi", "timestamp": 0, "extra": true}}),
        json!({"type": "response", "command": "abort", "success": true, "error": null}),
        json!({"type": "response", "command": "abort", "success": false}),
        json!({"type": "response", "command": "prompt", "success": true, "data": {"disposition": "maybe"}}),
    ];
    for v in bad {
        assert!(try_decode_line(&v).is_err(), "accepted drifted line {v}");
    }
    let usage = json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}});
    let ok = json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x"}, "usage": usage});
    let Out::Event(e) = decode_line(&ok) else {
        panic!()
    };
    assert!(matches!(
        *e,
        Event::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta { .. },
            ..
        }
    ));
}

#[test]
#[should_panic(expected = "does not match the wire mirror types")]
fn decode_line_panics_with_the_line() {
    decode_line(&json!({"type": "turn_end"}));
}
