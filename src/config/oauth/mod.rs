//! OAuth logins in auth.json (`{"type": "oauth", "access", "refresh", "expires", …}`, written by
//! Pi's `/login` or `nova login`), used as Pi uses them: the access token is the provider's key
//! while it has more than five minutes left; past that it is refreshed with the provider's
//! authorization server and the new tokens are written back to auth.json. The refresh runs
//! under an exclusive lock on a file beside auth.json and re-reads the file first, so when two
//! processes find the token stale, one refreshes and the other uses what it wrote: a provider
//! that rotates its refresh tokens never sees the old one twice. The file is replaced
//! atomically (a 0600 temporary file renamed over it), and its other entries and fields are
//! kept as they were.
//!
//! [`providers`] has one row per provider Pi logs in to; [`store`] is the one place auth.json
//! is locked and written; [`http`] the requests and where they go (Pi's own host overrides,
//! such as `KIMI_CODE_OAUTH_HOST`, and one loopback-only override for tests).

pub mod http;
pub mod login;
pub mod providers;
pub mod store;

use serde_json::{Map, Value};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Pi refreshes a token with less than this left.
const MIN_VALIDITY: Duration = Duration::from_secs(5 * 60);

/// Whether nova can use an OAuth login for `provider`.
pub fn supported(provider: &str) -> bool {
    providers::find(provider).is_some()
}

/// Whether `nova login` can sign in to `provider` (rather than store an API key).
pub fn can_log_in(provider: &str) -> bool {
    providers::find(provider).is_some()
}

/// Signs in to `provider`, returning the auth.json entry to store.
pub async fn log_in(
    provider: &str,
    io: &mut login::Interaction<'_>,
) -> Result<Map<String, Value>, String> {
    let row = providers::find(provider)
        .ok_or_else(|| format!("nova has no OAuth login for \"{provider}\""))?;
    login::login(row, io).await
}

/// An OAuth entry's tokens, and its other fields (a Copilot login's `enterpriseUrl`, a Codex
/// login's `accountId`, …).
#[derive(Clone, PartialEq)]
pub struct Tokens {
    pub access: String,
    pub refresh: String,
    /// Milliseconds since the epoch, as Pi writes it.
    pub expires: u64,
    pub extra: Map<String, Value>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// The tokens of an auth.json entry, when it is an OAuth entry with all three.
    pub fn of(entry: &Value) -> Option<Tokens> {
        if entry.get("type")?.as_str()? != "oauth" {
            return None;
        }
        let mut extra = entry.as_object()?.clone();
        let access = extra.remove("access")?.as_str()?.to_owned();
        let refresh = extra.remove("refresh")?.as_str()?.to_owned();
        let expires = extra
            .remove("expires")?
            .as_f64()
            .map(|e| e.max(0.0) as u64)?;
        extra.remove("type");
        Some(Tokens {
            access,
            refresh,
            expires,
            extra,
        })
    }

    fn fresh_for(&self, now: u64, min_validity: Duration) -> bool {
        self.expires > now.saturating_add(min_validity.as_millis() as u64)
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where a refresh reads and writes: auth.json, and how to read variables.
pub struct Store<'a> {
    pub path: &'a Path,
    pub var: http::Vars<'a>,
}

/// A usable access token for `provider`, refreshing (and writing back) `tokens` when they are
/// about to expire. The error names the provider and, when the login is dead, `nova login`.
pub async fn access_token(
    provider: &str,
    tokens: &Tokens,
    store: &Store<'_>,
) -> Result<String, String> {
    access_token_valid_for(provider, tokens, store, MIN_VALIDITY).await
}

/// [`access_token`] for a caller that needs the token to last `min_validity` (`nova auth
/// print-bearer-token --min-expiry`): one with less left is refreshed first.
pub async fn access_token_valid_for(
    provider: &str,
    tokens: &Tokens,
    store: &Store<'_>,
    min_validity: Duration,
) -> Result<String, String> {
    let fresh = |t: &Tokens| t.fresh_for(now_ms(), min_validity.max(MIN_VALIDITY));
    if fresh(tokens) {
        return Ok(tokens.access.clone());
    }
    let row = providers::find(provider)
        .ok_or_else(|| format!("nova cannot refresh the OAuth login of \"{provider}\""))?;
    let lock = store::lock(store.path).await?;
    // Another process may have refreshed while this one waited for the lock.
    let current = store::read_entry(store.path, provider)?;
    let current_tokens = current.as_ref().and_then(Tokens::of);
    if let Some(current) = &current_tokens
        && fresh(current)
    {
        drop(lock);
        return Ok(current.access.clone());
    }
    // Logged out (or replaced by a key) meanwhile: refreshing would bring the login back.
    let (Some(current_tokens), Some(Value::Object(entry))) = (current_tokens, current) else {
        return Err(format!(
            "the OAuth login of {provider} is no longer in {}; log in again with `nova login \
             {provider}`",
            store.path.display()
        ));
    };
    let refresh = current_tokens.refresh;
    let fields = row.refresh(&entry, &refresh, store.var).await?;
    let access = fields
        .get("access")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    store::write_fields(store.path, provider, fields)
        .map_err(|e| format!("cannot keep the refreshed login: {e}"))?;
    drop(lock);
    Ok(access)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_freshness() {
        let entry = serde_json::json!({"type": "oauth", "access": "a", "refresh": "r",
                                       "expires": 1_000_000.0, "enterpriseUrl": "x"});
        let tokens = Tokens::of(&entry).unwrap();
        assert!(tokens.fresh_for(0, MIN_VALIDITY));
        assert!(!tokens.fresh_for(1_000_000 - 60_000, MIN_VALIDITY));
        assert_eq!(tokens.extra["enterpriseUrl"], "x");
        assert_eq!(tokens.extra.len(), 1);
        assert!(Tokens::of(&serde_json::json!({"type": "api_key", "key": "k"})).is_none());
        assert!(!format!("{tokens:?}").contains('"'), "tokens never print");
        assert!(supported("anthropic") && supported("github-copilot") && !supported("groq"));
    }

    #[tokio::test]
    async fn a_login_removed_meanwhile_is_not_brought_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        std::fs::write(&path, r#"{"groq": {"type": "api_key", "key": "k"}}"#).unwrap();
        let stale = Tokens::of(&serde_json::json!({"type": "oauth", "access": "a",
                                                   "refresh": "r", "expires": 1}))
        .unwrap();
        let var = |_: &str| None;
        let store = Store {
            path: &path,
            var: &var,
        };
        let error = access_token("anthropic", &stale, &store).await.unwrap_err();
        assert!(error.contains("`nova login anthropic`"), "{error}");
        assert!(store::read_all(&path).unwrap().get("anthropic").is_none());
    }
}
