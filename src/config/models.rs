//! The model registry: `models.json` in Pi's format, or, without one, the local Ollama server's
//! models. Secrets (`apiKey`, header values) stay unresolved here and are resolved per request.

use super::{ConfigError, builtin, catalog};
use crate::protocol::{LoadOptions, Model, ModelCompat, ModelCost, ThinkingLevelMap};
use crate::provider::http::Route;
use crate::provider::{Api, aws, azure, compat, github_copilot};
use crate::secret;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

mod registered;
pub use registered::Registered;

/// Pi's defaults for fields a model entry leaves out.
const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// The context length a discovered Ollama model is loaded with at most (`ollama.maxDiscoveredContext`
/// in settings): a model's trained length can be 128K or more, and the memory Ollama sets
/// aside grows with it.
pub const DEFAULT_OLLAMA_MAX_CONTEXT: u64 = 32_768;
const DEFAULT_MAX_TOKENS: u64 = 16_384;

#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    pub name: String,
    pub api: Api,
    pub base_url: String,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    /// A model's own `headers`, by model id: sent after the provider's, a model's winning
    /// where both name one, as Pi sends them.
    pub model_headers: BTreeMap<String, Vec<(String, String)>>,
}

/// What a request to a model needs to be let in, secrets resolved.
#[derive(Debug, Default)]
pub struct Credentials {
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    /// Where a Bedrock or Azure request goes (and how a Bedrock one is signed).
    pub route: Option<Route>,
}

#[derive(Debug, Default)]
pub struct Registry {
    providers: Vec<ProviderConfig>,
    models: Vec<Model>,
    /// Output of `!command` values, run once per process as Pi caches them.
    command_cache: secret::CommandCache,
    /// Keys from auth.json, as written.
    auth: super::auth::AuthKeys,
    /// The command line's `--api-key`, for the provider it applies to.
    runtime_key: Option<(String, String)>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFile {
    providers: BTreeMap<String, RawProvider>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawProvider {
    base_url: Option<String>,
    api: Option<String>,
    api_key: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    compat: Option<Value>,
    #[serde(default)]
    models: Vec<RawModel>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawModel {
    id: String,
    name: Option<String>,
    api: Option<String>,
    base_url: Option<String>,
    #[serde(default)]
    reasoning: bool,
    thinking_level_map: Option<ThinkingLevelMap>,
    compat: Option<Value>,
    input: Option<Vec<String>>,
    context_window: Option<u64>,
    max_tokens: Option<u64>,
    #[serde(default)]
    cost: ModelCost,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// A model an Ollama server has pulled, with the context length it was trained for when the
/// server said (`/api/show`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredModel {
    pub name: String,
    pub trained_context: Option<u64>,
}

impl Registry {
    pub fn new(providers: Vec<ProviderConfig>, models: Vec<Model>) -> Self {
        Registry {
            providers,
            models,
            command_cache: secret::CommandCache::default(),
            auth: Default::default(),
            runtime_key: None,
        }
    }

    /// The keys of auth.json, used before models.json's `apiKey` as Pi uses them.
    pub fn set_auth(&mut self, auth: super::auth::AuthKeys) {
        self.auth = auth;
    }

    /// The command line's `--api-key` for `provider`: it wins over every other key.
    pub fn set_runtime_key(&mut self, provider: String, key: String) {
        self.runtime_key = Some((provider, key));
    }

    /// Whether `provider` has a key from the command line or auth.json (the sources that
    /// enable a built-in provider beside its variable and models.json).
    pub fn has_stored_key(&self, provider: &str) -> bool {
        self.runtime_key
            .as_ref()
            .is_some_and(|(p, _)| p == provider)
            || self.auth.has(provider)
    }

    /// The OAuth login auth.json holds for `provider`, unless `--api-key` replaced it.
    pub fn login(&self, provider: &str) -> Option<&super::oauth::Tokens> {
        let replaced = self
            .runtime_key
            .as_ref()
            .is_some_and(|(p, _)| p == provider);
        self.auth.oauth(provider).filter(|_| !replaced)
    }

    /// Where auth.json is (a refreshed login is written back there).
    pub fn auth_path(&self) -> &Path {
        self.auth.path()
    }

    /// Parses a models.json. `Ok(None)` when the file does not exist.
    pub fn from_file(
        path: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Registry>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        Self::from_json(&text, warnings)
            .map(Some)
            .map_err(|reason| ConfigError::ModelsJson {
                path: path.to_owned(),
                reason,
            })
    }

    /// Parses a models.json; problems that do not stop a model from working (a bad `compat`
    /// value) go to `warnings`.
    pub fn from_json(text: &str, warnings: &mut Vec<String>) -> Result<Registry, String> {
        let raw: RawFile =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
                .map_err(|e| match e.path().to_string().as_str() {
                    "." => e.into_inner().to_string(),
                    path => format!("at {path}: {}", e.into_inner()),
                })?;
        let mut providers = Vec::new();
        let mut models = Vec::new();
        for (name, p) in raw.providers {
            let model_headers = model_headers(&p);
            // A built-in provider's entry changes that provider, so it inherits its api and URL.
            let (default_api, default_base) = builtin::defaults(&name).unzip();
            let provider_api = p.api.as_deref().or(default_api);
            let provider_base = p.base_url.as_deref().or(default_base);
            models.extend(models_of(&name, &p, provider_api, provider_base, warnings)?);
            let api = match provider_api {
                Some(a) => parse_api(&name, a)?,
                None => Api::OpenAiCompletions,
            };
            providers.push(ProviderConfig {
                api,
                base_url: provider_base.unwrap_or_default().to_owned(),
                name,
                api_key: p.api_key,
                headers: p.headers.into_iter().collect(),
                model_headers,
            });
        }
        Ok(Registry::new(providers, models))
    }

    /// The zero-configuration registry: one `ollama` provider and the models its server lists.
    /// Each model's window is its trained context length capped at `max_context`, and Ollama
    /// is asked to load it with that much (128,000 and the server's own length when the server
    /// did not say).
    pub fn ollama_default(
        base_url: &str,
        discovered: Vec<DiscoveredModel>,
        max_context: u64,
    ) -> Registry {
        let base_url = base_url.trim_end_matches('/').to_owned();
        let models = discovered
            .into_iter()
            .map(|d| {
                let num_ctx = d.trained_context.map(|t| t.min(max_context));
                (d.name, num_ctx)
            })
            .map(|(id, num_ctx)| Model {
                name: id.clone(),
                id,
                api: Api::Ollama,
                provider: "ollama".to_owned(),
                base_url: base_url.clone(),
                reasoning: false,
                input: vec!["text".to_owned()],
                cost: ModelCost::default(),
                context_window: num_ctx.unwrap_or(DEFAULT_CONTEXT_WINDOW),
                max_tokens: DEFAULT_MAX_TOKENS,
                thinking_level_map: None,
                compat: None,
                load: LoadOptions {
                    num_ctx,
                    keep_alive: None,
                },
            })
            .collect();
        let provider = ProviderConfig {
            name: "ollama".to_owned(),
            api: Api::Ollama,
            base_url,
            api_key: None,
            headers: vec![],
            model_headers: BTreeMap::new(),
        };
        Registry::new(vec![provider], models)
    }

    /// Adds a built-in provider's models after the configured ones. A models.json entry for the
    /// same provider keeps its settings, its base URL applies to the built-in models, its
    /// headers come after the built-in ones (so they win where both name one), and its models
    /// replace built-in ones with the same id.
    pub fn add_builtin(&mut self, provider: ProviderConfig, models: Vec<Model>) {
        let base_url = match self.provider(&provider.name) {
            Some(configured) if !configured.base_url.is_empty() => {
                Some(configured.base_url.trim_end_matches('/').to_owned())
            }
            _ => None,
        };
        let fresh: Vec<Model> = models
            .into_iter()
            .filter(|m| self.find(&m.provider, &m.id).is_none())
            .map(|m| Model {
                base_url: base_url.clone().unwrap_or(m.base_url),
                ..m
            })
            .collect();
        self.models.extend(fresh);
        match self.providers.iter_mut().find(|p| p.name == provider.name) {
            Some(configured) => {
                // A built-in model's own headers (NVIDIA's poll header) still reach it, but a
                // header the user's provider entry names is theirs to set.
                for (id, headers) in provider.model_headers {
                    let kept: Vec<(String, String)> = headers
                        .into_iter()
                        .filter(|(n, _)| {
                            !configured
                                .headers
                                .iter()
                                .any(|(c, _)| c.eq_ignore_ascii_case(n))
                        })
                        .collect();
                    if !kept.is_empty() {
                        configured.model_headers.entry(id).or_insert(kept);
                    }
                }
                let own = std::mem::take(&mut configured.headers);
                configured.headers = provider.headers.into_iter().chain(own).collect();
            }
            None => self.providers.push(provider),
        }
    }

    /// Gives every Ollama model the `ollama.keepAlive` setting.
    pub fn set_keep_alive(&mut self, keep_alive: Option<&Value>) {
        for model in self.models.iter_mut().filter(|m| m.api == Api::Ollama) {
            model.load.keep_alive = keep_alive.cloned();
        }
    }

    pub fn models(&self) -> &[Model] {
        &self.models
    }

    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        self.models
            .iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    /// Resolves `--provider`/`--model` (or the settings defaults). `model` may be `provider/id`;
    /// an exact id wins first, since ids such as `org/name` contain slashes themselves.
    pub fn resolve(&self, provider: Option<&str>, model: &str) -> Option<&Model> {
        if let Some(p) = provider {
            return self.find(p, model).or_else(|| {
                model
                    .split_once('/')
                    .filter(|(pp, _)| *pp == p)
                    .and_then(|(_, id)| self.find(p, id))
            });
        }
        self.models.iter().find(|m| m.id == model).or_else(|| {
            let (p, id) = model.split_once('/')?;
            self.find(p, id)
        })
    }

    /// The models `provider`'s login says its account may use (`availableModelIds`, which Pi
    /// stores for Copilot), when it names them.
    pub fn login_models(&self, provider: &str) -> Option<Vec<String>> {
        let ids = self
            .auth
            .oauth(provider)?
            .extra
            .get("availableModelIds")?
            .as_array()?;
        ids.iter()
            .map(|id| id.as_str().map(str::to_owned))
            .collect()
    }

    /// The variable `name` as `provider` sees it: its login's `env` in auth.json applies over
    /// the process environment, for that provider only. An empty value is no value.
    pub fn provider_var(&self, provider: &str, name: &str) -> Option<String> {
        self.auth
            .env(provider)
            .and_then(|env| env.get(name))
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .filter(|v| !v.is_empty())
    }

    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// The API key, headers and (for Bedrock) AWS target for a request to `model`, secrets
    /// resolved.
    pub async fn credentials(&self, model: &Model) -> Result<Credentials, ConfigError> {
        let Some(provider) = self.provider(&model.provider) else {
            return Ok(Credentials::default());
        };
        let runtime = self
            .runtime_key
            .as_ref()
            .filter(|(p, _)| *p == provider.name)
            .map(|(_, key)| key.clone());
        let scoped = self.auth.env(&provider.name);
        let var = |name: &str| self.provider_var(&provider.name, name);
        // Pi's order: the command line, auth.json, models.json's `apiKey`, the environment.
        let login = self
            .auth
            .oauth(&provider.name)
            .filter(|_| runtime.is_none());
        let stored = match self.auth.key(&provider.name).filter(|_| runtime.is_none()) {
            _ if let Some(tokens) = login => {
                let store = super::oauth::Store {
                    path: self.auth.path(),
                    var: &var,
                };
                Some(
                    super::oauth::access_token(&provider.name, tokens, &store)
                        .await
                        .map_err(|reason| ConfigError::Secret {
                            what: "the OAuth login".to_owned(),
                            provider: provider.name.clone(),
                            reason,
                        })?,
                )
            }
            Some(raw) => Some(
                secret::resolve_in(
                    raw,
                    secret::Syntax::Template,
                    Some(&self.command_cache),
                    var,
                )
                .await
                .map_err(|reason| ConfigError::Secret {
                    what: "auth.json key".to_owned(),
                    provider: provider.name.clone(),
                    reason,
                })?,
            ),
            None => runtime,
        };
        let key = match (&stored, &provider.api_key) {
            (Some(_), _) => stored,
            (None, None) if model.api == Api::BedrockConverseStream => None,
            (None, None) => builtin::env_key(&provider.name),
            (None, Some(raw)) => {
                Some(
                    self.resolve_value(raw)
                        .await
                        .map_err(|reason| ConfigError::Secret {
                            what: "apiKey".to_owned(),
                            provider: provider.name.clone(),
                            reason,
                        })?,
                )
            }
        };
        let key = key.filter(|k| !k.is_empty());
        let unresolved = |reason| ConfigError::Secret {
            what: match model.api {
                Api::BedrockConverseStream => "the AWS credentials",
                _ => "the address",
            }
            .to_owned(),
            provider: provider.name.clone(),
            reason,
        };
        let route = match model.api {
            Api::BedrockConverseStream => {
                let sources = aws::Sources {
                    var: &var,
                    home: std::env::var_os("HOME").map(Into::into),
                    stored_profile: scoped.is_some_and(|env| env.contains_key("AWS_PROFILE")),
                };
                let target = aws::target(&model.id, &model.base_url, key.as_deref(), &sources)
                    .map_err(unresolved)?;
                Some(Route::Aws(target))
            }
            Api::AzureOpenAiResponses => Some(Route::Azure(
                azure::target(&model.id, &model.base_url, &var).map_err(unresolved)?,
            )),
            // A catalog address naming `{VARIABLE}`s (Cloudflare's account and gateway) is
            // filled here, where the login's `env` is known.
            _ if model.base_url.contains('{') => Some(Route::Address(
                catalog::fill_address(&model.base_url, var).map_err(unresolved)?,
            )),
            // A Copilot login on GitHub Enterprise has an address of its own, used when its
            // token names none.
            _ if provider.name == github_copilot::PROVIDER => login
                .and_then(|tokens| super::oauth::providers::copilot_domain(&tokens.extra))
                .map(|domain| Route::Copilot(github_copilot::enterprise_base_url(&domain))),
            _ => None,
        };
        let own = provider.model_headers.get(&model.id).into_iter().flatten();
        let mut headers: Vec<(String, String)> = Vec::with_capacity(provider.headers.len() + 1);
        // A gateway that reads its key from a header of its own leaves the API's usual ones to
        // the provider behind it (Cloudflare's `cf-aig-authorization`).
        let mut key = key;
        if let Some(name) = builtin::find(&provider.name).and_then(|b| b.key_header)
            && let Some(k) = key.take()
        {
            headers.push((name.to_owned(), format!("Bearer {k}")));
        }
        for (name, raw) in provider.headers.iter().chain(own) {
            let value = self
                .resolve_value(raw)
                .await
                .map_err(|reason| ConfigError::Secret {
                    what: format!("header \"{name}\""),
                    provider: provider.name.clone(),
                    reason,
                })?;
            // Header names are case-insensitive: the model's replaces the provider's.
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            headers.push((name.clone(), value));
        }
        Ok(Credentials {
            api_key: key.filter(|_| !matches!(route, Some(Route::Aws(_)))),
            headers,
            route,
        })
    }

    /// A configured secret, as Pi reads models.json ([`secret::Syntax::Template`]); each
    /// `!command` runs once per process.
    pub async fn resolve_value(&self, raw: &str) -> Result<String, String> {
        secret::resolve(raw, secret::Syntax::Template, Some(&self.command_cache)).await
    }
}

/// A provider entry's models' own `headers`, by model id.
fn model_headers(p: &RawProvider) -> BTreeMap<String, Vec<(String, String)>> {
    p.models
        .iter()
        .filter(|m| !m.headers.is_empty())
        .map(|m| (m.id.clone(), m.headers.clone().into_iter().collect()))
        .collect()
}

/// The models a provider entry declares, each taking the provider's `api` and `baseUrl` where
/// it names none.
fn models_of(
    name: &str,
    p: &RawProvider,
    provider_api: Option<&str>,
    provider_base: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<Vec<Model>, String> {
    if let Some(c) = &p.compat {
        compat::check(&format!("provider \"{name}\""), c, warnings);
    }
    let mut models = Vec::with_capacity(p.models.len());
    for (i, m) in p.models.iter().enumerate() {
        if let Some(c) = &m.compat {
            compat::check(&format!("model \"{name}/{}\"", m.id), c, warnings);
        }
        let api_name = m.api.as_deref().or(provider_api).ok_or_else(|| {
            format!(
                "provider \"{name}\": models[{i}] (\"{}\") has no \"api\"",
                m.id
            )
        })?;
        let api = parse_api(name, api_name)?;
        let base_url = m.base_url.as_deref().or(provider_base).ok_or_else(|| {
            format!(
                "provider \"{name}\": models[{i}] (\"{}\") has no \"baseUrl\"",
                m.id
            )
        })?;
        models.push(Model {
            id: m.id.clone(),
            name: m.name.clone().unwrap_or_else(|| m.id.clone()),
            api,
            provider: name.to_owned(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            reasoning: m.reasoning,
            input: m.input.clone().unwrap_or_else(|| vec!["text".to_owned()]),
            cost: m.cost.clone(),
            context_window: m.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
            max_tokens: m.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            thinking_level_map: m.thinking_level_map.clone(),
            compat: compat::merge(p.compat.as_ref(), m.compat.as_ref()).map(ModelCompat::from),
            // A declared window is what the user wants the prompt to get; without one, the
            // server's own setting stands.
            load: LoadOptions {
                num_ctx: m.context_window,
                keep_alive: None,
            },
        });
    }
    Ok(models)
}

fn parse_api(provider: &str, api: &str) -> Result<Api, String> {
    Api::parse(api).ok_or_else(|| {
        let known: Vec<String> = <Api as strum::IntoEnumIterator>::iter()
            .map(|a| format!("\"{}\"", a.as_str()))
            .collect();
        format!(
            "provider \"{provider}\": unknown api \"{api}\" (nova speaks {})",
            known.join(", ")
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{"providers":{
        "local":{"baseUrl":"http://127.0.0.1:11434/","api":"ollama","models":[
            {"id":"qwen3:8b","reasoning":true},
            {"id":"org/vision","input":["text","image"],"contextWindow":32000,"maxTokens":1000,"name":"Vision"}]},
        "oai":{"baseUrl":"http://127.0.0.1:8000/v1","api":"openai-completions","apiKey":"literal-key",
            "headers":{"X-Test":"$NOVA_TEST_HEADER_VAR"},
            "models":[{"id":"gpt","cost":{"input":1.5,"output":2}}]}}}"#;

    #[test]
    fn parses_pi_format_with_defaults() {
        let r = Registry::from_json(SAMPLE, &mut Vec::new()).unwrap();
        let q = r.find("local", "qwen3:8b").unwrap();
        assert_eq!(q.name, "qwen3:8b");
        assert_eq!(q.base_url, "http://127.0.0.1:11434");
        assert_eq!((q.context_window, q.max_tokens), (128_000, 16_384));
        assert_eq!(q.input, vec!["text"]);
        assert!(q.reasoning);
        let g = r.find("oai", "gpt").unwrap();
        assert_eq!(g.cost.input, 1.5);
        assert_eq!(g.api, Api::OpenAiCompletions);
        assert_eq!(r.resolve(None, "org/vision").unwrap().name, "Vision");
        assert_eq!(r.resolve(None, "oai/gpt").unwrap().id, "gpt");
        assert_eq!(r.resolve(Some("oai"), "gpt").unwrap().id, "gpt");
        assert!(r.resolve(Some("local"), "gpt").is_none());
        assert!(r.resolve(None, "nope").is_none());
    }

    #[test]
    fn ollama_context_rule() {
        let r = Registry::from_json(SAMPLE, &mut Vec::new()).unwrap();
        // A declared window is loaded whole; an undeclared one is left to the server.
        assert_eq!(
            r.find("local", "org/vision").unwrap().load.num_ctx,
            Some(32_000)
        );
        assert_eq!(r.find("local", "qwen3:8b").unwrap().load.num_ctx, None);

        let found = |name: &str, trained| DiscoveredModel {
            name: name.into(),
            trained_context: trained,
        };
        let mut r = Registry::ollama_default(
            "http://h:11434/",
            vec![
                found("big", Some(131_072)),
                found("small", Some(8192)),
                found("quiet", None),
            ],
            DEFAULT_OLLAMA_MAX_CONTEXT,
        );
        r.set_keep_alive(Some(&serde_json::json!(-1)));
        let window = |id| {
            let m = r.find("ollama", id).unwrap();
            (m.context_window, m.load.num_ctx)
        };
        assert_eq!(window("big"), (32_768, Some(32_768)));
        assert_eq!(window("small"), (8192, Some(8192)));
        assert_eq!(window("quiet"), (DEFAULT_CONTEXT_WINDOW, None));
        assert_eq!(
            r.find("ollama", "big").unwrap().load.keep_alive,
            Some(serde_json::json!(-1))
        );
    }

    #[test]
    fn compat_is_merged_and_checked() {
        let mut warnings = Vec::new();
        let r = Registry::from_json(
            r#"{"providers":{"x":{"baseUrl":"u","api":"openai-completions",
                "compat":{"supportsStore":false,"maxTokensField":"max_tokens"},
                "models":[{"id":"m","compat":{"supportsStore":true,"requiresToolResultName":1}},
                          {"id":"n"}]}}}"#,
            &mut warnings,
        )
        .unwrap();
        assert_eq!(
            r.find("x", "m")
                .unwrap()
                .compat
                .as_ref()
                .map(|c| c.written().clone()),
            Some(
                serde_json::json!({"supportsStore": true, "maxTokensField": "max_tokens",
                                    "requiresToolResultName": 1})
            )
        );
        assert_eq!(
            r.find("x", "n")
                .unwrap()
                .compat
                .as_ref()
                .map(|c| c.written().clone()),
            Some(serde_json::json!({"supportsStore": false, "maxTokensField": "max_tokens"}))
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("model \"x/m\": compat \"requiresToolResultName\" is 1"),
            "{warnings:?}"
        );
    }

    #[test]
    fn invalid_files_say_why() {
        let e = Registry::from_json(
            r#"{"providers":{"x":{"baseUrl":"u","api":"grpc","models":[{"id":"m"}]}}}"#,
            &mut Vec::new(),
        )
        .err()
        .unwrap();
        assert!(e.contains("unknown api \"grpc\""), "{e}");
        let e = Registry::from_json(
            r#"{"providers":{"x":{"api":"ollama","models":[{"id":"m"}]}}}"#,
            &mut Vec::new(),
        )
        .err()
        .unwrap();
        assert!(e.contains("baseUrl"), "{e}");
        let e = Registry::from_json(
            r#"{"providers":{"x":{"models":[{"name":"m"}]}}}"#,
            &mut Vec::new(),
        )
        .err()
        .unwrap();
        assert!(e.contains("missing field `id`"), "{e}");
        assert!(Registry::from_json("[]", &mut Vec::new()).is_err());
    }

    #[test]
    fn models_json_changes_the_builtin_anthropic_provider() {
        let mut r = Registry::from_json(
            r#"{"providers":{
            "anthropic":{"baseUrl":"http://127.0.0.1:9/","headers":{"X-Proxy":"1"},
                "compat":{"forceAdaptiveThinking":true},
                "models":[{"id":"claude-sonnet-4-5","maxTokens":1000},
                          {"id":"my-claude","compat":{"forceAdaptiveThinking":false}}]},
            "local":{"baseUrl":"http://127.0.0.1:11434","api":"ollama","models":[{"id":"q"}]}}}"#,
            &mut Vec::new(),
        )
        .unwrap();
        let (provider, models) = builtin::find("anthropic")
            .unwrap()
            .provider_and_models()
            .unwrap();
        let builtin_count = models.len();
        r.add_builtin(provider, models);
        let mine = r.find("anthropic", "my-claude").unwrap();
        assert_eq!(mine.api, Api::AnthropicMessages);
        assert!(!mine.adaptive_thinking(), "the model's compat wins");
        let sonnet = r.find("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(
            sonnet.max_tokens, 1000,
            "models.json replaces a built-in model"
        );
        assert!(sonnet.adaptive_thinking(), "the provider's compat applies");
        let opus = r.find("anthropic", "claude-opus-4-6").unwrap();
        assert_eq!(
            opus.base_url, "http://127.0.0.1:9",
            "the base URL applies to built-ins"
        );
        assert_eq!(r.models().len(), 3 + builtin_count - 1);
        assert_eq!(
            r.models()[0].id,
            "claude-sonnet-4-5",
            "configured models come first"
        );
        assert_eq!(r.provider("anthropic").unwrap().headers.len(), 1);
    }

    #[tokio::test]
    async fn a_models_own_headers_follow_the_providers_and_win_over_them() {
        let json = r#"{"providers":{"p":{"baseUrl":"http://127.0.0.1:1","api":"anthropic-messages",
            "headers":{"X-A":"provider","X-B":"provider"},
            "models":[{"id":"own","headers":{"x-b":"model","X-C":"model"}},{"id":"plain"}]}}}"#;
        let r = Registry::from_json(json, &mut Vec::new()).unwrap();
        let headers = async |id: &str| {
            r.credentials(r.find("p", id).unwrap())
                .await
                .unwrap()
                .headers
        };
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            headers("own").await,
            pairs(&[("X-A", "provider"), ("X-C", "model"), ("x-b", "model")])
        );
        assert_eq!(
            headers("plain").await,
            pairs(&[("X-A", "provider"), ("X-B", "provider")])
        );
    }

    /// A Copilot login on GitHub Enterprise routes its requests to the enterprise's address.
    #[tokio::test]
    async fn a_copilot_enterprise_login_has_its_own_address() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let entry = serde_json::json!({"github-copilot": {"type": "oauth", "access": "tid=1",
            "refresh": "ghu_x", "expires": 4_000_000_000_000u64,
            "enterpriseUrl": "https://ghe.example.com/"}});
        std::fs::write(&path, entry.to_string()).unwrap();
        let mut r = Registry::default();
        r.set_auth(super::super::auth::load(&path, &mut Vec::new()));
        let (provider, models) = builtin::find("github-copilot")
            .unwrap()
            .provider_and_models()
            .unwrap();
        r.add_builtin(provider, models);
        let credentials = r.credentials(&r.models()[0].clone()).await.unwrap();
        assert_eq!(credentials.api_key.as_deref(), Some("tid=1"));
        assert_eq!(
            credentials.route,
            Some(Route::Copilot("https://copilot-api.ghe.example.com".into()))
        );
    }

    #[tokio::test]
    async fn anthropic_reads_its_key_from_the_environment() {
        let mut r = Registry::default();
        let (provider, models) = builtin::find("anthropic")
            .unwrap()
            .provider_and_models()
            .unwrap();
        r.add_builtin(provider, models);
        let model = r.models()[0].clone();
        assert_eq!(model.base_url, "https://api.anthropic.com");
        let key = r.credentials(&model).await.unwrap().api_key;
        assert_eq!(key, builtin::env_key("anthropic"));
    }

    #[tokio::test]
    async fn secrets_resolve_as_pi_does() {
        let r = Registry::default();
        assert_eq!(r.resolve_value("plain").await.unwrap(), "plain");
        assert_eq!(r.resolve_value("!printf ' k1 \\n'").await.unwrap(), "k1");
        assert!(
            r.resolve_value("!exit 3")
                .await
                .unwrap_err()
                .contains("failed")
        );
        assert_eq!(
            r.resolve_value("$HOME").await.unwrap(),
            std::env::var("HOME").unwrap()
        );
        assert_eq!(
            r.resolve_value("${HOME}").await.unwrap(),
            std::env::var("HOME").unwrap()
        );
        assert_eq!(
            r.resolve_value("HOME").await.unwrap(),
            std::env::var("HOME").unwrap()
        );
        assert!(
            r.resolve_value("$NOVA_SURELY_UNSET_VAR_123")
                .await
                .unwrap_err()
                .contains("NOVA_SURELY_UNSET_VAR_123")
        );
    }
}
