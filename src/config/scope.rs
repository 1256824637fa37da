//! The model scope: `--models a,b` or the `enabledModels` setting, Pi's patterns for the models
//! `cycle_model` goes through. A pattern is an id, a `provider/id`, or a case-insensitive glob
//! matched against both; any of them may end in `:<thinking level>`.

use super::Registry;
use crate::glob::{Case, Glob};
use crate::protocol::{Model, ThinkingLevel};

/// A model in the scope, with the thinking level its pattern named.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedModel {
    pub model: Model,
    pub thinking: Option<ThinkingLevel>,
}

/// The models `patterns` name, in pattern order and each once. A pattern that names nothing is
/// reported in `warnings` and skipped.
pub fn resolve(
    patterns: &[String],
    registry: &Registry,
    warnings: &mut Vec<String>,
) -> Vec<ScopedModel> {
    let mut scope: Vec<ScopedModel> = Vec::new();
    for pattern in patterns.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let (base, thinking) = split_thinking(pattern);
        let matches = matching(base, registry);
        if matches.is_empty() {
            warnings.push(format!("no models match pattern \"{pattern}\""));
        }
        for model in matches {
            if !scope.iter().any(|s| same(&s.model, model)) {
                scope.push(ScopedModel {
                    model: model.clone(),
                    thinking,
                });
            }
        }
    }
    scope
}

pub fn same(a: &Model, b: &Model) -> bool {
    a.provider == b.provider && a.id == b.id
}

/// `base:level` when the suffix is a level name; model ids such as `qwen3:8b` keep their colon.
pub(super) fn split_thinking(pattern: &str) -> (&str, Option<ThinkingLevel>) {
    match pattern.rsplit_once(':') {
        Some((base, suffix)) => match ThinkingLevel::parse(suffix) {
            Some(level) => (base, Some(level)),
            None => (pattern, None),
        },
        None => (pattern, None),
    }
}

fn matching<'a>(pattern: &str, registry: &'a Registry) -> Vec<&'a Model> {
    // An exact reference first: ids may contain glob characters (`name[1m]`).
    if let Some(model) = registry.resolve(None, pattern) {
        return vec![model];
    }
    if !pattern.contains(['*', '?', '[']) {
        return Vec::new();
    }
    // `*` stops at `/` (as in Pi's globs), so `*qwen*` is tried against the bare id too.
    let Ok(glob) = Glob::path(pattern, Case::Insensitive) else {
        return Vec::new();
    };
    registry
        .models()
        .iter()
        .filter(|m| glob.is_match(format!("{}/{}", m.provider, m.id)) || glob.is_match(&m.id))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        Registry::from_json(
            r#"{"providers": {
                "local": {"baseUrl": "http://x", "api": "ollama", "models": [
                    {"id": "qwen3:8b", "reasoning": true}, {"id": "gemma3:12b"}]},
                "remote": {"baseUrl": "http://y", "api": "openai-completions", "models": [
                    {"id": "Qwen3-Coder"}]}}}"#,
            &mut Vec::new(),
        )
        .unwrap()
    }

    fn names(scope: &[ScopedModel]) -> Vec<String> {
        scope
            .iter()
            .map(|s| {
                let level = s.thinking.map(|l| format!(":{}", l.as_str()));
                format!(
                    "{}/{}{}",
                    s.model.provider,
                    s.model.id,
                    level.unwrap_or_default()
                )
            })
            .collect()
    }

    #[test]
    fn ids_globs_and_levels() {
        let registry = registry();
        let mut warnings = Vec::new();
        let patterns: Vec<String> = ["gemma3:12b:high", "*qwen*", "local/qwen3:8b", "nope"]
            .map(String::from)
            .to_vec();
        let scope = resolve(&patterns, &registry, &mut warnings);
        assert_eq!(
            names(&scope),
            [
                "local/gemma3:12b:high",
                "local/qwen3:8b",
                "remote/Qwen3-Coder"
            ]
        );
        assert_eq!(warnings, ["no models match pattern \"nope\""]);
        assert_eq!(split_thinking("qwen3:8b"), ("qwen3:8b", None));
    }
}
