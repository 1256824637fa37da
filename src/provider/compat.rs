//! The fields OpenAI-compatible servers disagree about, as Pi's models.json `compat` object
//! names them (Pi 1.6, `openai-completions`): which role carries the system prompt, whether
//! `reasoning_effort`, `store` and `stream_options` may be sent, which field caps the output,
//! how thinking is asked for, and how tool results and earlier thinking must be replayed.
//!
//! Each field starts from Pi's default for the server, detected from the provider's name and the
//! base URL (api.openai.com gets `developer`; DeepSeek, z.ai, Together… their own dialects; a
//! local server the plain OpenAI one); an explicit `compat` value overrides it field by field.
//! The model's `compat` is already merged over its provider's and read into typed fields by the
//! registry ([`check`] reports its bad values then, once); a request only combines the two.

use crate::protocol::{CompatFlags, Model, ModelCompat};
pub use crate::protocol::{MaxTokensField, ThinkingFormat};
use serde_json::Value;

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
    /// The server keeps a prompt cache for a day when asked (`prompt_cache_retention`).
    pub supports_long_cache_retention: bool,
}

impl Compat {
    /// Pi's defaults for `model`'s server, overridden by its `compat` object.
    pub fn of(model: &Model) -> Compat {
        let mut compat = Compat::detect(&model.provider, &model.base_url);
        if let Some(explicit) = &model.compat {
            compat.apply(explicit);
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
            supports_long_cache_retention: !(together
                || workers_ai
                || ai_gateway
                || nvidia
                || ant_ling),
        }
    }

    /// Puts the fields `explicit` sets over the detected ones.
    fn apply(&mut self, explicit: &ModelCompat) {
        let CompatFlags {
            supports_store,
            supports_developer_role,
            supports_reasoning_effort,
            supports_usage_in_streaming,
            requires_tool_result_name,
            requires_assistant_after_tool_result,
            requires_thinking_as_text,
            requires_non_null_assistant_content,
            supports_strict_mode,
            force_adaptive_thinking: _,
            // Headers, not the body: `provider::session_headers` reads it.
            send_session_affinity_headers: _,
            // Shapes the reply, not the request: the accumulator reads it.
            tool_calls_in_text: _,
            supports_long_cache_retention,
        } = explicit.flags;
        let set = |flag: &mut bool, value: Option<bool>| *flag = value.unwrap_or(*flag);
        set(&mut self.supports_store, supports_store);
        set(&mut self.supports_developer_role, supports_developer_role);
        set(
            &mut self.supports_reasoning_effort,
            supports_reasoning_effort,
        );
        set(
            &mut self.supports_usage_in_streaming,
            supports_usage_in_streaming,
        );
        set(
            &mut self.requires_tool_result_name,
            requires_tool_result_name,
        );
        set(
            &mut self.requires_assistant_after_tool_result,
            requires_assistant_after_tool_result,
        );
        set(
            &mut self.requires_thinking_as_text,
            requires_thinking_as_text,
        );
        set(
            &mut self.requires_non_null_assistant_content,
            requires_non_null_assistant_content,
        );
        set(&mut self.supports_strict_mode, supports_strict_mode);
        set(
            &mut self.supports_long_cache_retention,
            supports_long_cache_retention,
        );
        self.max_tokens_field = explicit.max_tokens_field.unwrap_or(self.max_tokens_field);
        self.thinking_format = explicit.thinking_format.unwrap_or(self.thinking_format);
    }
}

/// Reads a models.json `compat` value (at `place`, such as `provider "x"`), reporting its
/// problems.
pub fn check(place: &str, value: &Value, warnings: &mut Vec<String>) {
    if !value.is_object() {
        warnings.push(format!(
            "models.json: {place}: \"compat\" is not an object; ignored"
        ));
        return;
    }
    ModelCompat::read(value.clone(), &mut |problem| {
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
            compat: compat.map(ModelCompat::from),
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
    fn session_fields_with_bad_values_are_reported() {
        let mut warnings = Vec::new();
        let compat = json!({"sessionAffinityFormat": "x", "promptCacheKeyMode": true,
            "sendSessionAffinityHeaders": "yes"});
        check("model \"m\"", &compat, &mut warnings);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("\"openai-nosession\"")));
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
