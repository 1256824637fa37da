//! A model's models.json `compat` object, read once when the registry is built: the fields Pi
//! names for OpenAI-compatible servers and Anthropic's `forceAdaptiveThinking`, each typed, and
//! the object as written, which `Model` echoes on the wire as Pi does. What a field left unset
//! means for a given server is `provider::compat`'s business.
//!
//! Reading is lenient: a field with a bad value stays unset (the caller hears about it once);
//! fields Pi knows that change nothing in nova are kept in the echo only.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Which request field carries the output budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    MaxCompletionTokens,
    MaxTokens,
}

/// How thinking is asked for (Pi's `thinkingFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingFormat {
    /// `reasoning_effort`.
    OpenAi,
    /// `reasoning: {effort}`, `effort: "none"` when off.
    OpenRouter,
    /// `thinking: {type: enabled|disabled}` plus `reasoning_effort`.
    DeepSeek,
    /// `reasoning: {enabled}` plus `reasoning_effort`.
    Together,
    /// `thinking: {type: enabled|disabled}` plus `reasoning_effort`.
    Zai,
    /// Top-level `enable_thinking` plus `reasoning_effort`.
    Qwen,
    /// `chat_template_kwargs: {enable_thinking, preserve_thinking}`.
    QwenChatTemplate,
    /// Top-level `thinking: "<effort>"`, `"none"` when off.
    StringThinking,
    /// `reasoning: {effort}` only for a level the model maps to a value.
    AntLing,
}

impl ThinkingFormat {
    fn parse(name: &str) -> Option<ThinkingFormat> {
        Some(match name {
            "openai" => ThinkingFormat::OpenAi,
            "openrouter" => ThinkingFormat::OpenRouter,
            "deepseek" => ThinkingFormat::DeepSeek,
            "together" => ThinkingFormat::Together,
            "zai" => ThinkingFormat::Zai,
            "qwen" => ThinkingFormat::Qwen,
            "qwen-chat-template" => ThinkingFormat::QwenChatTemplate,
            "string-thinking" => ThinkingFormat::StringThinking,
            "ant-ling" => ThinkingFormat::AntLing,
            _ => return None,
        })
    }
}

/// Which headers carry the session's id for routing (Pi's `sessionAffinityFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAffinityFormat {
    /// `session-id` (chat completions: `session_id`) beside the request-id headers.
    OpenAi,
    /// The request-id headers without `session-id`.
    OpenAiNoSession,
    /// `x-session-id` alone.
    OpenRouter,
}

/// When a body carries `prompt_cache_key` (Pi's `promptCacheKeyMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptCacheKeyMode {
    /// Where Pi sends it by default (the Responses API; chat completions to OpenAI's own server).
    Auto,
    Enabled,
    Disabled,
}

/// The formats Pi has that need per-model templates nova does not model.
const UNSUPPORTED_FORMATS: &[&str] = &["chat-template", "baseten"];

/// The true-or-false fields of a `compat` object; `None` leaves the server's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompatFlags {
    pub supports_store: Option<bool>,
    pub supports_developer_role: Option<bool>,
    pub supports_reasoning_effort: Option<bool>,
    pub supports_usage_in_streaming: Option<bool>,
    pub requires_tool_result_name: Option<bool>,
    pub requires_assistant_after_tool_result: Option<bool>,
    pub requires_thinking_as_text: Option<bool>,
    pub requires_non_null_assistant_content: Option<bool>,
    pub supports_strict_mode: Option<bool>,
    pub force_adaptive_thinking: Option<bool>,
    /// Route by the session's id with affinity headers (chat completions, Anthropic Messages).
    pub send_session_affinity_headers: Option<bool>,
    /// nova's own: recover tool calls a model wrote as text (`provider::text_calls`).
    pub tool_calls_in_text: Option<bool>,
    /// The server keeps a prompt cache longer when asked (with `PI_CACHE_RETENTION=long`).
    pub supports_long_cache_retention: Option<bool>,
}

/// A `compat` object, typed; `None` fields were absent or had a bad value.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCompat {
    /// The object as written, for the wire.
    written: Value,
    pub flags: CompatFlags,
    pub max_tokens_field: Option<MaxTokensField>,
    pub thinking_format: Option<ThinkingFormat>,
    pub session_affinity_format: Option<SessionAffinityFormat>,
    pub prompt_cache_key_mode: Option<PromptCacheKeyMode>,
}

impl ModelCompat {
    /// Reads `written`, telling `warn` about each field whose value cannot be used. A value
    /// that is not an object sets nothing (whoever reports problems checks that first).
    pub fn read(written: Value, warn: &mut dyn FnMut(String)) -> ModelCompat {
        let mut compat = ModelCompat {
            written: Value::Null,
            flags: CompatFlags::default(),
            max_tokens_field: None,
            thinking_format: None,
            session_affinity_format: None,
            prompt_cache_key_mode: None,
        };
        if let Value::Object(fields) = &written {
            for (key, value) in fields {
                compat.set(key, value, warn);
            }
        }
        compat.written = written;
        compat
    }

    /// The object as written in models.json.
    pub fn written(&self) -> &Value {
        &self.written
    }

    fn set(&mut self, key: &str, value: &Value, warn: &mut dyn FnMut(String)) {
        let flags = &mut self.flags;
        let flag = match key {
            "supportsStore" => &mut flags.supports_store,
            "supportsDeveloperRole" => &mut flags.supports_developer_role,
            "supportsReasoningEffort" => &mut flags.supports_reasoning_effort,
            "supportsUsageInStreaming" => &mut flags.supports_usage_in_streaming,
            "requiresToolResultName" => &mut flags.requires_tool_result_name,
            "requiresAssistantAfterToolResult" => &mut flags.requires_assistant_after_tool_result,
            "requiresThinkingAsText" => &mut flags.requires_thinking_as_text,
            "requiresNonNullAssistantContent" => &mut flags.requires_non_null_assistant_content,
            "supportsStrictMode" => &mut flags.supports_strict_mode,
            "toolCallsInText" => &mut flags.tool_calls_in_text,
            "sendSessionAffinityHeaders" => &mut flags.send_session_affinity_headers,
            "supportsLongCacheRetention" => &mut flags.supports_long_cache_retention,
            // Anthropic's; Pi never reports a bad value of it, so neither does nova.
            "forceAdaptiveThinking" => {
                flags.force_adaptive_thinking = value.as_bool();
                return;
            }
            "maxTokensField" => {
                match value.as_str() {
                    Some("max_tokens") => self.max_tokens_field = Some(MaxTokensField::MaxTokens),
                    Some("max_completion_tokens") => {
                        self.max_tokens_field = Some(MaxTokensField::MaxCompletionTokens)
                    }
                    _ => warn(format!(
                        "\"maxTokensField\" is {value}; expected \"max_tokens\" or \"max_completion_tokens\""
                    )),
                }
                return;
            }
            "sessionAffinityFormat" => {
                match value.as_str() {
                    Some("openai") => {
                        self.session_affinity_format = Some(SessionAffinityFormat::OpenAi)
                    }
                    Some("openai-nosession") => {
                        self.session_affinity_format = Some(SessionAffinityFormat::OpenAiNoSession)
                    }
                    Some("openrouter") => {
                        self.session_affinity_format = Some(SessionAffinityFormat::OpenRouter)
                    }
                    _ => warn(format!(
                        "\"sessionAffinityFormat\" is {value}; expected \"openai\", \"openai-nosession\" or \"openrouter\""
                    )),
                }
                return;
            }
            "promptCacheKeyMode" => {
                match value.as_str() {
                    Some("auto") => self.prompt_cache_key_mode = Some(PromptCacheKeyMode::Auto),
                    Some("enabled") => {
                        self.prompt_cache_key_mode = Some(PromptCacheKeyMode::Enabled)
                    }
                    Some("disabled") => {
                        self.prompt_cache_key_mode = Some(PromptCacheKeyMode::Disabled)
                    }
                    _ => warn(format!(
                        "\"promptCacheKeyMode\" is {value}; expected \"auto\", \"enabled\" or \"disabled\""
                    )),
                }
                return;
            }
            "thinkingFormat" => {
                let name = value.as_str().unwrap_or_default();
                match ThinkingFormat::parse(name) {
                    Some(format) => self.thinking_format = Some(format),
                    None if UNSUPPORTED_FORMATS.contains(&name) => warn(format!(
                        "\"thinkingFormat\": \"{name}\" is not supported by nova; using the detected format"
                    )),
                    None => warn(format!(
                        "\"thinkingFormat\" is {value}, which is not a format Pi knows"
                    )),
                }
                return;
            }
            _ => return,
        };
        match value {
            Value::Bool(b) => *flag = Some(*b),
            other => warn(format!("\"{key}\" is {other}; expected true or false")),
        }
    }
}

/// Read without complaint: the complaints belong to loading models.json.
impl From<Value> for ModelCompat {
    fn from(written: Value) -> ModelCompat {
        ModelCompat::read(written, &mut |_| {})
    }
}

impl Serialize for ModelCompat {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.written.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ModelCompat {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ModelCompat, D::Error> {
        Value::deserialize(deserializer).map(ModelCompat::from)
    }
}
