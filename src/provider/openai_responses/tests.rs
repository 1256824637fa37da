use super::*;
use crate::protocol::{AssistantMessage, Message, StopReason, Usage};
use crate::provider::ErrorKind;
use crate::provider::prepare::tests::{call, model, result, user_text};
use crate::provider::test_support::{Outcome, all_splits_agree};
use ProviderEvent::*;
use serde_json::json;
use std::sync::Arc;

fn responses_model() -> Model {
    Model {
        reasoning: true,
        ..model("openai-responses", true)
    }
}

fn run(chunks: &[&[u8]]) -> Outcome {
    let mut acc = Accumulator::with_id_prefix(&responses_model(), "t".into());
    let mut events = Vec::new();
    for c in chunks {
        if let Err(e) = acc.push(c, &mut events) {
            return (events, Some(e));
        }
    }
    let err = acc.finish(&mut events).err();
    (events, err)
}

/// Frames each payload as OpenAI does: `event: <its type>`, `data: <payload>`, blank line.
fn sse(payloads: &[Value]) -> String {
    payloads
        .iter()
        .map(|p| format!("event: {}\ndata: {p}\n\n", p["type"].as_str().unwrap()))
        .collect()
}

fn check(payloads: &[Value]) -> Outcome {
    all_splits_agree(sse(payloads).as_bytes(), run)
}

fn created() -> Value {
    json!({"type": "response.created", "sequence_number": 0, "response": {
        "id": "resp_1", "object": "response", "status": "in_progress", "output": []}})
}

fn completed(status: &str, extra: Value) -> Value {
    let mut response = json!({"id": "resp_1", "status": status, "usage": {
        "input_tokens": 1000, "input_tokens_details": {"cached_tokens": 600},
        "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 200},
        "total_tokens": 1300}});
    if let (Some(r), Some(e)) = (response.as_object_mut(), extra.as_object()) {
        r.extend(e.clone());
    }
    let kind = if status == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    json!({"type": kind, "response": response})
}

fn reasoning_item(summary: &[&str]) -> Value {
    let summary: Vec<Value> = summary
        .iter()
        .map(|t| json!({"type": "summary_text", "text": t}))
        .collect();
    json!({"type": "reasoning", "id": "rs_1", "summary": summary,
           "encrypted_content": "gAAAA-secret"})
}

fn usage() -> ProviderEvent {
    let mut u = crate::provider::priced(
        &responses_model(),
        Tokens {
            input: 400,
            output: 300,
            cache_read: 600,
            cache_write: 0,
            cache_write_1h: None,
        },
    );
    u.reasoning = Some(200);
    Usage(u)
}

#[test]
fn reasoning_text_and_usage() {
    let stream = [
        created(),
        json!({"type": "response.in_progress", "response": {"id": "resp_1"}}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.reasoning_summary_part.added", "output_index": 0,
               "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0,
               "summary_index": 0, "delta": "Think"}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0,
               "summary_index": 0, "delta": "ing."}),
        json!({"type": "response.reasoning_summary_part.added", "output_index": 0,
               "summary_index": 1, "part": {"type": "summary_text", "text": ""}}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0,
               "summary_index": 1, "delta": "More."}),
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": reasoning_item(&["Thinking.", "More."])}),
        json!({"type": "response.output_item.added", "output_index": 1,
               "item": {"type": "message", "id": "msg_1", "role": "assistant",
                        "status": "in_progress", "content": []}}),
        json!({"type": "response.content_part.added", "output_index": 1, "content_index": 0,
               "part": {"type": "output_text", "text": ""}}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0,
               "delta": "Héllo"}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0,
               "delta": " there"}),
        json!({"type": "response.output_text.done", "output_index": 1, "content_index": 0,
               "text": "Héllo there"}),
        json!({"type": "response.output_item.done", "output_index": 1,
               "item": {"type": "message", "id": "msg_1", "role": "assistant",
                        "phase": "final_answer",
                        "content": [{"type": "output_text", "text": "Héllo there"}]}}),
        completed("completed", json!({})),
    ];
    let (events, err) = check(&stream);
    assert_eq!(err, None);
    assert_eq!(
        events,
        [
            Start {
                response_id: Some("resp_1".into()),
                usage: None,
            },
            Thinking(String::new()),
            Thinking("Think".into()),
            Thinking("ing.".into()),
            Thinking("\n\n".into()),
            Thinking("More.".into()),
            ThinkingSignature(reasoning_item(&["Thinking.", "More."]).to_string()),
            Text("Héllo".into()),
            Text(" there".into()),
            TextSignature(r#"{"v":1,"id":"msg_1","phase":"final_answer"}"#.into()),
            usage(),
            Finish(StopReason::Stop),
        ]
    );
}

#[test]
fn items_whose_text_came_only_at_the_end() {
    let (events, err) = check(&[
        json!({"type": "response.output_item.done", "output_index": 0,
               "item": reasoning_item(&["All at once."])}),
        json!({"type": "response.output_item.added", "output_index": 1,
               "item": {"type": "message", "id": "msg_2", "content": []}}),
        json!({"type": "response.output_item.done", "output_index": 1,
               "item": {"type": "message", "id": "msg_2",
                        "content": [{"type": "refusal", "refusal": "I can't help with that."}]}}),
        completed("completed", json!({"usage": null})),
    ]);
    assert_eq!(err, None);
    assert_eq!(
        events,
        [
            Thinking(String::new()),
            Thinking("All at once.".into()),
            ThinkingSignature(reasoning_item(&["All at once."]).to_string()),
            Text("I can't help with that.".into()),
            TextSignature(r#"{"v":1,"id":"msg_2"}"#.into()),
            Finish(StopReason::Stop),
        ]
    );
}

#[test]
fn parallel_tool_calls_with_argument_deltas() {
    let added = |index: u64, call: &str, name: &str| {
        json!({"type": "response.output_item.added", "output_index": index,
               "item": {"type": "function_call", "id": format!("fc_{call}"), "call_id": call,
                        "name": name, "arguments": "", "status": "in_progress"}})
    };
    let delta = |index: u64, d: &str| {
        json!({"type": "response.function_call_arguments.delta", "output_index": index,
               "delta": d})
    };
    let done = |index: u64, call: &str, name: &str, args: &str| {
        json!({"type": "response.output_item.done", "output_index": index,
               "item": {"type": "function_call", "id": format!("fc_{call}"), "call_id": call,
                        "name": name, "arguments": args, "status": "completed"}})
    };
    let (events, err) = check(&[
        added(0, "call_a", "read"),
        added(1, "call_b", "bash"),
        delta(0, "{\"pa"),
        delta(1, "{\"command\""),
        delta(0, "th\": \"a.rs\"}"),
        json!({"type": "response.function_call_arguments.done", "output_index": 0,
               "arguments": "{\"path\": \"a.rs\"}"}),
        done(0, "call_a", "read", "{\"path\": \"a.rs\"}"),
        // The rest of the second call's arguments only in its `done`.
        done(1, "call_b", "bash", "{\"command\": \"ls\"}"),
        completed("completed", json!({})),
    ]);
    assert_eq!(err, None);
    let frag = |index, id: Option<&str>, name: Option<&str>, arguments: &str| ToolCall {
        index,
        id: id.map(Into::into),
        name: name.map(Into::into),
        arguments: arguments.into(),
    };
    assert_eq!(
        events,
        [
            frag(0, Some("call_a|fc_call_a"), Some("read"), ""),
            frag(1, Some("call_b|fc_call_b"), Some("bash"), ""),
            frag(0, None, None, "{\"pa"),
            frag(1, None, None, "{\"command\""),
            frag(0, None, None, "th\": \"a.rs\"}"),
            frag(1, None, None, ": \"ls\"}"),
            usage(),
            Finish(StopReason::ToolUse),
        ]
    );
}

#[test]
fn a_call_left_open_fails_the_reply() {
    let (_, err) = check(&[
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "bash",
                        "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 0,
               "delta": "{\"comm"}),
        completed("completed", json!({})),
    ]);
    assert_eq!(
        err,
        Some(ProviderError::Api(
            "the stream completed with an unfinished tool call: bash".into()
        ))
    );
}

#[test]
fn stop_reasons_and_errors() {
    let text = [
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": "m"}}),
        json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}),
    ];
    let with = |last: Value| {
        let mut s = text.to_vec();
        s.push(last);
        check(&s)
    };
    let incomplete = |reason: &str| {
        completed(
            "incomplete",
            json!({"incomplete_details": {"reason": reason}}),
        )
    };
    let (events, err) = with(incomplete("max_output_tokens"));
    assert_eq!(err, None);
    assert_eq!(events.last(), Some(&Finish(StopReason::Length)));
    assert_eq!(
        with(incomplete("content_filter")).1,
        Some(ProviderError::ContentFilter)
    );
    assert_eq!(
        with(incomplete("other")).1,
        Some(ProviderError::Api("Response incomplete: other".into()))
    );

    let failed = json!({"type": "response.failed", "response": {"id": "resp_1",
        "status": "failed",
        "error": {"code": "server_error", "message": "The server had an error."}}});
    let (events, err) = with(failed);
    assert_eq!(events, [Text("Hi".into())]);
    let err = err.unwrap();
    assert_eq!(
        err,
        ProviderError::Api("server_error: The server had an error.".into())
    );
    assert_eq!(err.kind(), ErrorKind::Retryable);

    let overflow = json!({"type": "error", "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model.", "param": "input"});
    let err = with(overflow).1.unwrap();
    assert_eq!(
        err.to_string(),
        "provider error: Error Code context_length_exceeded: Your input exceeds the context \
         window of this model."
    );
    assert_eq!(err.kind(), ErrorKind::Overflow);

    let limited = json!({"type": "error", "code": "rate_limit_exceeded",
        "message": "Slow down."});
    assert_eq!(with(limited).1.unwrap().kind(), ErrorKind::Retryable);

    // Cut before the terminal event.
    let (events, err) = check(&text);
    assert_eq!(events, [Text("Hi".into())]);
    assert_eq!(err, Some(ProviderError::EndedEarly));

    let (_, err) = all_splits_agree(b"data: {\"type\": \"response.crea\n\n", run);
    assert!(
        matches!(err, Some(ProviderError::InvalidJson { .. })),
        "{err:?}"
    );
}

#[test]
fn endpoints() {
    assert_eq!(
        endpoint("https://api.openai.com/v1/"),
        "https://api.openai.com/v1/responses"
    );
}

fn body_of(req: &Request) -> Value {
    serde_json::from_slice(
        &build_body(req, Flavour::OpenAi, crate::provider::body::Buffer).unwrap(),
    )
    .unwrap()
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

#[test]
fn body_sends_back_reasoning_items_messages_and_calls() {
    let m = responses_model();
    let item = reasoning_item(&["plan"]);
    let messages: Vec<Arc<Message>> = [
        Message::User(crate::protocol::UserMessage {
            content: crate::protocol::UserContent::Blocks(vec![
                ContentBlock::text("What is this?"),
                ContentBlock::image("aW1n", "image/png"),
            ]),
            timestamp: 1,
        }),
        reply(
            vec![
                ContentBlock::Thinking {
                    thinking: "plan".into(),
                    thinking_signature: Some(item.to_string()),
                    redacted: None,
                },
                ContentBlock::Text {
                    text: "Let me look.".into(),
                    text_signature: Some(r#"{"v":1,"id":"msg_1","phase":"commentary"}"#.into()),
                },
                ContentBlock::ToolCall {
                    id: "call_a|fc_a".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a.rs"}),
                    thought_signature: None,
                },
            ],
            &m,
        ),
        result("call_a|fc_a", vec![ContentBlock::text("fn main() {}")]),
        user_text("thanks"),
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
        system_prompt: "You are nova.",
        messages: &messages,
        tools: &tools,
        max_tokens: None,
        thinking: Some(ThinkingLevel::High),
        session_id: None,
    };
    assert_eq!(
        body_of(&req),
        json!({
            "model": "m1",
            "stream": true,
            "store": false,
            "max_output_tokens": 64000,
            "reasoning": {"effort": "high", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "input": [
                {"role": "developer", "content": "You are nova."},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "detail": "auto",
                     "image_url": "data:image/png;base64,aW1n"},
                ]},
                item,
                {"type": "message", "role": "assistant", "status": "completed", "id": "msg_1",
                 "phase": "commentary",
                 "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
                {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "read",
                 "arguments": "{\"path\":\"a.rs\"}"},
                {"type": "function_call_output", "call_id": "call_a", "output": "fn main() {}"},
                {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
            ],
            "tools": [{"type": "function", "name": "read", "description": "Read a file",
                       "parameters": {"type": "object"}}],
        })
    );

    // Another model gets the text and the calls, none of what only this one can read.
    let other = Model {
        id: "m2".into(),
        ..m.clone()
    };
    let body = body_of(&Request {
        model: &other,
        thinking: Some(ThinkingLevel::Off),
        ..req.clone()
    });
    assert_eq!(body["reasoning"], json!({"effort": "none"}));
    assert!(body.get("include").is_none());
    let input = body["input"].as_array().unwrap();
    assert!(!body.to_string().contains("gAAAA-secret"));
    assert_eq!(input[2]["id"], "msg_pi_0");
    assert!(input[2].get("phase").is_none());
    assert_eq!(
        input[3],
        json!({"type": "function_call", "call_id": "call_a", "name": "read",
               "arguments": "{\"path\":\"a.rs\"}"})
    );
}

#[test]
fn body_of_tool_results_and_foreign_ids() {
    let m = responses_model();
    let anthropic = model("anthropic-messages", true);
    let messages: Vec<Arc<Message>> = [
        user_text("go"),
        reply(
            vec![
                call("toolu_01|weird id", "read"),
                call("c2", "view"),
                call("c3", "none"),
            ],
            &anthropic,
        ),
        result("toolu_01|weird id", vec![ContentBlock::text("A")]),
        result(
            "c2",
            vec![
                ContentBlock::text("zoomed"),
                ContentBlock::image("Y2F0", "image/jpeg"),
            ],
        ),
        result("c3", vec![]),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let body = body_of(&Request {
        model: &m,
        system_prompt: "",
        messages: &messages,
        tools: &[],
        max_tokens: Some(4),
        thinking: None,
        session_id: None,
    });
    assert_eq!(body["max_output_tokens"], 16, "the API's floor");
    assert!(body.get("reasoning").is_none());
    assert!(body.get("tools").is_none());
    let input = body["input"].as_array().unwrap();
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[1]["call_id"], "toolu_01");
    assert!(input[1].get("id").is_none());
    assert_eq!(
        input[4],
        json!({"type": "function_call_output", "call_id": "toolu_01", "output": "A"})
    );
    assert_eq!(
        input[5]["output"],
        json!([
            {"type": "input_text", "text": "zoomed"},
            {"type": "input_image", "detail": "auto", "image_url": "data:image/jpeg;base64,Y2F0"},
        ])
    );
    assert_eq!(input[6]["output"], "(no tool output)");
}

#[test]
fn call_ids_are_cut_the_same_way_for_calls_and_results() {
    assert_eq!(call_id("call_1|fc_1"), "call_1");
    assert_eq!(call_id("a b/c_"), "a_b_c");
    assert_eq!(call_id(&"x".repeat(80)).len(), 64);
}

fn run_codex(chunks: &[&[u8]]) -> Outcome {
    let mut acc = Accumulator {
        codex: true,
        ..Accumulator::with_id_prefix(&responses_model(), "t".into())
    };
    let mut events = Vec::new();
    for c in chunks {
        if let Err(e) = acc.push(c, &mut events) {
            return (events, Some(e));
        }
    }
    let err = acc.finish(&mut events).err();
    (events, err)
}

/// Codex's stream, as Pi reads it: `response.done` ends a reply like `response.completed`, and
/// errors are worded `Codex error: …` (the event's own message, else its `error` object's, else
/// the code); a failed response says its message. The plain flavour ignores `response.done`.
#[test]
fn codex_streams_end_and_fail_as_pi_reads_them() {
    let text_item = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "status": "completed", "content": [{"type": "output_text", "text": "Hi"}]});
    let mut done = completed("completed", json!({}));
    done["type"] = json!("response.done");
    let reply = [
        created(),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": text_item}),
        done,
    ];
    let (events, err) = all_splits_agree(sse(&reply).as_bytes(), run_codex);
    assert_eq!(err, None);
    assert_eq!(events.last(), Some(&Finish(StopReason::Stop)));
    assert!(events.contains(&Text("Hi".into())));
    let (_, plain) = check(&reply);
    assert_eq!(plain, Some(ProviderError::EndedEarly));

    let codex_error =
        |payload: Value| all_splits_agree(sse(&[created(), payload]).as_bytes(), run_codex).1;
    assert_eq!(
        codex_error(json!({"type": "error", "code": "c1", "message": "slow down"})),
        Some(ProviderError::Api("Codex error: slow down".into()))
    );
    assert_eq!(
        codex_error(json!({"type": "error", "error": {"code": "server_error", "message": "boom"}})),
        Some(ProviderError::Api("Codex error: boom".into()))
    );
    assert_eq!(
        codex_error(json!({"type": "error", "error": {"code": "rate_limit_exceeded"}})),
        Some(ProviderError::Api(
            "Codex error: rate_limit_exceeded".into()
        ))
    );
    assert_eq!(
        codex_error(
            json!({"type": "response.failed", "response": {"id": "resp_1",
            "status": "failed", "error": {"code": "server_error", "message": "it broke"}}})
        ),
        Some(ProviderError::Api("it broke".into()))
    );
    assert_eq!(
        codex_error(json!({"type": "response.failed", "response": {"status": "failed"}})),
        Some(ProviderError::Api("Codex response failed".into()))
    );
    // Its server errors are retried like OpenAI's.
    let err = codex_error(json!({"type": "error", "error": {"code": "server_error"}})).unwrap();
    assert_eq!(err.kind(), ErrorKind::Retryable);
}

/// A "Sign in with ChatGPT" token on OpenAI's API, as Pi tells one (the `openai` provider at
/// OpenAI's address, a key that is not `sk-…`), is sent no `max_output_tokens`, which that
/// sign-in refuses; a used-up shared limit gets Pi's hint.
#[test]
fn a_chatgpt_sign_in_is_sent_no_output_limit() {
    let m = Model {
        provider: "openai".into(),
        base_url: "https://api.openai.com/v1".into(),
        ..responses_model()
    };
    assert!(is_chatgpt_sign_in(&m, Some("eyJhbGciOi.chatgpt")));
    assert!(!is_chatgpt_sign_in(&m, Some("sk-proj-key")));
    assert!(!is_chatgpt_sign_in(&m, None));
    let elsewhere = Model {
        base_url: "https://proxy.example/v1".into(),
        ..m.clone()
    };
    assert!(!is_chatgpt_sign_in(&elsewhere, Some("eyJhbGciOi.chatgpt")));

    let messages = [Arc::new(user_text("hi"))];
    let req = Request {
        model: &m,
        system_prompt: "sys",
        messages: &messages,
        tools: &[],
        max_tokens: None,
        thinking: None,
        session_id: None,
    };
    let body = |flavour| -> Value {
        serde_json::from_slice(&build_body(&req, flavour, crate::provider::body::Buffer).unwrap())
            .unwrap()
    };
    assert!(body(Flavour::ChatGpt).get("max_output_tokens").is_none());
    assert!(body(Flavour::OpenAi)["max_output_tokens"].as_u64().unwrap() >= 16);

    let limited = r#"{"error":{"code":"subscription_sharing_usage_limit_exceeded"}}"#;
    assert_eq!(
        chatgpt_error_text(limited),
        format!("{limited}\nCheck your ChatGPT usage: https://chatgpt.com/settings/usage")
    );
    assert!(
        chatgpt_error_text("subscription_sharing_workplace_individual_usage_limit_exceeded")
            .contains("Ask your workspace admin")
    );
    assert_eq!(chatgpt_error_text("other"), "other");
}
