//! What the mock answers: a scripted [`Reply`] and its frames in each wire format.

use super::Gate;
use serde_json::{Value, json};
use std::time::Duration;

/// `created_at` in every Ollama frame; fixed so captured streams are reproducible.
const CREATED_AT: &str = "2026-01-01T00:00:00.000000000Z";
/// `created` in every OpenAI chunk.
const CREATED: u64 = 1_767_225_600;

#[derive(Debug, Clone)]
enum Segment {
    Thinking(String),
    /// Anthropic only: an encrypted thinking block (its opaque payload).
    Redacted(String),
    Text(String),
    ToolCall {
        id: String,
        name: String,
        args: Value,
    },
}

/// One scripted answer to one chat request. Build with [`Reply::text`], [`Reply::new`] or
/// [`Reply::http_error`], then chain content and faults.
///
/// Frame counting (for `cut_after`, `stall_after`, `invalid_json_after`, `gate_after`): every
/// NDJSON line / SSE event is one frame, including Ollama's final `done` line and OpenAI's
/// finish chunk, usage chunk and `[DONE]`. `n` means "after the first n frames were written";
/// an `n` at or beyond the frame count acts after the last frame, before the terminating chunk.
#[derive(Debug, Clone)]
pub struct Reply {
    segments: Vec<Segment>,
    text_chunks: usize,
    thinking_chunks: usize,
    arg_fragments: usize,
    usage: (u64, u64),
    /// Anthropic's prompt-cache counts: read, written. Responses: cached input, and the
    /// second number as reasoning tokens.
    cache: (u64, u64),
    /// Anthropic: after this many frames, an `error` event of this type and message ends the
    /// stream (Responses: an `error` event with this code).
    error_event: Option<(usize, String, String)>,
    finish: Option<String>,
    reasoning_field: String,
    pub(super) split_writes: bool,
    pub(super) cut_after: Option<usize>,
    pub(super) cut_inside_frame: bool,
    pub(super) stall_after: Option<usize>,
    pub(super) invalid_json_after: Option<usize>,
    pub(super) delay_per_frame: Option<Duration>,
    pub(super) gates: Vec<(usize, Gate)>,
    pub(super) http_error: Option<(u16, String)>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) hang_up: bool,
}

impl Default for Reply {
    fn default() -> Self {
        Self::new()
    }
}

impl Reply {
    /// An empty streamed reply (only the terminating frames); add content with the builders.
    pub fn new() -> Self {
        Reply {
            segments: Vec::new(),
            text_chunks: 1,
            thinking_chunks: 1,
            arg_fragments: 3,
            usage: (10, 5),
            cache: (0, 0),
            error_event: None,
            finish: None,
            reasoning_field: "reasoning_content".into(),
            split_writes: false,
            cut_after: None,
            cut_inside_frame: false,
            stall_after: None,
            invalid_json_after: None,
            delay_per_frame: None,
            gates: Vec::new(),
            http_error: None,
            headers: Vec::new(),
            hang_up: false,
        }
    }

    /// Read the whole request (it is recorded), then close the connection without a byte of
    /// response: a server or proxy that may have acted on the request but never answered.
    pub fn hang_up() -> Self {
        Reply {
            hang_up: true,
            ..Self::new()
        }
    }

    /// A streamed reply whose text is `text` (one frame unless [`Reply::text_chunks`]).
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().and_text(text)
    }

    /// A reply of `n` text deltas, each `piece` (the benchmark shape: `many_chunks(20_000, "x")`).
    pub fn many_chunks(n: usize, piece: &str) -> Self {
        Self::text(piece.repeat(n)).text_chunks(n)
    }

    /// An answer that is an HTTP error with this status and body (JSON content type when the body
    /// parses as JSON, text otherwise).
    pub fn http_error(status: u16, body: impl Into<String>) -> Self {
        let mut r = Self::new();
        r.http_error = Some((status, body.into()));
        r
    }

    /// Append another text segment (it follows earlier text/tool-call segments in order).
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.segments.push(Segment::Text(text.into()));
        self
    }

    /// Add reasoning. Thinking is streamed before any text or tool call, whatever the order of
    /// the builder calls.
    pub fn thinking(mut self, thinking: impl Into<String>) -> Self {
        let at = self
            .segments
            .iter()
            .position(|s| !matches!(s, Segment::Thinking(_)))
            .unwrap_or(self.segments.len());
        self.segments.insert(at, Segment::Thinking(thinking.into()));
        self
    }

    /// Anthropic: add a redacted thinking block carrying `data`, streamed before any text.
    pub fn redacted_thinking(mut self, data: impl Into<String>) -> Self {
        let at = self
            .segments
            .iter()
            .position(|s| !matches!(s, Segment::Thinking(_) | Segment::Redacted(_)))
            .unwrap_or(self.segments.len());
        self.segments.insert(at, Segment::Redacted(data.into()));
        self
    }

    /// Anthropic: the prompt-cache tokens read and written (default none).
    pub fn cache_usage(mut self, read: u64, write: u64) -> Self {
        self.cache = (read, write);
        self
    }

    /// Anthropic: after `n` frames, send an `error` event (`error.type` = `kind`) and end the
    /// stream there, as Anthropic does when it fails mid-reply.
    pub fn error_event_after(
        mut self,
        n: usize,
        kind: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.error_event = Some((n, kind.into(), message.into()));
        self
    }

    /// Add a tool call; several calls make a parallel batch. OpenAI arguments are streamed as
    /// several fragments of the JSON text; Ollama sends all calls of a run in one frame with the
    /// arguments as an object.
    pub fn tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        args: Value,
    ) -> Self {
        self.segments.push(Segment::ToolCall {
            id: id.into(),
            name: name.into(),
            args,
        });
        self
    }

    /// Stream every text segment as `n` deltas (split on char boundaries; fewer when the text
    /// has fewer chars).
    pub fn text_chunks(mut self, n: usize) -> Self {
        self.text_chunks = n.max(1);
        self
    }

    /// Stream every thinking segment as `n` deltas.
    pub fn thinking_chunks(mut self, n: usize) -> Self {
        self.thinking_chunks = n.max(1);
        self
    }

    /// How many fragments each OpenAI tool call's argument text is cut into (default 3).
    pub fn arg_fragments(mut self, n: usize) -> Self {
        self.arg_fragments = n.max(1);
        self
    }

    /// Reported usage: Ollama `prompt_eval_count`/`eval_count`, OpenAI
    /// `prompt_tokens`/`completion_tokens`, Anthropic `input_tokens`/`output_tokens` (default
    /// 10, 5).
    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.usage = (input, output);
        self
    }

    /// Override the finish reason: OpenAI `finish_reason` as given; Ollama `done_reason` as
    /// given except `tool_calls`, which Ollama reports as `stop`.
    pub fn finish(mut self, reason: impl Into<String>) -> Self {
        self.finish = Some(reason.into());
        self
    }

    /// The OpenAI delta field carrying reasoning (default `reasoning_content`; Ollama's
    /// OpenAI-compatible endpoint uses `reasoning`).
    pub fn reasoning_field(mut self, field: impl Into<String>) -> Self {
        self.reasoning_field = field.into();
        self
    }

    /// Write every frame in small pieces (1–13 bytes, split inside the JSON and inside UTF-8
    /// sequences), each its own HTTP chunk, flushed separately.
    pub fn split_writes(mut self) -> Self {
        self.split_writes = true;
        self
    }

    /// After `n` frames, close the socket without the terminating chunk.
    pub fn cut_after(mut self, n: usize) -> Self {
        self.cut_after = Some(n);
        self
    }

    /// After `n` frames, write the first half of the next frame, then close the socket without
    /// the terminating chunk.
    pub fn cut_inside_frame(mut self, n: usize) -> Self {
        self.cut_after = Some(n);
        self.cut_inside_frame = true;
        self
    }

    /// After `n` frames, send nothing more but keep the connection open until the client closes
    /// it (or the mock is dropped).
    pub fn stall_after(mut self, n: usize) -> Self {
        self.stall_after = Some(n);
        self
    }

    /// After `n` frames, send one frame that is not valid JSON, then carry on.
    pub fn invalid_json_after(mut self, n: usize) -> Self {
        self.invalid_json_after = Some(n);
        self
    }

    /// Sleep this long before every frame.
    pub fn delay_per_frame(mut self, delay: Duration) -> Self {
        self.delay_per_frame = Some(delay);
        self
    }

    /// After `n` frames (written and flushed), wait until `gate` is opened. If the client goes
    /// away meanwhile, the stream ends there.
    pub fn gate_after(mut self, n: usize, gate: &Gate) -> Self {
        self.gates.push((n, gate.clone()));
        self
    }

    /// An extra response header (for example `retry-after`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn tool_calls(&self) -> bool {
        self.segments
            .iter()
            .any(|s| matches!(s, Segment::ToolCall { .. }))
    }

    /// The frames of this reply in Ollama's NDJSON format.
    pub(super) fn ollama_frames(&self, model: &str) -> Vec<Vec<u8>> {
        let frame = |message: Value| {
            ndjson(&json!({
                "model": model,
                "created_at": CREATED_AT,
                "message": message,
                "done": false,
            }))
        };
        let mut frames = Vec::new();
        let mut calls: Vec<Value> = Vec::new();
        for seg in &self.segments {
            if !matches!(seg, Segment::ToolCall { .. }) && !calls.is_empty() {
                frames.push(frame(ollama_calls_message(std::mem::take(&mut calls))));
            }
            match seg {
                Segment::Thinking(t) => {
                    for piece in split_even(t, self.thinking_chunks) {
                        frames.push(frame(json!({
                            "role": "assistant", "content": "", "thinking": piece,
                        })));
                    }
                }
                Segment::Text(t) => {
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(frame(json!({"role": "assistant", "content": piece})));
                    }
                }
                Segment::ToolCall { name, args, .. } => {
                    calls.push(json!({"function": {"name": name, "arguments": args}}));
                }
                Segment::Redacted(_) => {}
            }
        }
        if !calls.is_empty() {
            frames.push(frame(ollama_calls_message(calls)));
        }
        let done_reason = match self.finish.as_deref() {
            None | Some("tool_calls") => "stop",
            Some(other) => other,
        };
        frames.push(ndjson(&json!({
            "model": model,
            "created_at": CREATED_AT,
            "message": {"role": "assistant", "content": ""},
            "done": true,
            "done_reason": done_reason,
            "total_duration": 1_000_000u64,
            "load_duration": 1_000u64,
            "prompt_eval_count": self.usage.0,
            "prompt_eval_duration": 1_000u64,
            "eval_count": self.usage.1,
            "eval_duration": 1_000u64,
        })));
        frames
    }

    /// The frames of this reply in the OpenAI chat-completions SSE format.
    pub(super) fn openai_frames(&self, model: &str, id: &str, include_usage: bool) -> Vec<Vec<u8>> {
        let chunk = |delta: Value, finish: Value| {
            sse(&json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }))
        };
        let mut first = true;
        let mut delta = |mut d: Value| {
            if first {
                first = false;
                d["role"] = json!("assistant");
            }
            chunk(d, Value::Null)
        };
        let mut frames = Vec::new();
        let mut call_index = 0;
        for seg in &self.segments {
            match seg {
                Segment::Thinking(t) => {
                    for piece in split_even(t, self.thinking_chunks) {
                        let mut d = json!({});
                        d[self.reasoning_field.as_str()] = json!(piece);
                        frames.push(delta(d));
                    }
                }
                Segment::Text(t) => {
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(delta(json!({"content": piece})));
                    }
                }
                Segment::ToolCall { id, name, args } => {
                    frames.push(delta(json!({"tool_calls": [{
                        "index": call_index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }]})));
                    let text = serde_json::to_string(args).unwrap();
                    for frag in split_even(&text, self.arg_fragments) {
                        frames.push(delta(json!({"tool_calls": [{
                            "index": call_index, "function": {"arguments": frag},
                        }]})));
                    }
                    call_index += 1;
                }
                Segment::Redacted(_) => {}
            }
        }
        let finish = self.finish.clone().unwrap_or_else(|| {
            if self.tool_calls() {
                "tool_calls".into()
            } else {
                "stop".into()
            }
        });
        frames.push(chunk(json!({}), json!(finish)));
        if include_usage {
            frames.push(sse(&json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": self.usage.0,
                    "completion_tokens": self.usage.1,
                    "total_tokens": self.usage.0 + self.usage.1,
                },
            })));
        }
        frames.push(b"data: [DONE]\n\n".to_vec());
        frames
    }
}

impl Reply {
    /// The signature the mock gives a thinking text: the conversation check expects exactly
    /// this back with the same text on later requests.
    pub fn signature_of(thinking: &str) -> String {
        let hash = thinking.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("mock-signature-{hash:016x}")
    }

    /// The frames of this reply in Anthropic's Messages SSE format: `message_start`, a `ping`,
    /// each segment as one content block (thinking with its [`Reply::signature_of`]), `message_delta`
    /// and `message_stop`.
    pub(super) fn anthropic_frames(&self, model: &str, id: &str) -> Vec<Vec<u8>> {
        let mut frames = vec![
            named_event(&json!({"type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {
                    "input_tokens": self.usage.0,
                    "cache_read_input_tokens": self.cache.0,
                    "cache_creation_input_tokens": self.cache.1,
                    "output_tokens": 1,
                },
            }})),
            named_event(&json!({"type": "ping"})),
        ];
        for (index, seg) in self.segments.iter().enumerate() {
            let start = |block: Value| {
                named_event(&json!({
                    "type": "content_block_start", "index": index, "content_block": block,
                }))
            };
            let delta = |delta: Value| {
                named_event(&json!({
                    "type": "content_block_delta", "index": index, "delta": delta,
                }))
            };
            match seg {
                Segment::Thinking(t) => {
                    frames.push(start(
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                    ));
                    for piece in split_even(t, self.thinking_chunks) {
                        frames.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                    }
                    frames.push(delta(
                        json!({"type": "signature_delta", "signature": Reply::signature_of(t)}),
                    ));
                }
                Segment::Redacted(data) => {
                    frames.push(start(json!({"type": "redacted_thinking", "data": data})));
                }
                Segment::Text(t) => {
                    frames.push(start(json!({"type": "text", "text": ""})));
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(delta(json!({"type": "text_delta", "text": piece})));
                    }
                }
                Segment::ToolCall { id, name, args } => {
                    frames.push(start(
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    ));
                    frames.push(delta(
                        json!({"type": "input_json_delta", "partial_json": ""}),
                    ));
                    let text = serde_json::to_string(args).unwrap();
                    for frag in split_even(&text, self.arg_fragments) {
                        frames.push(delta(
                            json!({"type": "input_json_delta", "partial_json": frag}),
                        ));
                    }
                }
            }
            frames.push(named_event(
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let finish = self.finish.clone().unwrap_or_else(|| {
            if self.tool_calls() {
                "tool_use".into()
            } else {
                "end_turn".into()
            }
        });
        frames.push(named_event(&json!({
            "type": "message_delta",
            "delta": {"stop_reason": finish, "stop_sequence": null},
            "usage": {"output_tokens": self.usage.1},
        })));
        frames.push(named_event(&json!({"type": "message_stop"})));
        if let Some((n, kind, message)) = &self.error_event {
            frames.truncate(*n);
            frames.push(named_event(&json!({
                "type": "error", "error": {"type": kind, "message": message},
            })));
        }
        frames
    }
}

impl Reply {
    /// The encrypted content the mock gives a reasoning item whose summary is `summary`: the
    /// conversation check expects exactly this back with it.
    pub fn encrypted_of(summary: &str) -> String {
        format!("enc-{}", Reply::signature_of(summary))
    }

    /// The frames of this reply in OpenAI's Responses SSE format: `response.created`, each
    /// segment as one output item (thinking as a reasoning item with its summary and
    /// [`Reply::encrypted_of`], text as a message, each tool call as a function call whose
    /// arguments stream in fragments), then `response.completed` (or `response.incomplete` for
    /// a `length` finish) with usage; an error event, when scripted, replaces the tail.
    pub(super) fn responses_frames(&self, model: &str, id: &str) -> Vec<Vec<u8>> {
        let response = |status: &str| {
            json!({"id": id, "object": "response", "model": model,
                                             "status": status, "output": []})
        };
        let mut frames = vec![named_event(
            &json!({"type": "response.created", "response": response("in_progress")}),
        )];
        for (index, seg) in self.segments.iter().enumerate() {
            let event = |mut v: Value| {
                v["output_index"] = json!(index);
                named_event(&v)
            };
            match seg {
                Segment::Thinking(t) => {
                    let item_id = format!("rs_{index}");
                    frames.push(event(json!({"type": "response.output_item.added",
                        "item": {"type": "reasoning", "id": item_id, "summary": []}})));
                    frames.push(event(
                        json!({"type": "response.reasoning_summary_part.added",
                        "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                    ));
                    for piece in split_even(t, self.thinking_chunks) {
                        frames.push(event(
                            json!({"type": "response.reasoning_summary_text.delta",
                            "item_id": item_id, "summary_index": 0, "delta": piece}),
                        ));
                    }
                    frames.push(event(json!({"type": "response.output_item.done",
                        "item": {"type": "reasoning", "id": item_id,
                                 "summary": [{"type": "summary_text", "text": t}],
                                 "encrypted_content": Reply::encrypted_of(t)}})));
                }
                Segment::Text(t) => {
                    let item_id = format!("msg_{index}");
                    frames.push(event(json!({"type": "response.output_item.added",
                        "item": {"type": "message", "id": item_id, "role": "assistant",
                                 "status": "in_progress", "content": []}})));
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(event(json!({"type": "response.output_text.delta",
                            "item_id": item_id, "content_index": 0, "delta": piece})));
                    }
                    frames.push(event(json!({"type": "response.output_item.done",
                        "item": {"type": "message", "id": item_id, "role": "assistant",
                                 "status": "completed",
                                 "content": [{"type": "output_text", "text": t,
                                              "annotations": []}]}})));
                }
                Segment::ToolCall { id, name, args } => {
                    let item = |arguments: &str, status: &str| {
                        json!({"type": "function_call",
                        "id": format!("fc_{id}"), "call_id": id, "name": name,
                        "arguments": arguments, "status": status})
                    };
                    frames.push(event(json!({"type": "response.output_item.added",
                        "item": item("", "in_progress")})));
                    let text = serde_json::to_string(args).unwrap();
                    for frag in split_even(&text, self.arg_fragments) {
                        frames.push(event(json!({
                            "type": "response.function_call_arguments.delta", "delta": frag})));
                    }
                    frames.push(event(
                        json!({"type": "response.function_call_arguments.done",
                        "arguments": text}),
                    ));
                    frames.push(event(json!({"type": "response.output_item.done",
                        "item": item(&text, "completed")})));
                }
                Segment::Redacted(_) => {}
            }
        }
        let mut last = response(if self.finish.as_deref() == Some("length") {
            "incomplete"
        } else {
            "completed"
        });
        if self.finish.as_deref() == Some("length") {
            last["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        last["usage"] = json!({
            "input_tokens": self.usage.0 + self.cache.0,
            "input_tokens_details": {"cached_tokens": self.cache.0},
            "output_tokens": self.usage.1,
            "output_tokens_details": {"reasoning_tokens": self.cache.1},
            "total_tokens": self.usage.0 + self.cache.0 + self.usage.1,
        });
        let kind = if last["status"] == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        frames.push(named_event(&json!({"type": kind, "response": last})));
        if let Some((n, code, message)) = &self.error_event {
            frames.truncate(*n);
            frames.push(named_event(&json!({
                "type": "error", "code": code, "message": message, "param": null,
            })));
        }
        frames
    }
}

impl Reply {
    /// The `thoughtSignature` the mock gives a Gemini thought (by its whole text) or function
    /// call (by its id): base64, as the API's are, and expected back on the same part.
    pub fn google_signature_of(key: &str) -> String {
        let hash = Reply::signature_of(key);
        let hex = hash.trim_start_matches("mock-signature-");
        format!("Z2VtaW5p{hex}")
    }

    /// The frames of this reply as Gemini's `streamGenerateContent?alt=sse` sends them: one
    /// `GenerateContentResponse` per piece of thinking (`thought: true`, the signature on the
    /// last piece) or text, one per function call (whole, with its id; the first call of the
    /// reply carries a signature, as Gemini signs the first call of a step), each with the
    /// running usage, then a last one with the finish reason and the final usage. A scripted
    /// error event replaces the tail with an `{"error": …}` payload.
    pub(super) fn google_frames(&self, model: &str, id: &str) -> Vec<Vec<u8>> {
        let usage = |final_: bool| {
            let mut u = json!({
                "promptTokenCount": self.usage.0 + self.cache.0,
                "candidatesTokenCount": if final_ { self.usage.1 } else { 0 },
                "totalTokenCount": self.usage.0 + self.cache.0 + if final_ { self.usage.1 + self.cache.1 } else { 0 },
            });
            if self.cache.0 > 0 {
                u["cachedContentTokenCount"] = json!(self.cache.0);
            }
            if final_ && self.cache.1 > 0 {
                u["thoughtsTokenCount"] = json!(self.cache.1);
            }
            u
        };
        let response = |parts: Vec<Value>, finish: Option<&str>| {
            let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
            if let Some(f) = finish {
                candidate["finishReason"] = json!(f);
            }
            google_sse(&json!({
                "candidates": [candidate],
                "usageMetadata": usage(finish.is_some()),
                "modelVersion": model,
                "responseId": id,
            }))
        };
        let mut frames = Vec::new();
        let mut signed_a_call = false;
        for seg in &self.segments {
            match seg {
                Segment::Thinking(t) => {
                    let pieces = split_even(t, self.thinking_chunks);
                    let last = pieces.len() - 1;
                    for (i, piece) in pieces.into_iter().enumerate() {
                        let mut part = json!({"text": piece, "thought": true});
                        if i == last {
                            part["thoughtSignature"] = json!(Reply::google_signature_of(t));
                        }
                        frames.push(response(vec![part], None));
                    }
                }
                Segment::Text(t) => {
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(response(vec![json!({"text": piece})], None));
                    }
                }
                Segment::ToolCall { id, name, args } => {
                    let mut part = json!({"functionCall": {"id": id, "name": name, "args": args}});
                    if !signed_a_call {
                        part["thoughtSignature"] = json!(Reply::google_signature_of(id));
                        signed_a_call = true;
                    }
                    frames.push(response(vec![part], None));
                }
                Segment::Redacted(_) => {}
            }
        }
        let finish = match self.finish.as_deref() {
            None => "STOP",
            Some("length") => "MAX_TOKENS",
            Some(other) => other,
        };
        frames.push(response(Vec::new(), Some(finish)));
        if let Some((n, status, message)) = &self.error_event {
            frames.truncate(*n);
            frames.push(google_sse(&json!({
                "error": {"code": 503, "message": message, "status": status},
            })));
        }
        frames
    }
}

impl Reply {
    /// The frames of this reply as Pi's messages protocol sends them: one SSE `data:` event per
    /// assistant-message event (`start`, then `*_start` / `*_delta` / `*_end` by `contentIndex`,
    /// thinking signed with [`Reply::signature_of`], a redacted block as its end alone), and a
    /// `done` event with the stop reason (`toolUse` after calls, `length` for a `length`
    /// finish) and the usage. A scripted error event replaces the tail with an `error` event
    /// whose `errorMessage` is the scripted message.
    pub(super) fn pi_frames(&self, id: &str) -> Vec<Vec<u8>> {
        let mut frames = vec![pi_sse(&json!({"type": "start"}))];
        let mut calls = false;
        for (index, seg) in self.segments.iter().enumerate() {
            let event = |kind: &str, extra: Value| {
                let mut e = json!({"type": kind, "contentIndex": index});
                if let (Some(e), Value::Object(extra)) = (e.as_object_mut(), extra) {
                    e.extend(extra);
                }
                pi_sse(&e)
            };
            match seg {
                Segment::Thinking(t) => {
                    frames.push(event("thinking_start", json!({})));
                    for piece in split_even(t, self.thinking_chunks) {
                        frames.push(event("thinking_delta", json!({"delta": piece})));
                    }
                    frames.push(event(
                        "thinking_end",
                        json!({"content": t, "contentSignature": Reply::signature_of(t)}),
                    ));
                }
                Segment::Redacted(data) => {
                    frames.push(event("thinking_start", json!({})));
                    frames.push(event(
                        "thinking_end",
                        json!({"content": "", "contentSignature": data, "redacted": true}),
                    ));
                }
                Segment::Text(t) => {
                    frames.push(event("text_start", json!({})));
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(event("text_delta", json!({"delta": piece})));
                    }
                    frames.push(event("text_end", json!({"content": t})));
                }
                Segment::ToolCall { id, name, args } => {
                    calls = true;
                    frames.push(event("toolcall_start", json!({"id": id, "toolName": name})));
                    let text = args.to_string();
                    for piece in split_even(&text, self.arg_fragments) {
                        frames.push(event("toolcall_delta", json!({"delta": piece})));
                    }
                    frames.push(event(
                        "toolcall_end",
                        json!({"toolCall": {"type": "toolCall", "id": id, "name": name,
                                            "arguments": args}}),
                    ));
                }
            }
        }
        let reason = match self.finish.as_deref() {
            Some("length") => "length",
            _ if calls => "toolUse",
            _ => "stop",
        };
        let usage = json!({
            "input": self.usage.0, "output": self.usage.1,
            "cacheRead": self.cache.0, "cacheWrite": self.cache.1,
            "totalTokens": self.usage.0 + self.usage.1 + self.cache.0 + self.cache.1,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        });
        frames.push(pi_sse(
            &json!({"type": "done", "reason": reason, "usage": usage, "responseId": id}),
        ));
        if let Some((n, _, message)) = &self.error_event {
            frames.truncate(*n);
            frames.push(pi_sse(&json!({"type": "error", "reason": "error",
                "errorMessage": message, "usage": usage})));
        }
        frames
    }
}

/// One SSE event as Pi's messages protocol sends it: a bare `data:` line.
fn pi_sse(v: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(v).unwrap());
    out.extend(b"\n\n");
    out
}

/// One SSE event as Gemini sends it: a bare `data:` line, CRLF-terminated.
fn google_sse(v: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(v).unwrap());
    out.extend(b"\r\n\r\n");
    out
}

/// One SSE event as Anthropic and OpenAI's Responses send them: `event:` named after the
/// payload's `type`.
fn named_event(v: &Value) -> Vec<u8> {
    let mut out = format!("event: {}\ndata: ", v["type"].as_str().unwrap()).into_bytes();
    out.extend(serde_json::to_vec(v).unwrap());
    out.extend(b"\n\n");
    out
}

fn ollama_calls_message(calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": "", "tool_calls": calls})
}

fn ndjson(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(v).unwrap();
    out.push(b'\n');
    out
}

fn sse(v: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(v).unwrap());
    out.extend(b"\n\n");
    out
}

/// `s` cut into `n` pieces of nearly equal char count (fewer if `s` is shorter; one if empty).
fn split_even(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let n = n.min(chars.len()).max(1);
    let (base, extra) = (chars.len() / n, chars.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        out.push(chars[at..at + len].iter().collect());
        at += len;
    }
    out
}

impl Reply {
    /// The frames of this reply as Bedrock's ConverseStream sends them, binary event-stream
    /// messages encoded by AWS's own crate: `messageStart`, each segment as one content block
    /// (reasoning with its [`Reply::signature_of`] as a last delta, encrypted reasoning as its
    /// bytes, a tool call opened by `contentBlockStart` with its input in fragments), then
    /// `messageStop` and `metadata` with the usage (cache counts as read and written). A
    /// scripted error event replaces the tail with an exception of that type.
    pub(super) fn bedrock_frames(&self) -> Vec<Vec<u8>> {
        let mut frames = vec![bedrock_event("messageStart", &json!({"role": "assistant"}))];
        let delta = |index: usize, delta: Value| {
            bedrock_event(
                "contentBlockDelta",
                &json!({"contentBlockIndex": index, "delta": delta}),
            )
        };
        let stop =
            |index: usize| bedrock_event("contentBlockStop", &json!({"contentBlockIndex": index}));
        let mut calls = false;
        for (index, seg) in self.segments.iter().enumerate() {
            match seg {
                Segment::Thinking(t) => {
                    for piece in split_even(t, self.thinking_chunks) {
                        frames.push(delta(index, json!({"reasoningContent": {"text": piece}})));
                    }
                    let signature = Reply::signature_of(t);
                    frames.push(delta(
                        index,
                        json!({"reasoningContent": {"signature": signature}}),
                    ));
                }
                Segment::Redacted(data) => {
                    use base64::Engine as _;
                    let bytes = base64::engine::general_purpose::STANDARD.encode(data);
                    frames.push(delta(
                        index,
                        json!({"reasoningContent": {"redactedContent": bytes}}),
                    ));
                }
                Segment::Text(t) => {
                    for piece in split_even(t, self.text_chunks) {
                        frames.push(delta(index, json!({"text": piece})));
                    }
                }
                Segment::ToolCall { id, name, args } => {
                    calls = true;
                    frames.push(bedrock_event(
                        "contentBlockStart",
                        &json!({"contentBlockIndex": index,
                                "start": {"toolUse": {"toolUseId": id, "name": name}}}),
                    ));
                    for piece in split_even(&args.to_string(), self.arg_fragments) {
                        frames.push(delta(index, json!({"toolUse": {"input": piece}})));
                    }
                }
            }
            frames.push(stop(index));
        }
        let reason = match self.finish.as_deref() {
            None if calls => "tool_use",
            None => "end_turn",
            Some("length") => "max_tokens",
            Some(other) => other,
        };
        frames.push(bedrock_event("messageStop", &json!({"stopReason": reason})));
        let (input, output) = self.usage;
        let (read, write) = self.cache;
        frames.push(bedrock_event(
            "metadata",
            &json!({"usage": {"inputTokens": input, "outputTokens": output,
                              "totalTokens": input + output + read + write,
                              "cacheReadInputTokens": read, "cacheWriteInputTokens": write},
                    "metrics": {"latencyMs": 42}}),
        ));
        if let Some((n, kind, message)) = &self.error_event {
            frames.truncate(*n);
            frames.push(bedrock_message(
                &[(":message-type", "exception"), (":exception-type", kind)],
                serde_json::to_vec(&json!({"message": message})).unwrap(),
            ));
        }
        frames
    }
}

/// One Bedrock event: its type, and its payload as JSON.
fn bedrock_event(kind: &str, payload: &Value) -> Vec<u8> {
    bedrock_message(
        &[(":message-type", "event"), (":event-type", kind)],
        serde_json::to_vec(payload).unwrap(),
    )
}

/// One event-stream message with these string headers, as AWS's encoder writes it.
pub(super) fn bedrock_message(headers: &[(&str, &str)], payload: Vec<u8>) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let mut all: Vec<Header> = headers
        .iter()
        .map(|(k, v)| Header::new(k.to_string(), HeaderValue::String(v.to_string().into())))
        .collect();
    all.push(Header::new(
        ":content-type",
        HeaderValue::String("application/json".into()),
    ));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(
        &Message::new_from_parts(all, payload),
        &mut out,
    )
    .unwrap();
    out
}
