//! The fields OpenAI-compatible servers disagree about, as Pi's models.json `compat` object
//! names them (Pi 1.6, `openai-completions`): which role carries the system prompt, whether
//! `reasoning_effort`, `store` and `stream_options` may be sent, which field caps the output,
//! how thinking is asked for, and how tool results and earlier thinking must be replayed.
//!
//! Each field starts from Pi's default for the server, detected from the provider's name and the
//! base URL (api.openai.com gets `developer`; DeepSeek, z.ai, Together… their own dialects; a
//! local server the plain OpenAI one); an explicit `compat` value overrides it field by field.
//! The model's `compat` is already merged over its provider's by the registry.
//!
//! Parsing is lenient: a field with a bad value keeps its default, and [`check`] reports it when
//! models.json is loaded; fields Pi knows that change nothing here are accepted silently.

use crate::protocol::Model;
use serde_json::{Map, Value};

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

/// The formats Pi has that need per-model templates nova does not model.
const UNSUPPORTED_FORMATS: &[&str] = &["chat-template", "baseten"];

/// What one OpenAI-compatible request must look like for its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compat {
    /// Send `store: false`.
    pub supports_store: bool,
    /// Send the system prompt of a reasoning model as `role: "developer"`.
    pub supports_developer_role: bool,
    pub supports_reasoning_effort: bool,
    /// Ask for a usage chunk with `stream_options.include_usage`.
    pub supports_usage_in_streaming: bool,
    pub max_tokens_field: MaxTokensField,
    /// Tool results carry the tool's `name`.
    pub requires_tool_result_name: bool,
    /// A user message may not follow tool results directly: an assistant line goes between.
    pub requires_assistant_after_tool_result: bool,
    /// Earlier thinking is replayed as assistant text (otherwise it is not sent back).
    pub requires_thinking_as_text: bool,
    /// An assistant message with only tool calls has `content: ""`, not `null`.
    pub requires_non_null_assistant_content: bool,
    /// Tool definitions carry `strict: false` (servers that do not know the field may reject it).
    pub supports_strict_mode: bool,
    pub thinking_format: ThinkingFormat,
}

impl Compat {
    /// Pi's defaults for `model`'s server, overridden by its `compat` object.
    pub fn of(model: &Model) -> Compat {
        let mut compat = Compat::detect(&model.provider, &model.base_url);
        if let Some(Value::Object(fields)) = &model.compat {
            compat.apply(fields, &mut |_| {});
        }
        compat
    }

    /// Pi's auto-detection from the provider's name and base URL.
    fn detect(provider: &str, base_url: &str) -> Compat {
        let url = base_url.to_ascii_lowercase();
        let is =
            |name: &str, hosts: &[&str]| provider == name || hosts.iter().any(|h| url.contains(h));
        let zai = provider == "zai-coding-cn" || is("zai", &["api.z.ai", "open.bigmodel.cn"]);
        let together = is("together", &["api.together.ai", "api.together.xyz"]);
        let moonshot = provider == "moonshotai-cn" || is("moonshotai", &["api.moonshot."]);
        let openrouter = is("openrouter", &["openrouter.ai"]);
        let workers_ai = is("cloudflare-workers-ai", &["api.cloudflare.com"]);
        let ai_gateway = is("cloudflare-ai-gateway", &["gateway.ai.cloudflare.com"]);
        let nvidia = is("nvidia", &["integrate.api.nvidia.com"]);
        let ant_ling = is("ant-ling", &["api.ant-ling.com"]);
        let cerebras = is("cerebras", &["cerebras.ai"]);
        let deepseek = is("deepseek", &["deepseek.com"]);
        let grok = is("xai", &["api.x.ai"]);
        let chutes = url.contains("chutes.ai");
        let opencode = is("opencode", &["opencode.ai"]);
        let non_standard = nvidia
            || cerebras
            || grok
            || together
            || chutes
            || deepseek
            || zai
            || moonshot
            || opencode
            || workers_ai
            || ai_gateway
            || ant_ling;
        let max_tokens =
            chutes || deepseek || moonshot || ai_gateway || together || nvidia || ant_ling || zai;
        Compat {
            supports_store: !non_standard,
            // Other hosts' chat templates often reject `developer`; every host takes `system`.
            supports_developer_role: is("openai", &["api.openai.com"]),
            supports_reasoning_effort: !(grok
                || zai
                || moonshot
                || together
                || ai_gateway
                || nvidia
                || ant_ling),
            supports_usage_in_streaming: true,
            max_tokens_field: if max_tokens {
                MaxTokensField::MaxTokens
            } else {
                MaxTokensField::MaxCompletionTokens
            },
            requires_tool_result_name: false,
            requires_assistant_after_tool_result: false,
            requires_thinking_as_text: false,
            requires_non_null_assistant_content: false,
            supports_strict_mode: false,
            thinking_format: if deepseek {
                ThinkingFormat::DeepSeek
            } else if zai {
                ThinkingFormat::Zai
            } else if together {
                ThinkingFormat::Together
            } else if ant_ling {
                ThinkingFormat::AntLing
            } else if openrouter {
                ThinkingFormat::OpenRouter
            } else {
                ThinkingFormat::OpenAi
            },
        }
    }

    /// Applies the fields of a `compat` object, telling `warn` about each bad value.
    fn apply(&mut self, fields: &Map<String, Value>, warn: &mut dyn FnMut(String)) {
        for (key, value) in fields {
            let flag = match key.as_str() {
                "supportsStore" => &mut self.supports_store,
                "supportsDeveloperRole" => &mut self.supports_developer_role,
                "supportsReasoningEffort" => &mut self.supports_reasoning_effort,
                "supportsUsageInStreaming" => &mut self.supports_usage_in_streaming,
                "requiresToolResultName" => &mut self.requires_tool_result_name,
                "requiresAssistantAfterToolResult" => {
                    &mut self.requires_assistant_after_tool_result
                }
                "requiresThinkingAsText" => &mut self.requires_thinking_as_text,
                "requiresNonNullAssistantContent" => &mut self.requires_non_null_assistant_content,
                "supportsStrictMode" => &mut self.supports_strict_mode,
                "maxTokensField" => {
                    match value.as_str() {
                        Some("max_tokens") => self.max_tokens_field = MaxTokensField::MaxTokens,
                        Some("max_completion_tokens") => {
                            self.max_tokens_field = MaxTokensField::MaxCompletionTokens
                        }
                        _ => warn(format!(
                            "\"maxTokensField\" is {value}; expected \"max_tokens\" or \"max_completion_tokens\""
                        )),
                    }
                    continue;
                }
                "thinkingFormat" => {
                    let name = value.as_str().unwrap_or_default();
                    match ThinkingFormat::parse(name) {
                        Some(format) => self.thinking_format = format,
                        None if UNSUPPORTED_FORMATS.contains(&name) => warn(format!(
                            "\"thinkingFormat\": \"{name}\" is not supported by nova; using the detected format"
                        )),
                        None => warn(format!(
                            "\"thinkingFormat\" is {value}, which is not a format Pi knows"
                        )),
                    }
                    continue;
                }
                _ => continue,
            };
            match value {
                Value::Bool(b) => *flag = *b,
                other => warn(format!("\"{key}\" is {other}; expected true or false")),
            }
        }
    }
}

/// Reports the problems of a models.json `compat` value (at `place`, such as `provider "x"`).
pub fn check(place: &str, value: &Value, warnings: &mut Vec<String>) {
    let Value::Object(fields) = value else {
        warnings.push(format!(
            "models.json: {place}: \"compat\" is not an object; ignored"
        ));
        return;
    };
    let mut scratch = Compat::detect("", "");
    scratch.apply(fields, &mut |problem| {
        warnings.push(format!("models.json: {place}: compat {problem}; ignored"));
    });
}

/// A model's `compat`: its provider's object with the model's fields over it, as Pi merges them.
pub fn merge(provider: Option<&Value>, model: Option<&Value>) -> Option<Value> {
    match (provider, model) {
        (Some(Value::Object(p)), Some(Value::Object(m))) => {
            let mut merged = p.clone();
            merged.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
            Some(Value::Object(merged))
        }
        (p, m) => m.or(p).cloned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::provider::prepare::tests::model;
    use serde_json::json;

    fn on(provider: &str, base_url: &str, compat: Option<Value>) -> Compat {
        Compat::of(&Model {
            provider: provider.into(),
            base_url: base_url.into(),
            compat,
            ..model("openai-completions", false)
        })
    }

    #[test]
    fn detected_as_pi_does() {
        let local = on("llama", "http://127.0.0.1:8080/v1", None);
        assert_eq!(local, Compat::detect("", ""));
        assert!(local.supports_store && local.supports_reasoning_effort);
        assert!(!local.supports_developer_role);
        assert_eq!(local.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert_eq!(local.thinking_format, ThinkingFormat::OpenAi);

        assert!(on("x", "https://api.openai.com/v1", None).supports_developer_role);
        assert!(on("openai", "https://proxy.example/v1", None).supports_developer_role);

        let deepseek = on("ds", "https://api.DeepSeek.com/v1", None);
        assert_eq!(deepseek.thinking_format, ThinkingFormat::DeepSeek);
        assert_eq!(deepseek.max_tokens_field, MaxTokensField::MaxTokens);
        assert!(!deepseek.supports_store);

        let zai = on("zai", "https://example.com", None);
        assert_eq!(zai.thinking_format, ThinkingFormat::Zai);
        assert!(!zai.supports_reasoning_effort);
        let grok = on("g", "https://api.x.ai/v1", None);
        assert!(!grok.supports_reasoning_effort && !grok.supports_store);
        assert_eq!(
            on("o", "https://openrouter.ai/api/v1", None).thinking_format,
            ThinkingFormat::OpenRouter
        );
    }

    #[test]
    fn explicit_fields_override_and_bad_ones_are_reported() {
        let compat = json!({
            "supportsDeveloperRole": true,
            "maxTokensField": "max_tokens",
            "supportsStore": "no",
            "thinkingFormat": "chat-template",
            "supportsFinishReason": false,
            "openRouterRouting": {"only": ["x"]},
        });
        let c = on("local", "http://127.0.0.1:8080/v1", Some(compat.clone()));
        assert!(c.supports_developer_role && c.supports_store);
        assert_eq!(c.max_tokens_field, MaxTokensField::MaxTokens);
        assert_eq!(c.thinking_format, ThinkingFormat::OpenAi);

        let mut warnings = Vec::new();
        check("provider \"local\"", &compat, &mut warnings);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("provider \"local\": compat \"supportsStore\" is \"no\""));
        assert!(warnings[1].contains("\"chat-template\" is not supported"));
        check("model \"m\"", &json!([1]), &mut warnings);
        assert!(warnings[2].contains("model \"m\": \"compat\" is not an object"));
    }

    #[test]
    fn model_fields_win_over_the_provider_s() {
        let p = json!({"supportsStore": false, "maxTokensField": "max_tokens"});
        let m = json!({"supportsStore": true});
        assert_eq!(
            merge(Some(&p), Some(&m)),
            Some(json!({"supportsStore": true, "maxTokensField": "max_tokens"}))
        );
        assert_eq!(merge(Some(&p), None), Some(p.clone()));
        assert_eq!(merge(None, Some(&m)), Some(m.clone()));
        assert_eq!(merge(None, None), None);
    }
}
