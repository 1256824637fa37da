use super::*;
use crate::protocol::{Message, StopReason, ToolResultMessage, UserContent, UserMessage};
use crate::provider::ErrorKind;
use crate::provider::prepare::tests::{assistant, call, model, result, user_text};
use crate::provider::test_support::{Outcome, all_splits_agree};
use ProviderEvent::*;
use serde_json::json;
use std::sync::Arc;

fn run(chunks: &[&[u8]]) -> Outcome {
    let mut acc = Accumulator::new(&model("anthropic-messages", true));
    let mut events = Vec::new();
    let mut err = None;
    for c in chunks {
        if let Err(e) = acc.push(c, &mut events) {
            err = Some(e);
            break;
        }
    }
    if err.is_none() {
        err = acc.finish(&mut events).err();
    }
    // The reply's start is checked once, in `the_start_carries_the_id_and_input_usage`.
    events.retain(|e| !matches!(e, Start { .. }));
    (events, err)
}

#[test]
fn the_start_carries_the_id_and_input_usage() {
    let mut acc = Accumulator::new(&model("anthropic-messages", true));
    let mut events = Vec::new();
    acc.push(sse(&[message_start()]).as_bytes(), &mut events)
        .unwrap();
    let [Start { response_id, usage }] = &events[..] else {
        panic!("one start, not {events:?}");
    };
    assert_eq!(response_id.as_deref(), Some("msg_01"));
    let usage = usage.as_ref().unwrap();
    assert_eq!(
        (usage.input, usage.output, usage.cache_read),
        (1200, 1, 4000)
    );
}

/// Frames each payload as Anthropic does: `event: <its type>`, `data: <payload>`, blank line.
fn sse(payloads: &[Value]) -> String {
    payloads
        .iter()
        .map(|p| format!("event: {}\ndata: {p}\n\n", p["type"].as_str().unwrap()))
        .collect()
}

fn check(payloads: &[Value]) -> Outcome {
    all_splits_agree(sse(payloads).as_bytes(), run)
}

fn message_start() -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "m1", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 300,
                  "cache_read_input_tokens": 4000, "output_tokens": 1}}})
}

fn block_start(index: u64, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: u64, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn block_stop(index: u64) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_delta(reason: &str) -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
           "usage": {"output_tokens": 250}})
}

fn message_stop() -> Value {
    json!({"type": "message_stop"})
}

fn usage() -> ProviderEvent {
    let u = crate::provider::priced(
        &model("anthropic-messages", true),
        Tokens {
            input: 1200,
            output: 250,
            cache_read: 4000,
            cache_write: 300,
            cache_write_1h: Some(0),
        },
    );
    assert_eq!(u.total_tokens, 5750);
    Usage(u)
}

#[test]
fn text_with_pings_and_cache_usage() {
    let payloads = [
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        json!({"type": "ping"}),
        delta(0, json!({"type": "text_delta", "text": "Hello"})),
        delta(0, json!({"type": "text_delta", "text": " wörld ✓"})),
        block_stop(0),
        message_delta("end_turn"),
        message_stop(),
    ];
    let want = (
        vec![
            Text("Hello".into()),
            Text(" wörld ✓".into()),
            usage(),
            Finish(StopReason::Stop),
        ],
        None,
    );
    assert_eq!(check(&payloads), want);
    // CRLF framing, and a server that closes after the stop reason without `message_stop`.
    let crlf = sse(&payloads).replace('\n', "\r\n");
    assert_eq!(all_splits_agree(crlf.as_bytes(), run), want);
    assert_eq!(check(&payloads[..7]), want);
}

#[test]
fn thinking_signature_redacted_and_tool_use() {
    let payloads = [
        message_start(),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "look."})),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "EqQBCkYIAR"}),
        ),
        block_stop(0),
        block_start(
            1,
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"}),
        ),
        block_stop(1),
        block_start(2, json!({"type": "text", "text": "Reading."})),
        block_stop(2),
        block_start(
            3,
            json!({"type": "tool_use", "id": "toolu_01", "name": "read", "input": {}}),
        ),
        delta(3, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(
            3,
            json!({"type": "input_json_delta", "partial_json": "{\"path\": \"a"}),
        ),
        delta(
            3,
            json!({"type": "input_json_delta", "partial_json": ".rs\"}"}),
        ),
        block_stop(3),
        block_start(
            4,
            json!({"type": "tool_use", "id": "toolu_02", "name": "ls", "input": {"path": "."}}),
        ),
        block_stop(4),
        message_delta("tool_use"),
        message_stop(),
    ];
    let frag = |index, id: Option<&str>, name: Option<&str>, arguments: &str| ToolCall {
        index,
        id: id.map(Into::into),
        name: name.map(Into::into),
        arguments: arguments.into(),
    };
    assert_eq!(
        check(&payloads),
        (
            vec![
                Thinking(String::new()),
                Thinking("Let me ".into()),
                Thinking("look.".into()),
                ThinkingSignature("EqQBCkYIAR".into()),
                RedactedThinking("EmwKAhgBEgy3va".into()),
                Text("Reading.".into()),
                frag(0, Some("toolu_01"), Some("read"), ""),
                // The server's empty first fragment, passed on as Pi passes it.
                frag(0, None, None, ""),
                frag(0, None, None, "{\"path\": \"a"),
                frag(0, None, None, ".rs\"}"),
                frag(1, Some("toolu_02"), Some("ls"), "{\"path\":\".\"}"),
                usage(),
                Finish(StopReason::ToolUse),
            ],
            None
        )
    );
}

#[test]
fn errors() {
    let text = [
        message_start(),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hi"})),
    ];
    let with = |extra: Value| {
        let mut p = text.to_vec();
        p.push(extra);
        check(&p)
    };
    let overloaded = json!({"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let (events, err) = with(overloaded);
    assert_eq!(events, [Text("Hi".into())]);
    let err = err.unwrap();
    assert_eq!(
        err,
        ProviderError::Api("Overloaded (overloaded_error)".into())
    );
    assert_eq!(err.kind(), ErrorKind::Retryable);

    let invalid = json!({"type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}});
    assert_eq!(with(invalid).1.unwrap().kind(), ErrorKind::Overflow);
    let auth = json!({"type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    assert_eq!(with(auth).1.unwrap().kind(), ErrorKind::Auth);

    let refusal = json!({"type": "message_delta", "delta": {"stop_reason": "refusal",
        "stop_details": {"explanation": "I can't help with that."}}});
    assert_eq!(
        with(refusal).1,
        Some(ProviderError::Api("I can't help with that.".into()))
    );
    assert_eq!(
        with(message_delta("sensitive")).1,
        Some(ProviderError::ContentFilter)
    );
    assert_eq!(
        check(&text),
        (vec![Text("Hi".into())], Some(ProviderError::EndedEarly))
    );

    let cut = format!("{}data: {{\"type\":\"content_bl", sse(&text));
    let (events, err) = all_splits_agree(cut.as_bytes(), run);
    assert_eq!(events, [Text("Hi".into())]);
    assert!(
        err.unwrap().to_string().contains("content_bl"),
        "the bad line is quoted"
    );

    let plain = "event: error\ndata: upstream connect error\n\n";
    assert_eq!(
        all_splits_agree(plain.as_bytes(), run).1,
        Some(ProviderError::Api("upstream connect error".into()))
    );
}

#[test]
fn endpoints() {
    assert_eq!(
        endpoint("https://api.anthropic.com/"),
        "https://api.anthropic.com/v1/messages"
    );
}

fn body_of(req: &Request) -> Value {
    serde_json::from_slice(
        &build_body(req, Identity::ApiKey, crate::provider::body::Buffer).unwrap(),
    )
    .unwrap()
}

fn request<'a>(m: &'a Model, messages: &'a [Arc<Message>], tools: &'a [ToolSpec]) -> Request<'a> {
    Request {
        model: m,
        system_prompt: "You are nova.",
        messages,
        tools,
        max_tokens: None,
        thinking: None,
        session_id: None,
    }
}

fn anthropic_reply(blocks: Vec<ContentBlock>, stop: StopReason) -> Message {
    let Message::Assistant(mut a) = assistant(blocks, stop) else {
        unreachable!()
    };
    a.api = "anthropic-messages".into();
    Message::Assistant(a)
}

#[test]
fn body() {
    let m = model("anthropic-messages", true);
    let png = ContentBlock::image("aW1n", "image/png");
    let thinking =
        |text: &str, signature: Option<&str>, redacted: Option<bool>| ContentBlock::Thinking {
            thinking: text.into(),
            thinking_signature: signature.map(Into::into),
            redacted,
        };
    let messages: Vec<Arc<Message>> = [
        Message::User(UserMessage {
            content: UserContent::Blocks(vec![
                ContentBlock::text("What is this?"),
                ContentBlock::text("  "),
                png.clone(),
            ]),
            timestamp: 1,
        }),
        anthropic_reply(
            vec![
                thinking("hmm", Some("sig-1"), None),
                thinking("[Reasoning redacted]", Some("opaque"), Some(true)),
                thinking("unsigned", None, None),
                ContentBlock::text(" "),
                call("c1", "read"),
                call("call|odd.id", "view_image"),
                ContentBlock::ToolCall {
                    id: "c3".into(),
                    name: "bash".into(),
                    arguments: json!("not json"),
                    thought_signature: None,
                },
            ],
            StopReason::ToolUse,
        ),
        result(
            "c1",
            vec![ContentBlock::text("line 1"), ContentBlock::text("line 2")],
        ),
        Message::ToolResult(ToolResultMessage {
            tool_call_id: "call|odd.id".into(),
            tool_name: "view_image".into(),
            content: vec![png.clone()],
            details: None,
            is_error: false,
            duration_ms: None,
            timestamp: 3,
        }),
        Message::ToolResult(ToolResultMessage {
            tool_call_id: "c3".into(),
            tool_name: "bash".into(),
            content: vec![
                ContentBlock::text("failed"),
                png.clone(),
                ContentBlock::image("Y2F0", "image/jpeg"),
            ],
            details: None,
            is_error: true,
            duration_ms: None,
            timestamp: 3,
        }),
        // Another model's thinking is not sent: its signature would not verify.
        assistant(
            vec![
                thinking("elsewhere", Some("sig-x"), None),
                ContentBlock::text("A cat."),
            ],
            StopReason::Stop,
        ),
        user_text("thanks"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let tools = [
        ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object"}),
        },
        ToolSpec {
            name: "bash".into(),
            description: "Run".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ];
    let cache = json!({"type": "ephemeral"});
    let png_block = json!({"type": "image", "source":
        {"type": "base64", "media_type": "image/png", "data": "aW1n"}});
    assert_eq!(
        body_of(&request(&m, &messages, &tools)),
        json!({
            "model": "m1",
            "max_tokens": 64000,
            "stream": true,
            "system": [{"type": "text", "text": "You are nova.", "cache_control": cache}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "What is this?"}, png_block]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "unsigned"},
                    {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "c1"}},
                    {"type": "tool_use", "id": "call_odd_id", "name": "view_image",
                     "input": {"path": "call|odd.id"}},
                    {"type": "tool_use", "id": "c3", "name": "bash", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "line 1\nline 2",
                     "is_error": false},
                    {"type": "tool_result", "tool_use_id": "call_odd_id", "is_error": false,
                     "content": [{"type": "text", "text": "(see attached image)"}, png_block]},
                    {"type": "tool_result", "tool_use_id": "c3", "is_error": true, "content": [
                        {"type": "text", "text": "failed"},
                        {"type": "text", "text": "(image attached after the tool results)"},
                    ]},
                    {"type": "text", "text": "Images from the error result of tool call c3 (bash):"},
                    png_block,
                    {"type": "image", "source":
                        {"type": "base64", "media_type": "image/jpeg", "data": "Y2F0"}},
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "thanks", "cache_control": cache},
                ]},
            ],
            "tools": [
                {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}},
                {"name": "bash", "description": "Run",
                 "input_schema": {"type": "object", "properties": {}}, "cache_control": cache},
            ],
        })
    );

    // The last tool result carries the conversation's cache marker when it ends the request.
    let body = body_of(&request(&m, &messages[..3], &[]));
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap();
    assert_eq!(blocks[0]["content"], "line 1\nline 2");
    assert_eq!(blocks.last().unwrap()["cache_control"], cache, "{last}");
    assert!(blocks[..2].iter().all(|b| b.get("cache_control").is_none()));
    assert!(body.get("tools").is_none());
}

#[test]
fn thinking_levels() {
    let messages = [Arc::new(user_text("hi"))];
    let budget = Model {
        reasoning: true,
        max_tokens: 64_000,
        ..model("anthropic-messages", true)
    };
    let body = |m: &Model, level| {
        body_of(&Request {
            thinking: level,
            ..request(m, &messages, &[])
        })
    };
    let b = body(&budget, Some(ThinkingLevel::Medium));
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192, "display": "summarized"})
    );
    // Pi 1.6 asks for the model's whole output budget, the thinking budget inside it.
    assert_eq!(b["max_tokens"], 64_000);
    let b = body(&budget, Some(ThinkingLevel::Max));
    assert_eq!(b["thinking"]["budget_tokens"], 16_384);
    assert_eq!(b["max_tokens"], 64_000);
    // A conversation that fills most of the window leaves less: 128,000 minus ~100,000 of
    // input and Pi's 4,096 margin (the 15% one would leave under 32,768).
    let long = [Arc::new(user_text(&"word ".repeat(80_000)))];
    let b = body_of(&Request {
        thinking: Some(ThinkingLevel::Medium),
        ..request(&budget, &long, &[])
    });
    assert_eq!(b["max_tokens"], 128_000 - 100_000 - 4096);
    // A small model's budget leaves room for the answer.
    let small = Model {
        max_tokens: 4096,
        ..budget.clone()
    };
    let b = body(&small, Some(ThinkingLevel::High));
    assert_eq!(
        (
            b["max_tokens"].as_u64(),
            b["thinking"]["budget_tokens"].as_u64()
        ),
        (Some(4096), Some(3072))
    );
    assert_eq!(
        body(&budget, Some(ThinkingLevel::Off))["thinking"],
        json!({"type": "disabled"})
    );
    assert!(body(&budget, None).get("thinking").is_none());
    let plain = model("anthropic-messages", true);
    assert!(
        body(&plain, Some(ThinkingLevel::High))
            .get("thinking")
            .is_none()
    );

    let mut adaptive = Model {
        compat: Some(json!({"forceAdaptiveThinking": true}).into()),
        ..budget
    };
    let b = body(&adaptive, Some(ThinkingLevel::Minimal));
    assert_eq!(
        b["thinking"],
        json!({"type": "adaptive", "display": "summarized"})
    );
    assert_eq!(b["output_config"], json!({"effort": "low"}));
    assert_eq!(b["max_tokens"], 64_000);
    adaptive.thinking_level_map = Some(
        [
            (ThinkingLevel::Off, None),
            (ThinkingLevel::Xhigh, Some("xhigh".to_string())),
        ]
        .into_iter()
        .collect(),
    );
    assert_eq!(
        body(&adaptive, Some(ThinkingLevel::Xhigh))["output_config"]["effort"],
        "xhigh"
    );
    assert_eq!(
        body(&adaptive, Some(ThinkingLevel::Max))["output_config"]["effort"],
        "high"
    );
    // A model that cannot stop thinking is left to its default.
    let b = body(&adaptive, Some(ThinkingLevel::Off));
    assert!(
        b.get("thinking").is_none() && b.get("output_config").is_none(),
        "{b}"
    );
}

/// A subscription's token goes as Claude Code: its identity first in the system prompt, its
/// tool names on the tools and on earlier calls, its headers and betas; the reply's calls get
/// nova's names back. An API key keeps nova's own names and sends no such headers.
#[test]
fn a_subscription_token_speaks_as_claude_code() {
    assert_eq!(
        Identity::of(Some("sk-ant-api03-x"), false),
        Identity::ApiKey
    );
    assert_eq!(Identity::of(None, false), Identity::ApiKey);
    let identity = Identity::of(Some("sk-ant-oat01-secret"), false);
    assert_eq!(identity, Identity::ClaudeCode);

    let m = model("anthropic-messages", false);
    let messages: Vec<Arc<Message>> = vec![
        user_text("look"),
        anthropic_reply(
            vec![call("c1", "read"), call("c2", "find")],
            StopReason::ToolUse,
        ),
        result("c1", vec![ContentBlock::text("x")]),
        result("c2", vec![ContentBlock::text("y")]),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let tools: Vec<ToolSpec> = ["read", "bash", "find"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        })
        .collect();
    let req = request(&m, &messages, &tools);
    let body: Value = serde_json::from_slice(
        &build_body(&req, Identity::ClaudeCode, crate::provider::body::Buffer).unwrap(),
    )
    .unwrap();
    let cache = json!({"type": "ephemeral"});
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
             "cache_control": cache},
            {"type": "text", "text": "You are nova.", "cache_control": cache},
        ])
    );
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Read", "Bash", "find"]);
    assert_eq!(body["messages"][1]["content"][0]["name"], "Read");
    assert_eq!(body["messages"][1]["content"][1]["name"], "find");
    let plain = body_of(&req);
    assert_eq!(plain["tools"][0]["name"], "read");
    assert_eq!(plain["messages"][1]["content"][0]["name"], "read");
    assert_eq!(plain["system"].as_array().unwrap().len(), 1);

    let headers = identity_headers(&req, identity, &[]);
    assert_eq!(
        headers,
        [
            ("accept", "application/json".to_owned()),
            (
                "anthropic-dangerous-direct-browser-access",
                "true".to_owned()
            ),
            ("user-agent", "claude-cli/2.1.322".to_owned()),
            ("x-app", "cli".to_owned()),
            (
                "anthropic-beta",
                "claude-code-20250219,oauth-2025-04-20".to_owned()
            ),
        ]
    );
    assert!(identity_headers(&req, Identity::ApiKey, &[]).is_empty());
    // A budget for thinking adds the interleaved-thinking beta, as Pi asks for it.
    let reasoning = Model {
        reasoning: true,
        ..m.clone()
    };
    let thinking = Request {
        thinking: Some(ThinkingLevel::Medium),
        ..request(&reasoning, &messages, &tools)
    };
    let configured = [("User-Agent".to_owned(), "mine".to_owned())];
    let headers = identity_headers(&thinking, identity, &configured);
    assert!(headers.iter().all(|(name, _)| *name != "user-agent"));
    assert_eq!(
        headers.last().unwrap().1,
        "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14"
    );

    let reply = sse(&[
        message_start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}),
        ),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "t2", "name": "Glob", "input": {}}),
        ),
        block_stop(1),
        message_delta("tool_use"),
        message_stop(),
    ]);
    let names = |identity| {
        let mut acc = Accumulator::for_request(&m, identity, &tools);
        let mut events = Vec::new();
        acc.push(reply.as_bytes(), &mut events).unwrap();
        events
            .into_iter()
            .filter_map(|e| match e {
                ToolCall { name, .. } => name,
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(names(Identity::ClaudeCode), ["bash", "Glob"]);
    assert_eq!(names(Identity::ApiKey), ["Bash", "Glob"]);
}
