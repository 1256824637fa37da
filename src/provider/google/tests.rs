use super::*;
use crate::protocol::{Message, StopReason, Usage, UserContent, UserMessage};
use crate::provider::ErrorKind;
use crate::provider::prepare::tests::{model, result, user_text};
use crate::provider::test_support::{Outcome, all_splits_agree};
use ProviderEvent::*;
use serde_json::json;
use std::sync::Arc;

fn gemini(id: &str) -> Model {
    Model {
        id: id.into(),
        reasoning: true,
        provider: "google".into(),
        ..model("google-generative-ai", true)
    }
}

/// The event carrying the response id of [`response`]'s frames, sent as soon as it is read.
fn start() -> ProviderEvent {
    Start {
        response_id: Some("resp-1".into()),
        usage: None,
    }
}

fn run(chunks: &[&[u8]]) -> Outcome {
    let mut acc = Accumulator::with_id_prefix(&gemini("gemini-2.5-flash"), "t".into());
    let mut events = Vec::new();
    for c in chunks {
        if let Err(e) = acc.push(c, &mut events) {
            return (events, Some(e));
        }
    }
    let err = acc.finish(&mut events).err();
    (events, err)
}

/// Frames each response as Gemini's `alt=sse` does: `data: <json>` and a blank line, CRLF.
fn sse(responses: &[Value]) -> String {
    responses
        .iter()
        .map(|r| format!("data: {r}\r\n\r\n"))
        .collect()
}

fn check(responses: &[Value]) -> Outcome {
    all_splits_agree(sse(responses).as_bytes(), run)
}

fn response(parts: Value, finish: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    json!({"candidates": [candidate], "modelVersion": "gemini-2.5-flash",
           "responseId": "resp-1"})
}

fn with_usage(mut r: Value) -> Value {
    r["usageMetadata"] = json!({"promptTokenCount": 1000, "candidatesTokenCount": 200,
        "thoughtsTokenCount": 50, "cachedContentTokenCount": 600, "totalTokenCount": 1250});
    r
}

fn usage() -> ProviderEvent {
    let mut u = crate::provider::priced(
        &gemini("gemini-2.5-flash"),
        Tokens {
            input: 400,
            output: 250,
            cache_read: 600,
            cache_write: 0,
            cache_write_1h: None,
        },
    );
    u.reasoning = Some(50);
    u.total_tokens = 1250;
    Usage(u)
}

#[test]
fn thoughts_text_and_usage_with_signatures_on_their_blocks() {
    let (events, err) = check(&[
        response(json!([{"text": "Planning", "thought": true}]), None),
        response(
            json!([{"text": " more.", "thought": true, "thoughtSignature": "dGhpbms="}]),
            None,
        ),
        response(json!([{"text": "Héllo"}]), None),
        response(
            json!([{"text": " there", "thoughtSignature": "dGV4dA=="}]),
            None,
        ),
        with_usage(response(json!([{"text": ""}]), Some("STOP"))),
    ]);
    assert_eq!(err, None);
    assert_eq!(
        events,
        [
            start(),
            Thinking("Planning".into()),
            Thinking(" more.".into()),
            ThinkingSignature("dGhpbms=".into()),
            Text("Héllo".into()),
            Text(" there".into()),
            Text(String::new()),
            TextSignature("dGV4dA==".into()),
            usage(),
            Finish(StopReason::Stop),
        ]
    );
}

#[test]
fn parallel_calls_whole_with_ids_and_signatures() {
    let (events, err) = check(&[
        response(json!([{"text": "Let me look."}]), None),
        with_usage(response(
            json!([
                {"functionCall": {"name": "read", "args": {"path": "a.rs"}},
                 "thoughtSignature": "c2ln"},
                {"functionCall": {"id": "given", "name": "bash", "args": {"command": "ls"}}},
                {"functionCall": {"id": "given", "name": "bash"}},
            ]),
            Some("STOP"),
        )),
    ]);
    assert_eq!(err, None);
    let call = |index, id: &str, name: &str, arguments: &str| ToolCall {
        index,
        id: Some(id.into()),
        name: Some(name.into()),
        arguments: arguments.into(),
    };
    assert_eq!(
        events,
        [
            start(),
            Text("Let me look.".into()),
            call(0, "call_t_0", "read", r#"{"path":"a.rs"}"#),
            ToolCallSignature {
                index: 0,
                signature: "c2ln".into(),
            },
            call(1, "given", "bash", r#"{"command":"ls"}"#),
            // A repeated id would pair one result with two calls.
            call(2, "call_t_2", "bash", "{}"),
            usage(),
            Finish(StopReason::ToolUse),
        ]
    );
}

#[test]
fn finish_reasons_and_blocked_prompts() {
    let text = response(json!([{"text": "Hi"}]), None);
    let ending = |reason: &str| {
        let mut last = response(json!([]), Some(reason));
        last["candidates"][0]["finishMessage"] = json!("  ");
        check(&[text.clone(), last])
    };
    let (events, err) = ending("MAX_TOKENS");
    assert_eq!(err, None);
    assert_eq!(events.last(), Some(&Finish(StopReason::Length)));
    assert_eq!(
        ending("CONTINUATION").0.last(),
        Some(&Finish(StopReason::Length))
    );

    let (events, err) = ending("SAFETY");
    assert_eq!(events, [start(), Text("Hi".into())]);
    let err = err.unwrap();
    assert_eq!(
        err.to_string(),
        "provider error: Gemini stopped the reply (SAFETY: its safety filters flagged the content)"
    );
    assert_eq!(err.kind(), ErrorKind::Other);
    for reason in [
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "OTHER",
        "NEW_ONE",
    ] {
        let err = ending(reason).1.unwrap();
        assert!(err.to_string().contains(reason), "{err}");
    }
    let mut malformed = response(json!([]), Some("MALFORMED_FUNCTION_CALL"));
    malformed["candidates"][0]["finishMessage"] = json!("Malformed function call: print(");
    assert_eq!(
        check(&[malformed]).1.unwrap().to_string(),
        "provider error: Gemini stopped the reply (MALFORMED_FUNCTION_CALL: the model wrote a \
         function call that does not parse): Malformed function call: print("
    );

    let blocked = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7}});
    let (events, err) = check(&[blocked]);
    assert!(events.is_empty());
    assert_eq!(
        err,
        Some(ProviderError::Api(
            "Gemini blocked the prompt (PROHIBITED_CONTENT)".into()
        ))
    );

    // Cut before any finish reason.
    let (events, err) = check(std::slice::from_ref(&text));
    assert_eq!(events, [start(), Text("Hi".into())]);
    assert_eq!(err, Some(ProviderError::EndedEarly));
}

#[test]
fn errors_in_the_stream_and_bad_frames() {
    let failure = |code: u64, status: &str, message: &str| json!({"error": {"code": code, "message": message, "status": status}});
    let text = response(json!([{"text": "par"}]), None);
    let (events, err) = check(&[
        text.clone(),
        failure(503, "UNAVAILABLE", "The model is overloaded."),
    ]);
    assert_eq!(events, [start(), Text("par".into())]);
    let err = err.unwrap();
    assert_eq!(
        err,
        ProviderError::Api("The model is overloaded. (UNAVAILABLE)".into())
    );
    assert_eq!(err.kind(), ErrorKind::Retryable);
    let overflow = failure(
        400,
        "INVALID_ARGUMENT",
        "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
    );
    assert_eq!(check(&[overflow]).1.unwrap().kind(), ErrorKind::Overflow);
    let (_, err) = check(&[json!({"error": {"code": 500}})]);
    assert_eq!(
        err,
        Some(ProviderError::Api(
            "error without a message (code 500)".into()
        ))
    );

    let (_, err) = all_splits_agree(b"data: {\"candidates\": [{\"con\r\n\r\n", run);
    assert!(
        matches!(err, Some(ProviderError::InvalidJson { .. })),
        "{err:?}"
    );
    // Odd field types cost the field, not the reply.
    let (events, err) = check(&[response(
        json!([{"text": 42, "thought": "yes", "thoughtSignature": 7},
               {"functionCall": {"name": ["x"], "args": [1]}}]),
        Some("STOP"),
    )]);
    assert_eq!(err, None);
    assert_eq!(events[0], start());
    assert_eq!(events[1], Text("42".into()));
    assert_eq!(
        events[2],
        ToolCall {
            index: 0,
            id: Some("call_t_0".into()),
            name: None,
            arguments: "[1]".into(),
        }
    );
}

#[test]
fn endpoints_and_retry_delays() {
    assert_eq!(
        endpoint(
            "https://generativelanguage.googleapis.com/v1beta/",
            "gemini-2.5-flash"
        ),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:\
         streamGenerateContent?alt=sse"
    );
    assert_eq!(
        endpoint("http://h/v1beta", "tunedModels/mine"),
        "http://h/v1beta/tunedModels/mine:streamGenerateContent?alt=sse"
    );
    let body = r#"{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}"#;
    assert_eq!(retry_delay(body), Some(std::time::Duration::from_secs(37)));
    assert_eq!(retry_delay("busy"), None);
    assert_eq!(
        retry_delay(r#"{"error": {"details": [{"retryDelay": "-1s"}]}}"#),
        None
    );
}

#[test]
fn which_models_think_in_levels_and_want_ids() {
    for id in [
        "gemini-3-pro-preview",
        "gemini-3.1-pro-preview",
        "gemini-3-flash-preview",
        "gemini-3.8-flash",
        "gemini-4-argon",
        "gemini-12-x",
        "gemini-flash-latest",
        "gemma-4-31b-it",
        "gemma4-e2b",
    ] {
        assert!(thinks_in_levels(id), "{id}");
    }
    for id in [
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-3.-pro",
        "gemini-3-nano",
        "gemini-pro-latest",
        "gemma-3-27b",
    ] {
        assert!(!thinks_in_levels(id), "{id}");
    }
    assert!(Family::of("gemini-3-flash-preview").call_ids);
    assert!(Family::of("gemini-live-3-x").call_ids);
    assert!(Family::of("claude-sonnet-4-5").call_ids);
    assert!(!Family::of("gemini-2.5-pro").call_ids);
    assert!(!Family::of("gemini-2.5-pro").images_in_results);
    assert!(Family::of("gemma-4-31b-it").images_in_results);
    assert!(is_base64("dGV4dA==") && is_base64("c2ln"));
    assert!(!is_base64("mock-signature") && !is_base64("") && !is_base64("===="));
}

fn body_of(req: &Request) -> Value {
    serde_json::from_slice(&build_body(req, crate::provider::body::Buffer).unwrap()).unwrap()
}

fn request<'a>(
    m: &'a Model,
    messages: &'a [Arc<Message>],
    thinking: Option<ThinkingLevel>,
) -> Request<'a> {
    Request {
        model: m,
        system_prompt: "You are nova.",
        messages,
        tools: &[],
        max_tokens: None,
        thinking,
        session_id: None,
    }
}

fn reply(content: Vec<ContentBlock>, from: &Model) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        api: from.api.as_str().into(),
        provider: from.provider.clone(),
        model: from.id.clone(),
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        response_id: None,
        thinking_level: None,
        raw_stop_reason: None,
        duration_ms: None,
        timestamp: 2,
    })
}

fn signed_call(id: &str, name: &str, signature: Option<&str>) -> ContentBlock {
    ContentBlock::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"path": "a.rs"}),
        thought_signature: signature.map(Into::into),
    }
}

fn conversation(from: &Model) -> Vec<Arc<Message>> {
    [
        Message::User(UserMessage {
            content: UserContent::Blocks(vec![
                ContentBlock::text("What is this?"),
                ContentBlock::image("aW1n", "image/png"),
            ]),
            timestamp: 1,
        }),
        reply(
            vec![
                ContentBlock::Thinking {
                    thinking: "plan".into(),
                    thinking_signature: Some("dGhpbms=".into()),
                    redacted: None,
                },
                ContentBlock::Text {
                    text: String::new(),
                    text_signature: Some("dGV4dA==".into()),
                },
                ContentBlock::Text {
                    text: " ".into(),
                    text_signature: Some("not base64!".into()),
                },
                signed_call("call|1", "read", Some("c2ln")),
                signed_call("c2", "view", None),
            ],
            from,
        ),
        result("call|1", vec![ContentBlock::text("fn main() {}")]),
        result("c2", vec![ContentBlock::image("Y2F0", "image/jpeg")]),
        user_text("thanks"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect()
}

#[test]
fn body_sends_thoughts_and_signatures_back_to_the_model_that_wrote_them() {
    let m = gemini("gemini-3-flash-preview");
    let messages = conversation(&m);
    let tools = [ToolSpec {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {
            "mode": {"const": "fast", "default": {"const": "kept"}},
            "const": {"type": "string"}}}),
    }];
    let req = Request {
        tools: &tools,
        ..request(&m, &messages, Some(ThinkingLevel::Low))
    };
    assert_eq!(
        body_of(&req),
        json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "What is this?"},
                    {"inlineData": {"mimeType": "image/png", "data": "aW1n"}},
                ]},
                {"role": "model", "parts": [
                    {"text": "plan", "thought": true, "thoughtSignature": "dGhpbms="},
                    {"text": "", "thoughtSignature": "dGV4dA=="},
                    {"functionCall": {"name": "read", "args": {"path": "a.rs"}, "id": "call_1"},
                     "thoughtSignature": "c2ln"},
                    {"functionCall": {"name": "view", "args": {"path": "a.rs"}, "id": "c2"}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read", "response": {"output": "fn main() {}"},
                                          "id": "call_1"}},
                    {"functionResponse": {"name": "read",
                                          "response": {"output": "(see attached image)"},
                                          "parts": [{"inlineData": {"mimeType": "image/jpeg",
                                                                    "data": "Y2F0"}}],
                                          "id": "c2"}},
                ]},
                {"role": "user", "parts": [{"text": "thanks"}]},
            ],
            "systemInstruction": {"parts": [{"text": "You are nova."}], "role": "user"},
            "tools": [{"functionDeclarations": [{"name": "read", "description": "Read a file",
                "parametersJsonSchema": {"type": "object", "properties": {
                    "mode": {"enum": ["fast"], "default": {"const": "kept"}},
                    "const": {"type": "string"}}}}]}],
            "generationConfig": {"maxOutputTokens": 64000,
                "thinkingConfig": {"includeThoughts": true, "thinkingLevel": "LOW"}},
        })
    );

    // Another model gets the text and the calls, none of the thoughts or signatures.
    let other = gemini("gemini-3.1-pro-preview");
    let body = body_of(&request(&other, &messages, Some(ThinkingLevel::High)));
    assert_eq!(
        body["contents"][1]["parts"],
        json!([
            {"functionCall": {"name": "read", "args": {"path": "a.rs"}, "id": "call_1"}},
            {"functionCall": {"name": "view", "args": {"path": "a.rs"}, "id": "c2"}},
        ])
    );
    assert!(!body.to_string().contains("c2ln"));
}

#[test]
fn older_models_get_result_images_in_a_turn_of_their_own_and_no_ids() {
    let m = gemini("gemini-2.5-flash");
    let messages = conversation(&m);
    let body = body_of(&request(&m, &messages, Some(ThinkingLevel::Medium)));
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(
        contents[1]["parts"][2],
        json!({"functionCall": {"name": "read", "args": {"path": "a.rs"}},
               "thoughtSignature": "c2ln"})
    );
    assert_eq!(
        contents[2..],
        [
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "fn main() {}"}}},
                {"functionResponse": {"name": "read",
                                      "response": {"output": "(see attached image)"}}},
            ]}),
            json!({"role": "user", "parts": [
                {"text": "Tool result image:"},
                {"inlineData": {"mimeType": "image/jpeg", "data": "Y2F0"}},
            ]}),
            json!({"role": "user", "parts": [{"text": "thanks"}]}),
        ]
    );
    assert_eq!(
        body["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingBudget": 8192})
    );
}

#[test]
fn thinking_configs_as_pi_sends_them() {
    let messages = [Arc::new(user_text("hi"))];
    let config = |m: &Model, level: Option<ThinkingLevel>| {
        body_of(&request(m, &messages, level))["generationConfig"]["thinkingConfig"].clone()
    };
    let flash = gemini("gemini-2.5-flash");
    assert_eq!(
        config(&flash, Some(ThinkingLevel::Off)),
        json!({"thinkingBudget": 0})
    );
    assert_eq!(config(&flash, None), json!({"thinkingBudget": 0}));
    assert_eq!(
        config(&gemini("gemini-2.5-pro"), Some(ThinkingLevel::High)),
        json!({"includeThoughts": true, "thinkingBudget": 32768})
    );
    assert_eq!(
        config(
            &gemini("gemini-2.5-flash-lite"),
            Some(ThinkingLevel::Minimal)
        ),
        json!({"includeThoughts": true, "thinkingBudget": 512})
    );
    assert_eq!(
        config(&gemini("some-other-model"), Some(ThinkingLevel::Low)),
        json!({"includeThoughts": true, "thinkingBudget": -1})
    );
    // A model that cannot stop thinking thinks as little as it can.
    let mut pro = gemini("gemini-3.1-pro-preview");
    pro.thinking_level_map = Some(
        [
            (ThinkingLevel::Off, None),
            (ThinkingLevel::Minimal, None),
            (ThinkingLevel::Low, Some("low".to_owned())),
            (ThinkingLevel::High, Some("HIGH".to_owned())),
        ]
        .into_iter()
        .collect(),
    );
    assert_eq!(
        config(&pro, Some(ThinkingLevel::Off)),
        json!({"thinkingLevel": "LOW"})
    );
    assert_eq!(
        config(&pro, Some(ThinkingLevel::High)),
        json!({"includeThoughts": true, "thinkingLevel": "HIGH"})
    );
    let plain = Model {
        reasoning: false,
        ..gemini("gemini-2.5-flash")
    };
    let body = body_of(&request(&plain, &messages, Some(ThinkingLevel::High)));
    assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 64000}));
    assert!(body.get("tools").is_none());
}

#[test]
fn arguments_go_back_as_objects() {
    let m = gemini("gemini-2.5-flash");
    let call = |arguments: Value| ContentBlock::ToolCall {
        id: "c".into(),
        name: "bash".into(),
        arguments,
        thought_signature: None,
    };
    for (arguments, sent) in [
        (json!("{\"command\":\"ls\"}"), json!({"command": "ls"})),
        (json!("{\"command\":"), json!({})),
        (json!([1]), json!({})),
    ] {
        let messages = [
            Arc::new(user_text("go")),
            Arc::new(reply(vec![call(arguments)], &m)),
        ];
        let body = body_of(&request(&m, &messages, None));
        assert_eq!(
            body["contents"][1]["parts"][0]["functionCall"]["args"],
            sent
        );
    }
}
