//! Providers an extension registers for its session (Pi's `pi.registerProvider(name, config)`
//! in its models.json form), laid over the [`Registry`] without changing it: the registry is
//! the process's, a registration belongs to one session.
//!
//! Credentials follow the address, not the name. The user's keys (auth.json, OAuth logins,
//! `--api-key`, models.json's `apiKey` and `headers`, a built-in provider's variable) go only
//! to an address the user's own registry has for that provider; a model an extension adds or
//! moves elsewhere gets only the key and headers the extension gave. Pi hands the provider's
//! stored key to whatever `baseUrl` an extension sets; nova does not, so that registering
//! `anthropic` with a new `baseUrl` cannot collect the user's Anthropic key.

use super::{Credentials, RawProvider, Registry, builtin, model_headers, models_of};
use crate::protocol::Model;
use crate::secret;
use serde_json::Value;
use std::collections::BTreeMap;

/// One extension's provider: models it adds (replacing the provider's), or a new address and
/// headers for the provider's models.
#[derive(Debug, Clone, PartialEq)]
pub struct Registered {
    pub name: String,
    base_url: Option<String>,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
    model_headers: BTreeMap<String, Vec<(String, String)>>,
    /// The models it declares, which replace the provider's; `None` keeps them.
    models: Option<Vec<Model>>,
}

impl Registry {
    /// Reads an extension's registration of `name`; problems that do not stop a model from
    /// working (a bad `compat` value) go to `warnings`.
    pub fn register(
        &self,
        name: &str,
        config: Value,
        warnings: &mut Vec<String>,
    ) -> Result<Registered, String> {
        let declares_models = config.get("models").is_some_and(|m| !m.is_null());
        let raw: RawProvider = serde_path_to_error::deserialize(config).map_err(|e| {
            match e.path().to_string().as_str() {
                "." => format!("provider \"{name}\": {}", e.into_inner()),
                path => format!("provider \"{name}\": at {path}: {}", e.into_inner()),
            }
        })?;
        // Pi would run these. An extension runs what it likes in its own process already, so
        // refusing them takes nothing from it; what it prevents is nova running a command
        // named by data an extension passed on (a server's model list), in nova's process.
        let commands = raw
            .api_key
            .iter()
            .map(|v| ("apiKey".to_owned(), v))
            .chain(
                raw.headers
                    .iter()
                    .map(|(n, v)| (format!("header \"{n}\""), v)),
            )
            .chain(
                raw.models
                    .iter()
                    .flat_map(|m| &m.headers)
                    .map(|(n, v)| (format!("header \"{n}\""), v)),
            );
        for (what, value) in commands {
            if value.starts_with('!') {
                return Err(format!(
                    "provider \"{name}\": {what} is a `!command`, which nova does not run for \
                     an extension (run it in the extension and pass its output)"
                ));
            }
        }
        let configured = self.provider(name);
        let (default_api, default_base) = builtin::defaults(name).unzip();
        let api = raw
            .api
            .as_deref()
            .or(configured.map(|c| c.api.as_str()))
            .or(default_api);
        let base = raw
            .base_url
            .as_deref()
            .or(configured
                .map(|c| c.base_url.as_str())
                .filter(|b| !b.is_empty()))
            .or(default_base);
        let models = if declares_models {
            Some(models_of(name, &raw, api, base, warnings)?)
        } else if self.models.iter().any(|m| m.provider == name) {
            None
        } else {
            return Err(format!(
                "provider \"{name}\": declares no models, and there is no provider of that name \
                 whose models it could change"
            ));
        };
        Ok(Registered {
            name: name.to_owned(),
            base_url: raw
                .base_url
                .as_deref()
                .map(|b| b.trim_end_matches('/').to_owned()),
            api_key: raw.api_key.clone(),
            headers: raw.headers.clone().into_iter().collect(),
            model_headers: model_headers(&raw),
            models,
        })
    }

    /// The registry's models with `registered` laid over them, in registration order.
    pub fn models_with(&self, registered: &[Registered]) -> Vec<Model> {
        let mut models = self.models.clone();
        for r in registered {
            match &r.models {
                Some(own) => {
                    models.retain(|m| m.provider != r.name);
                    models.extend(own.iter().cloned());
                }
                None => {
                    for m in models.iter_mut().filter(|m| m.provider == r.name) {
                        if let Some(base) = &r.base_url {
                            m.base_url.clone_from(base);
                        }
                    }
                }
            }
        }
        models
    }

    pub fn find_with(&self, registered: &[Registered], provider: &str, id: &str) -> Option<Model> {
        self.models_with(registered)
            .into_iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    /// The credentials for a request to `model`, given the extension's registration of its
    /// provider, if any (see the module's note on where the user's keys go).
    pub async fn credentials_with(
        &self,
        registered: Option<&Registered>,
        model: &Model,
    ) -> Result<Credentials, super::ConfigError> {
        let users_address = self
            .models
            .iter()
            .any(|m| m.provider == model.provider && m.base_url == model.base_url)
            || self.provider(&model.provider).is_some_and(|p| {
                !p.base_url.is_empty() && p.base_url.trim_end_matches('/') == model.base_url
            });
        let mut credentials = if users_address {
            self.credentials(model).await?
        } else {
            Credentials::default()
        };
        let Some(r) = registered else {
            return Ok(credentials);
        };
        let failed = |what: String| {
            move |reason| super::ConfigError::Secret {
                what,
                provider: r.name.clone(),
                reason,
            }
        };
        if let Some(raw) = &r.api_key {
            let key = secret::resolve(raw, secret::Syntax::Template, None)
                .await
                .map_err(failed("the extension's apiKey".to_owned()))?;
            credentials.api_key = Some(key).filter(|k| !k.is_empty());
        }
        let own = r.model_headers.get(&model.id).into_iter().flatten();
        for (name, raw) in r.headers.iter().chain(own) {
            let value = secret::resolve(raw, secret::Syntax::Template, None)
                .await
                .map_err(failed(format!("the extension's header \"{name}\"")))?;
            credentials
                .headers
                .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            credentials.headers.push((name.clone(), value));
        }
        Ok(credentials)
    }
}
