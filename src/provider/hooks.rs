//! Pi's provider hooks (`before_provider_request`, `before_provider_headers`,
//! `after_provider_response`) around the one place every model request is sent
//! ([`super::http::stream`]), for whoever runs them (the session's extensions).
//!
//! What a hook may change is what cannot send the user's credentials elsewhere: the payload
//! (it travels to the same server as before) and the headers that carry no credential. The
//! address is not the hooks' to change at all, and the headers that carry a credential are
//! neither shown to them nor changed by them: the API's own auth headers, every configured
//! header (a models.json or extension header may hold a key, and nova cannot tell which do),
//! `host`, and a signature's `x-amz-*`. A hook's attempt on one of those is refused and
//! reported, and the request goes out as nova built it.

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::collections::BTreeMap;

/// One of the provider hooks, by Pi's event name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    BeforeProviderRequest,
    BeforeProviderHeaders,
    AfterProviderResponse,
}

impl Hook {
    pub fn event(self) -> &'static str {
        match self {
            Hook::BeforeProviderRequest => "before_provider_request",
            Hook::BeforeProviderHeaders => "before_provider_headers",
            Hook::AfterProviderResponse => "after_provider_response",
        }
    }
}

/// Headers by lower-case name.
pub type Headers = BTreeMap<String, String>;

/// Runs the hooks; a request asks [`Hooks::subscribed`] first, so an unsubscribed hook costs
/// nothing (not even building the payload whole).
pub trait Hooks: Send + Sync {
    fn subscribed(&self, hook: Hook) -> bool;

    /// The payload the hooks leave, `None` when they left it as it was (or failed).
    fn payload(&self, payload: Value) -> BoxFuture<'static, Option<Value>>;

    /// The headers the hooks leave of `headers`, a name mapped to `None` removed; `None` when
    /// they failed.
    fn headers(
        &self,
        headers: Headers,
    ) -> BoxFuture<'static, Option<BTreeMap<String, Option<String>>>>;

    fn response(&self, status: u16, headers: Headers) -> BoxFuture<'static, ()>;

    /// A change the hooks asked for that nova refused, and why.
    fn refused(&self, hook: Hook, why: String);
}

/// Whether `name` (lower case) carries a credential, or routes the request: never shown to a
/// hook nor changed by one. `configured` are the provider's configured headers.
fn protected(name: &str, configured: &[(String, String)]) -> bool {
    matches!(
        name,
        "authorization"
            | "proxy-authorization"
            | "x-api-key"
            | "x-goog-api-key"
            | "api-key"
            | "cookie"
            | "host"
            | "content-length"
    ) || name.starts_with("x-amz-")
        || configured.iter().any(|(c, _)| c.eq_ignore_ascii_case(name))
}

impl std::fmt::Debug for dyn Hooks + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooks")
    }
}

/// What of `headers` a hook is shown.
pub(super) fn shown(headers: &HeaderMap, configured: &[(String, String)]) -> Headers {
    headers
        .iter()
        .filter(|(name, _)| !protected(name.as_str(), configured))
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

/// Applies what the hooks left of the `shown` headers to `headers`: a header they dropped or
/// set to `None` is removed, a new or changed value set; a change to a protected header, or a
/// name or value HTTP does not allow, is refused and reported.
pub(super) fn apply(
    headers: &mut HeaderMap,
    shown: &Headers,
    left: BTreeMap<String, Option<String>>,
    configured: &[(String, String)],
    hooks: &dyn Hooks,
) {
    let refuse = |why: String| hooks.refused(Hook::BeforeProviderHeaders, why);
    for name in shown.keys().filter(|n| !left.contains_key(*n)) {
        headers.remove(name.as_str());
    }
    for (name, value) in left {
        let lower = name.to_ascii_lowercase();
        if shown.get(&lower) == value.as_ref() && lower == name {
            continue;
        }
        if protected(&lower, configured) {
            refuse(format!(
                "header \"{name}\" is not the hooks' to set or remove: it carries the request's \
                 credentials or its address"
            ));
            continue;
        }
        let Ok(header) = HeaderName::from_bytes(lower.as_bytes()) else {
            refuse(format!("\"{name}\" is not a header name"));
            continue;
        };
        match value.map(|v| HeaderValue::from_str(&v)) {
            None => {
                headers.remove(&header);
            }
            Some(Ok(v)) => {
                headers.insert(header, v);
            }
            Some(Err(_)) => refuse(format!(
                "the value of header \"{name}\" is not one HTTP allows"
            )),
        }
    }
}

/// The response's headers as a hook sees them (lower-case names, text values).
pub(super) fn response_headers(headers: &HeaderMap) -> Headers {
    headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}
