//! The built-in tools through the real binary, as a model uses them: the mock scripts tool
//! calls, nova runs them on real temp trees and generated images, and each case checks the
//! `tool_execution_end` event, the toolResult message and what the next request carries back to
//! the model (they must agree).

use crate::support::mock_llm::{MockLlm, Recorded, Reply};
use crate::support::nova_proc::{Nova, NovaBuilder};
use base64::Engine;
use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use serde_json::{Value, json};
use std::io::Cursor;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long one scripted run may take; generous, since the machine is shared.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

const TEXT_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Api {
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
fn nova_on(mock: &MockLlm, api: Api, model: &str) -> NovaBuilder {
    let (models, provider) = two_models(mock, api);
    Nova::builder()
        .models_json(models)
        .args(["--provider", provider, "--model", model])
}

type Call = (&'static str, &'static str, Value);

/// A finished run: turn `k` made the calls `turns[k]`; a final text reply ended it.
struct Ran {
    nova: Nova,
    mock: MockLlm,
    api: Api,
    events: Vec<Value>,
    turns: Vec<Vec<Call>>,
}

/// One call's result, checked to agree across the event, the toolResult message and the request.
struct Outcome {
    end: Value,
    /// The `role:"tool"` message of the next request.
    sent: Value,
    /// The next request as a whole.
    request: Value,
}

impl Outcome {
    fn is_error(&self) -> bool {
        self.end["isError"] == true
    }

    fn content(&self) -> &[Value] {
        self.end["result"]["content"].as_array().unwrap()
    }

    fn text(&self) -> &str {
        self.content()[0]["text"].as_str().unwrap()
    }

    fn details(&self) -> &Value {
        &self.end["result"]["details"]
    }

    fn ok(&self) -> &str {
        assert!(!self.is_error(), "expected success: {}", self.end);
        self.text()
    }

    fn err(&self) -> &str {
        assert!(self.is_error(), "expected an error: {}", self.end);
        assert_eq!(self.content().len(), 1, "{}", self.end);
        self.text()
    }

    /// The image block, which must be the second of `[text, image]`; returns its decoded bytes.
    fn image(&self, mime: &str) -> Vec<u8> {
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

    fn image_data(&self) -> &str {
        self.content()[1]["data"].as_str().unwrap()
    }
}

/// Script `turns` (each a batch of calls) and a final text reply, spawn nova, run one prompt.
fn run_turns(mock: MockLlm, builder: NovaBuilder, api: Api, turns: Vec<Vec<Call>>) -> Ran {
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

fn run_calls(mock: MockLlm, builder: NovaBuilder, api: Api, calls: Vec<Call>) -> Ran {
    run_turns(mock, builder, api, vec![calls])
}

impl Ran {
    fn of_type(&self, ty: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == ty).collect()
    }

    fn outcome(&self, id: &str) -> Outcome {
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

fn gradient(width: u32, height: u32) -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
        Rgb([
            (x % 256) as u8,
            (y % 256) as u8,
            ((x * 7 + y * 3) % 256) as u8,
        ])
    }))
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    gradient(width, height)
        .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
        .unwrap();
    out
}

fn size_of(bytes: &[u8]) -> (u32, u32) {
    let img = image::load_from_memory(bytes).unwrap();
    (img.width(), img.height())
}

fn abs(nova: &Nova, rel: &str) -> String {
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
// read, write, edit
// ---------------------------------------------------------------------------------------------

#[test]
fn read_text_with_offsets_limits_and_notices() {
    let mock = MockLlm::start();
    let lines: Vec<String> = (1..=2500).map(|i| format!("line {i}")).collect();
    let builder = nova_on(&mock, Api::OpenAi, "text-model").file("notes.txt", lines.join("\n"));
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            (
                "window",
                "read",
                json!({"path": "notes.txt", "offset": 2, "limit": 3}),
            ),
            ("whole", "read", json!({"path": "notes.txt"})),
            ("tail", "read", json!({"path": "notes.txt", "offset": 2498})),
            ("at", "read", json!({"path": "@notes.txt", "limit": "1"})),
            ("past", "read", json!({"path": "notes.txt", "offset": 3000})),
            ("missing", "read", json!({"path": "missing.txt"})),
        ],
    );
    assert_eq!(
        ran.outcome("window").ok(),
        "line 2\nline 3\nline 4\n\n[2496 more lines in file. Use offset=5 to continue.]"
    );

    let whole = ran.outcome("whole");
    let text = whole.ok();
    assert!(text.starts_with("line 1\nline 2\n"), "{text}");
    assert!(
        text.ends_with(
            "\nline 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"
        ),
        "{}",
        &text[text.len() - 200..]
    );
    assert_eq!(whole.details()["truncation"]["truncatedBy"], "lines");

    assert_eq!(ran.outcome("tail").ok(), "line 2498\nline 2499\nline 2500");
    assert_eq!(
        ran.outcome("at").ok(),
        "line 1\n\n[2499 more lines in file. Use offset=2 to continue.]"
    );
    assert_eq!(
        ran.outcome("past").err(),
        "Offset 3000 is beyond end of file (2500 lines total)"
    );
    assert_eq!(
        ran.outcome("missing").err(),
        format!(
            "ENOENT: no such file or directory, open '{}'",
            abs(&ran.nova, "missing.txt")
        )
    );
}

#[test]
fn read_an_image_gives_text_then_the_image() {
    let mock = MockLlm::start();
    let bytes = png(64, 48);
    let jpeg = {
        let mut out = Vec::new();
        gradient(40, 30)
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Jpeg)
            .unwrap();
        out
    };
    // Detected by content, not by name.
    let builder = nova_on(&mock, Api::Ollama, "vision-model")
        .file("shot.bin", &bytes)
        .file("photo.png", &jpeg)
        .file("wide.png", png(3000, 1000));
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("r", "read", json!({"path": "shot.bin"})),
            ("jpeg", "read", json!({"path": "photo.png"})),
            ("wide", "read", json!({"path": "wide.png"})),
        ],
    );
    let out = ran.outcome("r");
    assert_eq!(out.image("image/png"), bytes, "a small PNG is sent as is");
    assert_eq!(out.text(), "Read image file [image/png]");
    assert_eq!(out.sent["content"], "Read image file [image/png]");
    assert_eq!(out.sent["images"], json!([out.image_data()]));

    let out = ran.outcome("jpeg");
    assert_eq!(out.image("image/jpeg"), jpeg);
    assert_eq!(out.text(), "Read image file [image/jpeg]");

    let out = ran.outcome("wide");
    let (w, h) = size_of(&out.image("image/png"));
    assert_eq!(w, 2000);
    assert!(h == 666 || h == 667, "{w}x{h}");
    assert_eq!(
        out.text(),
        format!(
            "Read image file [image/png]\n[Image: original 3000x1000, displayed at {w}x{h}. \
             Multiply coordinates by 1.50 to map to original image.]"
        )
    );
    assert_eq!(out.sent["images"], json!([out.image_data()]));
}

#[test]
fn write_creates_directories_and_overwrites() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "text-model").file("old.txt", "old contents\n");
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            (
                "new",
                "write",
                json!({"path": "deep/er/new.txt", "content": "hello\nworld\n"}),
            ),
            (
                "over",
                "write",
                json!({"path": "old.txt", "content": "new"}),
            ),
        ],
    );
    assert_eq!(
        ran.outcome("new").ok(),
        "Successfully wrote 12 bytes to deep/er/new.txt"
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("deep/er/new.txt")).unwrap(),
        "hello\nworld\n"
    );
    assert_eq!(
        ran.outcome("over").ok(),
        "Successfully wrote 3 bytes to old.txt"
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("old.txt")).unwrap(),
        "new"
    );
}

#[test]
fn edit_single_and_multiple_replacements_with_diffs_and_errors() {
    let mock = MockLlm::start();
    let original = "fn a() {}\nfn b() {}\nfn b() {}\nfn c() {}\n";
    let builder = nova_on(&mock, Api::OpenAi, "text-model")
        .file("src/lib.rs", original)
        .file("quotes.txt", "let s = \u{201c}hi\u{201d};   \nnext\n")
        .file("dos.txt", "one\r\ntwo\r\nthree\r\n");
    let ran = run_turns(
        mock,
        builder,
        Api::OpenAi,
        vec![
            vec![(
                "single",
                "edit",
                json!({"path": "src/lib.rs", "oldText": "fn a() {}", "newText": "fn a2() {}"}),
            )],
            vec![(
                "multi",
                "edit",
                json!({"path": "src/lib.rs", "edits": [
                    {"oldText": "fn c() {}", "newText": "fn c2() {}"},
                    {"oldText": "fn a2() {}", "newText": "fn a3() {}\n// added"},
                ]}),
            )],
            vec![
                (
                    "absent",
                    "edit",
                    json!({"path": "src/lib.rs", "oldText": "fn zzz() {}", "newText": "x"}),
                ),
                (
                    "twice",
                    "edit",
                    json!({"path": "src/lib.rs", "oldText": "fn b() {}", "newText": "x"}),
                ),
                (
                    "second",
                    "edit",
                    json!({"path": "src/lib.rs", "edits": [
                        {"oldText": "fn a3() {}", "newText": "x"},
                        {"oldText": "nowhere", "newText": "y"},
                    ]}),
                ),
                (
                    "fuzzy",
                    "edit",
                    json!({"path": "quotes.txt", "oldText": "let s = \"hi\";", "newText": "let s = \"ho\";"}),
                ),
                (
                    "crlf",
                    "edit",
                    json!({"path": "dos.txt", "oldText": "two\nthree", "newText": "2\n3"}),
                ),
                (
                    "nofile",
                    "edit",
                    json!({"path": "nope.rs", "oldText": "a", "newText": "b"}),
                ),
            ],
        ],
    );
    let file = ran.nova.cwd().join("src/lib.rs");

    let single = ran.outcome("single");
    assert_eq!(
        single.ok(),
        "Successfully replaced 1 block(s) in src/lib.rs."
    );
    assert_eq!(single.details()["firstChangedLine"], 1);
    let diff = single.details()["diff"].as_str().unwrap();
    assert!(
        diff.contains("-1 fn a() {}") && diff.contains("+1 fn a2() {}"),
        "{diff}"
    );

    let multi = ran.outcome("multi");
    assert_eq!(
        multi.ok(),
        "Successfully replaced 2 block(s) in src/lib.rs."
    );
    assert_eq!(multi.details()["firstChangedLine"], 1);
    let diff = multi.details()["diff"].as_str().unwrap();
    for line in [
        "-1 fn a2() {}",
        "+1 fn a3() {}",
        "+2 // added",
        "-4 fn c() {}",
        "+5 fn c2() {}",
    ] {
        assert!(diff.contains(line), "{line:?} in\n{diff}");
    }

    let after = "fn a3() {}\n// added\nfn b() {}\nfn b() {}\nfn c2() {}\n";
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after);
    assert_eq!(
        ran.outcome("absent").err(),
        "Could not find the exact text in src/lib.rs. The old text must match exactly including \
         all whitespace and newlines."
    );
    assert_eq!(
        ran.outcome("twice").err(),
        "Found 2 occurrences of the text in src/lib.rs. The text must be unique. Please provide \
         more context to make it unique."
    );
    assert!(
        ran.outcome("second")
            .err()
            .starts_with("Could not find edits[1] in src/lib.rs."),
        "{}",
        ran.outcome("second").end
    );
    assert_eq!(ran.outcome("nofile").err(), "File not found: nope.rs");
    assert_eq!(
        ran.outcome("fuzzy").ok(),
        "Successfully replaced 1 block(s) in quotes.txt."
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("quotes.txt")).unwrap(),
        "let s = \"ho\";\nnext\n",
        "a fuzzy match writes the file back normalised"
    );
    assert_eq!(
        ran.outcome("crlf").ok(),
        "Successfully replaced 1 block(s) in dos.txt."
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("dos.txt")).unwrap(),
        "one\r\n2\r\n3\r\n",
        "CRLF line endings are kept"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        after,
        "failed edits change nothing, not even the first of several"
    );
}

// ---------------------------------------------------------------------------------------------
// bash
// ---------------------------------------------------------------------------------------------

#[test]
fn bash_exit_codes_timeouts_and_empty_output() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "text-model");
    let started = Instant::now();
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            (
                "fail",
                "bash",
                json!({"command": "echo out; echo err >&2; exit 3"}),
            ),
            (
                "slow",
                "bash",
                json!({"command": "echo started; sleep 30", "timeout": 1}),
            ),
            ("quiet", "bash", json!({"command": "true"})),
            ("pwd", "bash", json!({"command": "pwd"})),
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the timeout stopped the sleep"
    );
    assert_eq!(
        ran.outcome("fail").err(),
        "out\nerr\n\n\nCommand exited with code 3"
    );
    assert_eq!(
        ran.outcome("slow").err(),
        "started\n\n\nCommand timed out after 1 seconds"
    );
    assert_eq!(ran.outcome("quiet").ok(), "(no output)");
    let cwd = std::fs::canonicalize(ran.nova.cwd()).unwrap();
    assert_eq!(
        ran.outcome("pwd").ok(),
        format!("{}\n", cwd.display()),
        "runs in the session cwd"
    );
}

/// Splits a truncated bash result into the shown tail and the full-output file the notice names,
/// checking the notice reads `<prefix><path>]`.
fn shown_and_full_output<'a>(text: &'a str, prefix: &str) -> (&'a str, &'a str) {
    let (shown, notice) = text.rsplit_once("\n\n").unwrap();
    let path = notice
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{notice:?} does not read {prefix:?}<path>]"));
    (shown, path)
}

#[test]
fn bash_truncates_the_tail_and_saves_the_full_output() {
    let mock = MockLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let builder =
        nova_on(&mock, Api::OpenAi, "text-model").env("TMPDIR", tmp.path().display().to_string());
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("lines", "bash", json!({"command": "seq 1 30000"})),
            (
                "bytes",
                "bash",
                json!({"command": "for i in $(seq 1 1000); do printf '%099d\\n' $i; done"}),
            ),
        ],
    );

    // Over 2000 lines: the last 2000 are shown.
    let lines = ran.outcome("lines");
    let (shown, path) = shown_and_full_output(
        lines.ok(),
        "[Showing lines 28002-30001 of 30001. Full output: ",
    );
    let expected: String = (28002..=30000).map(|i| format!("{i}\n")).collect();
    assert_eq!(shown, expected);
    assert!(Path::new(path).starts_with(tmp.path()), "{path}");
    let full: String = (1..=30000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), full);
    assert_eq!(lines.details()["fullOutputPath"], path);
    assert_eq!(lines.details()["truncation"]["truncated"], true);
    assert_eq!(lines.details()["truncation"]["truncatedBy"], "lines");

    // Over 50 KB in fewer lines: whole lines from the end, up to 50 KB.
    let bytes = ran.outcome("bytes");
    let text = bytes.ok();
    let first: usize = text.lines().next().unwrap().parse().unwrap();
    let (shown, path) = shown_and_full_output(
        text,
        &format!("[Showing lines {first}-1001 of 1001 (50.0KB limit). Full output: "),
    );
    let expected: String = (first..=1000).map(|i| format!("{i:099}\n")).collect();
    assert_eq!(shown, expected);
    assert!(
        shown.len() <= 50 * 1024 && shown.len() > 50 * 1024 - 200,
        "{}",
        shown.len()
    );
    let full: String = (1..=1000).map(|i| format!("{i:099}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), full);
    assert_eq!(bytes.details()["truncation"]["truncatedBy"], "bytes");
}

// ---------------------------------------------------------------------------------------------
// grep, find, ls
// ---------------------------------------------------------------------------------------------

/// A git work tree with ignored, hidden and binary files.
fn search_tree(builder: NovaBuilder) -> NovaBuilder {
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(builder.cwd())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        std::fs::create_dir_all(builder.cwd().join(".git")).unwrap();
    }
    builder
        .file(".gitignore", "ignored.txt\nbuild/\n")
        .file("ignored.txt", "needle in ignored\n")
        .file("build/out.txt", "needle in build\n")
        .file("build/z.rs", "fn z() {}\n")
        .file(".hidden.txt", "needle in hidden\n")
        .file(".config/x.rs", "// needle in hidden dir\n")
        .file("src/main.rs", "fn main() {\n    // needle one\n}\n")
        .file("src/lib.rs", "pub fn f() {}\n")
        .file("src/nested/deep.rs", "\n")
        .file("data.bin", b"\0\x01\x02needle binary\n")
        .file(
            "many.txt",
            "needle 1\nneedle 2\nneedle 3\nneedle 4\nneedle 5\n",
        )
        .file("ctx.txt", "zero\nbefore\nneedle ctx\nafter\nend\n")
}

#[test]
fn grep_honours_gitignore_searches_hidden_skips_binary() {
    let mock = MockLlm::start();
    let builder = search_tree(nova_on(&mock, Api::Ollama, "text-model"));
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("all", "grep", json!({"pattern": "needle"})),
            (
                "context",
                "grep",
                json!({"pattern": "needle ctx", "context": 1}),
            ),
            (
                "limited",
                "grep",
                json!({"pattern": "NEEDLE \\d", "ignoreCase": true, "limit": 2}),
            ),
            ("glob", "grep", json!({"pattern": "needle", "glob": "*.rs"})),
            (
                "literal",
                "grep",
                json!({"pattern": "needle \\d", "literal": true}),
            ),
            ("none", "grep", json!({"pattern": "no_such_text_zz"})),
            (
                "file",
                "grep",
                json!({"pattern": "needle [45]", "path": "many.txt"}),
            ),
            ("badpath", "grep", json!({"pattern": "x", "path": "nope"})),
        ],
    );
    assert_eq!(
        ran.outcome("all").ok(),
        "\
.config/x.rs:1: // needle in hidden dir
.hidden.txt:1: needle in hidden
ctx.txt:3: needle ctx
many.txt:1: needle 1
many.txt:2: needle 2
many.txt:3: needle 3
many.txt:4: needle 4
many.txt:5: needle 5
src/main.rs:2:     // needle one"
    );
    assert_eq!(
        ran.outcome("context").ok(),
        "ctx.txt-2- before\nctx.txt:3: needle ctx\nctx.txt-4- after"
    );
    let limited = ran.outcome("limited");
    assert_eq!(
        limited.ok(),
        "many.txt:1: needle 1\nmany.txt:2: needle 2\n\n[2 matches limit reached. Use limit=4 \
         for more, or refine pattern]"
    );
    assert_eq!(limited.details()["matchLimitReached"], 2);
    assert_eq!(
        ran.outcome("glob").ok(),
        ".config/x.rs:1: // needle in hidden dir\nsrc/main.rs:2:     // needle one"
    );
    assert_eq!(ran.outcome("literal").ok(), "No matches found");
    assert_eq!(ran.outcome("none").ok(), "No matches found");
    assert_eq!(
        ran.outcome("file").ok(),
        "many.txt:4: needle 4\nmany.txt:5: needle 5",
        "a single file is shown by its name"
    );
    assert_eq!(
        ran.outcome("badpath").err(),
        format!("Path not found: {}", abs(&ran.nova, "nope"))
    );
}

#[test]
fn find_globs_and_ls_listings() {
    let mock = MockLlm::start();
    let builder = search_tree(nova_on(&mock, Api::OpenAi, "text-model"))
        .file("listing/b.txt", "")
        .file("listing/A.txt", "")
        .file("listing/.dot", "")
        .file("listing/sub/x", "")
        .file("listing/Zeta/y", "")
        .file("listing/c.md", "");
    std::fs::create_dir_all(builder.cwd().join("empty")).unwrap();
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("rs", "find", json!({"pattern": "*.rs"})),
            ("dir", "find", json!({"pattern": "nested"})),
            (
                "under",
                "find",
                json!({"pattern": "**/*.rs", "path": "src"}),
            ),
            (
                "capped",
                "find",
                json!({"pattern": "*.rs", "path": "src", "limit": 2}),
            ),
            ("nomatch", "find", json!({"pattern": "*.zig"})),
            ("ls", "ls", json!({"path": "listing"})),
            ("lscap", "ls", json!({"path": "listing", "limit": 2})),
            ("empty", "ls", json!({"path": "empty"})),
            ("notdir", "ls", json!({"path": "listing/b.txt"})),
            ("lsmissing", "ls", json!({"path": "gone"})),
        ],
    );
    assert_eq!(
        ran.outcome("rs").ok(),
        ".config/x.rs\nsrc/lib.rs\nsrc/main.rs\nsrc/nested/deep.rs",
        "hidden included, ignored build/ left out"
    );
    assert_eq!(ran.outcome("dir").ok(), "src/nested/");
    assert_eq!(ran.outcome("under").ok(), "lib.rs\nmain.rs\nnested/deep.rs");
    let capped = ran.outcome("capped");
    let (shown, notice) = capped.ok().split_once("\n\n").unwrap();
    assert_eq!(
        notice,
        "[2 results limit reached. Use limit=4 for more, or refine pattern]"
    );
    let shown: Vec<&str> = shown.lines().collect();
    assert_eq!(shown.len(), 2);
    assert!(shown.iter().all(|l| l.ends_with(".rs")), "{shown:?}");
    assert_eq!(capped.details()["resultLimitReached"], 2);
    assert_eq!(
        ran.outcome("nomatch").ok(),
        "No files found matching pattern"
    );

    assert_eq!(
        ran.outcome("ls").ok(),
        ".dot\nA.txt\nb.txt\nc.md\nsub/\nZeta/"
    );
    let lscap = ran.outcome("lscap");
    assert_eq!(
        lscap.ok(),
        ".dot\nA.txt\n\n[2 entries limit reached. Use limit=4 for more]"
    );
    assert_eq!(lscap.details()["entryLimitReached"], 2);
    assert_eq!(ran.outcome("empty").ok(), "(empty directory)");
    assert_eq!(
        ran.outcome("notdir").err(),
        format!("Not a directory: {}", abs(&ran.nova, "listing/b.txt"))
    );
    assert_eq!(
        ran.outcome("lsmissing").err(),
        format!("Path not found: {}", abs(&ran.nova, "gone"))
    );
}

// ---------------------------------------------------------------------------------------------
// view_image and zoom
// ---------------------------------------------------------------------------------------------

#[test]
fn view_image_shows_downscales_and_reaches_an_ollama_vision_model() {
    let mock = MockLlm::start();
    let small = png(64, 48);
    let builder = nova_on(&mock, Api::Ollama, "vision-model")
        .file("small.png", &small)
        .file("wide.png", png(3000, 1000))
        .file("notes.png", "just text");
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("small", "view_image", json!({"path": "small.png"})),
            ("wide", "view_image", json!({"path": "wide.png"})),
            ("text", "view_image", json!({"path": "notes.png"})),
            ("gone", "view_image", json!({"path": "gone.png"})),
        ],
    );
    let out = ran.outcome("small");
    assert_eq!(out.image("image/png"), small);
    let text = out.text();
    assert!(
        text.starts_with("Image file small.png: PNG, 64x48 px, "),
        "{text}"
    );
    assert_eq!(out.sent["content"], text);
    assert_eq!(out.sent["images"], json!([out.image_data()]));

    let wide = ran.outcome("wide");
    let (w, h) = size_of(&wide.image("image/png"));
    assert_eq!(w, 2000);
    assert!(h == 666 || h == 667, "{w}x{h}");
    let text = wide.text();
    assert!(
        text.starts_with("Image file wide.png: PNG, 3000x1000 px, "),
        "{text}"
    );
    assert!(text.contains("[Downscaled from 3000x1000 px ("), "{text}");
    assert!(text.contains(&format!(" to {w}x{h} px (")), "{text}");
    assert_eq!(wide.sent["images"], json!([wide.image_data()]));

    let not_image = ran.outcome("text");
    assert_eq!(
        not_image.err(),
        format!(
            "Not a PNG, JPEG, GIF or WebP image: {}",
            abs(&ran.nova, "notes.png")
        )
    );
    assert!(not_image.sent.get("images").is_none());
    assert!(
        ran.outcome("gone").err().starts_with("ENOENT"),
        "{}",
        ran.outcome("gone").end
    );
}

#[test]
fn view_image_reaches_an_openai_vision_model_in_a_following_user_message() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::OpenAi, "vision-model")
        .file("a.png", png(20, 10))
        .file("b.png", png(10, 20));
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("a", "view_image", json!({"path": "a.png"})),
            ("b", "view_image", json!({"path": "b.png"})),
        ],
    );
    let a = ran.outcome("a");
    let b = ran.outcome("b");
    assert_eq!(size_of(&a.image("image/png")), (20, 10));
    assert_eq!(size_of(&b.image("image/png")), (10, 20));
    assert!(a.sent["content"].as_str().unwrap().contains("20x10 px"));

    let messages = a.request["messages"].as_array().unwrap();
    let at = messages
        .iter()
        .position(|m| m["role"] == "tool" && m["tool_call_id"] == "b")
        .unwrap();
    let follow = &messages[at + 1];
    assert_eq!(follow["role"], "user", "{follow}");
    let urls: Vec<&str> = follow["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "image_url")
        .map(|p| p["image_url"]["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            format!("data:image/png;base64,{}", a.image_data()),
            format!("data:image/png;base64,{}", b.image_data()),
        ]
    );
    let body = a.request.to_string();
    assert_eq!(body.matches("image_url").count(), 4, "two parts, no more");
}

#[test]
fn a_text_only_model_gets_a_note_instead_of_the_image() {
    for api in [Api::Ollama, Api::OpenAi] {
        let mock = MockLlm::start();
        let builder = nova_on(&mock, api, "text-model").file("pic.png", png(30, 30));
        let ran = run_calls(
            mock,
            builder,
            api,
            vec![("r", "read", json!({"path": "pic.png"}))],
        );
        let out = ran.outcome("r");
        out.image("image/png");
        let sent = out.sent["content"].as_str().unwrap();
        assert!(sent.starts_with("Read image file [image/png]"), "{sent}");
        assert!(
            sent.contains("[image omitted: model text-model does not accept images]"),
            "{api:?}: {sent}"
        );
        assert!(out.sent.get("images").is_none(), "{api:?}");
        let body = out.request.to_string();
        assert!(!body.contains(out.image_data()), "{api:?}: no base64 image");
        assert!(!body.contains("image_url"), "{api:?}");
        assert!(!body.contains("\"images\""), "{api:?}");
    }
}

#[test]
fn zoom_crops_magnifies_caps_and_rejects_outside_rectangles() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "vision-model")
        .file("pic.png", png(300, 200))
        .file("wide.png", png(3000, 1000))
        .file("notes.txt", "not an image")
        .file("photo.jpg", {
            let mut out = Vec::new();
            gradient(120, 80)
                .write_to(&mut Cursor::new(&mut out), ImageFormat::Jpeg)
                .unwrap();
            out
        });
    let zoom = |x: i64, y: i64, w: i64, h: i64, scale: Option<i64>| {
        let mut args = json!({"path": "pic.png", "x": x, "y": y, "width": w, "height": h});
        if let Some(s) = scale {
            args["scale"] = json!(s);
        }
        args
    };
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("default", "zoom", zoom(10, 20, 50, 40, None)),
            ("x4", "zoom", zoom(200, 150, 100, 50, Some(4))),
            ("capped", "zoom", zoom(0, 0, 300, 200, Some(8))),
            (
                "shrunk",
                "zoom",
                json!({"path": "wide.png", "x": 0, "y": 0, "width": 3000, "height": 1000, "scale": 1}),
            ),
            (
                "jpeg",
                "zoom",
                json!({"path": "photo.jpg", "x": 60, "y": 40, "width": 60, "height": 40, "scale": 3}),
            ),
            ("outside", "zoom", zoom(250, 150, 100, 100, None)),
            ("negative", "zoom", zoom(-5, 0, 10, 10, None)),
            ("empty", "zoom", zoom(0, 0, 0, 10, None)),
            ("scale", "zoom", zoom(0, 0, 10, 10, Some(9))),
            (
                "notimage",
                "zoom",
                json!({"path": "notes.txt", "x": 0, "y": 0, "width": 1, "height": 1}),
            ),
        ],
    );
    let out = ran.outcome("default");
    assert_eq!(size_of(&out.image("image/png")), (100, 80));
    assert!(
        out.text().starts_with(
            "Zoomed pic.png (PNG, 300x200 px): crop x=10 y=20 width=50 height=40, scale 2, \
             output 100x80 px PNG ("
        ),
        "{}",
        out.text()
    );
    assert_eq!(out.sent["images"], json!([out.image_data()]));

    // The crop is exact: scale 4 of a known gradient region.
    let x4 = ran.outcome("x4");
    let img = image::load_from_memory(&x4.image("image/png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(img.dimensions(), (400, 200));
    let source = gradient(300, 200).to_rgb8();
    let centre = img.get_pixel(4 * 50 + 2, 4 * 25 + 2);
    let expected = source.get_pixel(250, 175);
    for c in 0..3 {
        assert!(
            centre[c].abs_diff(expected[c]) <= 8,
            "{centre:?} vs {expected:?}"
        );
    }

    let capped = ran.outcome("capped");
    assert_eq!(size_of(&capped.image("image/png")), (1800, 1200));
    assert!(
        capped.text().contains("so scale 6 was used"),
        "{}",
        capped.text()
    );

    let shrunk = ran.outcome("shrunk");
    let (w, h) = size_of(&shrunk.image("image/png"));
    assert_eq!(w, 2000);
    assert!(h == 666 || h == 667, "{w}x{h}");
    assert!(
        shrunk
            .text()
            .contains(&format!("so it was downscaled to {w}x{h} px")),
        "{}",
        shrunk.text()
    );

    let jpeg = ran.outcome("jpeg");
    assert_eq!(size_of(&jpeg.image("image/png")), (180, 120), "always PNG");
    assert!(
        jpeg.text()
            .starts_with("Zoomed photo.jpg (JPEG, 120x80 px): "),
        "{}",
        jpeg.text()
    );

    for id in ["outside", "negative", "empty"] {
        let text = ran.outcome(id).err().to_owned();
        assert!(text.contains("the image is 300x200 px"), "{id}: {text}");
    }
    assert_eq!(
        ran.outcome("outside").err(),
        "Rectangle x=250 y=150 width=100 height=100 is not inside the image: the image is \
         300x200 px (x 0-299, y 0-199)"
    );
    assert!(ran.outcome("scale").err().contains("scale"));
    assert!(
        ran.outcome("notimage").err().starts_with("Not a PNG"),
        "{}",
        ran.outcome("notimage").end
    );
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
