//! Google Gemini (`POST {base}/models/{model}:streamGenerateContent?alt=sse`), Pi's
//! `google-generative-ai`: each SSE payload is a whole `GenerateContentResponse` holding the
//! next parts of the reply (`candidates[0].content.parts`), and the last one its
//! `finishReason` and `usageMetadata`. A part is text, thought-summary text (`thought: true`) or
//! a whole function call; Gemini never streams a call's arguments, and sends a parallel batch
//! as several calls in one response.
//!
//! A part may carry a `thoughtSignature`, the model's encrypted reasoning, which it needs back
//! on later turns on the very part it came with. Consecutive parts of one kind form one block,
//! as Pi forms them, so a signature is kept for the block (the last one sent for it) and goes
//! out when the block ends; a call's goes on the call. Signatures go back only to the model
//! that wrote them.

use super::body::BodyEncoder;
use super::lines::SseDecoder;
use super::prepare::{self, Joined, Part, View};
use super::{ProviderError, ProviderEvent, Request, Tokens};
use crate::protocol::{AssistantMessage, ContentBlock, Model, StopReason, ThinkingLevel, ToolSpec};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;

/// `<base>/models/<model>:streamGenerateContent?alt=sse`, for a base like
/// `https://generativelanguage.googleapis.com/v1beta`. A model id already naming its collection
/// (`models/…`, `tunedModels/…`) keeps it, as Google's SDK does.
pub fn endpoint(base_url: &str, model: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let model = if model.starts_with("models/") || model.starts_with("tunedModels/") {
        Cow::Borrowed(model)
    } else {
        Cow::Owned(format!("models/{model}"))
    };
    format!("{base}/{model}:streamGenerateContent?alt=sse")
}

/// Pi's text for a tool result that is only images.
const IMAGE_ONLY_RESULT: &str = "(see attached image)";
/// What introduces a tool result's images in the user turn after it, for models that take no
/// images inside a function response.
const RESULT_IMAGES_LEAD: &str = "Tool result image:";
/// Tool call ids the API accepts are at most this long.
const MAX_ID_CHARS: usize = 64;

/// The request body, serialised straight from the prepared view of the conversation.
pub fn build_body<E: BodyEncoder>(req: &Request, out: E) -> serde_json::Result<E::Output> {
    let prepared = prepare::request_messages(req.messages, req.model);
    let family = Family::of(&req.model.id);
    let mut contents: Vec<Content> = Vec::with_capacity(prepared.len());
    for view in &prepared {
        match view {
            View::User(parts) if parts.is_empty() => {}
            View::User(parts) => contents.push(Content {
                role: "user",
                parts: parts.iter().map(OutPart::from_user).collect(),
            }),
            View::Assistant(a) => {
                let parts = model_parts(a, req.model, family);
                if !parts.is_empty() {
                    contents.push(Content {
                        role: "model",
                        parts,
                    });
                }
            }
            View::ToolResult {
                tool_call_id,
                tool_name,
                content,
                is_error,
            } => push_result(
                &mut contents,
                family,
                tool_call_id,
                tool_name,
                content,
                *is_error,
            ),
        }
    }
    out.encode(
        &Body {
            contents,
            system_instruction: (!req.system_prompt.is_empty()).then_some(SystemInstruction {
                parts: [TextPart {
                    text: req.system_prompt,
                }],
                role: "user",
            }),
            tools: (!req.tools.is_empty()).then_some([Declarations(req.tools)]),
            generation_config: GenerationConfig {
                max_output_tokens: super::max_output_tokens(req),
                thinking_config: thinking_config(req),
            },
        },
        req,
        &prepared,
    )
}

/// What a model id says about how Gemini treats it.
#[derive(Debug, Clone, Copy)]
struct Family {
    /// Calls and results carry their ids (Gemini 3 on, and the non-Gemini models Google serves).
    call_ids: bool,
    /// A function response may hold images (Gemini 3 on, and models that are not Gemini).
    images_in_results: bool,
}

impl Family {
    fn of(id: &str) -> Family {
        let major = gemini_major(id);
        let recent = major.is_some_and(|m| m >= 3);
        Family {
            call_ids: recent || id.starts_with("claude-") || id.starts_with("gpt-oss-"),
            images_in_results: major.is_none() || recent,
        }
    }
}

/// The major version in `gemini-<n>…` or `gemini-live-<n>…`.
fn gemini_major(id: &str) -> Option<u64> {
    let id = id.to_ascii_lowercase();
    let rest = id.strip_prefix("gemini-")?;
    let rest = rest.strip_prefix("live-").unwrap_or(rest);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether the model takes a thinking level (Gemini 3 Pro and Flash, Gemini 4 on, the `latest`
/// Flash aliases, Gemma 4) rather than a token budget, as Pi decides it.
fn thinks_in_levels(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    let gemini_3 = id.match_indices("gemini-3").any(|(at, m)| {
        let mut rest = &id[at + m.len()..];
        if let Some(minor) = rest.strip_prefix('.') {
            let digits = minor.len() - minor.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return false;
            }
            rest = &minor[digits..];
        }
        rest.starts_with("-pro") || rest.starts_with("-flash")
    });
    let gemini_4_on = id.match_indices("gemini-").any(|(at, m)| {
        let mut digits = id[at + m.len()..].chars().map(|c| c.to_digit(10));
        matches!(
            (digits.next().flatten(), digits.next().flatten()),
            (Some(4..=9), _) | (Some(1..=9), Some(_))
        )
    });
    let gemma_4 = id.contains("gemma-4") || id.contains("gemma4");
    gemini_3
        || gemini_4_on
        || gemma_4
        || id == "gemini-flash-latest"
        || id == "gemini-flash-lite-latest"
}

/// The thinking settings, as Pi sends them: for a level, thought summaries and a level (models
/// that take one) or a token budget; for `off`, or no level (side requests), thinking turned off,
/// or the least a model that cannot stop thinking allows.
fn thinking_config(req: &Request) -> Option<ThinkingConfig> {
    let model = req.model;
    if !model.reasoning {
        return None;
    }
    let level = req.thinking.unwrap_or(ThinkingLevel::Off);
    let levels = thinks_in_levels(&model.id);
    if level == ThinkingLevel::Off {
        let fallback = model.clamp_thinking(ThinkingLevel::Off);
        return Some(if !levels || fallback == ThinkingLevel::Off {
            ThinkingConfig::budget(None, 0)
        } else {
            ThinkingConfig::level(None, google_level(model, fallback))
        });
    }
    Some(if levels {
        ThinkingConfig::level(Some(true), google_level(model, level))
    } else {
        ThinkingConfig::budget(Some(true), budget(&model.id, google_level(model, level)))
    })
}

/// The level's name as Google knows it: the model's level map may rename it. Google has
/// nothing above `HIGH`, where Pi refuses the request; nova asks for the most there is.
fn google_level(model: &Model, level: ThinkingLevel) -> &'static str {
    let named = model
        .thinking_value(level)
        .map_or_else(|| level.as_str().to_owned(), str::to_ascii_lowercase);
    match named.as_str() {
        "minimal" => "MINIMAL",
        "low" => "LOW",
        "medium" => "MEDIUM",
        _ => "HIGH",
    }
}

/// Pi's token budget for a level on the Gemini 2.5 models; -1 (the model decides) elsewhere.
fn budget(id: &str, level: &str) -> i64 {
    let table: [i64; 4] = if id.contains("2.5-pro") {
        [128, 2048, 8192, 32768]
    } else if id.contains("2.5-flash-lite") {
        [512, 2048, 8192, 24576]
    } else if id.contains("2.5-flash") {
        [128, 2048, 8192, 24576]
    } else {
        return -1;
    };
    match level {
        "MINIMAL" => table[0],
        "LOW" => table[1],
        "MEDIUM" => table[2],
        _ => table[3],
    }
}

/// A reply as the parts of a `model` turn. Its thinking goes back only to the model that wrote
/// it, as thought parts; signatures only to that model too, and only when they are base64,
/// which is all the API accepts.
fn model_parts<'a>(a: &'a AssistantMessage, model: &Model, family: Family) -> Vec<OutPart<'a>> {
    let same_model =
        a.provider == model.provider && a.api == model.api.as_str() && a.model == model.id;
    let signature = |s: &'a Option<String>| s.as_deref().filter(|s| same_model && is_base64(s));
    let mut parts = Vec::with_capacity(a.content.len());
    for block in &a.content {
        match block {
            ContentBlock::Text {
                text,
                text_signature,
            } => {
                let signature = signature(text_signature);
                // A signature may come on a part with no visible text; the model needs it back.
                if text.trim().is_empty() && signature.is_none() {
                    continue;
                }
                parts.push(OutPart::Text {
                    text,
                    thought: None,
                    thought_signature: signature,
                });
            }
            ContentBlock::Thinking {
                thinking,
                thinking_signature,
                ..
            } if same_model => {
                let signature = signature(thinking_signature);
                if thinking.trim().is_empty() && signature.is_none() {
                    continue;
                }
                parts.push(OutPart::Text {
                    text: thinking,
                    thought: Some(true),
                    thought_signature: signature,
                });
            }
            ContentBlock::Thinking { .. } | ContentBlock::Image { .. } => {}
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                thought_signature,
            } => parts.push(OutPart::FunctionCall {
                function_call: FunctionCall {
                    name,
                    args: CallArgs(arguments),
                    id: family.call_ids.then(|| call_id(id)),
                },
                thought_signature: signature(thought_signature),
            }),
        }
    }
    parts
}

/// Adds a tool result: a function response, in the user turn of the results before it when
/// there is one (all results of a reply go in one turn). Its images go inside the response, or,
/// for models that take none there, in a user turn of their own after it.
fn push_result<'a>(
    contents: &mut Vec<Content<'a>>,
    family: Family,
    tool_call_id: &'a str,
    tool_name: &'a str,
    content: &'a [Part<'a>],
    is_error: bool,
) {
    let images: Vec<OutPart<'a>> = content
        .iter()
        .filter(|p| p.is_image())
        .map(OutPart::from_user)
        .collect();
    let text = Joined::parts(content);
    let has_text = content
        .iter()
        .any(|p| matches!(p, Part::Text(t) if !t.trim().is_empty()));
    let output = if has_text {
        ResultText::Joined(text)
    } else if !images.is_empty() {
        ResultText::Fixed(IMAGE_ONLY_RESULT)
    } else {
        ResultText::Fixed("")
    };
    let inline = family.images_in_results && !images.is_empty();
    let (nested, after) = if inline {
        (Some(images), None)
    } else {
        (None, Some(images).filter(|i| !i.is_empty()))
    };
    let part = OutPart::FunctionResponse {
        function_response: FunctionResponse {
            name: tool_name,
            response: if is_error {
                ResultValue::Error(output)
            } else {
                ResultValue::Output(output)
            },
            parts: nested,
            id: family.call_ids.then(|| call_id(tool_call_id)),
        },
    };
    match contents.last_mut() {
        Some(last)
            if last.role == "user"
                && last
                    .parts
                    .iter()
                    .any(|p| matches!(p, OutPart::FunctionResponse { .. })) =>
        {
            last.parts.push(part);
        }
        _ => contents.push(Content {
            role: "user",
            parts: vec![part],
        }),
    }
    if let Some(images) = after {
        let mut parts = Vec::with_capacity(images.len() + 1);
        parts.push(OutPart::Text {
            text: RESULT_IMAGES_LEAD,
            thought: None,
            thought_signature: None,
        });
        parts.extend(images);
        contents.push(Content {
            role: "user",
            parts,
        });
    }
}

/// A call id as the API accepts it (`[A-Za-z0-9_-]`, at most 64 chars), made the same way for a
/// call and its result so the pair still matches.
fn call_id(id: &str) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.chars().count() <= MAX_ID_CHARS && id.chars().all(allowed) {
        return Cow::Borrowed(id);
    }
    Cow::Owned(
        id.chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .take(MAX_ID_CHARS)
            .collect(),
    )
}

/// Whether `s` is standard base64 (the API's encoding of bytes): a signature that is not could
/// only be rejected.
fn is_base64(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    !body.is_empty()
        && s.len().is_multiple_of(4)
        && s.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<SystemInstruction<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Declarations<'a>; 1]>,
    generation_config: GenerationConfig,
}

#[derive(Serialize)]
struct SystemInstruction<'a> {
    parts: [TextPart<'a>; 1],
    role: &'static str,
}

#[derive(Serialize)]
struct TextPart<'a> {
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    max_output_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    include_thoughts: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_level: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<i64>,
}

impl ThinkingConfig {
    fn level(include_thoughts: Option<bool>, level: &'static str) -> Self {
        ThinkingConfig {
            include_thoughts,
            thinking_level: Some(level),
            thinking_budget: None,
        }
    }

    fn budget(include_thoughts: Option<bool>, budget: i64) -> Self {
        ThinkingConfig {
            include_thoughts,
            thinking_level: None,
            thinking_budget: Some(budget),
        }
    }
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<OutPart<'a>>,
}

#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum OutPart<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        thought: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        thought_signature: Option<&'a str>,
    },
    InlineData {
        inline_data: InlineData<'a>,
    },
    FunctionCall {
        function_call: FunctionCall<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        thought_signature: Option<&'a str>,
    },
    FunctionResponse {
        function_response: FunctionResponse<'a>,
    },
}

impl<'a> OutPart<'a> {
    fn from_user(part: &'a Part<'a>) -> Self {
        match part {
            Part::Text(text) => OutPart::Text {
                text,
                thought: None,
                thought_signature: None,
            },
            Part::Image { data, mime_type } => OutPart::InlineData {
                inline_data: InlineData { mime_type, data },
            },
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InlineData<'a> {
    mime_type: &'a str,
    data: &'a str,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    name: &'a str,
    args: CallArgs<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Cow<'a, str>>,
}

/// A call's arguments as the object the API requires. nova keeps arguments that did not parse
/// as the model's raw text; that text goes back as the object it spells, or as `{}`.
struct CallArgs<'a>(&'a Value);

impl Serialize for CallArgs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => map.serialize(serializer),
            Value::String(text) => match serde_json::from_str::<Map<String, Value>>(text) {
                Ok(map) => map.serialize(serializer),
                Err(_) => Map::new().serialize(serializer),
            },
            _ => Map::new().serialize(serializer),
        }
    }
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    name: &'a str,
    response: ResultValue<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parts: Option<Vec<OutPart<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Cow<'a, str>>,
}

/// `{"output": …}` for a result, `{"error": …}` for a failed one, as Google's SDK documents.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum ResultValue<'a> {
    Output(ResultText<'a>),
    Error(ResultText<'a>),
}

#[derive(Serialize)]
#[serde(untagged)]
enum ResultText<'a> {
    Joined(Joined<'a, Part<'a>>),
    Fixed(&'static str),
}

/// `{"functionDeclarations": […]}`: each tool with its JSON schema as `parametersJsonSchema`.
struct Declarations<'a>(&'a [ToolSpec]);

impl Serialize for Declarations<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Declaration<'a> {
            name: &'a str,
            description: &'a str,
            parameters_json_schema: Value,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wrapper<I: Serialize> {
            function_declarations: I,
        }
        struct Seq<'a>(&'a [ToolSpec]);
        impl Serialize for Seq<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.iter().map(|t| Declaration {
                    name: &t.name,
                    description: &t.description,
                    parameters_json_schema: const_as_enum(&t.parameters, false),
                }))
            }
        }
        Wrapper {
            function_declarations: Seq(self.0),
        }
        .serialize(serializer)
    }
}

/// Keywords whose values map names to subschemas: their keys are names, not keywords.
const SCHEMA_NAME_MAPS: [&str; 6] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];
/// Keywords whose values are a subschema or a list of them, not literal data.
const SUBSCHEMA_KEYWORDS: [&str; 16] = [
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];

/// `schema` with each string or number `const` written as a one-value `enum`: Gemini ignores
/// `const` in `parametersJsonSchema` but honours `enum` (Pi rewrites it the same way). Literal
/// data (`default`, `examples`, an `enum`'s values) is left as it is.
fn const_as_enum(schema: &Value, names: bool) -> Value {
    match schema {
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| const_as_enum(v, false)).collect())
        }
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .map(|(key, value)| {
                    let value = if names || SUBSCHEMA_KEYWORDS.contains(&key.as_str()) {
                        const_as_enum(value, false)
                    } else if SCHEMA_NAME_MAPS.contains(&key.as_str()) {
                        const_as_enum(value, true)
                    } else {
                        value.clone()
                    };
                    (key.clone(), value)
                })
                .collect();
            if !names
                && !out.contains_key("enum")
                && let Some(value) = out.get("const").filter(|v| v.is_string() || v.is_number())
            {
                let value = value.clone();
                out.remove("const");
                out.insert("enum".to_owned(), Value::Array(vec![value]));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// One SSE payload: a `GenerateContentResponse`, or an error the server sent mid-stream.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Frame {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<CandidateContent>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Vec<InPart>,
}

/// A part of the reply. Fields whose type a server might get wrong stay JSON values, so an
/// odd one costs that field, not the frame.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InPart {
    #[serde(default)]
    text: Option<Value>,
    #[serde(default)]
    thought: Option<Value>,
    #[serde(default)]
    thought_signature: Option<Value>,
    #[serde(default)]
    function_call: Option<InCall>,
}

#[derive(Deserialize)]
struct InCall {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    total_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
    #[serde(default)]
    block_reason_message: Option<String>,
}

/// What a run of consecutive text parts makes: visible text, or a thought summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
}

/// Turns the SSE body into events; see the module docs for the format.
#[derive(Debug)]
pub struct Accumulator {
    sse: SseDecoder,
    model: Model,
    id_prefix: String,
    /// The block the last text part went to, and its signature so far.
    block: Option<(Kind, Option<String>)>,
    /// Ids of the calls so far: one the server repeats gets a fresh one.
    call_ids: HashSet<String>,
    finish: Option<String>,
    finish_message: Option<String>,
    usage: Option<UsageMetadata>,
    blocked: Option<String>,
    facts: super::ReplyFacts,
}

impl Accumulator {
    pub fn new(model: &Model) -> Self {
        Self::with_id_prefix(model, super::fresh_call_id_prefix())
    }

    /// Invented call ids are `call_<id_prefix>_<n>`; tests fix the prefix.
    pub(crate) fn with_id_prefix(model: &Model, id_prefix: String) -> Self {
        Accumulator {
            sse: SseDecoder::default(),
            model: model.clone(),
            id_prefix,
            block: None,
            call_ids: HashSet::new(),
            finish: None,
            finish_message: None,
            usage: None,
            blocked: None,
            facts: super::ReplyFacts::default(),
        }
    }

    pub fn facts(&self) -> &super::ReplyFacts {
        &self.facts
    }

    /// Feeds body bytes, appending the events they complete to `out`. Events parsed before an
    /// error are still appended, so a reply cut by a server error keeps what arrived.
    pub fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        for event in self.sse.push(bytes)? {
            self.frame(&event.data, out)?;
        }
        Ok(())
    }

    /// Ends the body: the reply ends with the finish reason its last response gave.
    pub fn finish(mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let sse = std::mem::take(&mut self.sse);
        for event in sse.finish()? {
            self.frame(&event.data, out)?;
        }
        self.end_block(out);
        let Some(reason) = self.finish.take() else {
            return Err(match self.blocked.take() {
                Some(reason) => ProviderError::Api(reason),
                None => ProviderError::EndedEarly,
            });
        };
        let calls = !self.call_ids.is_empty();
        let stop = match reason.as_str() {
            "STOP" if calls => StopReason::ToolUse,
            "STOP" => StopReason::Stop,
            // CONTINUATION: the reply could go on, which nova does not ask for.
            "MAX_TOKENS" | "CONTINUATION" => StopReason::Length,
            other => return Err(stopped(other, self.finish_message.as_deref())),
        };
        if let Some(usage) = self.usage.take() {
            out.push(ProviderEvent::Usage(self.priced(&usage)));
        }
        out.push(ProviderEvent::Finish(stop));
        Ok(())
    }

    fn frame(&mut self, data: &str, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let frame: Frame =
            serde_json::from_str(data).map_err(|e| ProviderError::invalid_json(data, &e))?;
        if let Some(error) = &frame.error {
            return Err(stream_error(error));
        }
        if self.facts.response_id.is_none()
            && let Some(id) = frame.response_id.filter(|id| !id.is_empty())
        {
            self.facts.response_id = Some(id.clone());
            // Announced at once, so a reply cut short still carries it.
            out.push(ProviderEvent::Start {
                response_id: Some(id),
                usage: None,
            });
        }
        if let Some(reason) = frame
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_deref())
        {
            let message = frame
                .prompt_feedback
                .as_ref()
                .and_then(|f| f.block_reason_message.as_deref());
            self.blocked = Some(blocked(reason, message));
        }
        // Gemini sends one candidate unless asked for more; nova never asks.
        if let Some(candidate) = frame.candidates.into_iter().next() {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.part(part, out);
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.facts.raw_stop_reason = Some(reason.clone());
                self.finish = Some(reason);
                self.finish_message = candidate.finish_message;
            }
        }
        if frame.usage_metadata.is_some() {
            self.usage = frame.usage_metadata;
        }
        Ok(())
    }

    fn part(&mut self, part: InPart, out: &mut Vec<ProviderEvent>) {
        let signature = part
            .thought_signature
            .as_ref()
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if let Some(text) = &part.text {
            let text = match text {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let kind = if part.thought == Some(Value::Bool(true)) {
                Kind::Thinking
            } else {
                Kind::Text
            };
            if self.block.as_ref().map(|(k, _)| *k) != Some(kind) {
                self.end_block(out);
                self.block = Some((kind, None));
            }
            out.push(match kind {
                Kind::Thinking => ProviderEvent::Thinking(text),
                Kind::Text => ProviderEvent::Text(text),
            });
            if let (Some((_, kept)), Some(signature)) = (&mut self.block, &signature) {
                *kept = Some(signature.clone());
            }
        }
        if let Some(call) = part.function_call {
            self.end_block(out);
            let index = self.call_ids.len();
            let offered = call
                .id
                .as_ref()
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty() && !self.call_ids.contains(*id));
            let id = match offered {
                Some(id) => id.to_owned(),
                None => format!("call_{}_{index}", self.id_prefix),
            };
            self.call_ids.insert(id.clone());
            let name = call
                .name
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or_default();
            let arguments = match call.args {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(args) => args.to_string(),
            };
            out.push(ProviderEvent::ToolCall {
                index,
                id: Some(id),
                name: Some(name.to_owned()).filter(|n| !n.is_empty()),
                arguments,
            });
            if let Some(signature) = signature {
                out.push(ProviderEvent::ToolCallSignature { index, signature });
            }
        }
    }

    /// Closes the open block, sending the signature it was given.
    fn end_block(&mut self, out: &mut Vec<ProviderEvent>) {
        match self.block.take() {
            Some((Kind::Thinking, Some(signature))) => {
                out.push(ProviderEvent::ThinkingSignature(signature));
            }
            Some((Kind::Text, Some(signature))) => {
                out.push(ProviderEvent::TextSignature(signature));
            }
            _ => {}
        }
    }

    /// The reply's usage as Pi counts it: thought tokens are output, cached ones are not input.
    fn priced(&self, usage: &UsageMetadata) -> crate::protocol::Usage {
        let count = |n: Option<u64>| n.unwrap_or(0);
        let cached = count(usage.cached_content_token_count);
        let thoughts = count(usage.thoughts_token_count);
        let mut priced = super::priced(
            &self.model,
            Tokens {
                input: count(usage.prompt_token_count).saturating_sub(cached),
                output: count(usage.candidates_token_count).saturating_add(thoughts),
                cache_read: cached,
                cache_write: 0,
                cache_write_1h: None,
            },
        );
        priced.reasoning = Some(thoughts);
        // The server's total also counts what it spent on tool-use prompts.
        if let Some(total) = usage.total_token_count.filter(|t| *t > 0) {
            priced.total_tokens = total;
        }
        priced
    }
}

/// The error for a reply Gemini stopped for a reason other than its end or its output limit.
fn stopped(reason: &str, message: Option<&str>) -> ProviderError {
    let why = match reason {
        "SAFETY" | "IMAGE_SAFETY" => "its safety filters flagged the content",
        "RECITATION" | "IMAGE_RECITATION" => "the content recited protected material",
        "BLOCKLIST" => "the content held blocked terms",
        "PROHIBITED_CONTENT" | "IMAGE_PROHIBITED_CONTENT" => "the content was prohibited",
        "SPII" => "the content held sensitive personal information",
        "LANGUAGE" => "the language is not supported",
        "MALFORMED_FUNCTION_CALL" => "the model wrote a function call that does not parse",
        "UNEXPECTED_TOOL_CALL" => "the model called a tool it was not offered",
        "TOO_MANY_TOOL_CALLS" => "the model made too many tool calls in a row",
        "MISSING_THOUGHT_SIGNATURE" => "a thought signature of an earlier turn was missing",
        "NO_IMAGE" => "the model produced no image",
        _ => "no reason given",
    };
    let detail = message
        .filter(|m| !m.trim().is_empty())
        .map(|m| format!(": {}", m.trim()))
        .unwrap_or_default();
    ProviderError::Api(format!(
        "Gemini stopped the reply ({reason}: {why}){detail}"
    ))
}

/// The error for a prompt Gemini refused to answer.
fn blocked(reason: &str, message: Option<&str>) -> String {
    let detail = message
        .filter(|m| !m.trim().is_empty())
        .map(|m| format!(": {}", m.trim()))
        .unwrap_or_default();
    format!("Gemini blocked the prompt ({reason}){detail}")
}

/// An error object sent in place of a response (`{"error": {"code", "message", "status"}}`),
/// worded as `message (STATUS)` so that its status classifies it.
fn stream_error(error: &Value) -> ProviderError {
    let field = |key: &str| match error.get(key) {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let (message, status, code) = (field("message"), field("status"), field("code"));
    let mut text = if message.is_empty() {
        "error without a message".to_owned()
    } else {
        message
    };
    match (status.is_empty(), code.is_empty()) {
        (false, _) => text.push_str(&format!(" ({status})")),
        (true, false) => text.push_str(&format!(" (code {code})")),
        (true, true) => {}
    }
    ProviderError::Api(text)
}

/// The delay a Google error body asks for (`details[].retryDelay` of its `RetryInfo`, such as
/// `"37s"`): Gemini says when to retry there, not in `Retry-After`.
pub fn retry_delay(body: &str) -> Option<std::time::Duration> {
    let body: Value = serde_json::from_str(body).ok()?;
    let details = body.get("error")?.get("details")?.as_array()?;
    details.iter().find_map(|d| {
        let delay = d.get("retryDelay")?.as_str()?;
        let seconds: f64 = delay.strip_suffix('s')?.trim().parse().ok()?;
        std::time::Duration::try_from_secs_f64(seconds).ok()
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
