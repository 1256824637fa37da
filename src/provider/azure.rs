//! Where an Azure OpenAI request goes, decided as Pi 1.6 decides it: the base URL
//! (`AZURE_OPENAI_BASE_URL`, else `https://<AZURE_OPENAI_RESOURCE_NAME>.openai.azure.com/openai/v1`,
//! else the model's `baseUrl`; an Azure host's bare or `/openai` path becomes `/openai/v1`), the
//! `api-version` query (`AZURE_OPENAI_API_VERSION`, else `v1`) and the deployment the request
//! names as its model (`AZURE_OPENAI_DEPLOYMENT_NAME_MAP`, `id=deployment,…`, else the model's
//! id). The reply is OpenAI's Responses stream, read by [`super::openai_responses`].

/// Pi's default `api-version`: the v1 API, which takes the deployment as the body's model.
const DEFAULT_API_VERSION: &str = "v1";

/// An Azure OpenAI request's address and model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub base_url: String,
    pub api_version: String,
    pub deployment: String,
}

/// The target for `model_id` (configured at `base_url`), reading variables through `var`.
pub fn target(
    model_id: &str,
    base_url: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Target, String> {
    let get = |name: &str| {
        var(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let base = get("AZURE_OPENAI_BASE_URL")
        .or_else(|| {
            get("AZURE_OPENAI_RESOURCE_NAME")
                .map(|name| format!("https://{name}.openai.azure.com/openai/v1"))
        })
        .or_else(|| Some(base_url.trim().to_owned()).filter(|b| !b.is_empty()))
        .ok_or_else(|| {
            "Azure OpenAI needs a base URL: set AZURE_OPENAI_BASE_URL or \
             AZURE_OPENAI_RESOURCE_NAME, or the provider's baseUrl"
                .to_owned()
        })?;
    let deployment = get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP")
        .and_then(|map| deployment_for(&map, model_id))
        .unwrap_or_else(|| model_id.to_owned());
    Ok(Target {
        base_url: normalise(&base)?,
        api_version: get("AZURE_OPENAI_API_VERSION")
            .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned()),
        deployment,
    })
}

/// `<base>/responses?api-version=<version>`.
pub fn endpoint(target: &Target) -> String {
    let version: String = target
        .api_version
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("{}/responses?api-version={version}", target.base_url)
}

/// The deployment `map` (`id=deployment,…`) names for `model_id`.
fn deployment_for(map: &str, model_id: &str) -> Option<String> {
    map.split(',').find_map(|entry| {
        let (id, deployment) = entry.split_once('=')?;
        (id.trim() == model_id && !deployment.trim().is_empty())
            .then(|| deployment.trim().to_owned())
    })
}

/// An Azure host's base with no API path gets `/openai/v1`; any other URL stays as it is.
fn normalise(base: &str) -> Result<String, String> {
    let trimmed = base.trim_end_matches('/');
    let mut url = reqwest::Url::parse(trimmed)
        .map_err(|e| format!("invalid Azure OpenAI base URL {trimmed}: {e}"))?;
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let azure = [
        ".openai.azure.com",
        ".cognitiveservices.azure.com",
        ".ai.azure.com",
    ]
    .iter()
    .any(|suffix| host.ends_with(suffix));
    let path = url.path().trim_end_matches('/').to_owned();
    if azure && matches!(path.as_str(), "" | "/openai" | "/openai/v1/responses") {
        url.set_path("/openai/v1");
        url.set_query(None);
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn resolve(vars: &[(&str, &str)], model: &str, base: &str) -> Result<Target, String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        let var = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        target(model, base, &var)
    }

    #[test]
    fn base_url_version_and_deployment_as_pi_resolves_them() {
        let t = resolve(&[("AZURE_OPENAI_RESOURCE_NAME", "acme")], "gpt-5.5", "").unwrap();
        assert_eq!(t.base_url, "https://acme.openai.azure.com/openai/v1");
        assert_eq!(
            (t.api_version.as_str(), t.deployment.as_str()),
            ("v1", "gpt-5.5")
        );
        assert_eq!(
            endpoint(&t),
            "https://acme.openai.azure.com/openai/v1/responses?api-version=v1"
        );
        let t = resolve(
            &[
                (
                    "AZURE_OPENAI_BASE_URL",
                    "https://acme.cognitiveservices.azure.com/",
                ),
                ("AZURE_OPENAI_RESOURCE_NAME", "ignored"),
                ("AZURE_OPENAI_API_VERSION", "2025-04-01-preview"),
                (
                    "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
                    "gpt-5=prod-5, gpt-5.5 = prod-55",
                ),
            ],
            "gpt-5.5",
            "",
        )
        .unwrap();
        assert_eq!(
            t.base_url,
            "https://acme.cognitiveservices.azure.com/openai/v1"
        );
        assert_eq!(t.deployment, "prod-55");
        assert!(endpoint(&t).ends_with("/responses?api-version=2025-04-01-preview"));
        // A model's own base URL, kept as it is when it is not Azure's.
        let t = resolve(&[], "m", "http://127.0.0.1:9/openai/v1/").unwrap();
        assert_eq!(t.base_url, "http://127.0.0.1:9/openai/v1");
        let e = resolve(&[], "m", "").unwrap_err();
        assert!(e.contains("AZURE_OPENAI_BASE_URL"), "{e}");
    }
}
