//! Radius's own model catalog. The gateway lists what an account may use (`GET
//! {gateway}/v1/config`: `{baseUrl, models}` in Pi's model shape); once known, that list
//! replaces Pi's baseline, since an organisation may turn models off. nova asks for it when
//! `nova login radius` succeeds and keeps it where Pi keeps it, in `models-store.json` beside
//! models.json (`{"radius": {"models": […], "checkedAt": ms}}`), so every later start reads it
//! without the network. The file is written under auth.json's lock, through the same private
//! rename, keeping the entries of other providers.

use super::oauth::http::{self, Body, Vars};
use super::oauth::{now_ms, store};
use crate::protocol::{Api, Model, ModelCost, ThinkingLevelMap};
use serde_json::{Map, Value, json};
use std::path::Path;

/// The file beside models.json holding catalogs fetched from providers.
pub const STORE_FILE: &str = "models-store.json";
const PROVIDER: &str = "radius";
const GATEWAY_CONFIG: &str = "https://radius.pi.dev/v1/config";

/// The stored catalog, when one with a usable model was kept.
pub fn cached_models(agent_dir: &Path) -> Option<Vec<Model>> {
    let all = store::read_all(&agent_dir.join(STORE_FILE)).ok()?;
    let models: Vec<Model> = all
        .get(PROVIDER)?
        .get("models")?
        .as_array()?
        .iter()
        .filter_map(|m| model(m, None))
        .collect();
    (!models.is_empty()).then_some(models)
}

/// Asks the gateway for the account's catalog with `token` and stores it; the number of models.
pub async fn refresh(agent_dir: &Path, token: &str, var: Vars<'_>) -> Result<usize, String> {
    let url = http::endpoint(GATEWAY_CONFIG, &[], var)?;
    let bearer = format!("Bearer {token}");
    let answer = http::send(&url, &[("authorization", &bearer)], Body::None, "Radius").await?;
    if !answer.ok() {
        return Err(answer.login_failure("loading the Radius model catalog", &url));
    }
    let (Some(base_url), Some(listed)) = (
        answer.field("baseUrl"),
        answer.body.get("models").and_then(Value::as_array),
    ) else {
        return Err(format!(
            "the Radius catalog at {url} lacks baseUrl or models"
        ));
    };
    let kept: Vec<Value> = listed
        .iter()
        .filter(|m| model(m, Some(base_url)).is_some())
        .map(|m| {
            let mut m = m.clone();
            m["api"] = json!(Api::PiMessages.as_str());
            m["provider"] = json!(PROVIDER);
            m["baseUrl"] = json!(base_url);
            m
        })
        .collect();
    let path = agent_dir.join(STORE_FILE);
    let lock = store::lock(&path).await?;
    let mut all = store::read_all(&path)?;
    let count = kept.len();
    let mut entry = Map::new();
    entry.insert("models".into(), Value::Array(kept));
    entry.insert("checkedAt".into(), now_ms().into());
    all.insert(PROVIDER.into(), Value::Object(entry));
    store::write_all(&path, &all)?;
    drop(lock);
    Ok(count)
}

/// One listed model, when it has every field Pi requires of one (an id, a name, whether it
/// reasons, its inputs, prices, window and output limit).
fn model(value: &Value, base_url: Option<&str>) -> Option<Model> {
    let text = |key: &str| value.get(key)?.as_str().map(str::to_owned);
    let count = |key: &str| {
        value
            .get(key)?
            .as_f64()
            .filter(|n| *n >= 0.0)
            .map(|n| n as u64)
    };
    let input: Vec<String> = value
        .get("input")?
        .as_array()?
        .iter()
        .filter_map(|i| i.as_str().map(str::to_owned))
        .collect();
    let base_url = base_url.map(str::to_owned).or_else(|| text("baseUrl"))?;
    Some(Model {
        id: text("id").filter(|id| !id.is_empty())?,
        name: text("name")?,
        api: Api::PiMessages,
        provider: PROVIDER.to_owned(),
        base_url,
        reasoning: value.get("reasoning")?.as_bool()?,
        input,
        cost: serde_json::from_value::<ModelCost>(value.get("cost")?.clone()).ok()?,
        context_window: count("contextWindow")?,
        max_tokens: count("maxTokens")?,
        thinking_level_map: value
            .get("thinkingLevelMap")
            .and_then(|m| serde_json::from_value::<ThinkingLevelMap>(m.clone()).ok()),
        compat: None,
        load: Default::default(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stored_models_are_read_and_bad_ones_skipped() {
        let dir = tempfile::tempdir().unwrap();
        assert!(cached_models(dir.path()).is_none());
        let good = json!({"id": "org-pick", "name": "Org Pick", "reasoning": true,
            "input": ["text"], "cost": {"input": 1, "output": 2, "cacheRead": 0.1,
            "cacheWrite": 0, "tiers": []}, "contextWindow": 200000, "maxTokens": 8000,
            "thinkingLevelMap": {"off": null, "high": "high"},
            "baseUrl": "https://gw.example/v1"});
        let store = json!({"radius": {"models": [good, {"id": "no-name"}], "checkedAt": 1},
                           "other": {"models": []}});
        std::fs::write(dir.path().join(STORE_FILE), store.to_string()).unwrap();
        let models = cached_models(dir.path()).unwrap();
        assert_eq!(models.len(), 1);
        assert_eq!(models[0].id, "org-pick");
        assert_eq!(models[0].api, Api::PiMessages);
        assert_eq!(models[0].base_url, "https://gw.example/v1");
        assert_eq!(models[0].max_tokens, 8000);
        assert!(models[0].thinking_level_map.is_some());
        std::fs::write(dir.path().join(STORE_FILE), "not json").unwrap();
        assert!(cached_models(dir.path()).is_none());
    }
}
