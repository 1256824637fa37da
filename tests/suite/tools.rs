//! The built-in tools through the real binary, as a model uses them: the mock scripts tool
//! calls, nova runs them on real temp trees and generated images, and each case checks the
//! `tool_execution_end` event, the toolResult message and what the next request carries back to
//! the model (they must agree).
//!
//! This file holds that harness and the tests of the tool set a model gets and of calls in batches
//! or with bad arguments. Each tool family has its own file: `tools_files` (read, write, edit),
//! `tools_bash`, `tools_search` (grep, find, ls) and `tools_images` (view_image, zoom).

use crate::support::mcp::wait_file_contains;
use crate::support::mock_llm::{MockLlm, Recorded, Reply};
use crate::support::nova_proc::{Nova, NovaBuilder};
use base64::Engine;
use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use serde_json::{Value, json};
use std::io::Cursor;
use std::time::Duration;

/// How long one scripted run may take; generous, since the machine is shared.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

const TEXT_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Api {
    Ollama,
    OpenAi,
}

/// A models.json with one provider serving `text-model` (`input: ["text"]`) and `vision-model`
/// (`input: ["text", "image"]`).
fn two_models(mock: &MockLlm, api: Api) -> (Value, &'static str) {
    let (provider, api_name, url) = match api {
        Api::Ollama => ("mock-ollama", "ollama", mock.base_url_ollama()),
        Api::OpenAi => ("mock-openai", "openai-completions", mock.base_url_openai()),
    };
    let model = |id: &str, input: Value| {
        json!({
            "id": id, "name": id, "api": api_name, "reasoning": false, "input": input,
            "contextWindow": 128000, "maxTokens": 4096,
        })
    };
    let models = json!({"providers": {provider: {
        "baseUrl": url, "api": api_name, "apiKey": "mock-key",
        "models": [model("text-model", json!(["text"])), model("vision-model", json!(["text", "image"]))],
    }}});
    (models, provider)
}

/// A nova on `model` (`text-model` or `vision-model`) of the mock's `api` endpoint.
pub(super) fn nova_on(mock: &MockLlm, api: Api, model: &str) -> NovaBuilder {
    let (models, provider) = two_models(mock, api);
    Nova::builder()
        .models_json(models)
        .args(["--provider", provider, "--model", model])
}

type Call = (&'static str, &'static str, Value);

/// A finished run: turn `k` made the calls `turns[k]`; a final text reply ended it.
pub(super) struct Ran {
    pub(super) nova: Nova,
    mock: MockLlm,
    api: Api,
    events: Vec<Value>,
    turns: Vec<Vec<Call>>,
}

/// One call's result, checked to agree across the event, the toolResult message and the request.
pub(super) struct Outcome {
    pub(super) end: Value,
    /// The `role:"tool"` message of the next request.
    pub(super) sent: Value,
    /// The next request as a whole.
    pub(super) request: Value,
}

impl Outcome {
    pub(super) fn is_error(&self) -> bool {
        self.end["isError"] == true
    }

    pub(super) fn content(&self) -> &[Value] {
        self.end["result"]["content"].as_array().unwrap()
    }

    pub(super) fn text(&self) -> &str {
        self.content()[0]["text"].as_str().unwrap()
    }

    pub(super) fn details(&self) -> &Value {
        &self.end["result"]["details"]
    }

    pub(super) fn ok(&self) -> &str {
        assert!(!self.is_error(), "expected success: {}", self.end);
        self.text()
    }

    pub(super) fn err(&self) -> &str {
        assert!(self.is_error(), "expected an error: {}", self.end);
        assert_eq!(self.content().len(), 1, "{}", self.end);
        self.text()
    }

    /// The image block, which must be the second of `[text, image]`; returns its decoded bytes.
    pub(super) fn image(&self, mime: &str) -> Vec<u8> {
        assert!(!self.is_error(), "{}", self.end);
        let content = self.content();
        assert_eq!(content.len(), 2, "[text, image]: {}", self.end);
        assert_eq!(content[0]["type"], "text");
        assert_eq!(content[1]["type"], "image");
        assert_eq!(content[1]["mimeType"], mime);
        base64::engine::general_purpose::STANDARD
            .decode(content[1]["data"].as_str().unwrap())
            .unwrap()
    }

    pub(super) fn image_data(&self) -> &str {
        self.content()[1]["data"].as_str().unwrap()
    }
}

/// Script `turns` (each a batch of calls) and a final text reply, spawn nova, run one prompt.
pub(super) fn run_turns(
    mock: MockLlm,
    builder: NovaBuilder,
    api: Api,
    turns: Vec<Vec<Call>>,
) -> Ran {
    for calls in &turns {
        let mut reply = Reply::new();
        for (id, name, args) in calls {
            reply = reply.tool_call(*id, *name, args.clone());
        }
        mock.push(reply);
    }
    mock.push(Reply::text("done"));
    let mut nova = builder.spawn();
    nova.request_ok(json!({"type": "prompt", "message": "use the tools"}));
    let events = nova.events_until_timeout("agent_settled", RUN_TIMEOUT);
    mock.assert_no_violations();
    let ran = Ran {
        nova,
        mock,
        api,
        events,
        turns,
    };
    assert_eq!(
        ran.mock.chat_requests().len(),
        ran.turns.len() + 1,
        "one request per turn"
    );
    ran
}

pub(super) fn run_calls(mock: MockLlm, builder: NovaBuilder, api: Api, calls: Vec<Call>) -> Ran {
    run_turns(mock, builder, api, vec![calls])
}

impl Ran {
    pub(super) fn of_type(&self, ty: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == ty).collect()
    }

    pub(super) fn outcome(&self, id: &str) -> Outcome {
        // Calls end in order, turn after turn: the n-th end answers the n-th scripted call.
        let mut global = 0;
        let mut found = None;
        for (turn, calls) in self.turns.iter().enumerate() {
            if let Some(i) = calls.iter().position(|c| c.0 == id) {
                found = Some((turn, i, calls[i].1));
                global += i;
                break;
            }
            global += calls.len();
        }
        let (turn, index, name) = found.unwrap_or_else(|| panic!("no scripted call {id}"));

        let ends = self.of_type("tool_execution_end");
        assert_eq!(
            ends.len(),
            self.turns.iter().map(Vec::len).sum::<usize>(),
            "one end per call"
        );
        let end = ends[global].clone();
        assert_eq!(end["toolName"], name, "{end}");
        let call_id = end["toolCallId"].as_str().unwrap();
        if self.api == Api::OpenAi {
            assert_eq!(call_id, id);
        }

        // The toolResult message says the same as the event.
        let message = self
            .of_type("message_end")
            .into_iter()
            .map(|e| &e["message"])
            .find(|m| m["role"] == "toolResult" && m["toolCallId"] == call_id)
            .unwrap_or_else(|| panic!("no toolResult message for {call_id}"));
        assert_eq!(message["toolName"], name);
        assert_eq!(message["content"], end["result"]["content"], "{id}");
        assert_eq!(message["isError"], end["isError"], "{id}");
        // Absent details in the event are `{}` in the message.
        let or_empty = |v: &Value| if v.is_null() { json!({}) } else { v.clone() };
        assert_eq!(
            or_empty(&message["details"]),
            or_empty(&end["result"]["details"]),
            "{id}"
        );

        // The next request carries it back, in call order.
        let request = self.mock.chat_requests()[turn + 1].clone();
        let sent = tool_messages(&request)[index].clone();
        match self.api {
            Api::Ollama => assert_eq!(sent["tool_name"], name, "{sent}"),
            Api::OpenAi => assert_eq!(sent["tool_call_id"], id, "{sent}"),
        }
        let content = end["result"]["content"].as_array().unwrap();
        if content.iter().all(|b| b["type"] == "text") {
            let joined: Vec<&str> = content
                .iter()
                .map(|b| b["text"].as_str().unwrap())
                .collect();
            assert_eq!(sent["content"], joined.join("\n"), "{id}");
        }
        Outcome {
            end,
            sent,
            request: request.body,
        }
    }
}

/// The `role:"tool"` messages after the request's last assistant message.
fn tool_messages(request: &Recorded) -> Vec<&Value> {
    let messages = request.messages();
    let last_assistant = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .expect("an assistant message");
    messages[last_assistant + 1..]
        .iter()
        .take_while(|m| m["role"] == "tool")
        .collect()
}

fn tool_names(request: &Recorded) -> Vec<String> {
    let mut names: Vec<String> = request.body["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

pub(super) fn gradient(width: u32, height: u32) -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
        Rgb([
            (x % 256) as u8,
            (y % 256) as u8,
            ((x * 7 + y * 3) % 256) as u8,
        ])
    }))
}

pub(super) fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    gradient(width, height)
        .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
        .unwrap();
    out
}

pub(super) fn size_of(bytes: &[u8]) -> (u32, u32) {
    let img = image::load_from_memory(bytes).unwrap();
    (img.width(), img.height())
}

pub(super) fn abs(nova: &Nova, rel: &str) -> String {
    nova.cwd().join(rel).display().to_string()
}

// ---------------------------------------------------------------------------------------------
// The tool set
// ---------------------------------------------------------------------------------------------

#[test]
fn the_default_tool_set_follows_the_model_across_set_model() {
    let mock = MockLlm::start();
    for text in ["one", "two", "three"] {
        mock.push(Reply::text(text));
    }
    let mut nova = nova_on(&mock, Api::Ollama, "text-model").spawn();
    let vision: Vec<&str> = TEXT_TOOLS
        .iter()
        .copied()
        .chain(["view_image", "zoom"])
        .collect();

    nova.run_prompt("first");
    nova.request_ok(
        json!({"type": "set_model", "provider": "mock-ollama", "modelId": "vision-model"}),
    );
    nova.run_prompt("second");
    nova.request_ok(
        json!({"type": "set_model", "provider": "mock-ollama", "modelId": "text-model"}),
    );
    nova.run_prompt("third");

    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["model"], "text-model");
    assert_eq!(tool_names(&requests[0]), sorted(&TEXT_TOOLS));
    assert_eq!(requests[1].body["model"], "vision-model");
    assert_eq!(tool_names(&requests[1]), sorted(&vision));
    assert_eq!(tool_names(&requests[2]), sorted(&TEXT_TOOLS));

    // Every tool is offered with an object schema naming its required parameters.
    let tools = requests[1].body["tools"].as_array().unwrap();
    let required = |name: &str| -> Value {
        let t = tools
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap();
        assert_eq!(t["type"], "function");
        assert!(
            !t["function"]["description"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
        );
        assert_eq!(t["function"]["parameters"]["type"], "object");
        t["function"]["parameters"]["required"].clone()
    };
    assert_eq!(required("read"), json!(["path"]));
    assert_eq!(required("view_image"), json!(["path"]));
    assert_eq!(
        required("zoom"),
        json!(["path", "x", "y", "width", "height"])
    );
    mock.assert_no_violations();
}

#[test]
fn the_default_set_on_openai_and_the_tools_flags() {
    let mock = MockLlm::start();
    mock.push(Reply::text("hi"));
    let mut nova = nova_on(&mock, Api::OpenAi, "vision-model").spawn();
    nova.run_prompt("hello");
    let vision: Vec<&str> = TEXT_TOOLS
        .iter()
        .copied()
        .chain(["view_image", "zoom"])
        .collect();
    assert_eq!(tool_names(&mock.chat_requests()[0]), sorted(&vision));

    // `--tools` fixes the set whatever the model.
    let mock = MockLlm::start();
    mock.push(Reply::text("a"));
    mock.push(Reply::text("b"));
    let mut nova = nova_on(&mock, Api::Ollama, "vision-model")
        .args(["--tools", "ls,zoom"])
        .spawn();
    nova.run_prompt("one");
    nova.request_ok(
        json!({"type": "set_model", "provider": "mock-ollama", "modelId": "text-model"}),
    );
    nova.run_prompt("two");
    let requests = mock.chat_requests();
    assert_eq!(tool_names(&requests[0]), sorted(&["ls", "zoom"]));
    assert_eq!(tool_names(&requests[1]), sorted(&["ls", "zoom"]));

    // `--no-tools` offers none.
    let mock = MockLlm::start();
    mock.push(Reply::text("a"));
    let mut nova = nova_on(&mock, Api::Ollama, "vision-model")
        .args(["--no-tools"])
        .spawn();
    nova.run_prompt("one");
    assert_eq!(tool_names(&mock.chat_requests()[0]), Vec::<String>::new());
}

#[test]
fn image_tools_are_not_found_for_a_text_model() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "text-model").file("p.png", png(4, 4));
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("v", "view_image", json!({"path": "p.png"})),
            (
                "z",
                "zoom",
                json!({"path": "p.png", "x": 0, "y": 0, "width": 2, "height": 2}),
            ),
        ],
    );
    assert_eq!(ran.outcome("v").err(), "Tool view_image not found");
    assert_eq!(ran.outcome("z").err(), "Tool zoom not found");
}

// ---------------------------------------------------------------------------------------------
// Batches and bad calls
// ---------------------------------------------------------------------------------------------

#[test]
fn calls_in_one_message_run_concurrently_and_end_in_call_order() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::OpenAi, "text-model");
    // The first call can only finish once the second has run; the wait is bounded (~20 s).
    let waiter = "for i in $(seq 1 2000); do if [ -f flag.txt ]; then echo saw flag; exit 0; fi; \
                  sleep 0.01; done; echo gave up; exit 1";
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("wait", "bash", json!({"command": waiter, "timeout": 40})),
            ("make", "write", json!({"path": "flag.txt", "content": "x"})),
            ("list", "ls", json!({})),
        ],
    );
    assert_eq!(ran.outcome("wait").ok(), "saw flag\n");
    assert_eq!(
        ran.outcome("make").ok(),
        "Successfully wrote 1 bytes to flag.txt"
    );
    ran.outcome("list").ok();

    let order: Vec<(&str, &str)> = ran
        .events
        .iter()
        .filter(|e| e["type"] == "tool_execution_start" || e["type"] == "tool_execution_end")
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["toolCallId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("tool_execution_start", "wait"),
            ("tool_execution_start", "make"),
            ("tool_execution_start", "list"),
            ("tool_execution_end", "wait"),
            ("tool_execution_end", "make"),
            ("tool_execution_end", "list"),
        ]
    );
    let results: Vec<&str> = ran
        .of_type("message_end")
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| e["message"]["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["wait", "make", "list"]);
    let turn_end = ran.of_type("turn_end")[0];
    let ids: Vec<&str> = turn_end["toolResults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["wait", "make", "list"]);
}

/// An unknown tool after a call that is still running must still end, and be answered, in call
/// order: on Ollama the results carry no call id, so their order is all that pairs them with
/// the calls.
#[test]
fn an_unknown_tool_after_a_running_call_still_ends_in_call_order() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "text-model");
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("echo", "bash", json!({"command": "echo first"})),
            ("t", "teleport", json!({})),
        ],
    );
    let ends: Vec<&str> = ran
        .of_type("tool_execution_end")
        .iter()
        .map(|e| e["toolName"].as_str().unwrap())
        .collect();
    assert_eq!(ends, ["bash", "teleport"]);
    assert_eq!(ran.outcome("echo").ok(), "first\n");
    assert_eq!(ran.outcome("t").err(), "Tool teleport not found");
}

/// The arguments a validation failure echoes, parsed back.
fn received(text: &str) -> Value {
    let (_, json) = text
        .split_once("\n\nReceived arguments:\n")
        .unwrap_or_else(|| panic!("no echo of the arguments in {text}"));
    serde_json::from_str(json).unwrap()
}

#[test]
fn invalid_arguments_name_every_problem_and_unknown_tools_are_not_found() {
    for api in [Api::Ollama, Api::OpenAi] {
        let mock = MockLlm::start();
        let builder = nova_on(&mock, api, "vision-model").file("keep.txt", "keep\n");
        let read_args = json!({"offset": "soon", "limit": true});
        let bash_args = json!({"command": ["ls"], "timeout": "later"});
        let edit_args = json!({"path": "keep.txt", "edits": [{"oldText": "keep"}]});
        let zoom_args = json!({"path": "p.png", "x": "left", "scale": 2.5});
        let ran = run_calls(
            mock,
            builder,
            api,
            vec![
                ("t", "teleport", json!({"to": "mars"})),
                ("r", "read", read_args.clone()),
                ("b", "bash", bash_args.clone()),
                ("e", "edit", edit_args.clone()),
                ("z", "zoom", zoom_args.clone()),
            ],
        );
        let read = ran.outcome("r");
        let text = read.err();
        assert!(
            text.starts_with("Validation failed for tool \"read\":\n"),
            "{text}"
        );
        for problem in [
            "  - path: must have required property 'path'",
            "  - offset: must be integer",
            "  - limit: must be integer",
        ] {
            assert!(text.contains(problem), "{api:?}: {problem:?} in {text}");
        }
        assert_eq!(received(text), read_args);

        let text = ran.outcome("b").err().to_owned();
        assert!(
            text.starts_with("Validation failed for tool \"bash\":\n"),
            "{text}"
        );
        assert!(text.contains("  - command: must be string"), "{text}");
        assert!(text.contains("  - timeout: must be number"), "{text}");
        assert_eq!(received(&text), bash_args);

        let text = ran.outcome("e").err().to_owned();
        assert!(
            text.starts_with("Validation failed for tool \"edit\":\n"),
            "{text}"
        );
        assert!(text.contains("newText"), "{text}");
        assert_eq!(received(&text), edit_args);
        assert_eq!(
            std::fs::read_to_string(ran.nova.cwd().join("keep.txt")).unwrap(),
            "keep\n"
        );

        let text = ran.outcome("z").err().to_owned();
        assert!(
            text.starts_with("Validation failed for tool \"zoom\":\n"),
            "{text}"
        );
        for problem in [
            "  - x: must be integer",
            "  - y: must have required property 'y'",
            "  - width: must have required property 'width'",
            "  - height: must have required property 'height'",
            "  - scale: must be integer",
        ] {
            assert!(text.contains(problem), "{api:?}: {problem:?} in {text}");
        }
        assert_eq!(received(&text), zoom_args);

        assert_eq!(ran.outcome("t").err(), "Tool teleport not found");
        let start = ran
            .of_type("tool_execution_start")
            .into_iter()
            .find(|e| e["toolName"] == "teleport")
            .unwrap();
        assert_eq!(start["args"], json!({"to": "mars"}));
    }
}

fn sorted_names(listed: &Value) -> Vec<String> {
    let mut names = active_names(listed);
    names.sort();
    names
}

fn active_names(listed: &Value) -> Vec<String> {
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["active"] == true)
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
}

#[test]
fn get_tools_lists_every_tool_and_set_active_tools_changes_the_next_request_and_the_session() {
    let mock = MockLlm::start();
    for text in ["one", "two"] {
        mock.push(Reply::text(text));
    }
    let mut nova = nova_on(&mock, Api::OpenAi, "text-model").spawn();

    let listed = nova.request_ok(json!({"type": "get_tools"}));
    let all = listed["tools"].as_array().unwrap();
    assert_eq!(all.len(), 9, "every built-in tool: {listed}");
    let read = all.iter().find(|t| t["name"] == "read").unwrap();
    assert_eq!(read["source"], "builtin");
    assert_eq!(read["parameters"]["required"], json!(["path"]));
    assert!(!read["description"].as_str().unwrap().is_empty());
    assert_eq!(
        sorted_names(&listed),
        sorted(&TEXT_TOOLS),
        "the startup set"
    );

    let refused = nova.request(json!({"type": "set_active_tools", "tools": ["ls", "nope", "rm"]}));
    assert_eq!(refused["success"], false, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("nope, rm") && error.contains("read, write"),
        "{error}"
    );
    let unchanged = nova.request_ok(json!({"type": "get_tools"}));
    assert_eq!(sorted_names(&unchanged), sorted(&TEXT_TOOLS));

    let set = nova.request_ok(json!({"type": "set_active_tools", "tools": ["ls", "read", "ls"]}));
    assert_eq!(active_names(&set), ["read", "ls"]);
    nova.run_prompt("first");
    nova.request_ok(json!({"type": "set_active_tools", "tools": []}));
    nova.run_prompt("second");
    let requests = mock.chat_requests();
    assert_eq!(tool_names(&requests[0]), sorted(&["ls", "read"]));
    assert!(
        requests[1]
            .body
            .get("tools")
            .is_none_or(|t| t == &json!([])),
        "{}",
        requests[1].body
    );

    // The set is recorded like a model change, so the session brings it back.
    let file = nova.request_ok(json!({"type": "get_state"}))["sessionFile"]
        .as_str()
        .unwrap()
        .to_owned();
    // Written by the session's writer thread, so wait for the last one.
    let text = wait_file_contains(
        std::path::Path::new(&file),
        r#""customType":"nova.active_tools","data":{"tools":[]}}"#,
        RUN_TIMEOUT,
    );
    let first = r#"{"type":"custom","#;
    let data = r#""customType":"nova.active_tools","data":{"tools":["ls","read"]}}"#;
    assert!(text.contains(first) && text.contains(data), "{text}");
    nova.request_ok(json!({"type": "new_session"}));
    assert!(
        active_names(&nova.request_ok(json!({"type": "get_tools"}))).is_empty(),
        "a new session keeps the set"
    );
    nova.request_ok(json!({"type": "set_active_tools", "tools": ["bash"]}));
    nova.request_ok(json!({"type": "switch_session", "sessionPath": file}));
    assert!(
        active_names(&nova.request_ok(json!({"type": "get_tools"}))).is_empty(),
        "the file's last set"
    );
    mock.assert_no_violations();
}
