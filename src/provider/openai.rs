//! OpenAI chat completions (`/chat/completions` with `stream: true`), as served by llama.cpp,
//! vLLM, LM Studio, Ollama's `/v1` and OpenAI itself: SSE frames of `chat.completion.chunk`,
//! tool calls streamed as fragments keyed by `index`, usage in a last chunk with no choices,
//! then `data: [DONE]`.

use super::body::BodyEncoder;
use super::compat::{Compat, MaxTokensField, ThinkingFormat};
use super::lines::SseDecoder;
use super::prepare::{self, Joined, Part, View};
use super::text_calls;
use super::{ArgumentsText, ProviderError, ProviderEvent, Request};
use crate::protocol::{
    AssistantMessage, ContentBlock, Model, StopReason, ThinkingLevel, ToolSpec, Usage,
};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// `<base>/chat/completions`, for a base like `http://127.0.0.1:8000/v1`.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

/// Text of a tool result that carried only images; the images follow in a user message.
const IMAGE_ONLY_RESULT: &str = "(see attached image)";
/// Lead-in of the user message that carries tool-result images, which the `tool` role cannot.
const TOOL_IMAGES_LEAD: &str = "Attached image(s) from tool result:";
/// Pi's bridge for servers that want an assistant turn between tool results and a user message.
const AFTER_TOOL_RESULTS: &str = "I have processed the tool results.";

/// The request body, serialised straight from the prepared view of the conversation, in the
/// dialect the model's [`Compat`] describes.
pub fn build_body<E: BodyEncoder>(req: &Request, out: E) -> serde_json::Result<E::Output> {
    let compat = Compat::of(req.model);
    let prepared = prepare::request_messages(req.messages, req.model);
    let mut messages = Vec::with_capacity(prepared.len() + 1);
    if !req.system_prompt.is_empty() {
        let content = req.system_prompt;
        messages.push(if req.model.reasoning && compat.supports_developer_role {
            Msg::Developer { content }
        } else {
            Msg::System { content }
        });
    }
    let bridge = || Msg::Assistant {
        content: Some(AssistantBody::Fixed(AFTER_TOOL_RESULTS)),
        tool_calls: None,
        reasoning: None,
    };
    let mut run_start = 0;
    for (i, view) in prepared.iter().enumerate() {
        match view {
            View::User(parts) => {
                let after_results = i > 0 && matches!(prepared[i - 1], View::ToolResult { .. });
                if after_results && compat.requires_assistant_after_tool_result {
                    messages.push(bridge());
                }
                messages.push(Msg::User {
                    content: UserBody::of(parts),
                });
            }
            View::Assistant(a) => {
                let text = Joined::text(&a.content);
                let thinking = Joined::thinking(&a.content);
                let calls = a.tool_calls().next().is_some();
                let content = if compat.requires_thinking_as_text && !thinking.is_empty() {
                    Some(AssistantBody::ThinkingAsText(ThinkingAsText(a)))
                } else if !text.is_empty() {
                    Some(AssistantBody::Text(text))
                } else if calls
                    && (compat.requires_non_null_assistant_content
                        || compat.requires_assistant_after_tool_result)
                {
                    Some(AssistantBody::Fixed(""))
                } else {
                    None
                };
                // Servers reject an assistant turn with neither content nor tool calls.
                if content.is_none() && !calls {
                    continue;
                }
                let reasoning = (!compat.requires_thinking_as_text)
                    .then(|| Reasoning::of(&a.content))
                    .flatten();
                messages.push(Msg::Assistant {
                    content,
                    tool_calls: calls.then_some(Calls(a)),
                    reasoning,
                });
            }
            View::ToolResult {
                tool_call_id,
                tool_name,
                content,
                ..
            } => {
                let text = Joined::parts(content);
                let content = if text.is_empty() && content.iter().any(Part::is_image) {
                    ToolText::Fixed(IMAGE_ONLY_RESULT)
                } else {
                    ToolText::Joined(text)
                };
                messages.push(Msg::Tool {
                    tool_call_id,
                    name: compat.requires_tool_result_name.then_some(*tool_name),
                    content,
                });
                if i == 0 || !matches!(prepared[i - 1], View::ToolResult { .. }) {
                    run_start = i;
                }
                // A user message between tool messages would break the call/result pairing, so
                // the images wait for the end of the run of results.
                let run = &prepared[run_start..=i];
                let run_ends = !matches!(prepared.get(i + 1), Some(View::ToolResult { .. }));
                if run_ends && images(run).next().is_some() {
                    if compat.requires_assistant_after_tool_result {
                        messages.push(bridge());
                    }
                    messages.push(Msg::User {
                        content: UserBody::ToolImages(ToolImages(run)),
                    });
                }
            }
        }
    }

    let max_tokens = super::max_output_tokens(req);
    let field = |wanted| (compat.max_tokens_field == wanted).then_some(max_tokens);
    out.encode(
        &Body {
            model: &req.model.id,
            messages,
            stream: true,
            prompt_cache_key: super::prompt_cache_key(req),
            prompt_cache_retention: (super::retention(req) == super::Retention::Long
                && compat.supports_long_cache_retention)
                .then_some(super::LONG_CACHE_OPENAI),
            stream_options: compat.supports_usage_in_streaming.then_some(StreamOptions {
                include_usage: true,
            }),
            store: compat.supports_store.then_some(false),
            max_completion_tokens: field(MaxTokensField::MaxCompletionTokens),
            max_tokens: field(MaxTokensField::MaxTokens),
            thinking: thinking_fields(req, &compat),
            tools: (!req.tools.is_empty()).then_some(Tools {
                specs: req.tools,
                strict: compat.supports_strict_mode,
            }),
        },
        req,
        &prepared,
    )
}

/// The fields that ask for (or turn off) thinking, in the server's [`ThinkingFormat`], as Pi
/// writes them. Nothing for a model without reasoning, nor for a side request that leaves the
/// level to the server.
fn thinking_fields(req: &Request, compat: &Compat) -> Map<String, Value> {
    let mut fields = Map::new();
    let Some(level) = req.thinking.filter(|_| req.model.reasoning) else {
        return fields;
    };
    let map = req.model.thinking_level_map.as_ref();
    // What the model's map says for a level: absent, `null`, or a value.
    let mapped = |l: ThinkingLevel| map.and_then(|m| m.get(&l)).map(Option::as_deref);
    let effort = (level != ThinkingLevel::Off).then_some(level);
    // Pi's `map[effort] ?? effort`.
    let value_or_name = |l: ThinkingLevel| mapped(l).flatten().unwrap_or(l.as_str());
    let off_named = mapped(ThinkingLevel::Off).flatten();
    let off_unsupported = mapped(ThinkingLevel::Off) == Some(None);
    let mut set = |key: &str, value: Value| {
        fields.insert(key.to_owned(), value);
    };
    let effort_field = compat.supports_reasoning_effort;
    match compat.thinking_format {
        ThinkingFormat::OpenAi => match effort {
            Some(l) if effort_field => set("reasoning_effort", json!(value_or_name(l))),
            None if effort_field => {
                if let Some(off) = off_named {
                    set("reasoning_effort", json!(off));
                }
            }
            _ => {}
        },
        ThinkingFormat::Zai => {
            set(
                "thinking",
                match effort {
                    Some(_) => json!({"type": "enabled", "clear_thinking": false}),
                    None => json!({"type": "disabled"}),
                },
            );
            // A level mapped to `null` sends no effort.
            let value = effort.and_then(|l| match mapped(l) {
                None => Some(l.as_str()),
                Some(v) => v,
            });
            if let Some(v) = value.filter(|_| effort_field) {
                set("reasoning_effort", json!(v));
            }
        }
        ThinkingFormat::Qwen => {
            set("enable_thinking", json!(effort.is_some()));
            if let Some(l) = effort.filter(|_| effort_field) {
                set("reasoning_effort", json!(value_or_name(l)));
            }
        }
        ThinkingFormat::QwenChatTemplate => set(
            "chat_template_kwargs",
            json!({"enable_thinking": effort.is_some(), "preserve_thinking": true}),
        ),
        ThinkingFormat::DeepSeek => {
            match effort {
                Some(_) => set("thinking", json!({"type": "enabled"})),
                None if !off_unsupported => set("thinking", json!({"type": "disabled"})),
                None => {}
            }
            if let Some(l) = effort.filter(|_| effort_field) {
                set("reasoning_effort", json!(value_or_name(l)));
            }
        }
        ThinkingFormat::OpenRouter => match effort {
            Some(l) => set("reasoning", json!({"effort": value_or_name(l)})),
            None if !off_unsupported => {
                set("reasoning", json!({"effort": off_named.unwrap_or("none")}))
            }
            None => {}
        },
        ThinkingFormat::AntLing => {
            if let Some(v) = effort.and_then(|l| mapped(l).flatten()) {
                set("reasoning", json!({ "effort": v }));
            }
        }
        ThinkingFormat::Together => {
            set("reasoning", json!({"enabled": effort.is_some()}));
            if let Some(l) = effort.filter(|_| effort_field) {
                set("reasoning_effort", json!(value_or_name(l)));
            }
        }
        ThinkingFormat::StringThinking => match effort {
            Some(l) => set("thinking", json!(value_or_name(l))),
            None if !off_unsupported => set("thinking", json!(off_named.unwrap_or("none"))),
            None => {}
        },
    }
    fields
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Msg<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(flatten)]
    thinking: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Msg<'a> {
    System {
        content: &'a str,
    },
    Developer {
        content: &'a str,
    },
    User {
        content: UserBody<'a>,
    },
    Assistant {
        content: Option<AssistantBody<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_calls: Option<Calls<'a>>,
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        reasoning: Option<Reasoning<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
        content: ToolText<'a>,
    },
}

/// The fields a server may stream reasoning in, in the order they are looked for; the one a
/// reply used is kept as its thinking block's signature (as Pi keeps it), so the reasoning goes
/// back in the same field on later turns (servers such as DeepSeek's want it there).
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "reasoning", "reasoning_text"];

/// An earlier reply's reasoning, sent back in the field it came in: `{"<field>": "<text>"}`,
/// flattened into the assistant message.
struct Reasoning<'a> {
    field: &'static str,
    text: Joined<'a, ContentBlock>,
}

impl<'a> Reasoning<'a> {
    /// From the first thinking block that says something, if its signature names a field.
    fn of(blocks: &'a [ContentBlock]) -> Option<Self> {
        let first = blocks.iter().find_map(|b| match b {
            ContentBlock::Thinking {
                thinking,
                thinking_signature,
                ..
            } if !thinking.trim().is_empty() => Some(thinking_signature.as_deref()),
            _ => None,
        })?;
        let field = REASONING_FIELDS.into_iter().find(|f| first == Some(*f))?;
        Some(Reasoning {
            field,
            text: Joined::nonblank_thinking(blocks),
        })
    }
}

impl Serialize for Reasoning<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.field, &self.text)?;
        map.end()
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum AssistantBody<'a> {
    Text(Joined<'a, ContentBlock>),
    Fixed(&'static str),
    ThinkingAsText(ThinkingAsText<'a>),
}

/// A reply's thinking as a text part before its text (`requiresThinkingAsText`), with no tags
/// around it so the model does not learn to write them.
struct ThinkingAsText<'a>(&'a AssistantMessage);

impl Serialize for ThinkingAsText<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = Joined::text(&self.0.content);
        let thinking = ContentPart::Joined {
            text: Joined::thinking(&self.0.content),
        };
        let text = (!text.is_empty()).then_some(ContentPart::Joined { text });
        serializer.collect_seq(std::iter::once(thinking).chain(text))
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserBody<'a> {
    /// A plain string when the message is text only: some servers' chat templates cannot render
    /// content parts at all.
    Text(Joined<'a, Part<'a>>),
    Parts(PartList<'a>),
    ToolImages(ToolImages<'a>),
}

impl<'a> UserBody<'a> {
    fn of(parts: &'a [Part<'a>]) -> Self {
        if parts.iter().any(Part::is_image) {
            UserBody::Parts(PartList(parts))
        } else {
            UserBody::Text(Joined::parts(parts))
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum ToolText<'a> {
    Joined(Joined<'a, Part<'a>>),
    Fixed(&'static str),
}

/// Content parts, each text block and image its own.
struct PartList<'a>(&'a [Part<'a>]);

impl Serialize for PartList<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|p| match p {
            Part::Text(text) => ContentPart::Text { text },
            Part::Image { data, mime_type } => ContentPart::image(data, mime_type),
        }))
    }
}

/// The images of a run of tool results, after a line saying where they come from.
struct ToolImages<'a>(&'a [View<'a>]);

impl Serialize for ToolImages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let lead = ContentPart::Text {
            text: TOOL_IMAGES_LEAD,
        };
        let images = images(self.0).map(|(data, mime_type)| ContentPart::image(data, mime_type));
        serializer.collect_seq(std::iter::once(lead).chain(images))
    }
}

/// `(data, mime type)` of every image in a run of tool results.
fn images<'a>(run: &'a [View<'a>]) -> impl Iterator<Item = (&'a str, &'a str)> {
    run.iter()
        .flat_map(|view| match view {
            View::ToolResult { content, .. } => content.as_slice(),
            _ => &[],
        })
        .filter_map(|part| match part {
            Part::Image { data, mime_type } => Some((*data, *mime_type)),
            Part::Text(_) => None,
        })
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart<'a> {
    Text {
        text: &'a str,
    },
    #[serde(rename = "text")]
    Joined {
        text: Joined<'a, ContentBlock>,
    },
    ImageUrl {
        image_url: ImageUrl<'a>,
    },
}

impl<'a> ContentPart<'a> {
    fn image(data: &'a str, mime_type: &'a str) -> Self {
        ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: DataUrl { data, mime_type },
            },
        }
    }
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: DataUrl<'a>,
}

/// `data:<mime type>;base64,<data>`, written into the body without building the URL first:
/// images are the largest strings a request carries.
struct DataUrl<'a> {
    data: &'a str,
    mime_type: &'a str,
}

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!(
            "data:{};base64,{}",
            self.mime_type, self.data
        ))
    }
}

/// A reply's tool calls, arguments as JSON text.
struct Calls<'a>(&'a AssistantMessage);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.tool_calls().map(|(id, name, arguments)| Call {
            id,
            kind: "function",
            function: Function {
                name,
                arguments: ArgumentsText(arguments),
            },
        }))
    }
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    arguments: ArgumentsText<'a>,
}

struct Tools<'a> {
    specs: &'a [ToolSpec],
    /// Whether to send `strict: false`, which servers without strict mode may reject.
    strict: bool,
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: ToolFunction<'a>,
        }
        #[derive(Serialize)]
        struct ToolFunction<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
            #[serde(skip_serializing_if = "Option::is_none")]
            strict: Option<bool>,
        }
        serializer.collect_seq(self.specs.iter().map(|t| Tool {
            kind: "function",
            function: ToolFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
                strict: self.strict.then_some(false),
            },
        }))
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    reasoning_text: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment by the spec; a few servers send the whole object instead.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionTokensDetails>,
    /// Where some servers put the reasoning count instead.
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionTokensDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// A tool call being streamed. Our index is its position in `Accumulator::calls`.
#[derive(Debug)]
struct CallState {
    /// The server's `index`, which keys its fragments.
    key: Option<u64>,
    server_id: Option<String>,
    named: bool,
}

/// Turns the SSE body into events; see the module docs for the format.
#[derive(Debug)]
pub struct Accumulator {
    sse: SseDecoder,
    model: Model,
    id_prefix: String,
    calls: Vec<CallState>,
    finish_reason: Option<StopReason>,
    usage: Option<Usage>,
    facts: super::ReplyFacts,
    /// The field the open thinking block's reasoning streams in, until the block ends.
    reasoning_field: Option<&'static str>,
    /// With `compat.toolCallsInText`: the reply's text, held back while it may be a tool call the
    /// model wrote as text (`None` once it cannot be, or when the model is not so marked).
    held_text: Option<String>,
    done: bool,
}

impl Accumulator {
    /// What the server has said about the reply so far, beside its content.
    pub fn facts(&self) -> &super::ReplyFacts {
        &self.facts
    }

    pub fn new(model: &Model) -> Self {
        Self::with_id_prefix(model, super::fresh_call_id_prefix())
    }

    fn with_id_prefix(model: &Model, id_prefix: String) -> Self {
        Accumulator {
            sse: SseDecoder::default(),
            model: model.clone(),
            id_prefix,
            calls: Vec::new(),
            finish_reason: None,
            usage: None,
            facts: super::ReplyFacts::default(),
            reasoning_field: None,
            held_text: model
                .compat
                .as_ref()
                .and_then(|c| c.flags.tool_calls_in_text)
                .unwrap_or(false)
                .then(String::new),
            done: false,
        }
    }

    /// Feeds body bytes, appending the events they complete to `out`. Events parsed before an
    /// error are still appended, so a reply cut by a server error keeps what arrived.
    pub fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let pushed = self.sse.push(bytes).and_then(|events| {
            events
                .iter()
                .try_for_each(|event| self.event(&event.event, &event.data, out))
        });
        if pushed.is_err() {
            // A reply cut short keeps its text, held or not.
            self.release_text(out);
        }
        pushed
    }

    /// Ends the body. A stream that stopped after its finish reason but before `[DONE]` is
    /// complete; one that stopped before either was cut.
    pub fn finish(mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let sse = std::mem::take(&mut self.sse);
        for event in sse.finish()? {
            self.event(&event.event, &event.data, out)?;
        }
        if self.done {
            return Ok(());
        }
        if self.finish_reason.is_none() {
            self.release_text(out);
            return Err(ProviderError::EndedEarly);
        }
        self.end(out);
        Ok(())
    }

    fn event(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(());
        }
        if name == "error" {
            return Err(ProviderError::Api(error_message(data)));
        }
        if data == "[DONE]" {
            self.end(out);
            return Ok(());
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| ProviderError::invalid_json(data, &e))?;
        if let Some(error) = chunk.error {
            return Err(ProviderError::Api(value_message(&error)));
        }
        if self.facts.response_id.is_none() && chunk.id.is_some() {
            self.facts.response_id.clone_from(&chunk.id);
            // Announced at once, so a reply cut short still carries it.
            out.push(ProviderEvent::Start {
                response_id: chunk.id,
                usage: None,
            });
        }
        // Some servers repeat a running total in every chunk; the last one wins.
        if let Some(u) = chunk.usage {
            let cached = u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0)
                .min(u.prompt_tokens);
            let mut usage = super::priced_usage(
                &self.model,
                u.prompt_tokens - cached,
                u.completion_tokens,
                cached,
            );
            // Already part of `completion_tokens`, as Pi counts it.
            let reasoning = u.completion_tokens_details.and_then(|d| d.reasoning_tokens);
            usage.reasoning = Some(reasoning.or(u.reasoning_tokens).unwrap_or(0));
            self.usage = Some(usage);
        }
        let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) else {
            return Ok(());
        };
        if let Some(delta) = choice.delta {
            self.delta(delta, out);
        }
        if let Some(reason) = choice.finish_reason {
            self.facts.raw_stop_reason = Some(reason.clone());
            self.finish_reason = Some(match reason.as_str() {
                "length" => StopReason::Length,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "content_filter" => return Err(ProviderError::ContentFilter),
                _ => StopReason::Stop,
            });
        }
        Ok(())
    }

    fn delta(&mut self, delta: Delta, out: &mut Vec<ProviderEvent>) {
        let thinking = [
            delta.reasoning_content,
            delta.reasoning,
            delta.reasoning_text,
        ]
        .into_iter()
        .zip(REASONING_FIELDS)
        .find_map(|(t, field)| t.filter(|t| !t.is_empty()).map(|t| (field, t)));
        if let Some((field, thinking)) = thinking {
            self.reasoning_field.get_or_insert(field);
            out.push(ProviderEvent::Thinking(thinking));
        }
        let text = delta.content.filter(|t| !t.is_empty());
        let calls = delta.tool_calls.unwrap_or_default();
        if text.is_some() || !calls.is_empty() {
            self.sign_thinking(out);
        }
        if let Some(text) = text {
            self.text(text, out);
        }
        if !calls.is_empty() {
            // The server found the calls itself: whatever was held is text.
            self.release_text(out);
        }
        for fragment in calls {
            self.tool_call(fragment, out);
        }
    }

    fn text(&mut self, text: String, out: &mut Vec<ProviderEvent>) {
        match &mut self.held_text {
            Some(held) => {
                held.push_str(&text);
                if !text_calls::may_be_call(held) {
                    self.release_text(out);
                }
            }
            None => out.push(ProviderEvent::Text(text)),
        }
    }

    /// Passes on the held text as text, and holds no more.
    fn release_text(&mut self, out: &mut Vec<ProviderEvent>) {
        if let Some(held) = self.held_text.take().filter(|t| !t.is_empty()) {
            out.push(ProviderEvent::Text(held));
        }
    }

    /// At the end of the reply: the held text becomes tool calls if it is nothing else.
    fn settle_text(&mut self, out: &mut Vec<ProviderEvent>) {
        let Some(held) = self.held_text.take() else {
            return;
        };
        match text_calls::parse(&held) {
            Some(calls) => {
                for call in calls {
                    let index = self.calls.len();
                    self.calls.push(CallState {
                        key: None,
                        server_id: None,
                        named: true,
                    });
                    out.push(ProviderEvent::ToolCall {
                        index,
                        id: Some(format!("call_{}_{index}", self.id_prefix)),
                        name: Some(call.name),
                        arguments: call.arguments,
                    });
                }
            }
            None if !held.is_empty() => out.push(ProviderEvent::Text(held)),
            None => {}
        }
    }

    /// Ends the open thinking block with the name of the field its reasoning came in.
    fn sign_thinking(&mut self, out: &mut Vec<ProviderEvent>) {
        if let Some(field) = self.reasoning_field.take() {
            out.push(ProviderEvent::ThinkingSignature(field.to_owned()));
        }
    }

    fn tool_call(&mut self, fragment: DeltaToolCall, out: &mut Vec<ProviderEvent>) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let (name, arguments) = match fragment.function {
            Some(f) => (
                f.name.filter(|n| !n.is_empty()),
                match f.arguments {
                    Some(Value::String(s)) => s,
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                },
            ),
            None => (None, String::new()),
        };

        let existing = self.calls.iter().position(|c| match fragment.index {
            // A known index with a different id is a new call: some servers number every call 0.
            Some(key) => c.key == Some(key) && (id.is_none() || c.server_id == id),
            None => id.is_some() && c.server_id == id,
        });
        // Without index or id, a fragment continues the latest call.
        let existing = existing.or_else(|| {
            (fragment.index.is_none() && id.is_none() && !self.calls.is_empty())
                .then(|| self.calls.len() - 1)
        });

        match existing {
            Some(index) => {
                let call = &mut self.calls[index];
                let name = name.filter(|_| !call.named);
                call.named |= name.is_some();
                if name.is_some() || !arguments.is_empty() {
                    out.push(ProviderEvent::ToolCall {
                        index,
                        id: None,
                        name,
                        arguments,
                    });
                }
            }
            None => {
                let index = self.calls.len();
                self.calls.push(CallState {
                    key: fragment.index,
                    server_id: id.clone(),
                    named: name.is_some(),
                });
                out.push(ProviderEvent::ToolCall {
                    index,
                    id: Some(id.unwrap_or_else(|| format!("call_{}_{index}", self.id_prefix))),
                    name,
                    arguments,
                });
            }
        }
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) {
        self.done = true;
        self.settle_text(out);
        self.sign_thinking(out);
        if let Some(usage) = self.usage.take() {
            out.push(ProviderEvent::Usage(usage));
        }
        // Some servers say `stop` even when the reply is tool calls; the calls are what matter.
        let reason = match self.finish_reason {
            Some(StopReason::Stop) | None if !self.calls.is_empty() => StopReason::ToolUse,
            Some(reason) => reason,
            None => StopReason::Stop,
        };
        out.push(ProviderEvent::Finish(reason));
    }
}

fn error_message(data: &str) -> String {
    match serde_json::from_str::<Value>(data) {
        Ok(v) => value_message(&v),
        Err(_) => data.to_string(),
    }
}

/// The human part of an error payload: `{"error":{"message":..}}`, `{"message":..}` or a string.
fn value_message(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    if let Some(inner) = v.get("error") {
        return value_message(inner);
    }
    match v.get("message").and_then(Value::as_str) {
        Some(m) => m.to_string(),
        None => v.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::protocol::{Message, StopReason, ToolResultMessage, UserContent, UserMessage};
    use crate::provider::prepare::tests::{assistant, call, model, result, user_text};
    use crate::provider::test_support::{Outcome, all_splits_agree};
    use ProviderEvent::*;
    use serde_json::json;
    use std::sync::Arc;

    /// The body `build_body` writes, parsed back for comparison.
    fn body_of(req: &Request) -> serde_json::Value {
        serde_json::from_slice(&build_body(req, crate::provider::body::Buffer).unwrap()).unwrap()
    }

    /// The event that carries the server's response id, as soon as it is read.
    fn start(id: &str) -> ProviderEvent {
        ProviderEvent::Start {
            response_id: Some(id.into()),
            usage: None,
        }
    }

    fn run(chunks: &[&[u8]]) -> Outcome {
        let mut acc = Accumulator::with_id_prefix(&model("openai-completions", true), "t".into());
        let mut events = Vec::new();
        for c in chunks {
            if let Err(e) = acc.push(c, &mut events) {
                return (events, Some(e));
            }
        }
        let err = acc.finish(&mut events).err();
        (events, err)
    }

    /// Frames each payload as `data: <payload>` plus a blank line, as servers do.
    fn sse(payloads: &[&str]) -> String {
        payloads.iter().map(|p| format!("data: {p}\n\n")).collect()
    }

    fn check(stream: &str) -> Outcome {
        all_splits_agree(stream.as_bytes(), run)
    }

    const USAGE: &str = r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764669600,"model":"qwen3","choices":[],"usage":{"prompt_tokens":1400,"completion_tokens":200,"total_tokens":1600,"prompt_tokens_details":{"cached_tokens":400}}}"#;

    #[test]
    fn reasoning_tokens_the_reply_id_and_the_raw_finish_reason_are_kept() {
        let mut a = Accumulator::new(&model("openai-completions", true));
        let mut out = Vec::new();
        let frames = [
            r#"{"id":"chatcmpl-42","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-42","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"id":"chatcmpl-42","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":50,"completion_tokens_details":{"reasoning_tokens":30}}}"#,
        ];
        for frame in frames {
            a.push(format!("data: {frame}\n\n").as_bytes(), &mut out)
                .unwrap();
        }
        assert_eq!(
            a.facts(),
            &crate::provider::ReplyFacts {
                response_id: Some("chatcmpl-42".into()),
                raw_stop_reason: Some("stop".into()),
            }
        );
        a.push(b"data: [DONE]\n\n", &mut out).unwrap();
        let reasoning = out.iter().find_map(|e| match e {
            Usage(u) => u.reasoning,
            _ => None,
        });
        assert_eq!(reasoning, Some(30));
    }

    fn usage() -> ProviderEvent {
        let mut u =
            crate::provider::priced_usage(&model("openai-completions", true), 1000, 200, 400);
        assert_eq!((u.input, u.cache_read, u.total_tokens), (1000, 400, 1600));
        // No reasoning count in the chunk: none spent, as Pi reads it.
        u.reasoning = Some(0);
        Usage(u)
    }

    #[test]
    fn thinking_then_text_llama_cpp() {
        let stream = sse(&[
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1764669600,"id":"chatcmpl-9","model":"qwen3","system_fingerprint":"b6000-abc","object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"The user says hi"}}],"created":1764669600,"id":"chatcmpl-9","model":"qwen3","object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"","content":"Hello"}}],"created":1764669600,"id":"chatcmpl-9","model":"qwen3","object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" there ✓"}}],"created":1764669600,"id":"chatcmpl-9","model":"qwen3","object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1764669600,"id":"chatcmpl-9","model":"qwen3","object":"chat.completion.chunk"}"#,
            USAGE,
            "[DONE]",
        ]);
        let want = (
            vec![
                start("chatcmpl-9"),
                Thinking("The user says hi".into()),
                // The field the reasoning came in signs its block, so it goes back there.
                ThinkingSignature("reasoning_content".into()),
                Text("Hello".into()),
                Text(" there ✓".into()),
                usage(),
                Finish(StopReason::Stop),
            ],
            None,
        );
        assert_eq!(check(&stream), want);
        // CRLF framing, keep-alive comments and a missing final blank line change nothing.
        let crlf = format!(": ping\r\n\r\n{}", stream.replace('\n', "\r\n"));
        assert_eq!(check(crlf.trim_end()), want);
        // Neither does a server that stops after the finish reason without `[DONE]`.
        let no_done = stream.replace("data: [DONE]\n\n", "");
        assert_eq!(check(&no_done), want);
    }

    #[test]
    fn other_reasoning_fields_and_length() {
        let stream = sse(&[
            r#"{"choices":[{"index":0,"delta":{"reasoning":"a"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_text":"b"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"length"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            check(&stream),
            (
                vec![
                    Thinking("a".into()),
                    Thinking("b".into()),
                    ThinkingSignature("reasoning".into()),
                    Text("c".into()),
                    Finish(StopReason::Length)
                ],
                None
            )
        );
    }

    #[test]
    fn parallel_tool_calls_interleaved() {
        let stream = sse(&[
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me look."},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"bash","arguments":"{\"comm"}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"a.rs\"}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"and\": \"ls\"}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            USAGE,
            "[DONE]",
        ]);
        let frag = |index, id: Option<&str>, name: Option<&str>, arguments: &str| ToolCall {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: arguments.into(),
        };
        assert_eq!(
            check(&stream),
            (
                vec![
                    start("chatcmpl-1"),
                    Text("Let me look.".into()),
                    frag(0, Some("call_a"), Some("read"), ""),
                    frag(0, None, None, "{\"pa"),
                    frag(1, Some("call_b"), Some("bash"), "{\"comm"),
                    frag(0, None, None, "th\": \"a.rs\"}"),
                    frag(1, None, None, "and\": \"ls\"}"),
                    usage(),
                    Finish(StopReason::ToolUse),
                ],
                None
            )
        );
    }

    #[test]
    fn tool_calls_without_ids_or_with_reused_index() {
        let stream = sse(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"ls","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x1","function":{"name":"read","arguments":{"path":"a"}}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x2","function":{"name":"read","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        let (events, err) = check(&stream);
        assert_eq!(err, None);
        let ids: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ToolCall { index, id, .. } => Some((*index, id.clone().unwrap())),
                _ => None,
            })
            .collect();
        assert_eq!(
            ids,
            [(0, "call_t_0".into()), (1, "x1".into()), (2, "x2".into())]
        );
        assert_eq!(events.last(), Some(&Finish(StopReason::ToolUse)));
    }

    #[test]
    fn errors() {
        let text = r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#;
        let cases = [
            (
                sse(&[
                    text,
                    r#"{"error":{"code":500,"message":"llama runner crashed","type":"server_error"}}"#,
                ]),
                ProviderError::Api("llama runner crashed".into()),
            ),
            (
                format!(
                    "{}event: error\ndata: {{\"message\":\"Overloaded\"}}\n\n",
                    sse(&[text])
                ),
                ProviderError::Api("Overloaded".into()),
            ),
            (
                sse(&[
                    text,
                    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}"#,
                ]),
                ProviderError::ContentFilter,
            ),
            (sse(&[text]), ProviderError::EndedEarly),
        ];
        for (stream, want) in cases {
            assert_eq!(check(&stream), (vec![Text("Hi".into())], Some(want)));
        }
        let (events, err) = check(&sse(&[text, r#"{"choices":[{"ind"#]));
        assert_eq!(events, [Text("Hi".into())]);
        assert!(
            err.unwrap().to_string().contains(r#"{"choices":[{"ind"#),
            "the bad line is quoted"
        );
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint("http://127.0.0.1:8000/v1/"),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
    }

    #[test]
    fn reasoning_goes_back_in_the_field_it_came_in() {
        let m = model("openai-completions", true);
        let thinking = |text: &str, sig: Option<&str>| ContentBlock::Thinking {
            thinking: text.into(),
            thinking_signature: sig.map(Into::into),
            redacted: None,
        };
        let messages: Vec<Arc<Message>> = [
            user_text("hi"),
            assistant(
                vec![
                    thinking("  ", None),
                    thinking("first", Some("reasoning_content")),
                    thinking("second", Some("reasoning_content")),
                    ContentBlock::text("Hello"),
                ],
                StopReason::Stop,
            ),
            user_text("again"),
            // Another provider's signature is not a field name: nothing goes back.
            assistant(
                vec![
                    thinking("opaque", Some("EqQBCkYIBxgC")),
                    ContentBlock::text("Hi"),
                ],
                StopReason::Stop,
            ),
            user_text("bye"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let req = Request {
            model: &m,
            system_prompt: "",
            messages: &messages,
            tools: &[],
            max_tokens: None,
            thinking: None,
            session_id: None,
        };
        let body = body_of(&req);
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": "Hello", "reasoning_content": "first\nsecond"})
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "assistant", "content": "Hi"})
        );
    }

    #[test]
    fn body() {
        let m = model("openai-completions", true);
        let png = ContentBlock::image("aW1n", "image/png");
        let messages: Vec<Arc<Message>> = [
            Message::User(UserMessage {
                content: UserContent::Blocks(vec![
                    ContentBlock::text("What is this?"),
                    png.clone(),
                ]),
                timestamp: 1,
            }),
            assistant(
                vec![
                    ContentBlock::Thinking {
                        thinking: "hmm".into(),
                        thinking_signature: None,
                        redacted: None,
                    },
                    call("c1", "read"),
                    call("c2", "view_image"),
                    call("c3", "view_image"),
                ],
                StopReason::ToolUse,
            ),
            result(
                "c1",
                vec![ContentBlock::text("line 1"), ContentBlock::text("line 2")],
            ),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "c2".into(),
                tool_name: "view_image".into(),
                content: vec![png.clone()],
                details: None,
                is_error: false,
                duration_ms: None,
                timestamp: 3,
            }),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "c3".into(),
                tool_name: "view_image".into(),
                content: vec![
                    ContentBlock::text("zoomed"),
                    ContentBlock::image("Y2F0", "image/jpeg"),
                ],
                details: None,
                is_error: false,
                duration_ms: None,
                timestamp: 3,
            }),
            assistant(vec![], StopReason::Stop),
            assistant(vec![ContentBlock::text("A cat.")], StopReason::Stop),
            Message::User(UserMessage {
                content: UserContent::Blocks(vec![ContentBlock::text("thanks")]),
                timestamp: 4,
            }),
            user_text("bye"),
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
            thinking: None,
            session_id: None,
        };
        let png_part =
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}});
        assert_eq!(
            body_of(&req),
            json!({
                "model": "m1",
                "stream": true,
                "stream_options": {"include_usage": true},
                "store": false,
                "max_completion_tokens": 64000,
                "messages": [
                    {"role": "system", "content": "You are nova."},
                    {"role": "user", "content": [{"type": "text", "text": "What is this?"}, png_part]},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"c1\"}"}},
                        {"id": "c2", "type": "function", "function": {"name": "view_image", "arguments": "{\"path\":\"c2\"}"}},
                        {"id": "c3", "type": "function", "function": {"name": "view_image", "arguments": "{\"path\":\"c3\"}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "line 1\nline 2"},
                    {"role": "tool", "tool_call_id": "c2", "content": "(see attached image)"},
                    {"role": "tool", "tool_call_id": "c3", "content": "zoomed"},
                    {"role": "user", "content": [
                        {"type": "text", "text": "Attached image(s) from tool result:"},
                        png_part,
                        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,Y2F0"}},
                    ]},
                    {"role": "assistant", "content": "A cat."},
                    {"role": "user", "content": "thanks"},
                    {"role": "user", "content": "bye"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "read", "description": "Read a file",
                    "parameters": {"type": "object"},
                }}],
            })
        );

        // A text-only model gets notes instead of images, and no image message at all.
        let text_only = model("openai-completions", false);
        let body = body_of(&Request {
            model: &text_only,
            max_tokens: Some(2000),
            ..req
        });
        assert_eq!(body["max_completion_tokens"], 2000);
        let text = body.to_string();
        assert!(!text.contains("image_url"), "{text}");
        assert!(text.contains("[image omitted: model m1 does not accept images]"));
    }

    /// A conversation with thinking, a tool call, its result and a user message after it.
    fn tool_round() -> Vec<Arc<Message>> {
        [
            user_text("list"),
            assistant(
                vec![
                    ContentBlock::Thinking {
                        thinking: "use ls".into(),
                        thinking_signature: None,
                        redacted: None,
                    },
                    call("c1", "ls"),
                ],
                StopReason::ToolUse,
            ),
            result("c1", vec![ContentBlock::text("a.rs")]),
            user_text("thanks"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect()
    }

    fn compat_body(compat: Value, reasoning: bool, thinking: Option<ThinkingLevel>) -> Value {
        let m = Model {
            reasoning,
            compat: Some(compat.into()),
            ..model("openai-completions", false)
        };
        let messages = tool_round();
        body_of(&Request {
            model: &m,
            system_prompt: "sys",
            messages: &messages,
            tools: &[ToolSpec {
                name: "ls".into(),
                description: "List".into(),
                parameters: json!({"type": "object"}),
            }],
            max_tokens: Some(100),
            thinking,
            session_id: None,
        })
    }

    #[test]
    fn compat_changes_the_request() {
        // Everything a strict local server might want switched the other way.
        let body = compat_body(
            json!({
                "supportsDeveloperRole": true, "supportsStore": false,
                "supportsUsageInStreaming": false, "maxTokensField": "max_tokens",
                "requiresToolResultName": true, "requiresAssistantAfterToolResult": true,
                "requiresThinkingAsText": true, "supportsStrictMode": true,
                "supportsReasoningEffort": false,
            }),
            true,
            Some(ThinkingLevel::High),
        );
        assert_eq!(
            body,
            json!({
                "model": "m1", "stream": true, "max_tokens": 100,
                "messages": [
                    {"role": "developer", "content": "sys"},
                    {"role": "user", "content": "list"},
                    {"role": "assistant", "content": [{"type": "text", "text": "use ls"}],
                     "tool_calls": [{"id": "c1", "type": "function",
                                     "function": {"name": "ls", "arguments": "{\"path\":\"c1\"}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "name": "read", "content": "a.rs"},
                    {"role": "assistant", "content": "I have processed the tool results."},
                    {"role": "user", "content": "thanks"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "ls", "description": "List", "parameters": {"type": "object"},
                    "strict": false}}],
            })
        );

        // The defaults for a local server: system role even for a reasoning model, no name,
        // no bridge, thinking not replayed, content null beside tool calls.
        let body = compat_body(json!({}), true, Some(ThinkingLevel::Low));
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert!(body["messages"][3].get("name").is_none());
        assert_eq!(body["messages"][4]["role"], "user");
        assert_eq!(body["reasoning_effort"], "low");
        assert_eq!(body["max_completion_tokens"], 100);
        assert_eq!(body["store"], false);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        // Developer role is for reasoning models only.
        let body = compat_body(json!({"supportsDeveloperRole": true}), false, None);
        assert_eq!(body["messages"][0]["role"], "system");
    }

    #[test]
    fn thinking_formats() {
        let fields = |format: &str, level: Option<ThinkingLevel>| {
            let body = compat_body(json!({"thinkingFormat": format}), true, level);
            let mut out = serde_json::Map::new();
            for key in [
                "reasoning_effort",
                "thinking",
                "reasoning",
                "enable_thinking",
                "chat_template_kwargs",
            ] {
                if let Some(v) = body.get(key) {
                    out.insert(key.into(), v.clone());
                }
            }
            Value::Object(out)
        };
        let high = Some(ThinkingLevel::High);
        let off = Some(ThinkingLevel::Off);
        let cases = [
            ("openai", high, json!({"reasoning_effort": "high"})),
            ("openai", off, json!({})),
            ("openai", None, json!({})),
            ("openrouter", high, json!({"reasoning": {"effort": "high"}})),
            ("openrouter", off, json!({"reasoning": {"effort": "none"}})),
            (
                "deepseek",
                high,
                json!({"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
            ),
            ("deepseek", off, json!({"thinking": {"type": "disabled"}})),
            (
                "zai",
                high,
                json!({"thinking": {"type": "enabled", "clear_thinking": false}, "reasoning_effort": "high"}),
            ),
            ("zai", off, json!({"thinking": {"type": "disabled"}})),
            (
                "qwen",
                high,
                json!({"enable_thinking": true, "reasoning_effort": "high"}),
            ),
            ("qwen", off, json!({"enable_thinking": false})),
            (
                "qwen-chat-template",
                high,
                json!({"chat_template_kwargs": {"enable_thinking": true, "preserve_thinking": true}}),
            ),
            ("together", off, json!({"reasoning": {"enabled": false}})),
            ("string-thinking", high, json!({"thinking": "high"})),
            ("string-thinking", off, json!({"thinking": "none"})),
            ("ant-ling", high, json!({})),
        ];
        for (format, level, want) in cases {
            assert_eq!(fields(format, level), want, "{format} at {level:?}");
        }
    }

    /// A stream of `text` in pieces of `piece` bytes, ending with `finish` and `[DONE]`.
    fn text_stream(text: &str, piece: usize, finish: &str) -> String {
        let mut payloads: Vec<String> = text
            .as_bytes()
            .chunks(piece)
            .map(|c| {
                let delta = json!({"content": String::from_utf8_lossy(c)});
                json!({"id": "c1", "choices": [{"index": 0, "delta": delta}]}).to_string()
            })
            .collect();
        payloads.push(
            json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                .to_string(),
        );
        payloads.push("[DONE]".into());
        payloads.iter().map(|p| format!("data: {p}\n\n")).collect()
    }

    fn run_with_compat(compat: Value, stream: &str) -> Outcome {
        let m = Model {
            compat: Some(compat.into()),
            ..model("openai-completions", false)
        };
        let mut acc = Accumulator::with_id_prefix(&m, "t".into());
        let mut events = Vec::new();
        if let Err(e) = acc.push(stream.as_bytes(), &mut events) {
            return (events, Some(e));
        }
        let err = acc.finish(&mut events).err();
        (events, err)
    }

    #[test]
    fn a_call_written_as_text_becomes_a_call_when_the_model_is_marked() {
        let written = "```json\n{\n  \"name\": \"write\",\n  \"arguments\": {\"path\": \"hello.py\", \"content\": \"print('hello')\"}\n}\n```";
        let stream = text_stream(written, 7, "stop");
        let (events, err) = run_with_compat(json!({"toolCallsInText": true}), &stream);
        assert_eq!(err, None);
        assert_eq!(
            events,
            vec![
                start("c1"),
                ToolCall {
                    index: 0,
                    id: Some("call_t_0".into()),
                    name: Some("write".into()),
                    arguments: r#"{"path":"hello.py","content":"print('hello')"}"#.into(),
                },
                Finish(StopReason::ToolUse),
            ]
        );
        // Unmarked, the same reply is text, streamed as it came.
        let (events, _) = run_with_compat(json!({}), &stream);
        assert!(events.iter().all(|e| !matches!(e, ToolCall { .. })));
        let pieces = written.len().div_ceil(7);
        assert_eq!(
            events.iter().filter(|e| matches!(e, Text(_))).count(),
            pieces
        );
    }

    #[test]
    fn marked_text_that_is_not_a_call_is_passed_on_whole_and_prose_at_once() {
        let json_text = r#"{"title": "not a call"}"#;
        let (events, _) = run_with_compat(
            json!({"toolCallsInText": true}),
            &text_stream(json_text, 5, "stop"),
        );
        assert_eq!(
            events,
            vec![
                start("c1"),
                Text(json_text.into()),
                Finish(StopReason::Stop)
            ]
        );
        // Prose is recognised at its first letter and streams from there on.
        let (events, _) = run_with_compat(
            json!({"toolCallsInText": true}),
            &text_stream("Hi there, friend", 4, "stop"),
        );
        let texts: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["Hi t", "here", ", fr", "iend"]);
        // A reply cut short keeps the text it held.
        let cut = text_stream("{\"name\": \"a\"", 4, "stop");
        let cut = &cut[..cut.find("finish_reason").unwrap_or(cut.len())];
        let cut = &cut[..cut.rfind("data:").unwrap_or(0)];
        let (events, err) = run_with_compat(json!({"toolCallsInText": true}), cut);
        assert_eq!(err, Some(ProviderError::EndedEarly));
        assert_eq!(events.last(), Some(&Text("{\"name\": \"a\"".into())));
    }
}
