//! Tests of the mock LLM server itself (nova is not involved): a raw HTTP/1.1 client checks the
//! bytes on the wire, and reqwest checks that a real client accepts them.

use crate::support::mock_llm::{
    Gate, MockLlm, NO_REPLY_BODY, Reply, WireFormat, check_conversation,
};
use serde_json::{Value, json};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    /// The de-chunked body.
    body: Vec<u8>,
    /// HTTP chunks received.
    chunks: usize,
    /// The terminating zero-length chunk arrived.
    complete: bool,
    /// The read timed out with the connection still open.
    stalled: bool,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    /// Ollama NDJSON lines, parsed.
    fn ndjson(&self) -> Vec<Value> {
        self.text()
            .split_terminator('\n')
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// SSE `data:` payloads (`[DONE]` kept as a string).
    fn sse(&self) -> Vec<Value> {
        let text = self.text();
        assert!(text.ends_with("\n\n"), "SSE body ends mid-event: {text:?}");
        text.split_terminator("\n\n")
            .map(|ev| {
                let data = ev.strip_prefix("data: ").expect("data: prefix");
                if data == "[DONE]" {
                    json!("[DONE]")
                } else {
                    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"))
                }
            })
            .collect()
    }
}

fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> RawResponse {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer mock-key\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut stalled = false;
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                stalled = true;
                break;
            }
            Err(e) => panic!("read: {e}"),
        }
    }
    parse_response(&raw, stalled)
}

fn parse_response(raw: &[u8], stalled: bool) -> RawResponse {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response head");
    let head = String::from_utf8(raw[..end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| l.split_once(':').unwrap())
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut rest = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v == "chunked");
    let mut resp = RawResponse {
        status,
        headers,
        body: Vec::new(),
        chunks: 0,
        complete: false,
        stalled,
    };
    if !chunked {
        resp.body = rest.to_vec();
        resp.complete = true;
        return resp;
    }
    while let Some(nl) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap(), 16).unwrap();
        if size == 0 {
            resp.complete = &rest[nl..] == b"\r\n\r\n";
            break;
        }
        let data = &rest[nl + 2..];
        if data.len() < size + 2 {
            // A chunk cut short: keep what arrived.
            resp.body.extend_from_slice(&data[..data.len().min(size)]);
            break;
        }
        resp.body.extend_from_slice(&data[..size]);
        resp.chunks += 1;
        rest = &data[size + 2..];
    }
    resp
}

fn ollama_chat(mock: &MockLlm, messages: Value) -> RawResponse {
    let body = json!({"model": "test-model", "messages": messages, "stream": true});
    request(mock.port(), "POST", "/api/chat", Some(&body), LONG)
}

fn openai_chat(mock: &MockLlm, messages: Value, include_usage: bool) -> RawResponse {
    let mut body = json!({"model": "test-model", "messages": messages, "stream": true});
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    request(
        mock.port(),
        "POST",
        "/v1/chat/completions",
        Some(&body),
        LONG,
    )
}

fn anthropic_chat(mock: &MockLlm) -> RawResponse {
    let body = json!({"model": "claude-test", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]});
    request(mock.port(), "POST", "/v1/messages", Some(&body), LONG)
}

fn responses_chat(mock: &MockLlm) -> RawResponse {
    let body = json!({"model": "gpt-test", "stream": true, "store": false,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}]});
    request(mock.port(), "POST", "/v1/responses", Some(&body), LONG)
}

fn google_chat(mock: &MockLlm) -> RawResponse {
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]});
    let path = "/v1beta/models/gemini-test:streamGenerateContent?alt=sse";
    request(mock.port(), "POST", path, Some(&body), LONG)
}

fn pi_chat(mock: &MockLlm) -> RawResponse {
    let body = json!({"model": "m1", "options": {"maxTokens": 100},
        "context": {"messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]}});
    request(mock.port(), "POST", "/pi/v1/messages", Some(&body), LONG)
}

fn bedrock_chat(mock: &MockLlm) -> RawResponse {
    let body = json!({"messages": [{"role": "user", "content": [{"text": "hello"}]}]});
    request(
        mock.port(),
        "POST",
        "/model/m1/converse-stream",
        Some(&body),
        LONG,
    )
}

/// Gemini's SSE payloads, each a bare CRLF-terminated `data:` line.
fn google_payloads(r: &RawResponse) -> Vec<Value> {
    let text = r.text();
    assert!(
        text.ends_with("\r\n\r\n"),
        "SSE body ends mid-event: {text:?}"
    );
    text.split_terminator("\r\n\r\n")
        .map(|ev| serde_json::from_str(ev.strip_prefix("data: ").expect("data: prefix")).unwrap())
        .collect()
}

/// Anthropic (and Responses) SSE events as `(event name, data)`; the name must match the data's
/// `type`.
fn anthropic_events(r: &RawResponse) -> Vec<(String, Value)> {
    let text = r.text();
    assert!(text.ends_with("\n\n"), "SSE body ends mid-event: {text:?}");
    text.split_terminator("\n\n")
        .map(|ev| {
            let (name, data) = ev.split_once('\n').expect("two lines");
            let name = name.strip_prefix("event: ").expect("event: prefix");
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name, "{ev}");
            (name.to_string(), data)
        })
        .collect()
}

fn hello() -> Value {
    json!([{"role": "user", "content": "hello"}])
}

/// Drop the per-request chunk id so two OpenAI streams can be compared.
fn without_ids(frames: Vec<Value>) -> Vec<Value> {
    frames
        .into_iter()
        .map(|mut f| {
            if let Some(o) = f.as_object_mut() {
                o.remove("id");
            }
            f
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Formats
// ---------------------------------------------------------------------------------------------

#[test]
fn ollama_text_with_thinking() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("hello world")
            .thinking("let me think")
            .usage(7, 3),
    );
    let r = ollama_chat(&mock, hello());
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(r.complete && !r.stalled);
    let f = r.ndjson();
    assert_eq!(f.len(), 3, "{f:#?}");
    assert_eq!(f[0]["model"], "test-model");
    assert!(f[0]["created_at"].is_string());
    assert_eq!(
        f[0]["message"],
        json!({"role": "assistant", "content": "", "thinking": "let me think"})
    );
    assert_eq!(f[0]["done"], false);
    assert_eq!(
        f[1]["message"],
        json!({"role": "assistant", "content": "hello world"})
    );
    assert_eq!(f[2]["done"], true);
    assert_eq!(f[2]["done_reason"], "stop");
    assert_eq!(f[2]["prompt_eval_count"], 7);
    assert_eq!(f[2]["eval_count"], 3);
    assert_eq!(mock.pending_replies(), 0);
    mock.assert_no_violations();
}

#[test]
fn ollama_parallel_tool_calls_and_length() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("reading")
            .tool_call("c1", "read", json!({"path": "a.txt"}))
            .tool_call("c2", "bash", json!({"command": "ls -la"})),
    );
    mock.push(Reply::text("abcdef").text_chunks(3).finish("length"));
    let f = ollama_chat(&mock, hello()).ndjson();
    assert_eq!(f.len(), 3);
    assert_eq!(f[1]["message"]["content"], "");
    assert_eq!(
        f[1]["message"]["tool_calls"],
        json!([
            {"function": {"name": "read", "arguments": {"path": "a.txt"}}},
            {"function": {"name": "bash", "arguments": {"command": "ls -la"}}},
        ])
    );
    assert_eq!(f[2]["done_reason"], "stop");

    let f = ollama_chat(&mock, hello()).ndjson();
    let texts: Vec<&str> = f[..3]
        .iter()
        .map(|x| x["message"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["ab", "cd", "ef"]);
    assert_eq!(f[3]["done_reason"], "length");
}

#[test]
fn openai_text_thinking_and_usage() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("hello world")
            .thinking("hmm")
            .text_chunks(3)
            .usage(11, 4),
    );
    mock.push(Reply::text("no usage"));
    let r = openai_chat(&mock, hello(), true);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(r.complete);
    let f = r.sse();
    assert_eq!(f.len(), 7, "{f:#?}");
    for c in &f[..5] {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "test-model");
        assert!(c["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(c["choices"][0]["index"], 0);
    }
    assert_eq!(
        f[0]["choices"][0]["delta"],
        json!({"role": "assistant", "reasoning_content": "hmm"})
    );
    assert_eq!(f[0]["choices"][0]["finish_reason"], Value::Null);
    let text: String = f[1..4]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "hello world");
    assert_eq!(f[4]["choices"][0]["delta"], json!({}));
    assert_eq!(f[4]["choices"][0]["finish_reason"], "stop");
    assert_eq!(f[5]["choices"], json!([]));
    assert_eq!(
        f[5]["usage"],
        json!({"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15})
    );
    assert_eq!(f[6], "[DONE]");

    let f = openai_chat(&mock, hello(), false).sse();
    assert_eq!(f.len(), 3, "no usage chunk unless asked: {f:#?}");
    assert_eq!(
        f[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": "no usage"})
    );
    assert_eq!(f[2], "[DONE]");
    mock.assert_no_violations();
}

#[test]
fn openai_parallel_tool_calls_in_fragments() {
    let mock = MockLlm::start();
    let a1 = json!({"path": "src/main.rs", "offset": 10});
    let a2 = json!({"command": "echo \"héllo\""});
    mock.push(
        Reply::text("two calls")
            .tool_call("call_1", "read", a1.clone())
            .tool_call("call_2", "bash", a2.clone()),
    );
    let f = openai_chat(&mock, hello(), true).sse();
    let deltas: Vec<&Value> = f
        .iter()
        .filter(|c| c["choices"].as_array().is_some_and(|a| !a.is_empty()))
        .map(|c| &c["choices"][0]["delta"])
        .collect();
    let mut args = ["".to_string(), "".to_string()];
    let mut heads = Vec::new();
    let mut fragments = [0, 0];
    for d in &deltas {
        for tc in d["tool_calls"].as_array().into_iter().flatten() {
            let i = tc["index"].as_u64().unwrap() as usize;
            if let Some(id) = tc.get("id") {
                assert_eq!(tc["type"], "function");
                heads.push((i, id.clone(), tc["function"]["name"].clone()));
            }
            let frag = tc["function"]["arguments"].as_str().unwrap();
            if !frag.is_empty() {
                fragments[i] += 1;
            }
            args[i].push_str(frag);
        }
    }
    assert_eq!(
        heads,
        vec![
            (0, json!("call_1"), json!("read")),
            (1, json!("call_2"), json!("bash"))
        ]
    );
    assert!(fragments.iter().all(|n| *n >= 2), "{fragments:?}");
    assert_eq!(serde_json::from_str::<Value>(&args[0]).unwrap(), a1);
    assert_eq!(serde_json::from_str::<Value>(&args[1]).unwrap(), a2);
    let finish = f
        .iter()
        .find(|c| !c["choices"][0]["finish_reason"].is_null());
    assert_eq!(finish.unwrap()["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn many_small_chunks() {
    let mock = MockLlm::start();
    mock.push(Reply::many_chunks(20_000, "x"));
    let r = openai_chat(&mock, hello(), true);
    let f = r.sse();
    assert_eq!(f.len(), 20_000 + 3);
    assert!(
        f[..20_000]
            .iter()
            .all(|c| c["choices"][0]["delta"]["content"] == "x")
    );
}

#[test]
fn tags_routes_and_empty_script() {
    let mock = MockLlm::start();
    let r = request(mock.port(), "GET", "/api/tags", None, LONG);
    assert_eq!(r.status, 200);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["models"][0]["name"], "test-model");
    mock.set_models(&["a", "b:7b"]);
    let r = request(mock.port(), "GET", "/api/tags", None, LONG);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    let names: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b:7b"]);

    let r = request(mock.port(), "POST", "/nope", Some(&json!({})), LONG);
    assert_eq!(r.status, 404);

    let r = ollama_chat(&mock, hello());
    assert_eq!(r.status, 500);
    assert_eq!(r.text(), NO_REPLY_BODY);
    let r = openai_chat(&mock, hello(), false);
    assert_eq!(r.status, 500);
    assert_eq!(r.text(), NO_REPLY_BODY);
}

#[test]
fn records_requests() {
    let mock = MockLlm::start();
    mock.push(Reply::text("a"));
    let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let port = mock.port();
    let t = std::thread::spawn(move || {
        request(port, "POST", "/v1/chat/completions", Some(&body), LONG)
    });
    let reqs = mock.wait_requests(1, LONG);
    t.join().unwrap();
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].header("Authorization"), Some("Bearer mock-key"));
    assert_eq!(reqs[0].messages()[0]["content"], "hi");
    assert!(reqs[0].is_chat());
    assert_eq!(mock.chat_requests().len(), 1);
}

#[test]
#[should_panic(expected = "expected 1 request(s)")]
fn wait_requests_times_out_readably() {
    let mock = MockLlm::start();
    mock.wait_requests(1, Duration::from_millis(50));
}

#[test]
fn http_error_reply() {
    let mock = MockLlm::start();
    mock.push(Reply::http_error(429, r#"{"error":"rate limit"}"#).header("retry-after", "1"));
    mock.push(Reply::http_error(503, "overloaded"));
    let r = openai_chat(&mock, hello(), false);
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.text(), r#"{"error":"rate limit"}"#);
    let r = ollama_chat(&mock, hello());
    assert_eq!(r.status, 503);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.text(), "overloaded");
}

// ---------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------

#[test]
fn split_writes_reassemble_to_the_same_bytes() {
    let text = "héllo ✓ wörld, with \"quotes\" and\nnewlines";
    let reply = || {
        Reply::text(text)
            .thinking("ünïcode thinking")
            .text_chunks(4)
            .tool_call(
                "c1",
                "edit",
                json!({"path": "ä.txt", "oldText": "ö", "newText": "✓"}),
            )
    };
    let mock = MockLlm::start();
    for format in [
        WireFormat::Ollama,
        WireFormat::OpenAi,
        WireFormat::Anthropic,
        WireFormat::Responses,
        WireFormat::Google,
        WireFormat::Bedrock,
        WireFormat::PiMessages,
    ] {
        mock.push(reply());
        mock.push(reply().split_writes());
        let (whole, split) = match format {
            WireFormat::Ollama => (ollama_chat(&mock, hello()), ollama_chat(&mock, hello())),
            WireFormat::OpenAi => (
                openai_chat(&mock, hello(), true),
                openai_chat(&mock, hello(), true),
            ),
            WireFormat::Anthropic => (anthropic_chat(&mock), anthropic_chat(&mock)),
            WireFormat::Responses => (responses_chat(&mock), responses_chat(&mock)),
            WireFormat::Google => (google_chat(&mock), google_chat(&mock)),
            WireFormat::Bedrock => (bedrock_chat(&mock), bedrock_chat(&mock)),
            WireFormat::PiMessages => (pi_chat(&mock), pi_chat(&mock)),
        };
        assert!(whole.complete && split.complete);
        assert!(
            split.chunks > whole.chunks * 10,
            "{} vs {}",
            split.chunks,
            whole.chunks
        );
        match format {
            WireFormat::Ollama | WireFormat::Bedrock => assert_eq!(whole.body, split.body),
            WireFormat::OpenAi => assert_eq!(without_ids(whole.sse()), without_ids(split.sse())),
            WireFormat::Anthropic => {
                let events = |r: &RawResponse| {
                    let mut events = anthropic_events(r);
                    events[0].1["message"]["id"] = json!("");
                    events
                };
                assert_eq!(events(&whole), events(&split));
            }
            WireFormat::Responses => {
                let events = |r: &RawResponse| {
                    let mut events = anthropic_events(r);
                    for (_, data) in &mut events {
                        if let Some(response) = data.get_mut("response") {
                            response["id"] = json!("");
                        }
                    }
                    events
                };
                assert_eq!(events(&whole), events(&split));
            }
            WireFormat::Google => {
                let payloads = |r: &RawResponse| {
                    let mut payloads = google_payloads(r);
                    for p in &mut payloads {
                        p["responseId"] = json!("");
                    }
                    payloads
                };
                assert_eq!(payloads(&whole), payloads(&split));
            }
            WireFormat::PiMessages => {
                let text = |r: &RawResponse| {
                    let text = r.text();
                    assert!(text.ends_with("\n\n"), "SSE body ends mid-event: {text:?}");
                    text.replace("pi-mock-12", "pi-mock-")
                        .replace("pi-mock-13", "pi-mock-")
                };
                assert_eq!(text(&whole), text(&split));
            }
        }
    }
}

#[test]
fn google_frames_carry_thoughts_text_whole_calls_signatures_and_the_finish() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("hi")
            .thinking("plan")
            .tool_call("c1", "read", json!({"path": "a"}))
            .tool_call("c2", "read", json!({"path": "b"}))
            .usage(10, 5),
    );
    let r = google_chat(&mock);
    assert!(r.complete);
    let payloads = google_payloads(&r);
    let parts: Vec<&Value> = payloads
        .iter()
        .flat_map(|p| p["candidates"][0]["content"]["parts"].as_array().unwrap())
        .collect();
    assert_eq!(parts[0]["thought"], true);
    assert_eq!(
        parts[0]["thoughtSignature"],
        Reply::google_signature_of("plan")
    );
    assert_eq!(parts[1]["text"], "hi");
    assert_eq!(parts[2]["functionCall"]["args"], json!({"path": "a"}));
    assert_eq!(
        parts[2]["thoughtSignature"],
        Reply::google_signature_of("c1")
    );
    assert!(parts[3].get("thoughtSignature").is_none());
    let last = payloads.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 5);
    assert_eq!(last["modelVersion"], "gemini-test");
}

#[test]
fn split_writes_arrive_as_separate_http_chunks_inside_utf8() {
    let mock = MockLlm::start();
    mock.push(Reply::text("✓✓✓✓").split_writes());
    let mut s = TcpStream::connect(("127.0.0.1", mock.port())).unwrap();
    let body = json!({"model": "m", "messages": [], "stream": true}).to_string();
    write!(
        s,
        "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let r = parse_response(&raw, false);
    // Some chunk boundary falls inside a 3-byte UTF-8 sequence.
    let mut at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut boundaries = Vec::new();
    let mut offset = 0;
    loop {
        let nl = raw[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&raw[at..at + nl]).unwrap(), 16).unwrap();
        if size == 0 {
            break;
        }
        offset += size;
        boundaries.push(offset);
        at += nl + 2 + size + 2;
    }
    assert!(boundaries.iter().any(|b| !r.text().is_char_boundary(*b)));
    assert_eq!(r.ndjson()[0]["message"]["content"], "✓✓✓✓");
}

#[test]
fn cut_after_ends_without_terminating_chunk() {
    let mock = MockLlm::start();
    mock.push(Reply::text("abcdef").text_chunks(6).cut_after(2));
    mock.push(Reply::text("abcdef").text_chunks(6).cut_after(3));
    mock.push(Reply::text("abcdef").text_chunks(6).cut_inside_frame(1));
    let r = ollama_chat(&mock, hello());
    assert!(!r.complete && !r.stalled);
    assert_eq!(r.ndjson().len(), 2);
    let r = openai_chat(&mock, hello(), true);
    assert!(!r.complete && !r.stalled);
    assert_eq!(r.sse().len(), 3);
    let r = ollama_chat(&mock, hello());
    assert!(!r.complete);
    let text = r.text();
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), 2, "one whole line and half a line: {text:?}");
    assert!(serde_json::from_str::<Value>(lines[1]).is_err());
}

#[test]
fn cut_after_all_frames_drops_only_the_terminator() {
    let mock = MockLlm::start();
    mock.push(Reply::text("hi").cut_after(2));
    mock.push(Reply::text("hi").cut_after(usize::MAX));
    for _ in 0..2 {
        let r = ollama_chat(&mock, hello());
        assert!(!r.complete);
        assert_eq!(r.ndjson().len(), 2);
        assert_eq!(r.ndjson()[1]["done"], true);
    }
}

#[test]
fn stall_keeps_the_connection_open() {
    let mock = MockLlm::start();
    mock.push(Reply::text("abcdef").text_chunks(3).stall_after(2));
    mock.push(Reply::text("after"));
    let mut s = open_stream(mock.port(), "/api/chat");
    let mut raw = read_until_frames(&mut s, "\"done\":false", 2);
    // Nothing more will come, so a short timeout cannot fire early; EOF would mean a close.
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 1024];
    match s.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        Ok(0) => panic!("the stalled stream was closed"),
        other => {
            raw.extend_from_slice(&buf[..*other.as_ref().unwrap_or(&0)]);
            panic!("data after the stall: {}", String::from_utf8_lossy(&raw));
        }
    }
    drop(s);
    // The client went away; the mock carries on serving.
    let r = ollama_chat(&mock, hello());
    assert!(r.complete);
    assert_eq!(r.ndjson()[0]["message"]["content"], "after");
}

/// Send a streaming chat request on a raw connection and return it unread.
fn open_stream(port: u16, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(LONG)).unwrap();
    let body = json!({"model": "m", "messages": [], "stream": true}).to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

/// Read raw bytes until `marker` has appeared `n` times.
fn read_until_frames(s: &mut TcpStream, marker: &str, n: usize) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&raw).matches(marker).count() < n {
        let got = s.read(&mut buf).unwrap();
        assert!(
            got > 0,
            "stream ended early: {}",
            String::from_utf8_lossy(&raw)
        );
        raw.extend_from_slice(&buf[..got]);
    }
    raw
}

#[test]
fn invalid_json_frame() {
    let mock = MockLlm::start();
    mock.push(Reply::text("abc").invalid_json_after(1));
    mock.push(Reply::text("abc").invalid_json_after(0));
    let r = ollama_chat(&mock, hello());
    assert!(r.complete);
    let text = r.text();
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    assert_eq!(lines.len(), 3);
    assert!(serde_json::from_str::<Value>(lines[0]).is_ok());
    assert!(serde_json::from_str::<Value>(lines[1]).is_err());
    assert!(serde_json::from_str::<Value>(lines[2]).is_ok());

    let r = openai_chat(&mock, hello(), false);
    let text = r.text();
    let first = text.split("\n\n").next().unwrap();
    let data = first.strip_prefix("data: ").unwrap();
    assert!(serde_json::from_str::<Value>(data).is_err());
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[test]
fn delay_per_frame_slows_the_stream() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("abc")
            .text_chunks(3)
            .delay_per_frame(Duration::from_millis(20)),
    );
    let start = Instant::now();
    let r = ollama_chat(&mock, hello());
    assert!(r.complete);
    assert!(start.elapsed() >= Duration::from_millis(80));
}

#[test]
fn gate_holds_and_releases() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::text("abcd").text_chunks(4).gate_after(2, &gate));
    let port = mock.port();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let body = json!({"model": "m", "messages": [], "stream": true});
        let r = request(port, "POST", "/api/chat", Some(&body), LONG);
        tx.send(()).unwrap();
        r
    });
    gate.wait_reached(LONG);
    assert_eq!(gate.times_reached(), 1);
    assert!(!gate.is_open());
    // The server is parked at the gate, so the client cannot have finished.
    assert!(rx.try_recv().is_err());
    gate.open();
    let r = t.join().unwrap();
    assert!(r.complete);
    let content: String = r
        .ndjson()
        .iter()
        .map(|f| f["message"]["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(content, "abcd");
}

#[test]
fn gate_lets_the_client_read_the_frames_before_it() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::text("abcd").text_chunks(4).gate_after(2, &gate));
    let mut s = open_stream(mock.port(), "/api/chat");
    let mut raw = read_until_frames(&mut s, "\"done\":false", 2);
    assert!(!String::from_utf8_lossy(&raw).contains("\"c\""));
    gate.open();
    s.read_to_end(&mut raw).unwrap();
    let r = parse_response(&raw, false);
    assert!(r.complete);
    assert_eq!(r.ndjson().len(), 5);
}

#[test]
fn gated_stream_ends_when_the_client_leaves() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::text("abcd").gate_after(1, &gate));
    mock.push(Reply::text("next"));
    let port = mock.port();
    let t = std::thread::spawn(move || {
        let body = json!({"model": "m", "messages": [], "stream": true});
        request(
            port,
            "POST",
            "/api/chat",
            Some(&body),
            Duration::from_millis(200),
        )
    });
    gate.wait_reached(LONG);
    let r = t.join().unwrap();
    assert!(r.stalled);
    // The mock still answers while that gate stays shut.
    assert!(ollama_chat(&mock, hello()).complete);
}

// ---------------------------------------------------------------------------------------------
// A real client
// ---------------------------------------------------------------------------------------------

fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn reqwest_reads_streams_and_sees_cuts() {
    use futures_util::StreamExt;
    let mock = MockLlm::start();
    mock.push(Reply::text("hello").text_chunks(5).split_writes());
    mock.push(Reply::text("hello").text_chunks(5).cut_after(2));
    let url = format!("{}/chat/completions", mock.base_url_openai());
    let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}],
                      "stream": true, "stream_options": {"include_usage": true}});
    runtime().block_on(async {
        let client = reqwest::Client::new();
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut stream = resp.bytes_stream();
        let mut all = Vec::new();
        let mut pieces = 0;
        while let Some(b) = stream.next().await {
            all.extend_from_slice(&b.unwrap());
            pieces += 1;
        }
        assert!(pieces > 10, "split writes arrive in pieces: {pieces}");
        let text = String::from_utf8(all).unwrap();
        assert!(text.ends_with("data: [DONE]\n\n"));

        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let mut stream = resp.bytes_stream();
        let mut saw_error = false;
        while let Some(b) = stream.next().await {
            if b.is_err() {
                saw_error = true;
            }
        }
        assert!(saw_error, "a cut stream must surface as an error");
    });
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["stream_options"]["include_usage"], true);
    mock.assert_no_violations();
}

#[test]
fn anthropic_every_event_type_through_nova_at_every_split() {
    use nova::provider::ProviderEvent as E;
    use nova::provider::anthropic::Accumulator;
    let mock = MockLlm::start();
    mock.push(
        Reply::text("héllo ✓")
            .thinking("thïnk")
            .redacted_thinking("opaque")
            .tool_call("toolu_1", "read", json!({"path": "ä"}))
            .text_chunks(3)
            .usage(7, 9)
            .cache_usage(11, 13),
    );
    let r = anthropic_chat(&mock);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let names: Vec<String> = anthropic_events(&r).into_iter().map(|(n, _)| n).collect();
    for name in [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    let model = nova::protocol::Model {
        id: "claude-test".into(),
        name: "claude-test".into(),
        api: nova::protocol::Api::AnthropicMessages,
        provider: "mock".into(),
        base_url: mock.base_url_anthropic(),
        reasoning: true,
        input: vec!["text".into()],
        cost: nova::protocol::ModelCost::default(),
        context_window: 200_000,
        max_tokens: 8192,
        thinking_level_map: None,
        compat: None,
        load: Default::default(),
    };
    let run = |pieces: &[&[u8]]| {
        let mut acc = Accumulator::new(&model);
        let mut events = Vec::new();
        for p in pieces {
            acc.push(p, &mut events).unwrap();
        }
        acc.finish(&mut events).unwrap();
        events
    };
    let body = &r.body;
    let whole = run(&[body]);
    for i in 0..=body.len() {
        assert_eq!(run(&[&body[..i], &body[i..]]), whole, "split at byte {i}");
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(run(&bytes), whole);
    let signature = nova::provider::ProviderEvent::ThinkingSignature(Reply::signature_of("thïnk"));
    assert!(whole.contains(&signature), "{whole:?}");
    assert!(whole.contains(&E::RedactedThinking("opaque".into())));
    assert!(whole.contains(&E::Finish(nova::protocol::StopReason::ToolUse)));
    let usage = whole.iter().find_map(|e| match e {
        E::Usage(u) => Some((u.input, u.output, u.cache_read, u.cache_write)),
        _ => None,
    });
    assert_eq!(usage, Some((7, 9, 11, 13)));
}

#[test]
fn anthropic_error_event_ends_the_stream() {
    let mock = MockLlm::start();
    mock.push(Reply::text("abc").error_event_after(3, "overloaded_error", "Overloaded"));
    let r = anthropic_chat(&mock);
    let events = anthropic_events(&r);
    assert_eq!(events.len(), 4);
    assert_eq!(
        events[3].1,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

// ---------------------------------------------------------------------------------------------
// Conversation invariants
// ---------------------------------------------------------------------------------------------

#[test]
fn anthropic_invariants() {
    let cache = json!({"type": "ephemeral"});
    let good = json!({"model": "m", "max_tokens": 10, "stream": true,
    "system": [{"type": "text", "text": "sys", "cache_control": cache}],
    "tools": [{"name": "read", "input_schema": {}, "cache_control": cache}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": Reply::signature_of("t")},
            {"type": "redacted_thinking", "data": "x"},
            {"type": "tool_use", "id": "a", "name": "read", "input": {}},
            {"type": "tool_use", "id": "b", "name": "read", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "b", "content": "B"},
            {"type": "tool_result", "tool_use_id": "a", "content": "A", "cache_control": cache},
        ]},
    ]});
    assert_eq!(
        check_conversation(WireFormat::Anthropic, &good),
        Vec::<String>::new()
    );
    let broken = |path: &[&str], value: Value, expect: &str| {
        let mut body = good.clone();
        let mut at = &mut body;
        for key in path {
            at = match key.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[*key],
            };
        }
        *at = value;
        let v = check_conversation(WireFormat::Anthropic, &body);
        assert!(v.iter().any(|l| l.contains(expect)), "{expect}: {v:?}");
    };
    broken(
        &["messages", "1", "content", "0", "signature"],
        json!("forged"),
        "signature",
    );
    broken(
        &["messages", "2", "content", "0", "tool_use_id"],
        json!("zz"),
        "did not call",
    );
    broken(
        &["messages", "2", "content", "1", "cache_control"],
        Value::Null,
        "last user message has no cache marker",
    );
    broken(
        &["system", "0", "cache_control"],
        Value::Null,
        "system prompt",
    );
    broken(&["tools", "0", "cache_control"], Value::Null, "last tool");
    broken(
        &["messages", "2", "content", "0"],
        json!({"type": "text", "text": "note"}),
        "have no tool_result",
    );
    broken(
        &["messages", "0", "content", "0", "text"],
        json!(" "),
        "empty text",
    );
    broken(&["stream"], json!(false), "stream");
}

fn openai_body(messages: Value) -> Value {
    json!({"model": "m", "stream": true, "messages": messages})
}

#[test]
fn openai_invariants_accept_a_good_conversation() {
    let good = openai_body(json!([
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "view_image", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "b", "content": "(see attached image)"},
        {"role": "tool", "tool_call_id": "a", "content": "text"},
        {"role": "user", "content": [
            {"type": "text", "text": "Attached image(s) from tool result:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]));
    assert_eq!(
        check_conversation(WireFormat::OpenAi, &good),
        Vec::<String>::new()
    );
}

#[test]
fn openai_invariants_flag_broken_conversations() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "read", "arguments": "{}"}});
    let cases = [
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
                   {"role": "tool", "tool_call_id": "a", "content": "x"},
                   {"role": "user", "content": "next"}]),
            "\"b\" has no tool message",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "", "tool_calls": [call("a")]},
                   {"role": "user", "content": "between"},
                   {"role": "tool", "tool_call_id": "a", "content": "x"}]),
            "without a preceding tool call",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "", "tool_calls": [call("a")]},
                   {"role": "tool", "tool_call_id": "a", "content": "x"},
                   {"role": "tool", "tool_call_id": "a", "content": "y"}]),
            "second tool message",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "", "tool_calls": [call("a")]},
                   {"role": "tool", "tool_call_id": "zzz", "content": "x"}]),
            "unknown tool call id",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "tool", "tool_call_id": "a", "content": "x"}]),
            "without a preceding tool call",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": ""},
                   {"role": "user", "content": "again"}]),
            "empty assistant message",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": null}]),
            "empty assistant message",
        ),
    ];
    for (messages, expected) in cases {
        let v = check_conversation(WireFormat::OpenAi, &openai_body(messages.clone()));
        assert!(
            v.iter().any(|m| m.contains(expected)),
            "expected {expected:?} for {messages:#}, got {v:?}"
        );
    }
    let not_streaming = json!({"model": "m", "messages": []});
    assert!(!check_conversation(WireFormat::OpenAi, &not_streaming).is_empty());
}

#[test]
fn ollama_invariants() {
    let call = |name: &str| json!({"function": {"name": name, "arguments": {}}});
    let good = json!({"model": "m", "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call("read"), call("bash")]},
        {"role": "tool", "content": "r", "tool_name": "read"},
        {"role": "tool", "content": "b"},
        {"role": "assistant", "content": "ok", "thinking": "t"},
        {"role": "user", "content": "more", "images": ["AAAA"]},
    ]});
    assert_eq!(
        check_conversation(WireFormat::Ollama, &good),
        Vec::<String>::new()
    );

    let cases = [
        (
            json!([{"role": "assistant", "content": "", "tool_calls": [call("read"), call("bash")]},
                   {"role": "tool", "content": "r"},
                   {"role": "user", "content": "next"}]),
            "2 tool call(s) but 1 tool message(s)",
        ),
        (
            json!([{"role": "assistant", "content": "", "tool_calls": [call("read")]},
                   {"role": "tool", "content": "r"},
                   {"role": "tool", "content": "again"}]),
            "1 tool call(s) but 2 tool message(s)",
        ),
        (
            json!([{"role": "user", "content": "hi"}, {"role": "tool", "content": "r"}]),
            "without a preceding tool call",
        ),
        (
            json!([{"role": "assistant", "content": "", "tool_calls": [call("read")]},
                   {"role": "tool", "content": "r", "tool_name": "write"}]),
            "answers none of the calls",
        ),
        (
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]),
            "empty assistant message",
        ),
    ];
    for (messages, expected) in cases {
        let v = check_conversation(WireFormat::Ollama, &json!({"messages": messages}));
        assert!(
            v.iter().any(|m| m.contains(expected)),
            "expected {expected:?} for {messages:#}, got {v:?}"
        );
    }
}

#[test]
fn the_mock_records_violations() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    mock.push(Reply::text("ok"));
    let r = openai_chat(&mock, hello(), false);
    assert!(r.complete);
    mock.assert_no_violations();
    let r = openai_chat(
        &mock,
        json!([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "?"}]),
        false,
    );
    assert!(
        r.complete,
        "violations are recorded, not answered with an error"
    );
    let v = mock.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].starts_with("request #1 (/v1/chat/completions): message 1:"),
        "{v:?}"
    );
    let caught =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| mock.assert_no_violations()));
    assert!(caught.is_err());
}
