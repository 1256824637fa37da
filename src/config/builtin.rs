//! Providers nova knows without a models.json entry, as Pi's built-in providers: one table,
//! [`CATALOG`], of the facts that decide how each is reached and enabled (its name, the
//! variables holding its key, the API and base URL a models.json entry for it inherits, Pi's
//! default model for it). Its models are data: the catalog files under `data/models/`
//! ([`super::catalog`]), compiled in and parsed only for the providers enabled. A provider is
//! enabled by its variable, a key in auth.json, or an `apiKey` for it in models.json;
//! models.json can change the provider and add or replace its models; see
//! [`super::Registry::add_builtin`].
//!
//! These facts stay code, not data, because each drives code: a provider the data names but
//! this table does not is one nova has no authentication or address for yet, and is not listed
//! (the catalog test says which).

use super::catalog;
use super::models::ProviderConfig;
use crate::protocol::Model;
use crate::provider::Api;

/// A built-in provider: its name, the variables holding its key, how it is reached, its models.
pub struct Builtin {
    pub name: &'static str,
    /// The variables that may hold its key, read in this order (Pi's): a subscription's token
    /// may come before the API key.
    pub key_vars: &'static [&'static str],
    /// What a models.json entry for the provider inherits; each catalog model has its own.
    pub api: Api,
    pub base_url: &'static str,
    /// Pi's default model for the provider, listed first: nova starts on the first model it
    /// knows.
    default_model: &'static str,
    /// Its catalog file (`data/models/<name>.json`).
    catalog: &'static str,
    /// Variables filling `{NAME}`s in its models' addresses (from the environment, or the
    /// login's `env` in auth.json); the provider is listed only once they are set, as in Pi.
    pub address_vars: &'static [&'static str],
    /// The header the key is sent in, as `Bearer <key>`, instead of the API's own.
    pub key_header: Option<&'static str>,
}

/// Every built-in provider, in the order their models are listed.
pub const CATALOG: &[Builtin] = &[
    Builtin {
        name: "anthropic",
        key_vars: &["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
        api: Api::AnthropicMessages,
        base_url: "https://api.anthropic.com",
        default_model: "claude-opus-5-5",
        catalog: include_str!("../../data/models/anthropic.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "openai",
        key_vars: &["OPENAI_API_KEY"],
        api: Api::OpenAiResponses,
        base_url: "https://api.openai.com/v1",
        default_model: "gpt-6.2-sol",
        catalog: include_str!("../../data/models/openai.json"),
        address_vars: &[],
        key_header: None,
    },
    // A ChatGPT Plus/Pro subscription: no variable, a login in auth.json (or a key given for it).
    Builtin {
        name: "openai-codex",
        key_vars: &[],
        api: Api::OpenAiCodexResponses,
        base_url: crate::provider::openai_codex::DEFAULT_BASE_URL,
        default_model: "gpt-6.2-sol",
        catalog: include_str!("../../data/models/openai-codex.json"),
        address_vars: &[],
        key_header: None,
    },
    // Radius, Pi's own gateway: a key, or a login in auth.json.
    Builtin {
        name: "radius",
        key_vars: &["RADIUS_API_KEY"],
        api: Api::PiMessages,
        base_url: "https://radius.pi.dev/v1",
        default_model: "balanced",
        catalog: include_str!("../../data/models/radius.json"),
        address_vars: &[],
        key_header: None,
    },
    // A GitHub Copilot subscription: its token (`COPILOT_GITHUB_TOKEN`, or a login in auth.json)
    // names its address.
    Builtin {
        name: "github-copilot",
        key_vars: &["COPILOT_GITHUB_TOKEN"],
        api: Api::OpenAiResponses,
        base_url: crate::provider::github_copilot::DEFAULT_BASE_URL,
        default_model: "gpt-6.1-sol",
        catalog: include_str!("../../data/models/github-copilot.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "google",
        key_vars: &["GEMINI_API_KEY"],
        api: Api::GoogleGenerativeAi,
        base_url: "https://generativelanguage.googleapis.com/v1beta",
        default_model: "gemini-4-argon",
        catalog: include_str!("../../data/models/google.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "openrouter",
        key_vars: &["OPENROUTER_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://openrouter.ai/api/v1",
        default_model: "moonshotai/kimi-k2.7-code",
        catalog: include_str!("../../data/models/openrouter.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "groq",
        key_vars: &["GROQ_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.groq.com/openai/v1",
        default_model: "openai/gpt-oss-120b",
        catalog: include_str!("../../data/models/groq.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "deepseek",
        key_vars: &["DEEPSEEK_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.deepseek.com",
        default_model: "deepseek-v4-pro",
        catalog: include_str!("../../data/models/deepseek.json"),
        address_vars: &[],
        key_header: None,
    },
    // Pi reaches Mistral through its conversations API; nova through its chat completions
    // (see `catalog::reached_as`).
    Builtin {
        name: "mistral",
        key_vars: &["MISTRAL_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.mistral.ai/v1",
        default_model: "devstral-medium-latest",
        catalog: include_str!("../../data/models/mistral.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "xai",
        key_vars: &["XAI_API_KEY"],
        api: Api::OpenAiResponses,
        base_url: "https://api.x.ai/v1",
        default_model: "grok-4.7",
        catalog: include_str!("../../data/models/xai.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "cerebras",
        key_vars: &["CEREBRAS_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.cerebras.ai/v1",
        default_model: "gpt-oss-120b",
        catalog: include_str!("../../data/models/cerebras.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "together",
        key_vars: &["TOGETHER_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.together.ai/v1",
        default_model: "moonshotai/Kimi-K3",
        catalog: include_str!("../../data/models/together.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "fireworks",
        key_vars: &["FIREWORKS_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.fireworks.ai/inference/v1",
        default_model: "accounts/fireworks/models/kimi-k3",
        catalog: include_str!("../../data/models/fireworks.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "huggingface",
        key_vars: &["HF_TOKEN"],
        api: Api::OpenAiCompletions,
        base_url: "https://router.huggingface.co/v1",
        default_model: "moonshotai/Kimi-K2.7-Code",
        catalog: include_str!("../../data/models/huggingface.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "moonshotai",
        key_vars: &["MOONSHOT_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.moonshot.ai/v1",
        default_model: "kimi-k2.7-code",
        catalog: include_str!("../../data/models/moonshotai.json"),
        address_vars: &[],
        key_header: None,
    },
    // The address comes from AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME (or a
    // models.json baseUrl): each Azure resource has its own.
    Builtin {
        name: "azure",
        key_vars: &["AZURE_OPENAI_API_KEY"],
        api: Api::AzureOpenAiResponses,
        base_url: "",
        default_model: "gpt-6.2-sol",
        catalog: include_str!("../../data/models/azure.json"),
        address_vars: &[],
        key_header: None,
    },
    // Meta's Model API: a key, or a Muse subscription's login in auth.json (a key minted daily).
    Builtin {
        name: "meta",
        key_vars: &["META_API_KEY"],
        api: Api::OpenAiResponses,
        base_url: "https://api.meta.ai/v1",
        default_model: "muse-spark-1.3",
        catalog: include_str!("../../data/models/meta.json"),
        address_vars: &[],
        key_header: None,
    },
    // Kimi Code's subscription: a key, or a login in auth.json (refreshed by `oauth`).
    Builtin {
        name: "kimi-coding",
        key_vars: &["KIMI_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.kimi.com/coding/v1",
        default_model: "kimi-for-coding",
        catalog: include_str!("../../data/models/kimi-coding.json"),
        address_vars: &[],
        key_header: None,
    },
    // Also enabled by AWS credentials (see `aws_enabled`); the key is a Bedrock bearer token.
    Builtin {
        name: "amazon-bedrock",
        key_vars: &["AWS_BEARER_TOKEN_BEDROCK"],
        api: Api::BedrockConverseStream,
        base_url: "https://bedrock-runtime.us-east-1.amazonaws.com",
        default_model: "us.anthropic.claude-opus-5-5",
        catalog: include_str!("../../data/models/amazon-bedrock.json"),
        address_vars: &[],
        key_header: None,
    },
    // Pi's smaller catalogs, one variable each; OpenCode's one key serves Zen and Go, and
    // Moonshot's serves both its regions.
    Builtin {
        name: "ant-ling",
        key_vars: &["ANT_LING_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.ant-ling.com/v1",
        default_model: "Ring-2.6-1T",
        catalog: include_str!("../../data/models/ant-ling.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "nvidia",
        key_vars: &["NVIDIA_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://integrate.api.nvidia.com/v1",
        default_model: "nvidia/nemotron-3.5-super-vl-120b-a12b",
        catalog: include_str!("../../data/models/nvidia.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "vercel-ai-gateway",
        key_vars: &["AI_GATEWAY_API_KEY"],
        api: Api::AnthropicMessages,
        base_url: "https://ai-gateway.vercel.sh",
        default_model: "zai/glm-5.3",
        catalog: include_str!("../../data/models/vercel-ai-gateway.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "zai",
        key_vars: &["ZAI_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.z.ai/api/coding/paas/v4",
        default_model: "glm-5.3",
        catalog: include_str!("../../data/models/zai.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "zai-coding-cn",
        key_vars: &["ZAI_CODING_CN_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://open.bigmodel.cn/api/coding/paas/v4",
        default_model: "glm-5.3",
        catalog: include_str!("../../data/models/zai-coding-cn.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "opencode",
        key_vars: &["OPENCODE_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://opencode.ai/inference/openai/v1",
        default_model: "kimi-k2.7-code",
        catalog: include_str!("../../data/models/opencode.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "opencode-go",
        key_vars: &["OPENCODE_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://opencode.ai/inference/go/openai/v1",
        default_model: "kimi-k3.1-pro",
        catalog: include_str!("../../data/models/opencode-go.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "baseten",
        key_vars: &["BASETEN_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://inference.baseten.co/v1",
        default_model: "zai-org/GLM-5.3",
        catalog: include_str!("../../data/models/baseten.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "minimax",
        key_vars: &["MINIMAX_API_KEY"],
        api: Api::AnthropicMessages,
        base_url: "https://api.minimax.io/anthropic",
        default_model: "MiniMax-M3",
        catalog: include_str!("../../data/models/minimax.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "minimax-cn",
        key_vars: &["MINIMAX_CN_API_KEY"],
        api: Api::AnthropicMessages,
        base_url: "https://api.minimaxi.com/anthropic",
        default_model: "MiniMax-M3",
        catalog: include_str!("../../data/models/minimax-cn.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "moonshotai-cn",
        key_vars: &["MOONSHOT_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.moonshot.cn/v1",
        default_model: "kimi-k2.7-code",
        catalog: include_str!("../../data/models/moonshotai-cn.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "qwen-token-plan",
        key_vars: &["QWEN_TOKEN_PLAN_TEAM_API_KEY", "QWEN_TOKEN_PLAN_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://token-plan.maas.qwencloudapi.com/compatible-mode/v1",
        default_model: "qwen3.8-max",
        catalog: include_str!("../../data/models/qwen-token-plan.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "qwen-token-plan-cn",
        key_vars: &[
            "QWEN_TOKEN_PLAN_TEAM_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        api: Api::OpenAiCompletions,
        base_url: "https://token-plan.maas.qianwenaiapi.com/compatible-mode/v1",
        default_model: "qwen3.8-max",
        catalog: include_str!("../../data/models/qwen-token-plan-cn.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "qwen-token-plan-individual",
        key_vars: &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY",
            "QWEN_TOKEN_PLAN_API_KEY",
        ],
        api: Api::OpenAiCompletions,
        base_url: "https://token-plan.maas.qwencloudapi.com/compatible-mode/v1",
        default_model: "qwen3.8-max",
        catalog: include_str!("../../data/models/qwen-token-plan-individual.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "qwen-token-plan-individual-cn",
        key_vars: &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        api: Api::OpenAiCompletions,
        base_url: "https://token-plan.maas.qianwenaiapi.com/compatible-mode/v1",
        default_model: "qwen3.8-max",
        catalog: include_str!("../../data/models/qwen-token-plan-individual-cn.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "xiaomi",
        key_vars: &["XIAOMI_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.xiaomimimo.com/v1",
        default_model: "mimo-v2.6-pro",
        catalog: include_str!("../../data/models/xiaomi.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "xiaomi-token-plan-cn",
        key_vars: &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://token-plan-cn.xiaomimimo.com/v1",
        default_model: "mimo-v2.6-pro",
        catalog: include_str!("../../data/models/xiaomi-token-plan-cn.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "xiaomi-token-plan-ams",
        key_vars: &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://token-plan-ams.xiaomimimo.com/v1",
        default_model: "mimo-v2.6-pro",
        catalog: include_str!("../../data/models/xiaomi-token-plan-ams.json"),
        address_vars: &[],
        key_header: None,
    },
    Builtin {
        name: "xiaomi-token-plan-sgp",
        key_vars: &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://token-plan-sgp.xiaomimimo.com/v1",
        default_model: "mimo-v2.6-pro",
        catalog: include_str!("../../data/models/xiaomi-token-plan-sgp.json"),
        address_vars: &[],
        key_header: None,
    },
    // Cloudflare's gateway: the account and gateway fill its address (from the environment or
    // the login's `env` in auth.json); the key goes in the gateway's own header, leaving the
    // usual ones to the upstream provider.
    Builtin {
        name: "cloudflare-ai-gateway",
        key_vars: &["CLOUDFLARE_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://gateway.ai.cloudflare.com/v1/{CLOUDFLARE_ACCOUNT_ID}/{CLOUDFLARE_GATEWAY_ID}/compat",
        default_model: "workers-ai/@cf/moonshotai/kimi-k2.7-code",
        catalog: include_str!("../../data/models/cloudflare-ai-gateway.json"),
        address_vars: &["CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_GATEWAY_ID"],
        key_header: Some("cf-aig-authorization"),
    },
    // Cloudflare Workers AI: the account fills its address.
    Builtin {
        name: "cloudflare-workers-ai",
        key_vars: &["CLOUDFLARE_API_KEY"],
        api: Api::OpenAiCompletions,
        base_url: "https://api.cloudflare.com/client/v4/accounts/{CLOUDFLARE_ACCOUNT_ID}/ai/v1",
        default_model: "@cf/moonshotai/kimi-k2.7-code",
        catalog: include_str!("../../data/models/cloudflare-workers-ai.json"),
        address_vars: &["CLOUDFLARE_ACCOUNT_ID"],
        key_header: None,
    },
    // Vertex AI with an API key (its express mode); Pi also signs in with Application Default
    // Credentials, which nova does not.
    Builtin {
        name: "google-vertex",
        key_vars: &["GOOGLE_CLOUD_API_KEY"],
        api: Api::GoogleGenerativeAi,
        base_url: super::catalog::VERTEX_EXPRESS_URL,
        default_model: "gemini-4-argon",
        catalog: include_str!("../../data/models/google-vertex.json"),
        address_vars: &[],
        key_header: None,
    },
];

/// The built-in provider called `name`.
pub fn find(name: &str) -> Option<&'static Builtin> {
    CATALOG.iter().find(|b| b.name == name)
}

/// The api and base URL a models.json entry for a built-in provider inherits.
pub fn defaults(provider: &str) -> Option<(&'static str, &'static str)> {
    find(provider).map(|b| (b.api.as_str(), b.base_url))
}

/// Whether the environment holds AWS credentials Bedrock can use without a bearer token (a
/// profile, or access keys), which enable `amazon-bedrock` as they do in Pi.
pub fn aws_enabled(var: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.is_empty());
    set("AWS_PROFILE") || (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
}

/// The key in the built-in provider's variable, when it is set and not empty.
pub fn env_key(provider: &str) -> Option<String> {
    find(provider)?
        .key_vars
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|k| !k.is_empty()))
}

impl Builtin {
    /// The provider as the registry holds it, and its models from the compiled-in catalog.
    pub fn provider_and_models(&self) -> Result<(ProviderConfig, Vec<Model>), String> {
        self.provider_and_models_from(self.catalog)
    }

    /// The provider and its models from `text`, a catalog file (the compiled-in one, or one
    /// `nova update --models` fetched). Models on an API nova cannot reach are left out.
    pub fn provider_and_models_from(
        &self,
        text: &str,
    ) -> Result<(ProviderConfig, Vec<Model>), String> {
        let entries = catalog::parse(text).map_err(|e| format!("{} catalog: {e}", self.name))?;
        let model_headers = entries
            .iter()
            .filter(|e| !e.headers.is_empty())
            .map(|e| (e.id.clone(), e.headers.clone().into_iter().collect()))
            .collect();
        let mut models: Vec<Model> = entries.iter().filter_map(|e| e.model(self.name)).collect();
        if let Some(i) = models.iter().position(|m| m.id == self.default_model) {
            models[..=i].rotate_right(1);
        }
        let provider = ProviderConfig {
            name: self.name.to_owned(),
            api: self.api,
            base_url: self.base_url.to_owned(),
            api_key: None,
            headers: Vec::new(),
            model_headers,
        };
        Ok((provider, models))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::ThinkingLevel::*;
    use serde_json::Value;
    use std::path::Path;

    fn models(name: &str) -> Vec<Model> {
        find(name).unwrap().provider_and_models().unwrap().1
    }

    /// Every catalog file parses, every model is on an API nova speaks with sane numbers, ids
    /// are unique per provider, and each file has its provider in the table (and back).
    #[test]
    fn the_catalog_is_sound() {
        let mut names: Vec<&str> = CATALOG.iter().map(|b| b.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOG.len(), "provider names are unique");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/models");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|f| f.strip_suffix(".json").map(str::to_owned))
            .filter(|f| f != "source")
            .collect();
        files.sort_unstable();
        assert_eq!(
            files, names,
            "a catalog file for each provider, and no other"
        );
        let source: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("source.json")).unwrap())
                .unwrap();
        // Models whose thinking format nova does not speak: listed, thinking the detected way.
        let mut unsupported = Vec::new();
        for builtin in CATALOG {
            for var in builtin.key_vars {
                assert!(var.contains("_KEY") || var.contains("_TOKEN"), "{var}");
            }
            let entries = catalog::parse(builtin.catalog).unwrap();
            let (provider, models) = builtin.provider_and_models().unwrap();
            assert_eq!(
                source["models"][builtin.name].as_u64(),
                Some(entries.len() as u64),
                "source.json counts {}",
                builtin.name
            );
            assert_eq!(
                models.len(),
                entries.len(),
                "every {} model is reachable",
                builtin.name
            );
            assert_eq!(
                models[0].id, builtin.default_model,
                "{} starts on Pi's default",
                builtin.name
            );
            let mut ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(
                ids.len(),
                models.len(),
                "ids are unique in {}",
                provider.name
            );
            for m in &models {
                let what = format!("{}/{}", m.provider, m.id);
                assert!(!m.name.is_empty(), "{what}");
                assert!(m.context_window >= 1024, "{what}");
                assert!(
                    m.max_tokens >= 256 && m.max_tokens <= m.context_window,
                    "{what}"
                );
                let c = &m.cost;
                for price in [c.input, c.output, c.cache_read, c.cache_write] {
                    assert!(
                        price.is_finite() && (0.0..1000.0).contains(&price),
                        "{what}"
                    );
                }
                assert!(m.input.iter().any(|i| i == "text"), "{what}");
                assert!(
                    m.input.iter().all(|i| i == "text" || i == "image"),
                    "{what}"
                );
                let placeholders = m.base_url.matches('{').count();
                assert_eq!(placeholders, builtin.address_vars.len(), "{what}");
                for var in builtin.address_vars {
                    assert!(m.base_url.contains(&format!("{{{var}}}")), "{what}");
                }
                if let Some(compat) = &m.compat {
                    let mut warnings = Vec::new();
                    crate::provider::compat::check(&what, compat.written(), &mut warnings);
                    if warnings.iter().all(|w| w.contains("not supported by nova")) {
                        unsupported.extend(warnings.iter().map(|_| what.clone()));
                    } else {
                        panic!("{warnings:?}");
                    }
                }
                if m.reasoning {
                    assert!(m.thinking_levels().iter().any(|l| *l != Off), "{what}");
                }
            }
        }
        assert_eq!(
            unsupported,
            ["baseten/zai-org/GLM-5.2", "baseten/zai-org/GLM-5.2-Fast"]
        );
    }

    #[test]
    fn models_keep_their_own_api_address_and_compat() {
        let copilot = models("github-copilot");
        let api_of = |id: &str| copilot.iter().find(|m| m.id == id).unwrap().api;
        assert_eq!(copilot[0].id, "gpt-6.1-sol");
        assert_eq!(api_of("gpt-6.1-sol"), Api::OpenAiResponses);
        assert_eq!(api_of("claude-opus-5.5"), Api::AnthropicMessages);
        assert_eq!(api_of("gemini-4-argon"), Api::OpenAiCompletions);
        let (provider, _) = find("nvidia").unwrap().provider_and_models().unwrap();
        assert!(
            provider
                .model_headers
                .values()
                .all(|h| h.contains(&("NVCF-POLL-SECONDS".to_owned(), "3600".to_owned())))
        );
        let kimi = models("kimi-coding");
        let compat = kimi[0].compat.as_ref().unwrap();
        assert_eq!(compat.flags.supports_store, Some(false));
        let claude = models("anthropic");
        assert!(claude.iter().all(|m| m.accepts_images() && m.reasoning));
        assert_eq!(
            defaults("openai"),
            Some(("openai-responses", "https://api.openai.com/v1"))
        );
        let sonnet = claude.iter().find(|m| m.id == "claude-sonnet-4-5").unwrap();
        assert!(!sonnet.adaptive_thinking());
        assert_eq!(sonnet.thinking_levels().last(), Some(&High));
        let opus = &claude[0];
        assert_eq!(opus.id, "claude-opus-5-5");
        assert!(opus.adaptive_thinking());
        assert_eq!(opus.thinking_levels(), [Low, Medium, High, Xhigh, Max]);
        let mistral = models("mistral");
        assert!(
            mistral
                .iter()
                .all(|m| m.api == Api::OpenAiCompletions
                    && m.base_url == "https://api.mistral.ai/v1")
        );
        let vertex = models("google-vertex");
        assert!(
            vertex
                .iter()
                .all(|m| m.api == Api::GoogleGenerativeAi
                    && m.base_url == catalog::VERTEX_EXPRESS_URL)
        );
        let openrouter = models("openrouter");
        assert!(openrouter.iter().any(|m| m.id == "qwen/qwen3-coder"));
    }
}
