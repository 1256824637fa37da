//! Providers nova knows without a models.json entry, as Pi's built-in model list does: the
//! `anthropic` provider with the current Claude models, enabled by `ANTHROPIC_API_KEY` (or an
//! `apiKey` for `anthropic` in models.json). models.json can change the provider and add or
//! replace its models; see [`super::Registry::add_builtin`].

use super::models::ProviderConfig;
use crate::protocol::{LoadOptions, Model, ModelCost, ThinkingLevel, ThinkingLevelMap};
use crate::provider::Api;
use ThinkingLevel::*;

pub const ANTHROPIC: &str = "anthropic";
/// Where the `anthropic` provider reads its key when models.json gives none.
pub const ANTHROPIC_KEY_VAR: &str = "ANTHROPIC_API_KEY";
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
const ANTHROPIC_API: &str = "anthropic-messages";

/// The api and base URL a models.json entry for a built-in provider inherits.
pub fn defaults(provider: &str) -> Option<(&'static str, &'static str)> {
    (provider == ANTHROPIC).then_some((ANTHROPIC_API, ANTHROPIC_BASE_URL))
}

/// One Claude model as Pi 1.6's catalogue describes it; every one reasons and takes images.
struct Row {
    id: &'static str,
    name: &'static str,
    /// Dollars per million tokens: input, output, cache read, cache write.
    cost: [f64; 4],
    context_window: u64,
    max_tokens: u64,
    /// Thinks with an effort level instead of a token budget.
    adaptive: bool,
    /// The thinking level map; `None` marks a level the model does not offer.
    levels: &'static [(ThinkingLevel, Option<&'static str>)],
}

/// The default model comes first: nova starts on the first model it knows.
const CLAUDE: &[Row] = &[
    Row {
        id: "claude-opus-5-5",
        name: "Claude Opus 5.5",
        cost: [4.0, 20.0, 0.2, 5.0],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[
            (Off, None),
            (Minimal, None),
            (Low, Some("low")),
            (Medium, Some("medium")),
            (High, Some("high")),
            (Xhigh, Some("xhigh")),
            (Max, Some("max")),
        ],
    },
    Row {
        id: "claude-fable-5",
        name: "Claude Fable 5",
        cost: [10.0, 50.0, 1.0, 12.5],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Off, None), (Xhigh, Some("xhigh")), (Max, Some("max"))],
    },
    Row {
        id: "claude-fable-5-1",
        name: "Claude Fable 5.1",
        cost: [10.0, 50.0, 0.25, 12.5],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Off, None), (Xhigh, Some("xhigh")), (Max, Some("max"))],
    },
    Row {
        id: "claude-fable-5-2",
        name: "Claude Fable 5.2",
        cost: [8.0, 40.0, 0.2, 10.0],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Off, None), (Xhigh, Some("xhigh")), (Max, Some("max"))],
    },
    Row {
        id: "claude-haiku-4-5",
        name: "Claude Haiku 4.5 (latest)",
        cost: [1.0, 5.0, 0.1, 1.25],
        context_window: 200_000,
        max_tokens: 64_000,
        adaptive: false,
        levels: &[],
    },
    Row {
        id: "claude-haiku-4-5-20251001",
        name: "Claude Haiku 4.5",
        cost: [1.0, 5.0, 0.1, 1.25],
        context_window: 200_000,
        max_tokens: 64_000,
        adaptive: false,
        levels: &[],
    },
    Row {
        id: "claude-haiku-5-5",
        name: "Claude Haiku 5.5",
        cost: [0.1, 0.5, 0.01, 0.125],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[
            (Minimal, None),
            (Low, Some("low")),
            (Medium, Some("medium")),
            (High, Some("high")),
            (Xhigh, Some("xhigh")),
            (Max, Some("max")),
        ],
    },
    Row {
        id: "claude-opus-4-5",
        name: "Claude Opus 4.5 (latest)",
        cost: [5.0, 25.0, 0.5, 6.25],
        context_window: 200_000,
        max_tokens: 64_000,
        adaptive: false,
        levels: &[],
    },
    Row {
        id: "claude-opus-4-5-20251101",
        name: "Claude Opus 4.5",
        cost: [5.0, 25.0, 0.5, 6.25],
        context_window: 200_000,
        max_tokens: 64_000,
        adaptive: false,
        levels: &[],
    },
    Row {
        id: "claude-opus-4-6",
        name: "Claude Opus 4.6",
        cost: [5.0, 25.0, 0.5, 6.25],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Max, Some("max"))],
    },
    Row {
        id: "claude-opus-4-7",
        name: "Claude Opus 4.7",
        cost: [5.0, 25.0, 0.5, 6.25],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Xhigh, Some("xhigh")), (Max, Some("max"))],
    },
    Row {
        id: "claude-opus-4-8",
        name: "Claude Opus 4.8",
        cost: [5.0, 25.0, 0.5, 6.25],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Xhigh, Some("xhigh")), (Max, Some("max"))],
    },
    Row {
        id: "claude-opus-5",
        name: "Claude Opus 5",
        cost: [5.0, 25.0, 0.5, 6.25],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Xhigh, Some("xhigh")), (Max, Some("max"))],
    },
    Row {
        id: "claude-sonnet-4-5",
        name: "Claude Sonnet 4.5 (latest)",
        cost: [3.0, 15.0, 0.3, 3.75],
        context_window: 200_000,
        max_tokens: 64_000,
        adaptive: false,
        levels: &[],
    },
    Row {
        id: "claude-sonnet-4-5-20250929",
        name: "Claude Sonnet 4.5",
        cost: [3.0, 15.0, 0.3, 3.75],
        context_window: 200_000,
        max_tokens: 64_000,
        adaptive: false,
        levels: &[],
    },
    Row {
        id: "claude-sonnet-4-6",
        name: "Claude Sonnet 4.6",
        cost: [3.0, 15.0, 0.3, 3.75],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Max, Some("max"))],
    },
    Row {
        id: "claude-sonnet-5",
        name: "Claude Sonnet 5",
        cost: [2.0, 10.0, 0.2, 2.5],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[(Xhigh, Some("xhigh")), (Max, Some("max"))],
    },
    Row {
        id: "claude-sonnet-5-5",
        name: "Claude Sonnet 5.5",
        cost: [2.0, 10.0, 0.1, 2.5],
        context_window: 1_000_000,
        max_tokens: 128_000,
        adaptive: true,
        levels: &[
            (Off, None),
            (Minimal, None),
            (Low, Some("low")),
            (Medium, Some("medium")),
            (High, Some("high")),
            (Xhigh, Some("xhigh")),
            (Max, Some("max")),
        ],
    },
];

/// The built-in `anthropic` provider and its models.
pub fn anthropic() -> (ProviderConfig, Vec<Model>) {
    let provider = ProviderConfig {
        name: ANTHROPIC.to_owned(),
        api: Api::AnthropicMessages,
        base_url: ANTHROPIC_BASE_URL.to_owned(),
        api_key: None,
        headers: vec![],
        model_headers: Default::default(),
    };
    let models = CLAUDE.iter().map(model).collect();
    (provider, models)
}

fn model(row: &Row) -> Model {
    let [input, output, cache_read, cache_write] = row.cost;
    let map: ThinkingLevelMap = row
        .levels
        .iter()
        .map(|(level, value)| (*level, value.map(str::to_owned)))
        .collect();
    Model {
        id: row.id.to_owned(),
        name: row.name.to_owned(),
        api: Api::AnthropicMessages,
        provider: ANTHROPIC.to_owned(),
        base_url: ANTHROPIC_BASE_URL.to_owned(),
        reasoning: true,
        input: vec!["text".to_owned(), "image".to_owned()],
        cost: ModelCost {
            input,
            output,
            cache_read,
            cache_write,
        },
        context_window: row.context_window,
        max_tokens: row.max_tokens,
        thinking_level_map: (!map.is_empty()).then_some(map),
        compat: row
            .adaptive
            .then(|| serde_json::json!({"forceAdaptiveThinking": true}).into()),
        load: LoadOptions::default(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sound() {
        let (provider, models) = anthropic();
        assert_eq!(provider.api, Api::AnthropicMessages);
        assert_eq!(models[0].id, "claude-opus-5-5");
        let mut ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), models.len(), "ids are unique");
        for m in &models {
            assert!(m.max_tokens < m.context_window, "{}", m.id);
            assert!(m.cost.cache_read < m.cost.input, "{}", m.id);
            assert!(m.accepts_images() && m.reasoning, "{}", m.id);
        }
        let sonnet = models.iter().find(|m| m.id == "claude-sonnet-4-5").unwrap();
        assert!(!sonnet.adaptive_thinking());
        assert_eq!(sonnet.thinking_levels().last(), Some(&High));
        let opus = models.iter().find(|m| m.id == "claude-opus-5-5").unwrap();
        assert!(opus.adaptive_thinking());
        assert_eq!(opus.thinking_levels(), [Low, Medium, High, Xhigh, Max]);
    }
}
