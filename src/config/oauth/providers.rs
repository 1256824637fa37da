//! The providers Pi 1.6 logs in to, one row each: how a login is refreshed and what the new
//! entry holds, in the fields Pi writes, so that either program reads what the other wrote.
//! Where Pi stores an expiry a few minutes short of the real one (its "skew"), so does nova.

use super::http::{self, Answer, Body, Vars};
use super::login::{
    Authorize, Browser, ChatGpt, CodexDevice, Device, KeyExchange, SecondLogin, Then,
};
use super::now_ms;
use serde_json::{Map, Value, json};

/// One provider's OAuth login.
pub struct Provider {
    pub id: &'static str,
    /// The person-facing name, for messages.
    pub name: &'static str,
    pub(super) refresh: Refresh,
    pub(super) login: Login,
    /// A device-code login offered beside a browser one (`nova login --device`).
    pub(super) device: Option<SecondLogin>,
}

/// How `nova login` signs in.
pub(super) enum Login {
    Browser(Browser),
    Device(Device),
    KeyExchange(KeyExchange),
    ChatGpt(ChatGpt),
}

/// How a login is refreshed.
pub(super) enum Refresh {
    /// The OAuth refresh grant at a token endpoint.
    Grant(Grant),
    /// GitHub Copilot: the stored GitHub token (`refresh`) buys a short-lived Copilot token
    /// (`access`) from GitHub's API, on github.com or the `enterpriseUrl` domain.
    Copilot,
    /// Meta: the identity token (`refresh`) mints a Model API key (`access`) for a day.
    MetaMint,
    /// OpenRouter: the login is a key that does not expire.
    Never,
}

/// A token endpoint and how to read its answers.
pub(super) struct Grant {
    pub url: &'static str,
    /// Pi's own variables naming the endpoint's host.
    pub host_vars: &'static [&'static str],
    pub client: Client,
    /// A JSON body rather than a form.
    pub json: bool,
    /// Sent with every token request (OpenAI's `resource`).
    pub extra: &'static [(&'static str, &'static str)],
    /// Milliseconds taken off the lifetime the server gives.
    pub skew: u64,
    /// The lifetime when the answer gives none (seconds); `None`: it must give one.
    pub default_lifetime: Option<f64>,
    /// Whether an answer may leave out `refresh_token`, keeping the one sent.
    pub keeps_refresh: bool,
    pub shape: Shape,
    /// Retries after a busy server (429, 5xx) or a failed connection, as Pi retries them.
    pub retries: u32,
}

pub(super) enum Client {
    Fixed(&'static str),
    /// Issued at login and stored in the entry as `clientId` (OpenAI's sign-in with ChatGPT).
    Issued,
}

/// What an entry holds besides the three tokens.
pub(super) enum Shape {
    Plain,
    /// `accountId`, read from the access token's claims (OpenAI Codex).
    CodexAccount,
    /// `clientId` and the granted `scopes`, which must include direct token use (ChatGPT).
    ChatGpt,
}

const MINUTE: u64 = 60_000;

/// The Copilot token request's client headers, as Pi sends them.
const COPILOT_HEADERS: &[(&str, &str)] = &[
    ("user-agent", "GitHubCopilotChat/0.35.0"),
    ("editor-version", "vscode/1.107.0"),
    ("editor-plugin-version", "copilot-chat/0.35.0"),
    ("copilot-integration-id", "vscode-chat"),
];
const META_MINT_URL: &str = "https://api.meta.ai/muse-code/key";
const CODEX_CLAIMS: &str = "https://api.openai.com/auth";
const CHATGPT_SCOPE: &str = "chatgpt.tokens.use.direct";
/// Pi's client at the Radius gateway, and what it asks for.
const RADIUS_CLIENT: &str = "pi-gateway";
const RADIUS_SCOPE: &str = "gateway offline_access";

pub const PROVIDERS: &[Provider] = &[
    Provider {
        id: "anthropic",
        name: "Anthropic (Claude Pro/Max)",
        refresh: Refresh::Grant(Grant {
            url: "https://platform.claude.com/v1/oauth/token",
            host_vars: &[],
            // Claude Code's public client id.
            client: Client::Fixed("9d1c250a-e61b-44d9-88ed-5944d1962f5e"),
            json: true,
            extra: &[],
            skew: 5 * MINUTE,
            default_lifetime: None,
            keeps_refresh: false,
            shape: Shape::Plain,
            retries: 0,
        }),
        login: Login::Browser(Browser {
            authorize: Authorize::At("https://claude.ai/oauth/authorize"),
            params: &[
                ("code", "true"),
                (
                    "scope",
                    "org:create_api_key user:profile user:inference user:sessions:claude_code \
                     user:mcp_servers user:file_upload",
                ),
            ],
            port: 53692,
            any_port: true,
            path: "/callback",
            redirect_host: "localhost",
            state_is_verifier: true,
            exchange_state: true,
        }),
        device: None,
    },
    Provider {
        id: "openai-codex",
        name: "OpenAI Codex (ChatGPT Plus/Pro)",
        refresh: Refresh::Grant(Grant {
            url: "https://auth.openai.com/oauth/token",
            host_vars: &[],
            // The Codex CLI's public client id.
            client: Client::Fixed("app_EMoamEEZ73f0CkXaXp7hrann"),
            json: false,
            extra: &[],
            skew: 0,
            default_lifetime: None,
            keeps_refresh: false,
            shape: Shape::CodexAccount,
            retries: 0,
        }),
        login: Login::Browser(Browser {
            authorize: Authorize::At("https://auth.openai.com/oauth/authorize"),
            params: &[
                ("scope", "openid profile email offline_access"),
                ("id_token_add_organizations", "true"),
                ("codex_cli_simplified_flow", "true"),
                // The backend knows Pi's originator (as the Codex provider sends it).
                ("originator", "pi"),
            ],
            // Shared with the Codex CLI, and fixed: when it is taken, the code is pasted.
            port: 1455,
            any_port: false,
            path: "/auth/callback",
            redirect_host: "localhost",
            state_is_verifier: false,
            exchange_state: false,
        }),
        device: Some(SecondLogin::Codex(CodexDevice {
            usercode: "https://auth.openai.com/api/accounts/deviceauth/usercode",
            poll: "https://auth.openai.com/api/accounts/deviceauth/token",
            verify: "https://auth.openai.com/codex/device",
            redirect: "https://auth.openai.com/deviceauth/callback",
        })),
    },
    Provider {
        id: "github-copilot",
        name: "GitHub Copilot",
        refresh: Refresh::Copilot,
        login: Login::Device(Device {
            // The Copilot editor plugins' GitHub app.
            client_id: "Iv1.b507a08c87ecfe98",
            start: "https://{domain}/login/device/code",
            params: &[("scope", "read:user")],
            headers: &[("user-agent", "GitHubCopilotChat/0.35.0")],
            poll: "https://{domain}/login/oauth/access_token",
            then: Then::Copilot,
        }),
        device: None,
    },
    Provider {
        id: "openai",
        name: "OpenAI (sign in with ChatGPT)",
        refresh: Refresh::Grant(Grant {
            url: "https://auth.openai.com/api/accounts/oauth/token",
            host_vars: &[],
            client: Client::Issued,
            json: false,
            extra: &[("resource", "https://api.openai.com/v1")],
            skew: 3 * MINUTE,
            default_lifetime: None,
            keeps_refresh: false,
            shape: Shape::ChatGpt,
            retries: 0,
        }),
        login: Login::ChatGpt(ChatGpt {
            authorize: "https://auth.openai.com/api/accounts/authorize",
            scope: "openid profile email offline_access resource.invoke chatgpt.tokens.use.direct",
            port: 1455,
            path: "/auth/callback",
        }),
        device: None,
    },
    Provider {
        id: "xai",
        name: "xAI (SuperGrok or X Premium)",
        refresh: Refresh::Grant(Grant {
            url: "https://auth.x.ai/oauth2/token",
            host_vars: &[],
            client: Client::Fixed("b1a00492-073a-47ea-816f-4c329264a828"),
            json: false,
            extra: &[],
            skew: 5 * MINUTE,
            default_lifetime: Some(3600.0),
            keeps_refresh: true,
            shape: Shape::Plain,
            retries: 0,
        }),
        login: Login::Device(Device {
            client_id: "b1a00492-073a-47ea-816f-4c329264a828",
            start: "https://auth.x.ai/oauth2/device/code",
            params: &[
                (
                    "scope",
                    "openid profile email offline_access grok-cli:access api:access",
                ),
                ("referrer", "pi"),
            ],
            headers: &[],
            poll: "https://auth.x.ai/oauth2/token",
            then: Then::Tokens,
        }),
        device: None,
    },
    Provider {
        id: "kimi-coding",
        name: "Kimi Code",
        refresh: Refresh::Grant(Grant {
            url: "https://auth.kimi.com/api/oauth/token",
            host_vars: &["KIMI_CODE_OAUTH_HOST", "KIMI_OAUTH_HOST"],
            client: Client::Fixed("17e5f671-d194-4dfb-9706-5516cb48c098"),
            json: false,
            extra: &[],
            skew: 0,
            default_lifetime: None,
            keeps_refresh: false,
            shape: Shape::Plain,
            retries: 3,
        }),
        login: Login::Device(Device {
            client_id: "17e5f671-d194-4dfb-9706-5516cb48c098",
            start: "https://auth.kimi.com/api/oauth/device_authorization",
            params: &[],
            headers: &[],
            poll: "https://auth.kimi.com/api/oauth/token",
            then: Then::Tokens,
        }),
        device: None,
    },
    Provider {
        id: "meta",
        name: "Meta (Muse)",
        refresh: Refresh::MetaMint,
        login: Login::Device(Device {
            // Muse Code's client id.
            client_id: "1031625952748946",
            start: "https://auth.meta.com/oidc/device/authorization/",
            params: &[],
            headers: &[],
            poll: "https://auth.meta.com/oidc/device/token/",
            then: Then::Meta,
        }),
        device: None,
    },
    // Pi's own gateway. Its token endpoint also answers the device-code poll.
    Provider {
        id: "radius",
        name: "Radius",
        refresh: Refresh::Grant(Grant {
            url: "https://radius.pi.dev/v1/oauth/token",
            host_vars: &[],
            client: Client::Fixed(RADIUS_CLIENT),
            json: false,
            extra: &[],
            skew: MINUTE,
            default_lifetime: None,
            keeps_refresh: true,
            shape: Shape::Plain,
            retries: 0,
        }),
        login: Login::Browser(Browser {
            authorize: Authorize::DiscoveredAt("https://radius.pi.dev/v1/oauth"),
            params: &[("scope", RADIUS_SCOPE), ("handoff", "url")],
            port: 1456,
            any_port: false,
            path: "/oauth/callback",
            redirect_host: "127.0.0.1",
            state_is_verifier: false,
            exchange_state: false,
        }),
        device: Some(SecondLogin::Device(Device {
            client_id: RADIUS_CLIENT,
            start: "https://radius.pi.dev/v1/oauth/device",
            params: &[("scope", RADIUS_SCOPE)],
            headers: &[],
            poll: "https://radius.pi.dev/v1/oauth/token",
            then: Then::Tokens,
        })),
    },
    Provider {
        id: "openrouter",
        name: "OpenRouter",
        refresh: Refresh::Never,
        login: Login::KeyExchange(KeyExchange {
            authorize: "https://openrouter.ai/auth",
            exchange: "https://openrouter.ai/api/v1/auth/keys",
        }),
        device: None,
    },
];

pub fn find(id: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.id == id)
}

impl Provider {
    /// New fields for `entry` (the stored login), from its refresh token.
    pub(super) async fn refresh(
        &self,
        entry: &Map<String, Value>,
        refresh: &str,
        var: Vars<'_>,
    ) -> Result<Map<String, Value>, String> {
        match &self.refresh {
            Refresh::Grant(grant) => {
                let url = http::endpoint(grant.url, grant.host_vars, var)?;
                let client_id = match grant.client {
                    Client::Fixed(id) => id,
                    Client::Issued => entry
                        .get("clientId")
                        .and_then(Value::as_str)
                        .filter(|c| !c.trim().is_empty())
                        .ok_or_else(|| self.relogin("has no issued client id"))?,
                };
                let mut pairs = vec![
                    ("grant_type", "refresh_token"),
                    ("client_id", client_id),
                    ("refresh_token", refresh),
                ];
                pairs.extend_from_slice(grant.extra);
                let mut attempt = 0;
                let answer = loop {
                    let body = Body::pairs(&pairs, grant.json);
                    let sent = http::send(&url, &[], body, self.name).await;
                    let busy = match &sent {
                        Ok(answer) => answer.status == 429 || answer.status >= 500,
                        Err(_) => true,
                    };
                    if !busy || attempt >= grant.retries {
                        break sent?;
                    }
                    // Pi's backoff for these: 1 s, 2 s, 4 s.
                    tokio::time::sleep(std::time::Duration::from_secs(1 << attempt)).await;
                    attempt += 1;
                };
                if !answer.ok() {
                    return Err(answer.refresh_failure(self.name, self.id, &url));
                }
                self.tokens(grant, &answer, Some(refresh), client_id)
            }
            Refresh::Copilot => {
                let domain = copilot_domain(entry);
                let url = http::endpoint(
                    &format!(
                        "https://api.{}/copilot_internal/v2/token",
                        domain.as_deref().unwrap_or("github.com")
                    ),
                    &[],
                    var,
                )?;
                let bearer = format!("Bearer {refresh}");
                let mut headers = vec![("authorization", bearer.as_str())];
                headers.extend_from_slice(COPILOT_HEADERS);
                let answer = http::send(&url, &headers, Body::None, self.name).await?;
                if !answer.ok() {
                    return Err(answer.refresh_failure(self.name, self.id, &url));
                }
                let (Some(token), Some(expires_at)) = (
                    answer.field("token"),
                    answer.body.get("expires_at").and_then(Value::as_f64),
                ) else {
                    return Err(self.incomplete("token or expires_at"));
                };
                let mut fields = oauth_fields(
                    token,
                    refresh,
                    ((expires_at * 1000.0) as u64).saturating_sub(5 * MINUTE),
                );
                if let Some(ids) = copilot_models(token, domain.as_deref(), var, self.name).await {
                    fields.insert("availableModelIds".into(), ids.into());
                }
                if let Some(domain) = domain {
                    fields.insert("enterpriseUrl".into(), domain.into());
                }
                Ok(fields)
            }
            Refresh::MetaMint => {
                let url = http::endpoint(META_MINT_URL, &[], var)?;
                let bearer = format!("Bearer {refresh}");
                let headers = [
                    ("authorization", bearer.as_str()),
                    ("x-api-version", "1.0.0"),
                ];
                let answer = http::send(&url, &headers, Body::Json(json!({})), self.name).await?;
                if !answer.ok() {
                    return Err(answer.refresh_failure(self.name, self.id, &url));
                }
                let key = answer
                    .field("api_key")
                    .ok_or_else(|| self.incomplete("api_key"))?;
                Ok(oauth_fields(
                    key,
                    refresh,
                    now_ms().saturating_add(24 * 60 * MINUTE),
                ))
            }
            Refresh::Never => Ok(entry.clone()),
        }
    }

    /// The entry's fields from a token endpoint's answer (to a refresh, or to a login's code
    /// exchange when `previous` is `None`).
    pub(super) fn tokens(
        &self,
        grant: &Grant,
        answer: &Answer,
        previous: Option<&str>,
        client_id: &str,
    ) -> Result<Map<String, Value>, String> {
        let access = answer
            .field("access_token")
            .ok_or_else(|| self.incomplete("access_token"))?;
        let refresh = match answer.field("refresh_token") {
            Some(refresh) => refresh,
            None if grant.keeps_refresh && previous.is_some() => previous.unwrap_or_default(),
            None => return Err(self.incomplete("refresh_token")),
        };
        let lifetime = answer
            .body
            .get("expires_in")
            .and_then(Value::as_f64)
            .filter(|e| *e > 0.0)
            .or(grant.default_lifetime)
            .ok_or_else(|| self.incomplete("expires_in"))?;
        let expires = now_ms()
            .saturating_add((lifetime * 1000.0) as u64)
            .saturating_sub(grant.skew);
        let mut fields = oauth_fields(access, refresh, expires);
        match grant.shape {
            Shape::Plain => {}
            Shape::CodexAccount => {
                let account = codex_account(access).ok_or_else(|| {
                    format!(
                        "the {} access token names no ChatGPT account; log in again with \
                         `nova login {}`",
                        self.name, self.id
                    )
                })?;
                fields.insert("accountId".into(), account.into());
            }
            Shape::ChatGpt => {
                let scopes: Vec<&str> = answer
                    .field("scope")
                    .unwrap_or_default()
                    .split_whitespace()
                    .collect();
                if !scopes.contains(&CHATGPT_SCOPE) {
                    return Err(format!(
                        "the {} grant lacks the {CHATGPT_SCOPE} scope; log in again with \
                         `nova login {}`",
                        self.name, self.id
                    ));
                }
                fields.insert("clientId".into(), client_id.into());
                fields.insert("scopes".into(), scopes.into());
            }
        }
        Ok(fields)
    }

    fn incomplete(&self, what: &str) -> String {
        format!("the {} server's answer lacks {what}", self.name)
    }

    fn relogin(&self, why: &str) -> String {
        format!(
            "the {} login {why}; log in again with `nova login {}`",
            self.name, self.id
        )
    }
}

/// An OAuth entry's three tokens, as Pi writes them.
pub(super) fn oauth_fields(access: &str, refresh: &str, expires: u64) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("type".into(), "oauth".into());
    fields.insert("access".into(), access.into());
    fields.insert("refresh".into(), refresh.into());
    fields.insert("expires".into(), expires.into());
    fields
}

/// The models a Copilot account may pick, as Pi lists them at login and refresh (stored as
/// `availableModelIds`, which narrows the provider's models); `None` when the list cannot be
/// had, and the stored one stays.
async fn copilot_models(
    token: &str,
    domain: Option<&str>,
    var: Vars<'_>,
    name: &str,
) -> Option<Vec<String>> {
    use crate::provider::github_copilot as copilot;
    let enterprise = domain.map(copilot::enterprise_base_url);
    let base = copilot::base_url(
        Some(token),
        enterprise.as_deref(),
        copilot::DEFAULT_BASE_URL,
    );
    let url = http::endpoint(&format!("{base}/models"), &[], var).ok()?;
    let bearer = format!("Bearer {token}");
    let mut headers = vec![
        ("authorization", bearer.as_str()),
        ("x-github-api-version", "2026-06-01"),
    ];
    headers.extend_from_slice(COPILOT_HEADERS);
    let answer = http::send(&url, &headers, Body::None, name).await.ok()?;
    if !answer.ok() {
        return None;
    }
    let models: Vec<&Value> = answer
        .body
        .get("data")?
        .as_array()?
        .iter()
        .filter(|m| m.get("id").is_some_and(Value::is_string))
        // A model that cannot call tools is no use to an agent.
        .filter(|m| m.pointer("/capabilities/supports/tool_calls") != Some(&Value::Bool(false)))
        .collect();
    let policy = |m: &Value| {
        m.pointer("/policy/state")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let id = |m: &Value| m.get("id").and_then(Value::as_str).map(str::to_owned);
    let picked: Vec<String> = models
        .iter()
        .filter(|m| m.get("model_picker_enabled") == Some(&Value::Bool(true)))
        .filter(|m| policy(m).as_deref() != Some("disabled"))
        .filter_map(|m| id(m))
        .collect();
    // Some individual accounts mark no model for the picker though their policies enable
    // them; Pi falls back to the policies there only.
    if picked.is_empty() && base == copilot::DEFAULT_BASE_URL {
        return Some(
            models
                .iter()
                .filter(|m| policy(m).as_deref() == Some("enabled"))
                .filter_map(|m| id(m))
                .collect(),
        );
    }
    Some(picked)
}

/// The GitHub Enterprise domain of a Copilot login (`enterpriseUrl`, a URL or a bare domain).
pub fn copilot_domain(entry: &Map<String, Value>) -> Option<String> {
    domain(entry.get("enterpriseUrl")?.as_str()?)
}

/// The host of a URL or bare domain.
pub(super) fn domain(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    let url = if raw.contains("://") {
        reqwest::Url::parse(raw)
    } else {
        reqwest::Url::parse(&format!("https://{raw}"))
    };
    url.ok()?.host_str().map(str::to_owned)
}

/// The ChatGPT account an OpenAI Codex access token (a JWT) is for.
fn codex_account(access: &str) -> Option<String> {
    use base64::Engine;
    let payload = access.split('.').nth(1)?;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let claims: Value = serde_json::from_slice(&engine.decode(payload).ok()?).ok()?;
    claims
        .get(CODEX_CLAIMS)?
        .get("chatgpt_account_id")?
        .as_str()
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn codex_accounts_and_copilot_domains() {
        let claims = json!({CODEX_CLAIMS: {"chatgpt_account_id": "acct-1"}});
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
        assert_eq!(
            codex_account(&format!("h.{payload}.s")).as_deref(),
            Some("acct-1")
        );
        assert_eq!(codex_account("not-a-jwt"), None);
        let entry = |url: &str| {
            let Value::Object(map) = json!({"enterpriseUrl": url}) else {
                unreachable!()
            };
            map
        };
        assert_eq!(
            copilot_domain(&entry("https://ghe.example.com/")).as_deref(),
            Some("ghe.example.com")
        );
        assert_eq!(
            copilot_domain(&entry("ghe.example.com")).as_deref(),
            Some("ghe.example.com")
        );
        assert_eq!(copilot_domain(&entry("")), None);
    }
}
