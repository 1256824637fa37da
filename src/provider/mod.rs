//! LLM providers: each wire format ([`ollama`], [`openai`], [`openai_responses`], [`anthropic`],
//! [`google`], [`bedrock`], Pi's own [`pi_messages`] that the Radius gateway speaks; Azure's Responses is [`openai_responses`] at an [`azure`] address,
//! ChatGPT's Codex backend its Codex flavour at an [`openai_codex`] address; GitHub Copilot's
//! models use three of them, as [`github_copilot`] describes) is
//! a pure state machine
//! (`build_body` + an `Accumulator` that turns body bytes into [`ProviderEvent`]s) behind thin
//! HTTP glue in [`http`]. Each serialises its request body straight from the borrowed view
//! [`prepare::request_messages`] makes of the shared conversation, so the body is the only copy
//! of it a request makes; each frames its response body with [`lines`].
//!
//! The agent sees only `ProviderEvent` deltas; it never sees provider bytes or JSON text. A
//! successful stream ends with `Usage` (what the server reported, counts it left out filled in
//! with nova's [`estimate`]) and then exactly one `Finish`; a failed one ends with a
//! [`ProviderError`] instead, after whatever it delivered.

pub mod anthropic;
pub mod aws;
pub mod azure;
pub mod bedrock;
pub mod body;
pub mod compat;
pub mod error;
pub mod estimate;
pub mod github_copilot;
pub mod google;
pub mod hooks;
pub mod http;
pub mod lines;
pub mod ollama;
pub mod openai;
pub mod openai_codex;
pub mod openai_responses;
mod overflow;
pub mod pi_messages;
pub mod prepare;
mod text_calls;

pub use error::{ErrorKind, ProviderError};

use crate::protocol::{
    Cost, Message, Model, PromptCacheKeyMode, SessionAffinityFormat, StopReason, ThinkingLevel,
    ToolSpec, Usage,
};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// One normalised step of a streamed reply. Deltas carry no block boundaries; the agent's
/// assembler derives them.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    Text(String),
    Thinking(String),
    /// A fragment of the signature that lets the open thinking block be sent back on later
    /// turns; it closes that block to further thinking.
    ThinkingSignature(String),
    /// A whole thinking block the provider encrypted: its opaque payload, to be sent back as is.
    RedactedThinking(String),
    /// What identifies the open text block to the provider when it is sent back (a Responses
    /// message item's id); it closes that block to further text.
    TextSignature(String),
    /// A fragment of tool call number `index` (0-based within the reply). `id` and `name` are set
    /// on the fragment that introduces them; `arguments` is a piece of the JSON argument text.
    /// The first fragment of every call carries an id, invented when the server gave none.
    ToolCall {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    /// The signature that lets tool call number `index` be sent back on later turns (Gemini's
    /// `thoughtSignature` on a function call).
    ToolCallSignature {
        index: usize,
        signature: String,
    },
    Usage(Usage),
    Finish(StopReason),
    /// The server has begun the reply (its response arrived, or Anthropic's `message_start`):
    /// the moment Pi announces the message, with what the server has said of it so far.
    Start {
        response_id: Option<String>,
        usage: Option<Usage>,
    },
}

pub use crate::protocol::Api;

/// What the server said about a reply beside its content: kept on the message as Pi keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyFacts {
    /// The server's id of the reply (OpenAI's chunk `id`, Anthropic's message id).
    pub response_id: Option<String>,
    /// The server's own finish reason, before it is mapped to a stop reason.
    pub raw_stop_reason: Option<String>,
}

/// What to ask a model; how to reach it is an [`http::Transport`].
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub model: &'a Model,
    pub system_prompt: &'a str,
    /// The conversation as the agent holds it: each wire format prepares its own view of it.
    pub messages: &'a [Arc<Message>],
    pub tools: &'a [ToolSpec],
    /// A tighter output budget than the model's own, for side requests such as compaction
    /// summaries that must leave room in the context window.
    pub max_tokens: Option<u64>,
    /// The session's thinking level, already clamped to the model; `None` leaves the choice to
    /// the server (side requests such as compaction summaries).
    pub thinking: Option<ThinkingLevel>,
    /// The id servers route the request by, and may key a prompt cache by.
    pub session_id: Option<SessionId<'a>>,
}

/// The id a request carries for routing and caching.
#[derive(Debug, Clone, Copy)]
pub struct SessionId<'a> {
    /// The session's own id, or a fresh one for a one-off summary, as Pi gives those.
    pub id: &'a str,
    /// Whether servers may key a prompt cache by it: off for one-off summaries (Pi's
    /// `cacheRetention: "none"`), which then carry only the ids OpenCode and Azure always get.
    pub cache: bool,
}

/// Pi's switch for the prompt cache's lifetime, read under Pi's name: `long` asks each server
/// that offers a longer-lived cache for it (an hour at Anthropic and Bedrock, a day at OpenAI).
pub const CACHE_RETENTION_VAR: &str = "PI_CACHE_RETENTION";

/// The long cache's lifetime as OpenAI's APIs name it (`prompt_cache_retention`).
const LONG_CACHE_OPENAI: &str = "24h";
/// The long cache's lifetime as Anthropic's and Bedrock's cache breakpoints name it (`ttl`).
const LONG_CACHE_BREAKPOINT: &str = "1h";

/// How long a request asks its server to keep the prompt cached (Pi's `cacheRetention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retention {
    /// Nothing to cache: a one-off summary.
    None,
    /// The server's default.
    Short,
    /// `PI_CACHE_RETENTION=long`.
    Long,
}

/// `req`'s [`Retention`]. The variable is read at each request, as Pi reads it; nova never
/// sets its own environment, so the read races nothing.
pub(crate) fn retention(req: &Request) -> Retention {
    if req.session_id.is_some_and(|s| !s.cache) {
        Retention::None
    } else if std::env::var_os(CACHE_RETENTION_VAR).is_some_and(|v| v == "long") {
        Retention::Long
    } else {
        Retention::Short
    }
}

/// Whether `req` asks for the long cache and its model's server takes the request (models.json
/// `compat.supportsLongCacheRetention`, true unless it says otherwise; chat completions detect
/// their own, [`compat::Compat`]).
pub(crate) fn long_retention(req: &Request) -> bool {
    retention(req) == Retention::Long
        && req
            .model
            .compat
            .as_ref()
            .and_then(|c| c.flags.supports_long_cache_retention)
            .unwrap_or(true)
}

/// OpenAI's limit on `prompt_cache_key`, in characters; Pi cuts longer ids to it.
const PROMPT_CACHE_KEY_CHARS: usize = 64;

/// The `prompt_cache_key` a body carries, as Pi 1.6 decides it per API: the request's id cut to
/// OpenAI's limit, unless the request caches nothing (Azure gets it regardless) or the model's
/// `compat.promptCacheKeyMode` says otherwise; chat completions send it by default only to
/// OpenAI's own server, or with the long cache to a server that keeps one.
fn prompt_cache_key<'a>(req: &Request<'a>) -> Option<&'a str> {
    let session = req.session_id?;
    let mode = req
        .model
        .compat
        .as_ref()
        .and_then(|c| c.prompt_cache_key_mode)
        .unwrap_or(PromptCacheKeyMode::Auto);
    let send = match req.model.api {
        Api::AzureOpenAiResponses => mode != PromptCacheKeyMode::Disabled,
        Api::OpenAiCodexResponses => session.cache,
        Api::OpenAiResponses => session.cache && mode != PromptCacheKeyMode::Disabled,
        Api::OpenAiCompletions => {
            session.cache
                && match mode {
                    PromptCacheKeyMode::Enabled => true,
                    PromptCacheKeyMode::Disabled => false,
                    PromptCacheKeyMode::Auto => {
                        req.model.base_url.contains("api.openai.com")
                            || (retention(req) == Retention::Long
                                && compat::Compat::of(req.model).supports_long_cache_retention)
                    }
                }
        }
        _ => false,
    };
    send.then(|| clamp_cache_key(session.id))
}

/// `id` cut to OpenAI's limit on `prompt_cache_key`.
fn clamp_cache_key(id: &str) -> &str {
    id.char_indices()
        .nth(PROMPT_CACHE_KEY_CHARS)
        .map_or(id, |(end, _)| &id[..end])
}

/// The headers that carry the session's id to `req`'s server, as Pi 1.6 sends them per API:
/// the Responses API's and Codex's session headers, the affinity headers of a server whose
/// compat asks for them (OpenRouter by default, in its own spelling), and OpenCode's routing
/// header on every API, the one a request that caches nothing still carries.
pub(crate) fn session_headers<'a>(req: &Request<'a>) -> Vec<(&'static str, &'a str)> {
    let Some(SessionId { id, cache }) = req.session_id else {
        return Vec::new();
    };
    let model = req.model;
    let url = model.base_url.to_ascii_lowercase();
    let openrouter = model.provider == "openrouter" || url.contains("openrouter.ai");
    let affinity = model
        .compat
        .as_ref()
        .and_then(|c| c.flags.send_session_affinity_headers)
        .unwrap_or(openrouter);
    let format = model
        .compat
        .as_ref()
        .and_then(|c| c.session_affinity_format);
    let openrouter_format = format.map_or(openrouter, |f| f == SessionAffinityFormat::OpenRouter);
    let with_session = format.is_none_or(|f| f == SessionAffinityFormat::OpenAi);
    let mut headers = Vec::new();
    match model.api {
        _ if !cache => {}
        Api::OpenAiResponses | Api::OpenAiCompletions | Api::AnthropicMessages
            if openrouter_format && (affinity || model.api == Api::OpenAiResponses) =>
        {
            headers.push(("x-session-id", id));
        }
        Api::OpenAiResponses => {
            if with_session {
                headers.push(("session-id", id));
            }
            headers.push(("x-client-request-id", id));
        }
        Api::OpenAiCodexResponses => {
            let key = clamp_cache_key(id);
            headers.extend([("session-id", key), ("x-client-request-id", key)]);
        }
        Api::OpenAiCompletions if affinity => {
            if with_session {
                headers.push(("session_id", id));
            }
            headers.extend([("x-client-request-id", id), ("x-session-affinity", id)]);
        }
        Api::AnthropicMessages if affinity => headers.push(("x-session-affinity", id)),
        _ => {}
    }
    let opencode = matches!(model.provider.as_str(), "opencode" | "opencode-go")
        || url.contains("opencode.ai");
    if opencode {
        headers.push(("x-opencode-session", id));
    }
    headers
}

/// Room Pi 1.6 leaves in the window beyond its estimate of the input: the estimate may count
/// lower than the server does (OpenRouter's tokenizer counts prose up to 12% higher).
const CONTEXT_SAFETY_TOKENS: u64 = 4096;
const CONTEXT_SAFETY_RATIO: f64 = 0.15;
/// The proportional margin is kept only while it leaves this much output; below that only the
/// fixed one is, and output is capped at this size.
const MIN_OUTPUT_WITH_RATIO_MARGIN: u64 = 32_768;

/// The request's output budget: what it asks for (the model's `maxTokens` unless a side request
/// asks for less), fitted into the window the conversation leaves, as Pi 1.6 sends it.
fn max_output_tokens(req: &Request) -> u64 {
    let wanted = req
        .max_tokens
        .map_or(req.model.max_tokens, |n| n.min(req.model.max_tokens));
    fit_to_context(req, wanted)
}

/// `wanted`, or less when the window has no room for it after the input (never below 1).
fn fit_to_context(req: &Request, wanted: u64) -> u64 {
    let window = i128::from(req.model.context_window);
    if window == 0 {
        return wanted.max(1);
    }
    // Replies before a compaction summary measured the context before it.
    let usage_from = req
        .messages
        .iter()
        .rposition(|m| matches!(**m, Message::CompactionSummary(_)))
        .map_or(0, |i| i + 1);
    let input = i128::from(estimate::context_tokens(req.messages, usage_from).tokens);
    let ratio_margin = (input as f64 * CONTEXT_SAFETY_RATIO).ceil() as i128;
    let margin = i128::from(CONTEXT_SAFETY_TOKENS).max(ratio_margin);
    let mut room = window - input - margin;
    let floor = i128::from(MIN_OUTPUT_WITH_RATIO_MARGIN);
    if room < floor {
        room = floor.min(window - input - i128::from(CONTEXT_SAFETY_TOKENS));
    }
    u64::try_from(room.max(1)).map_or(wanted, |room| wanted.min(room))
}

/// Token counts priced with the model's per-million-token costs.
fn priced_usage(model: &Model, input: u64, output: u64, cache_read: u64) -> Usage {
    priced(
        model,
        Tokens {
            input,
            output,
            cache_read,
            cache_write: 0,
            cache_write_1h: None,
        },
    )
}

/// What a reply used, as the server counted it; `input` excludes the cached parts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Tokens {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    /// Of `cache_write`, what went to a one-hour cache (Anthropic only: `Some` there).
    cache_write_1h: Option<u64>,
}

/// `tokens` priced with the model's per-million-token costs. Counts come from the server, so
/// the total saturates instead of overflowing on absurd ones.
fn priced(model: &Model, tokens: Tokens) -> Usage {
    let per_million = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    let cost = Cost {
        input: per_million(tokens.input, model.cost.input),
        output: per_million(tokens.output, model.cost.output),
        cache_read: per_million(tokens.cache_read, model.cost.cache_read),
        // A one-hour write costs twice the input rate, as Anthropic bills it and Pi prices it.
        cache_write: {
            let long = tokens.cache_write_1h.unwrap_or(0).min(tokens.cache_write);
            per_million(tokens.cache_write - long, model.cost.cache_write)
                + per_million(long, model.cost.input * 2.0)
        },
        total: 0.0,
        // nova prices every reply itself from the model's rates.
        total_from_provider: Some(false),
    };
    Usage {
        input: tokens.input,
        output: tokens.output,
        cache_read: tokens.cache_read,
        cache_write: tokens.cache_write,
        cache_write_1h: tokens.cache_write_1h,
        reasoning: None,
        total_tokens: tokens
            .input
            .saturating_add(tokens.output)
            .saturating_add(tokens.cache_read)
            .saturating_add(tokens.cache_write),
        cost: Cost {
            total: cost.input + cost.output + cost.cache_read + cost.cache_write,
            ..cost
        },
    }
}

/// A per-reply prefix for tool call ids the server did not supply. Random, because results are
/// matched to calls by id across the whole conversation, so ids must not repeat between replies.
fn fresh_call_id_prefix() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    id
}

/// A tool call's arguments as JSON text. A string is passed through as it is: nova keeps
/// arguments that did not parse as the raw text the model produced.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    }
}

/// [`arguments_text`] as a request body field, written without an intermediate string.
struct ArgumentsText<'a>(&'a Value);

impl Serialize for ArgumentsText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(s) => serializer.serialize_str(s),
            Value::Null => serializer.serialize_str("{}"),
            other => serializer.collect_str(other),
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::{ProviderError, ProviderEvent};

    /// What a whole stream produced: its events, and the error that ended it, if any.
    pub(crate) type Outcome = (Vec<ProviderEvent>, Option<ProviderError>);

    /// Runs a captured stream whole, cut in two at every byte boundary, and byte by byte;
    /// framing must not leak into the events, so all runs must agree.
    pub(crate) fn all_splits_agree(input: &[u8], run: impl Fn(&[&[u8]]) -> Outcome) -> Outcome {
        let whole = run(&[input]);
        for i in 0..=input.len() {
            assert_eq!(run(&[&input[..i], &input[i..]]), whole, "split at byte {i}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run(&bytes), whole, "byte by byte");
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::prepare::tests::model;

    fn request<'a>(model: &'a Model, session_id: &'a str) -> Request<'a> {
        Request {
            model,
            system_prompt: "",
            messages: &[],
            tools: &[],
            max_tokens: None,
            thinking: None,
            session_id: Some(SessionId {
                id: session_id,
                cache: true,
            }),
        }
    }

    #[test]
    fn the_cache_key_is_cut_at_64_characters_not_bytes() {
        let m = model("openai-responses", false);
        let long = "é".repeat(70);
        let key = prompt_cache_key(&request(&m, &long)).unwrap_or_default();
        assert_eq!(key.chars().count(), 64);
        assert_eq!(prompt_cache_key(&request(&m, "short")), Some("short"));
    }

    #[test]
    fn headers_follow_the_api_and_the_server() {
        let names = |api: &str, provider: &str, url: &str| -> Vec<&'static str> {
            let m = Model {
                provider: provider.into(),
                base_url: url.into(),
                ..model(api, false)
            };
            session_headers(&request(&m, "s1"))
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        let local = "http://127.0.0.1:1/v1";
        assert!(names("openai-completions", "local", local).is_empty());
        assert!(names("anthropic-messages", "local", local).is_empty());
        assert_eq!(
            names("openai-completions", "x", "https://openrouter.ai/api/v1"),
            ["x-session-id"]
        );
        assert_eq!(
            names("anthropic-messages", "openrouter", local),
            ["x-session-id"]
        );
        assert_eq!(
            names("openai-responses", "local", local),
            ["session-id", "x-client-request-id"]
        );
        assert_eq!(
            names("openai-codex-responses", "openai-codex", local),
            ["session-id", "x-client-request-id"]
        );
        assert!(names("azure-openai-responses", "azure", local).is_empty());
        assert_eq!(
            names("google-generative-ai", "x", "https://opencode.ai/zen/v1"),
            ["x-opencode-session"]
        );

        // A request that caches nothing keeps only OpenCode's routing header and Azure's key.
        let m = Model {
            provider: "opencode".into(),
            ..model("openai-completions", false)
        };
        let mut req = request(&m, "s2");
        req.session_id = Some(SessionId {
            id: "s2",
            cache: false,
        });
        assert_eq!(session_headers(&req), [("x-opencode-session", "s2")]);
        assert_eq!(prompt_cache_key(&req), None);
        let azure = model("azure-openai-responses", false);
        req.model = &azure;
        assert_eq!(prompt_cache_key(&req), Some("s2"));
    }

    #[test]
    fn compat_chooses_the_key_and_the_header_spelling() {
        let with = |api: &str, url: &str, compat: serde_json::Value| Model {
            base_url: url.into(),
            compat: Some(compat.into()),
            ..model(api, false)
        };
        let local = "http://127.0.0.1:1/v1";
        let key = |m: &Model| prompt_cache_key(&request(m, "s")).map(str::to_owned);
        let completions = with("openai-completions", local, serde_json::json!({}));
        assert_eq!(key(&completions), None);
        let official = with(
            "openai-completions",
            "https://api.openai.com/v1",
            serde_json::json!({}),
        );
        assert_eq!(key(&official).as_deref(), Some("s"));
        let enabled = serde_json::json!({"promptCacheKeyMode": "enabled"});
        assert_eq!(
            key(&with("openai-completions", local, enabled)).as_deref(),
            Some("s")
        );
        let disabled = serde_json::json!({"promptCacheKeyMode": "disabled"});
        assert_eq!(
            key(&with("openai-responses", local, disabled.clone())),
            None
        );
        assert_eq!(key(&with("azure-openai-responses", local, disabled)), None);

        let names = |m: &Model| -> Vec<&'static str> {
            session_headers(&request(m, "s"))
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        let no_session = serde_json::json!({"sessionAffinityFormat": "openai-nosession",
            "sendSessionAffinityHeaders": true});
        assert_eq!(
            names(&with("openai-completions", local, no_session.clone())),
            ["x-client-request-id", "x-session-affinity"]
        );
        assert_eq!(
            names(&with("openai-responses", local, no_session)),
            ["x-client-request-id"]
        );
        let openrouter = serde_json::json!({"sessionAffinityFormat": "openrouter",
            "sendSessionAffinityHeaders": true});
        assert_eq!(
            names(&with("anthropic-messages", local, openrouter)),
            ["x-session-id"]
        );
    }
}
