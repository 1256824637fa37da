//! nova against the mock LLM in both wire formats: every test is written once over [`Format`]
//! and instantiated for Ollama's native `/api/chat` (module `ollama`) and the OpenAI-compatible
//! `/v1/chat/completions` (module `openai`).

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{Nova, NovaBuilder};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub(super) const LONG: Duration = Duration::from_secs(20);

/// A valid 1×1 PNG.
pub(super) const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Ollama,
    OpenAi,
}

impl Format {
    /// The provider name the support's models.json helpers use.
    pub(super) fn provider(self) -> &'static str {
        match self {
            Format::Ollama => "mock-ollama",
            Format::OpenAi => "mock-openai",
        }
    }

    pub(super) fn api(self) -> &'static str {
        match self {
            Format::Ollama => "ollama",
            Format::OpenAi => "openai-completions",
        }
    }

    pub(super) fn base_url(self, mock: &MockLlm) -> String {
        match self {
            Format::Ollama => mock.base_url_ollama(),
            Format::OpenAi => mock.base_url_openai(),
        }
    }

    /// The chat endpoint under `base` (as [`Format::base_url`] builds it).
    pub(super) fn chat_url(self, base: &str) -> String {
        match self {
            Format::Ollama => format!("{base}/api/chat"),
            Format::OpenAi => format!("{base}/chat/completions"),
        }
    }

    /// nova started on `test-model` of this format's mock provider.
    pub(super) fn nova(self, mock: &MockLlm) -> NovaBuilder {
        match self {
            Format::Ollama => Nova::builder().ollama(mock),
            Format::OpenAi => Nova::builder().openai(mock),
        }
    }
}

/// One provider entry in Pi's models.json format.
pub(super) fn provider_entry(f: Format, base_url: &str, models: Value) -> Value {
    json!({"baseUrl": base_url, "api": f.api(), "apiKey": "mock-key", "models": models})
}

// ---------------------------------------------------------------------------------------------
// Event helpers
// ---------------------------------------------------------------------------------------------

/// A short name for an event: `message_start(user)`, `text_delta`, `turn_end`, …
pub(super) fn label(v: &Value) -> String {
    let ty = v["type"].as_str().unwrap_or("?");
    match ty {
        "message_start" | "message_end" => {
            format!("{ty}({})", v["message"]["role"].as_str().unwrap_or("?"))
        }
        "message_update" => v["assistantMessageEvent"]["type"]
            .as_str()
            .unwrap_or("?")
            .to_string(),
        _ => ty.to_string(),
    }
}

/// Labels of the events (responses left out), runs of the same `*_delta` collapsed into one.
pub(super) fn labels(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in events.iter().filter(|v| v["type"] != "response").map(label) {
        if l.ends_with("_delta") && out.last() == Some(&l) {
            continue;
        }
        out.push(l);
    }
    out
}

pub(super) fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|v| v["type"] == ty).collect()
}

/// The `message_update` inner events of kind `kind` (`text_delta`, `thinking_end`, …).
pub(super) fn updates<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|v| v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == kind)
        .map(|v| &v["assistantMessageEvent"])
        .collect()
}

pub(super) fn deltas(events: &[Value], kind: &str) -> String {
    updates(events, kind)
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

/// The message of the last assistant `message_end`.
pub(super) fn last_assistant(events: &[Value]) -> Value {
    events
        .iter()
        .rev()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .unwrap_or_else(|| panic!("no assistant message_end in {events:#?}"))["message"]
        .clone()
}

/// All text blocks of a message.
pub(super) fn text_of(message: &Value) -> String {
    message["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap())
        .collect()
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .collect()
}

/// A run that ended with a provider error: the error `message_end`, `turn_end`, `agent_end`,
/// `agent_settled`, in that order, closing the run. Returns the `errorMessage`.
pub(super) fn assert_error_turn(events: &[Value]) -> String {
    let l = labels(events);
    assert_eq!(
        l[l.len() - 4..],
        [
            "message_end(assistant)",
            "turn_end",
            "agent_end",
            "agent_settled"
        ],
        "{l:?}"
    );
    assert_eq!(l[..2], ["agent_start", "turn_start"], "{l:?}");
    assert!(l.contains(&"message_start(assistant)".to_string()), "{l:?}");
    let m = last_assistant(events);
    assert_eq!(m["stopReason"], "error", "{m}");
    let turn_end = of_type(events, "turn_end")[0];
    assert_eq!(turn_end["message"]["stopReason"], "error");
    assert_eq!(turn_end["toolResults"], json!([]));
    assert_eq!(of_type(events, "agent_settled")[0]["aborted"], false);
    let msg = m["errorMessage"]
        .as_str()
        .unwrap_or_else(|| panic!("error message_end without errorMessage: {m}"));
    assert!(!msg.is_empty());
    msg.to_string()
}

/// After an error turn: a new prompt with a fresh reply succeeds, and the request carrying it
/// holds both user prompts and no assistant message (the failed one is not resent).
fn assert_recovers(nova: &mut Nova, mock: &MockLlm, first_prompt: &str) {
    let before = mock.chat_requests().len();
    mock.push(Reply::text("back on track"));
    let events = nova.run_prompt("try again");
    let m = last_assistant(&events);
    assert_eq!(m["stopReason"], "stop", "{m}");
    assert_eq!(text_of(&m), "back on track");
    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), before + 1);
    let msgs = reqs[before].messages();
    assert_eq!(
        roles(msgs),
        ["system", "user", "user"],
        "{:#}",
        reqs[before].body
    );
    let body = reqs[before].body.to_string();
    assert!(
        body.contains(first_prompt) && body.contains("try again"),
        "{body}"
    );
    mock.assert_no_violations();
}

// ---------------------------------------------------------------------------------------------
// The tests, once per format
// ---------------------------------------------------------------------------------------------

fn plain_text_reply(f: Format) {
    let mock = MockLlm::start();
    let text = "Hello there, how can I help?";
    mock.push(Reply::text(text).text_chunks(4).usage(123, 45));
    let mut nova = f.nova(&mock).spawn();
    let events = nova.run_prompt("say hello");

    assert_eq!(
        labels(&events),
        [
            "agent_start",
            "turn_start",
            "message_start(user)",
            "message_end(user)",
            "message_start(assistant)",
            "text_start",
            "text_delta",
            "text_end",
            "message_end(assistant)",
            "turn_end",
            "agent_end",
            "agent_settled",
        ]
    );
    assert_eq!(deltas(&events, "text_delta"), text);
    assert!(
        updates(&events, "text_delta").len() > 1,
        "deltas were merged"
    );
    let end = updates(&events, "text_end")[0];
    assert_eq!(end["content"], text);
    assert_eq!(end["contentIndex"], 0);

    let m = last_assistant(&events);
    assert_eq!(m["stopReason"], "stop");
    assert_eq!(m["content"], json!([{"type": "text", "text": text}]));
    assert_eq!(m["provider"], f.provider());
    assert_eq!(m["api"], f.api());
    assert_eq!(m["model"], "test-model");
    assert_eq!(m["usage"]["input"], 123);
    assert_eq!(m["usage"]["output"], 45);
    assert_eq!(m["usage"]["totalTokens"], 168);

    let turn_end = of_type(&events, "turn_end")[0];
    assert_eq!(turn_end["turnIndex"], 0);
    assert_eq!(turn_end["toolResults"], json!([]));
    assert_eq!(turn_end["message"], m);
    let agent_end = of_type(&events, "agent_end")[0];
    let msgs = agent_end["messages"].as_array().unwrap();
    assert_eq!(roles(msgs), ["user", "assistant"]);
    assert_eq!(of_type(&events, "agent_settled")[0]["aborted"], false);

    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body["model"], "test-model");
    assert_eq!(reqs[0].body["stream"], true);
    if f == Format::OpenAi {
        assert_eq!(reqs[0].body["stream_options"]["include_usage"], true);
    }
    assert_eq!(roles(reqs[0].messages()), ["system", "user"]);
    assert_eq!(reqs[0].messages()[1]["content"], "say hello");

    let last = nova.request_ok(json!({"type": "get_last_assistant_text"}));
    assert_eq!(last["text"], text);
    mock.assert_no_violations();
}

/// `field`: the OpenAI delta field carrying reasoning (ignored for Ollama, which has `thinking`).
fn thinking_then_text(f: Format, field: &str) {
    let mock = MockLlm::start();
    let thinking = "The user wants a greeting. Keep it short.";
    let text = "Hi!";
    mock.push(
        Reply::text(text)
            .thinking(thinking)
            .thinking_chunks(3)
            .text_chunks(2)
            .reasoning_field(field),
    );
    let mut nova = f.nova(&mock).spawn();
    let events = nova.run_prompt("greet me");
    let l = labels(&events);
    let inner: Vec<&str> = l
        .iter()
        .map(String::as_str)
        .filter(|s| s.starts_with("text_") || s.starts_with("thinking_"))
        .collect();
    assert_eq!(
        inner,
        [
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
        ],
        "{l:?}"
    );
    assert_eq!(deltas(&events, "thinking_delta"), thinking);
    let t_end = updates(&events, "thinking_end")[0];
    assert_eq!(t_end["content"], thinking);
    assert_eq!(t_end["contentIndex"], 0);
    let x_end = updates(&events, "text_end")[0];
    assert_eq!(x_end["content"], text);
    assert_eq!(x_end["contentIndex"], 1);
    for start in updates(&events, "text_start") {
        assert_eq!(start["contentIndex"], 1);
    }

    let m = last_assistant(&events);
    assert_eq!(m["stopReason"], "stop");
    let content = m["content"].as_array().unwrap();
    assert_eq!(content.len(), 2, "{m}");
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(content[0]["thinking"], thinking);
    assert_eq!(content[1], json!({"type": "text", "text": text}));
    mock.assert_no_violations();
}

fn split_writes_match_unsplit(f: Format) {
    let mock = MockLlm::start();
    let reply = || {
        Reply::text("héllo wörld — ✓ 日本語のテキスト 🎉 done")
            .thinking("ünïcode thöughts ✓")
            .text_chunks(7)
            .thinking_chunks(3)
            .usage(31, 17)
    };
    mock.push(reply());
    mock.push(reply().split_writes());
    let mut nova = f.nova(&mock).spawn();
    let whole = last_assistant(&nova.run_prompt("one"));
    let split_events = nova.run_prompt("two");
    let split = last_assistant(&split_events);
    assert_eq!(whole["stopReason"], "stop");
    for key in ["content", "usage", "stopReason", "provider", "model"] {
        assert_eq!(whole[key], split[key], "{key} differs");
    }
    assert_eq!(
        deltas(&split_events, "text_delta"),
        "héllo wörld — ✓ 日本語のテキスト 🎉 done"
    );
    mock.assert_no_violations();
}

fn tool_call_round_trip(f: Format) {
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("call_1", "bash", json!({"command": "echo hi"}))
            .usage(20, 8),
    );
    mock.push(Reply::text("The command printed hi."));
    let mut nova = f.nova(&mock).spawn();
    let events = nova.events_until_prompt("run echo hi");
    let l = labels(&events);

    let first = of_type(&events, "message_end")
        .into_iter()
        .find(|v| v["message"]["role"] == "assistant")
        .unwrap()["message"]
        .clone();
    assert_eq!(first["stopReason"], "toolUse", "{first}");
    let calls: Vec<&Value> = first["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "toolCall")
        .collect();
    assert_eq!(calls.len(), 1, "{first}");
    assert_eq!(calls[0]["name"], "bash");
    assert_eq!(calls[0]["arguments"], json!({"command": "echo hi"}));
    let call_id = calls[0]["id"].as_str().unwrap().to_string();
    if f == Format::OpenAi {
        assert_eq!(call_id, "call_1");
    }
    assert!(!call_id.is_empty());
    let tc_end = updates(&events, "toolcall_end");
    assert_eq!(tc_end.len(), 1);
    assert_eq!(tc_end[0]["toolCall"], *calls[0]);

    let start = of_type(&events, "tool_execution_start")[0];
    assert_eq!(start["toolCallId"], call_id.as_str());
    assert_eq!(start["toolName"], "bash");
    assert_eq!(start["args"], json!({"command": "echo hi"}));
    assert!(!of_type(&events, "tool_execution_update").is_empty());
    let end = of_type(&events, "tool_execution_end")[0];
    assert_eq!(end["toolCallId"], call_id.as_str());
    assert_eq!(end["isError"], false, "{end}");
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hi")
    );

    let pos = |name: &str| {
        l.iter()
            .position(|x| x == name)
            .unwrap_or_else(|| panic!("{name} missing in {l:?}"))
    };
    assert!(pos("message_end(assistant)") < pos("tool_execution_start"));
    assert!(pos("tool_execution_start") < pos("tool_execution_update"));
    assert!(pos("tool_execution_update") < pos("tool_execution_end"));
    assert!(pos("tool_execution_end") < pos("message_start(toolResult)"));
    assert!(pos("message_end(toolResult)") < pos("turn_end"));

    let result_msg = of_type(&events, "message_end")
        .into_iter()
        .find(|v| v["message"]["role"] == "toolResult")
        .unwrap()["message"]
        .clone();
    assert_eq!(result_msg["toolCallId"], call_id.as_str());
    assert_eq!(result_msg["toolName"], "bash");
    assert_eq!(result_msg["isError"], false);

    let turn_ends = of_type(&events, "turn_end");
    assert_eq!(turn_ends.len(), 2);
    assert_eq!(turn_ends[0]["turnIndex"], 0);
    assert_eq!(turn_ends[0]["toolResults"], json!([result_msg]));
    assert_eq!(turn_ends[1]["turnIndex"], 1);
    assert_eq!(of_type(&events, "agent_start").len(), 1);
    let final_msg = last_assistant(&events);
    assert_eq!(text_of(&final_msg), "The command printed hi.");
    assert_eq!(final_msg["stopReason"], "stop");
    let all = of_type(&events, "agent_end")[0]["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        roles(&all),
        ["user", "assistant", "toolResult", "assistant"]
    );

    // The second request carries the call and its result in this format's shape.
    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].messages();
    assert_eq!(
        roles(msgs),
        ["system", "user", "assistant", "tool"],
        "{:#}",
        reqs[1].body
    );
    let (call, result) = (&msgs[2]["tool_calls"][0], &msgs[3]);
    assert_eq!(call["function"]["name"], "bash");
    match f {
        Format::Ollama => {
            assert_eq!(call["function"]["arguments"], json!({"command": "echo hi"}));
            assert_eq!(result["tool_name"], "bash");
        }
        Format::OpenAi => {
            assert_eq!(call["id"], "call_1");
            assert_eq!(call["type"], "function");
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, json!({"command": "echo hi"}));
            assert_eq!(result["tool_call_id"], "call_1");
        }
    }
    assert!(
        result["content"].as_str().unwrap().contains("hi"),
        "{result}"
    );
    let tools: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"bash"), "{tools:?}");
    mock.assert_no_violations();
}

fn parallel_tool_calls(f: Format) {
    let mock = MockLlm::start();
    // The first call cannot finish before the second has run (it waits for the file the second
    // creates; bounded so a serial nova fails instead of hanging).
    let slow = "for i in $(seq 400); do [ -f flag ] && break; sleep 0.05; done; \
                [ -f flag ] && echo first-done";
    let fast = "echo second-done; touch flag";
    mock.push(
        Reply::new()
            .tool_call("call_a", "bash", json!({"command": slow}))
            .tool_call("call_b", "bash", json!({"command": fast})),
    );
    mock.push(Reply::text("both ran"));
    let mut nova = f.nova(&mock).spawn();
    let events = nova.events_until_prompt("run both");

    let starts = of_type(&events, "tool_execution_start");
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0]["args"]["command"], slow);
    assert_eq!(starts[1]["args"]["command"], fast);
    let (id_a, id_b) = (
        starts[0]["toolCallId"].clone(),
        starts[1]["toolCallId"].clone(),
    );
    assert_ne!(id_a, id_b);
    let ends = of_type(&events, "tool_execution_end");
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0]["toolCallId"], id_a, "ends not in call order");
    assert_eq!(ends[1]["toolCallId"], id_b);
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert!(
        ends[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("first-done")
    );
    assert!(
        ends[1]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("second-done")
    );
    let results = &of_type(&events, "turn_end")[0]["toolResults"];
    assert_eq!(results[0]["toolCallId"], id_a);
    assert_eq!(results[1]["toolCallId"], id_b);

    let reqs = mock.chat_requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].messages();
    assert_eq!(roles(msgs), ["system", "user", "assistant", "tool", "tool"]);
    assert_eq!(msgs[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert!(msgs[3]["content"].as_str().unwrap().contains("first-done"));
    assert!(msgs[4]["content"].as_str().unwrap().contains("second-done"));
    if f == Format::OpenAi {
        assert_eq!(msgs[3]["tool_call_id"], "call_a");
        assert_eq!(msgs[4]["tool_call_id"], "call_b");
    }
    assert_eq!(text_of(&last_assistant(&events)), "both ran");
    mock.assert_no_violations();
}

/// Settings for a test that asserts what a transient failure does to the turn itself: without
/// automatic retry it ends the run at once.
fn no_retry() -> Value {
    json!({"retry": {"enabled": false}})
}

fn http_error(f: Format) {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(500, r#"{"error":"model exploded"}"#));
    let mut nova = f.nova(&mock).settings(no_retry()).spawn();
    let events = nova.run_prompt("boom");
    let msg = assert_error_turn(&events);
    assert!(msg.contains("500"), "{msg}");
    assert!(msg.contains("model exploded"), "{msg}");
    assert_recovers(&mut nova, &mock, "boom");
}

fn connection_refused(f: Format) {
    let mock = MockLlm::start();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead_base = match f {
        Format::Ollama => format!("http://127.0.0.1:{port}"),
        Format::OpenAi => format!("http://127.0.0.1:{port}/v1"),
    };
    let models = json!([{"id": "test-model"}]);
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {
            "dead": provider_entry(f, &dead_base, models.clone()),
            f.provider(): provider_entry(f, &f.base_url(&mock), models),
        }}))
        .args(["--model", "dead/test-model"])
        .settings(no_retry())
        .spawn();
    let t0 = Instant::now();
    let events = nova.run_prompt("anyone there?");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let msg = assert_error_turn(&events);
    assert!(msg.contains(&f.chat_url(&dead_base)), "{msg}");
    assert!(msg.to_lowercase().contains("refused"), "{msg}");
    if f == Format::Ollama {
        assert!(msg.contains("ollama serve"), "{msg}");
    }
    let model = nova.request_ok(
        json!({"type": "set_model", "provider": f.provider(), "modelId": "test-model"}),
    );
    assert_eq!(model["provider"], f.provider());
    assert_recovers(&mut nova, &mock, "anyone there?");
}

fn stream_cut(f: Format, inside_frame: bool) {
    let mock = MockLlm::start();
    let reply = Reply::text("partial answer that never ends").text_chunks(6);
    mock.push(if inside_frame {
        reply.cut_inside_frame(3)
    } else {
        reply.cut_after(3)
    });
    let mut nova = f.nova(&mock).settings(no_retry()).spawn();
    let events = nova.run_prompt("go");
    let msg = assert_error_turn(&events);
    assert!(
        msg.contains("cut mid-way") || msg.contains("ended early"),
        "{msg}"
    );
    // What arrived before the cut is kept in the message.
    let m = last_assistant(&events);
    assert!(
        "partial answer that never ends".starts_with(&text_of(&m)),
        "{m}"
    );
    assert!(!text_of(&m).is_empty(), "{m}");
    assert_recovers(&mut nova, &mock, "go");
}

fn invalid_json(f: Format) {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("abc def ghi")
            .text_chunks(3)
            .invalid_json_after(1),
    );
    let mut nova = f.nova(&mock).spawn();
    let events = nova.run_prompt("parse this");
    let msg = assert_error_turn(&events);
    assert!(msg.contains("invalid JSON"), "{msg}");
    assert!(msg.contains("oops"), "the bad line is quoted: {msg}");
    assert_recovers(&mut nova, &mock, "parse this");
}

fn stall(f: Format) {
    let mock = MockLlm::start();
    mock.push(Reply::text("abc def ghi").text_chunks(3).stall_after(1));
    let mut nova = f
        .nova(&mock)
        .settings(json!({"streamIdleTimeoutSeconds": 1, "retry": {"enabled": false}}))
        .spawn();
    nova.request_ok(json!({"type": "prompt", "message": "hang"}));
    let t0 = Instant::now();
    let events = nova.events_until_timeout("agent_settled", LONG);
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(8), "{took:?}");
    let msg = assert_error_turn(&events);
    assert!(msg.contains("1 s"), "{msg}");
    assert!(msg.contains(&f.chat_url(&f.base_url(&mock))), "{msg}");
    assert_recovers(&mut nova, &mock, "hang");
}

fn images(f: Format, image_model: bool) {
    let mock = MockLlm::start();
    let input = if image_model {
        json!(["text", "image"])
    } else {
        json!(["text"])
    };
    mock.push(Reply::text("a single pixel"));
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {f.provider(): provider_entry(
            f, &f.base_url(&mock), json!([{"id": "test-model", "input": input}]),
        )}}))
        .spawn();
    nova.request_ok(json!({
        "type": "prompt",
        "message": "what is in this picture?",
        "images": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}],
    }));
    let events = nova.events_until("agent_settled");
    assert_eq!(last_assistant(&events)["stopReason"], "stop");
    let user = &of_type(&events, "message_end")[0]["message"];
    assert_eq!(user["role"], "user");
    assert!(
        user.to_string().contains(PNG_1X1),
        "kept in the conversation"
    );

    let reqs = mock.chat_requests();
    let body = &reqs[0].body;
    let msg = &reqs[0].messages()[1];
    assert_eq!(msg["role"], "user");
    let raw = body.to_string();
    match (f, image_model) {
        (Format::Ollama, true) => {
            assert_eq!(msg["images"], json!([PNG_1X1]), "{msg}");
            assert!(
                msg["content"]
                    .as_str()
                    .unwrap()
                    .contains("what is in this picture?")
            );
        }
        (Format::OpenAi, true) => {
            let parts = msg["content"].as_array().unwrap();
            assert!(parts.contains(&json!({"type": "text", "text": "what is in this picture?"})));
            let images: Vec<&Value> = parts.iter().filter(|p| p["type"] == "image_url").collect();
            assert_eq!(images.len(), 1, "{msg}");
            assert_eq!(
                images[0]["image_url"]["url"],
                format!("data:image/png;base64,{PNG_1X1}")
            );
        }
        (_, false) => {
            assert!(
                !raw.contains(PNG_1X1),
                "image sent to a text-only model: {raw}"
            );
            assert!(msg.get("images").is_none(), "{msg}");
            let content = msg["content"].to_string();
            assert!(content.contains("what is in this picture?"), "{content}");
            assert!(content.to_lowercase().contains("image"), "{content}");
            assert!(content.contains("omitted"), "a note replaces it: {content}");
        }
    }
    mock.assert_no_violations();
}

fn auth(f: Format) {
    let mock = MockLlm::start();
    let cases = [
        (
            json!("$NOVA_TEST_KEY"),
            json!({"X-Nova-Literal": "plain-value", "X-Nova-Env": "${NOVA_TEST_HDR}"}),
            "Bearer env-secret-123",
            [
                ("x-nova-literal", "plain-value"),
                ("x-nova-env", "hdr-from-env"),
            ],
        ),
        (
            json!("!printf secret"),
            json!({"X-Nova-Literal": "other", "X-Nova-Env": "!printf cmd-header"}),
            "Bearer secret",
            [("x-nova-literal", "other"), ("x-nova-env", "cmd-header")],
        ),
        // Older Pi: a bare name of a set variable reads it; anything else is literal.
        (
            json!("NOVA_TEST_KEY"),
            json!({"X-Nova-Literal": "NOVA_UNSET_VAR_X", "X-Nova-Env": "NOVA_TEST_HDR"}),
            "Bearer env-secret-123",
            [
                ("x-nova-literal", "NOVA_UNSET_VAR_X"),
                ("x-nova-env", "hdr-from-env"),
            ],
        ),
        (
            json!("sk-literal-key"),
            json!({"X-Nova-Literal": "a b c", "X-Nova-Env": "$NOVA_TEST_HDR"}),
            "Bearer sk-literal-key",
            [("x-nova-literal", "a b c"), ("x-nova-env", "hdr-from-env")],
        ),
    ];
    for (i, (key, headers, bearer, expect)) in cases.into_iter().enumerate() {
        mock.push(Reply::text("authorised"));
        let mut provider = provider_entry(f, &f.base_url(&mock), json!([{"id": "test-model"}]));
        provider["apiKey"] = key;
        provider["headers"] = headers;
        let mut nova = Nova::builder()
            .models_json(json!({"providers": {f.provider(): provider}}))
            .env("NOVA_TEST_KEY", "env-secret-123")
            .env("NOVA_TEST_HDR", "hdr-from-env")
            .spawn();
        let events = nova.run_prompt("hi");
        assert_eq!(last_assistant(&events)["stopReason"], "stop", "case {i}");
        let req = &mock.chat_requests()[i];
        assert_eq!(req.header("authorization"), Some(bearer), "case {i}");
        for (name, value) in expect {
            assert_eq!(req.header(name), Some(value), "case {i}: {name}");
        }
    }
    mock.assert_no_violations();
}

fn unresolvable_api_key(f: Format) {
    let mock = MockLlm::start();
    let mut provider = provider_entry(f, &f.base_url(&mock), json!([{"id": "test-model"}]));
    provider["apiKey"] = json!("$NOVA_SURELY_UNSET_VAR");
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {f.provider(): provider}}))
        .spawn();
    let events = nova.run_prompt("hi");
    let msg = assert_error_turn(&events);
    assert!(msg.contains("NOVA_SURELY_UNSET_VAR"), "{msg}");
    assert!(mock.chat_requests().is_empty());
    let s = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(s["isStreaming"], false);
}

trait PromptExt {
    /// `run_prompt` with a longer wait (tool runs on a loaded machine).
    fn events_until_prompt(&mut self, message: &str) -> Vec<Value>;
}

impl PromptExt for Nova {
    fn events_until_prompt(&mut self, message: &str) -> Vec<Value> {
        self.request_ok(json!({"type": "prompt", "message": message}));
        self.events_until_timeout("agent_settled", LONG)
    }
}

/// One `#[test]` per format for each `fn name(f: Format)`.
macro_rules! for_both_formats {
    ($($name:ident;)*) => {
        mod ollama {
            $(#[test] fn $name() { super::$name(super::Format::Ollama) })*
        }
        mod openai {
            $(#[test] fn $name() { super::$name(super::Format::OpenAi) })*
        }
    };
}

/// Thinking through each OpenAI reasoning field (Ollama has one field; both run it).
fn thinking_reasoning_content(f: Format) {
    thinking_then_text(f, "reasoning_content");
}

fn thinking_reasoning(f: Format) {
    thinking_then_text(f, "reasoning");
}

fn stream_cut_between_frames(f: Format) {
    stream_cut(f, false);
}

fn stream_cut_inside_a_frame(f: Format) {
    stream_cut(f, true);
}

fn image_to_image_model(f: Format) {
    images(f, true);
}

fn image_to_text_only_model(f: Format) {
    images(f, false);
}

for_both_formats! {
    plain_text_reply;
    thinking_reasoning_content;
    thinking_reasoning;
    split_writes_match_unsplit;
    tool_call_round_trip;
    parallel_tool_calls;
    http_error;
    connection_refused;
    stream_cut_between_frames;
    stream_cut_inside_a_frame;
    invalid_json;
    stall;
    image_to_image_model;
    image_to_text_only_model;
    auth;
    unresolvable_api_key;
}

/// A small local model that writes its tool call as a fenced JSON reply instead of through the
/// API: with `compat.toolCallsInText` the call runs; without it the reply stays text.
#[test]
fn a_tool_call_written_as_text_runs_when_the_model_is_marked() {
    let written =
        "```json\n{\"name\": \"bash\", \"arguments\": {\"command\": \"echo written\"}}\n```";
    for marked in [true, false] {
        let mock = MockLlm::start();
        mock.push(Reply::text(written).text_chunks(9));
        mock.push(Reply::text("It printed written."));
        let mut models = crate::support::nova_proc::openai_models(&mock);
        models["providers"]["mock-openai"]["models"][0]["compat"] =
            json!({"toolCallsInText": marked});
        let mut nova = Nova::builder().openai(&mock).models_json(models).spawn();
        let events = nova.events_until_prompt("run echo written");
        let first = of_type(&events, "message_end")
            .into_iter()
            .find(|v| v["message"]["role"] == "assistant")
            .map(|v| v["message"].clone())
            .unwrap_or_default();
        if marked {
            assert_eq!(first["stopReason"], "toolUse", "{first}");
            assert_eq!(first["content"][0]["type"], "toolCall", "{first}");
            assert_eq!(first["content"][0]["name"], "bash");
            // Held until it was known to be a call: no text of it went out.
            assert_eq!(deltas(&events, "text_delta"), "It printed written.");
            let end = of_type(&events, "tool_execution_end")[0];
            assert_eq!(end["isError"], false, "{end}");
            assert!(
                end["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("written")
            );
            assert_eq!(mock.chat_requests().len(), 2);
        } else {
            assert_eq!(first["stopReason"], "stop", "{first}");
            assert_eq!(text_of(&first), written);
            assert!(of_type(&events, "tool_execution_start").is_empty());
            assert_eq!(mock.pending_replies(), 1);
        }
    }
}
