//! OAuth logins in auth.json (`{"type": "oauth", "access", "refresh", "expires", …}`, written by
//! Pi's `/login`), used as Pi uses them: the access token is the provider's key while it has
//! more than five minutes left; past that it is refreshed at the provider's token endpoint and
//! the new tokens are written back to auth.json. The refresh runs under an exclusive lock on a
//! file beside auth.json and re-reads the file first, so when two processes find the token
//! stale, one refreshes and the other uses what it wrote: a provider that rotates its refresh
//! tokens never sees the old one twice. The file is replaced atomically (a 0600 temporary file
//! renamed over it), and its other entries and fields are kept as they were.
//!
//! Nova refreshes the providers whose wire format it speaks with a bearer token: Kimi Code
//! (`kimi-coding`, its host from `KIMI_CODE_OAUTH_HOST` or `KIMI_OAUTH_HOST` as Pi reads them).

use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Pi refreshes a token with less than this left.
const MIN_VALIDITY: Duration = Duration::from_secs(5 * 60);
/// How long a token endpoint may take.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(30);

/// How a provider refreshes its tokens.
struct Refresher {
    provider: &'static str,
    /// The person-facing name, for errors.
    name: &'static str,
    /// The token endpoint: the variables that may name its host, the default host, the path.
    host_vars: &'static [&'static str],
    default_host: &'static str,
    path: &'static str,
    client_id: &'static str,
}

/// The providers nova refreshes, one row each.
const REFRESHERS: &[Refresher] = &[Refresher {
    provider: "kimi-coding",
    name: "Kimi Code",
    host_vars: &["KIMI_CODE_OAUTH_HOST", "KIMI_OAUTH_HOST"],
    default_host: "https://auth.kimi.com",
    path: "/api/oauth/token",
    // Kimi Code's public client id, which its token endpoint expects.
    client_id: "17e5f671-d194-4dfb-9706-5516cb48c098",
}];

/// Whether nova can use an OAuth login for `provider`.
pub fn supported(provider: &str) -> bool {
    refresher(provider).is_some()
}

fn refresher(provider: &str) -> Option<&'static Refresher> {
    REFRESHERS.iter().find(|r| r.provider == provider)
}

/// An OAuth entry's tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct Tokens {
    pub access: String,
    pub refresh: String,
    /// Milliseconds since the epoch, as Pi writes it.
    pub expires: u64,
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
        Some(Tokens {
            access: entry.get("access")?.as_str()?.to_owned(),
            refresh: entry.get("refresh")?.as_str()?.to_owned(),
            expires: entry.get("expires")?.as_f64().map(|e| e.max(0.0) as u64)?,
        })
    }

    fn fresh(&self, now: u64) -> bool {
        self.expires > now.saturating_add(MIN_VALIDITY.as_millis() as u64)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where a refresh reads and writes: auth.json, and how to read variables.
pub struct Store<'a> {
    pub path: &'a Path,
    pub var: &'a (dyn Fn(&str) -> Option<String> + Sync),
}

/// A usable access token for `provider`, refreshing (and writing back) `tokens` when they are
/// about to expire. The error names the provider and, when the login is dead, `nova login`.
pub async fn access_token(
    provider: &str,
    tokens: &Tokens,
    store: &Store<'_>,
) -> Result<String, String> {
    if tokens.fresh(now_ms()) {
        return Ok(tokens.access.clone());
    }
    let refresher = refresher(provider)
        .ok_or_else(|| format!("nova cannot refresh the OAuth login of \"{provider}\""))?;
    let lock = lock(store.path).await?;
    // Another process may have refreshed while this one waited for the lock.
    let current = read_entry(store.path, provider)?;
    if let Some(current) = current.as_ref().and_then(Tokens::of)
        && current.fresh(now_ms())
    {
        drop(lock);
        return Ok(current.access);
    }
    let refresh = current
        .as_ref()
        .and_then(Tokens::of)
        .map_or_else(|| tokens.refresh.clone(), |t| t.refresh);
    let fresh = refresh_at(refresher, &refresh, store).await?;
    write_entry(store.path, provider, &fresh)?;
    drop(lock);
    Ok(fresh.access)
}

/// Takes the lock that serialises refreshes, waiting for another process's (on a blocking
/// thread: `flock` blocks).
pub(super) async fn lock(auth: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
    let path = lock_path(auth);
    let taken = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| format!("cannot lock {}: {e}", path.display()))
    })
    .await;
    taken.map_err(|e| format!("cannot lock auth.json: {e}"))?
}

fn lock_path(auth: &Path) -> PathBuf {
    auth.with_file_name(".auth.json.nova-lock")
}

/// The file as a JSON object; a missing file is an empty one.
pub(super) fn read_all(path: &Path) -> Result<Map<String, Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a JSON object of providers: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn read_entry(path: &Path, provider: &str) -> Result<Option<Value>, String> {
    Ok(read_all(path)?.remove(provider))
}

/// Writes `tokens` into `provider`'s entry, keeping everything else, through a private
/// temporary file renamed over auth.json.
fn write_entry(path: &Path, provider: &str, tokens: &Tokens) -> Result<(), String> {
    let mut all = read_all(path)?;
    let entry = all
        .entry(provider.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    if let Value::Object(fields) = entry {
        fields.insert("type".into(), "oauth".into());
        fields.insert("access".into(), tokens.access.clone().into());
        fields.insert("refresh".into(), tokens.refresh.clone().into());
        fields.insert("expires".into(), tokens.expires.into());
    }
    write_all(path, &all)
}

/// Replaces auth.json with `all`, through a private temporary file renamed over it.
pub(super) fn write_all(path: &Path, all: &Map<String, Value>) -> Result<(), String> {
    let text = serde_json::to_string_pretty(all).map_err(|e| e.to_string())?;
    let temp = path.with_file_name(format!(".auth.json.{}.tmp", std::process::id()));
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!(
            "cannot write the refreshed login to {}: {e}",
            path.display()
        )
    })
}

/// Asks the provider's token endpoint for new tokens.
async fn refresh_at(
    refresher: &Refresher,
    refresh: &str,
    store: &Store<'_>,
) -> Result<Tokens, String> {
    let host = refresher
        .host_vars
        .iter()
        .find_map(|v| (store.var)(v).filter(|h| !h.trim().is_empty()))
        .unwrap_or_else(|| refresher.default_host.to_owned());
    let url = format!("{}{}", host.trim().trim_end_matches('/'), refresher.path);
    let client = crate::provider::http::SharedClient::default();
    let client = client.get().map_err(|e| e.to_string())?;
    let form = form_encode(&[
        ("client_id", refresher.client_id),
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh),
    ]);
    let request = client
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(form)
        .send();
    let name = refresher.name;
    let response = tokio::time::timeout(REFRESH_TIMEOUT, request)
        .await
        .map_err(|_| format!("the {name} token endpoint {url} did not answer within 30 s"))?
        .map_err(|e| format!("cannot reach the {name} token endpoint {url}: {e}"))?;
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let error = body
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if status == 401 || status == 403 || error == "invalid_grant" {
        return Err(format!(
            "the {name} login has expired or was revoked (the token endpoint answered {status}{}); \
             log in again with `nova login {}`",
            if error.is_empty() {
                String::new()
            } else {
                format!(": {error}")
            },
            refresher.provider
        ));
    }
    if !(200..300).contains(&status) {
        return Err(format!(
            "refreshing the {name} login failed: {url} answered {status}{}",
            if error.is_empty() {
                String::new()
            } else {
                format!(" ({error})")
            }
        ));
    }
    let field = |key: &str| {
        body.get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let expires_in = body
        .get("expires_in")
        .and_then(Value::as_f64)
        .filter(|e| *e > 0.0);
    match (field("access_token"), field("refresh_token"), expires_in) {
        (Some(access), Some(refresh), Some(expires_in)) => Ok(Tokens {
            access: access.to_owned(),
            refresh: refresh.to_owned(),
            expires: now_ms().saturating_add((expires_in * 1000.0) as u64),
        }),
        _ => Err(format!(
            "the {name} token endpoint's answer lacks access_token, refresh_token or expires_in"
        )),
    }
}

/// `application/x-www-form-urlencoded` pairs.
fn form_encode(pairs: &[(&str, &str)]) -> String {
    let encode = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(b).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn entries_freshness_and_write_back() {
        let entry = serde_json::json!({"type": "oauth", "access": "a", "refresh": "r",
                                       "expires": 1_000_000.0, "extra": 1});
        let tokens = Tokens::of(&entry).unwrap();
        assert!(tokens.fresh(0) && !tokens.fresh(1_000_000 - 60_000));
        assert!(Tokens::of(&serde_json::json!({"type": "api_key", "key": "k"})).is_none());
        assert!(!format!("{tokens:?}").contains('"'), "tokens never print");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        std::fs::write(
            &path,
            serde_json::json!({"kimi-coding": entry, "openai": {"type": "api_key", "key": "k"}})
                .to_string(),
        )
        .unwrap();
        let fresh = Tokens {
            access: "a2".into(),
            refresh: "r2".into(),
            expires: 5,
        };
        write_entry(&path, "kimi-coding", &fresh).unwrap();
        let all = read_all(&path).unwrap();
        assert_eq!(all["kimi-coding"]["access"], "a2");
        assert_eq!(all["kimi-coding"]["extra"], 1);
        assert_eq!(all["openai"]["key"], "k");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert_eq!(form_encode(&[("a b", "x/y=z&")]), "a+b=x%2Fy%3Dz%26");
    }
}
