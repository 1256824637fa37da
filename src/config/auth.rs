//! `auth.json` in the agent dir, in Pi 1.6's format: `{"<provider>": {"type": "api_key", "key":
//! "…", "env": {…}}}`, the key literal, `$VAR` or `!command` (resolved by [`crate::secret`] when
//! a request first needs it, a command's output cached for the process; `nova login` writes a
//! pasted key with Pi 1.6's `$$`/`$!` escapes so it is never taken for either). `env` holds variables
//! that apply to that provider only, over the process environment, as Pi applies them: the
//! key's `$VAR` reads them, and so do the provider's own settings (Bedrock's `AWS_PROFILE` and
//! `AWS_REGION`, Azure's address). OAuth entries are used and refreshed ([`super::oauth`]) for
//! the providers nova can refresh, and reported as not supported for the others. The file
//! holds secrets, so a mode looser than 0600 is warned about, and nothing read
//! from it is ever echoed.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The entries of an auth.json nova uses, by provider name, and where the file is (refreshed
/// OAuth tokens are written back there).
#[derive(Debug, Default, Clone)]
pub struct AuthKeys {
    keys: BTreeMap<String, ApiKey>,
    oauth: BTreeMap<String, super::oauth::Tokens>,
    path: PathBuf,
}

/// One `api_key` entry: its key as written, and the variables it scopes to its provider.
#[derive(Debug, Default, Clone)]
pub struct ApiKey {
    pub key: Option<String>,
    pub env: BTreeMap<String, String>,
}

impl AuthKeys {
    /// The key stored for `provider`, as written.
    pub fn key(&self, provider: &str) -> Option<&str> {
        self.keys.get(provider)?.key.as_deref()
    }

    /// The variables stored for `provider` (none when it has no entry).
    pub fn env(&self, provider: &str) -> Option<&BTreeMap<String, String>> {
        self.keys
            .get(provider)
            .map(|e| &e.env)
            .filter(|e| !e.is_empty())
    }

    /// The OAuth login stored for `provider`, when nova can use it.
    pub fn oauth(&self, provider: &str) -> Option<&super::oauth::Tokens> {
        self.oauth.get(provider)
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `provider` has an entry with a key, variables or a usable login: a credential
    /// Pi counts as configured.
    pub fn has(&self, provider: &str) -> bool {
        self.key(provider).is_some()
            || self.env(provider).is_some()
            || self.oauth.contains_key(provider)
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Entry {
    ApiKey {
        #[serde(default)]
        key: Option<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    #[serde(rename = "oauth")]
    OAuth {},
}

/// Reads `path`; a missing file is no keys. Problems are warnings naming the provider, never
/// the key.
pub fn load(path: &Path, warnings: &mut Vec<String>) -> AuthKeys {
    let empty = || AuthKeys {
        path: path.to_owned(),
        ..AuthKeys::default()
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return empty(),
        Err(e) => {
            warnings.push(format!("ignoring {}: {e}", path.display()));
            return empty();
        }
    };
    warn_if_readable_by_others(path, warnings);
    let entries: BTreeMap<String, Value> = match serde_json::from_str(&text) {
        Ok(entries) => entries,
        Err(e) => {
            // serde's message quotes no input, so it cannot leak a key.
            warnings.push(format!(
                "ignoring {}: not a JSON object of providers: {e}",
                path.display()
            ));
            return empty();
        }
    };
    let mut keys = BTreeMap::new();
    let mut oauth = BTreeMap::new();
    for (provider, value) in entries {
        let tokens = super::oauth::Tokens::of(&value);
        match serde_json::from_value::<Entry>(value) {
            Ok(Entry::ApiKey { key, env }) => {
                let key = key.filter(|k| !k.is_empty());
                // Pi's Bedrock login stores an empty entry to mean "the AWS credential chain".
                if key.is_none() && env.is_empty() && provider != "amazon-bedrock" {
                    warnings.push(format!(
                        "auth.json: provider \"{provider}\" has an api_key entry without a key"
                    ));
                }
                keys.insert(provider, ApiKey { key, env });
            }
            Ok(Entry::OAuth {}) if super::oauth::supported(&provider) => match tokens {
                Some(tokens) => {
                    oauth.insert(provider, tokens);
                }
                None => warnings.push(format!(
                    "auth.json: the OAuth login of provider \"{provider}\" lacks access, \
                     refresh or expires; log in again with `nova login {provider}`"
                )),
            },
            Ok(Entry::OAuth {}) => warnings.push(format!(
                "auth.json: provider \"{provider}\" is logged in with OAuth, which nova does not \
                 support yet for it; give it an API key (\"type\": \"api_key\") to use it"
            )),
            Err(_) => warnings.push(format!(
                "auth.json: provider \"{provider}\" has an entry nova cannot read (expected \
                 \"type\": \"api_key\" with a \"key\" and perhaps an \"env\" object of strings)"
            )),
        }
    }
    AuthKeys {
        keys,
        oauth,
        path: path.to_owned(),
    }
}

/// Stores `entry` as `provider`'s (`None` removes it), under the lock refreshes take, keeping
/// the other entries. Returns whether there was an entry before.
pub async fn store(path: &Path, provider: &str, entry: Option<Value>) -> Result<bool, String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let lock = super::oauth::store::lock(path).await?;
    let mut all = super::oauth::store::read_all(path)?;
    let had = match entry {
        Some(entry) => all.insert(provider.to_owned(), entry).is_some(),
        None => all.remove(provider).is_some(),
    };
    super::oauth::store::write_all(path, &all)?;
    drop(lock);
    Ok(had)
}

/// Which providers an auth.json merge added (with whether each is an OAuth login) and which it
/// left to the credential already there.
pub type Merged = (Vec<(String, bool)>, Vec<String>);

/// Adds the entries of `theirs` (another agent's auth.json, `nova import pi --auth`) for the
/// providers that have none, under the lock every change takes: a credential already here
/// always wins. With `write` false, only says what it would do.
pub async fn add_missing(
    path: &Path,
    theirs: serde_json::Map<String, Value>,
    write: bool,
) -> Result<Merged, String> {
    if !write {
        let mut all = super::oauth::store::read_all(path)?;
        return Ok(merge(&mut all, theirs));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let lock = super::oauth::store::lock(path).await?;
    let mut all = super::oauth::store::read_all(path)?;
    let merged = merge(&mut all, theirs);
    if !merged.0.is_empty() {
        super::oauth::store::write_all(path, &all)?;
    }
    drop(lock);
    Ok(merged)
}

fn merge(
    ours: &mut serde_json::Map<String, Value>,
    theirs: serde_json::Map<String, Value>,
) -> Merged {
    let (mut added, mut kept) = (Vec::new(), Vec::new());
    for (provider, entry) in theirs {
        if ours.contains_key(&provider) {
            kept.push(provider);
            continue;
        }
        let oauth = entry.get("type").and_then(Value::as_str) == Some("oauth");
        ours.insert(provider.clone(), entry);
        added.push((provider, oauth));
    }
    (added, kept)
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path, warnings: &mut Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            warnings.push(format!(
                "{} holds keys but its mode is {mode:04o}; make it private with `chmod 600 {}`",
                path.display(),
                path.display()
            ));
        }
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path, _warnings: &mut Vec<String>) {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_the_credential_already_there() {
        let mut ours = serde_json::json!({"openai": {"type": "api_key", "key": "ours"}});
        let theirs = serde_json::json!({
            "openai": {"type": "api_key", "key": "theirs"},
            "anthropic": {"type": "oauth", "access": "a", "refresh": "r", "expires": 1},
            "groq": {"type": "api_key", "key": "g"},
        });
        let (Value::Object(ours_map), Value::Object(theirs)) = (&mut ours, theirs) else {
            unreachable!()
        };
        let (added, kept) = merge(ours_map, theirs);
        assert_eq!(
            added,
            vec![("anthropic".to_owned(), true), ("groq".to_owned(), false)]
        );
        assert_eq!(kept, vec!["openai".to_owned()]);
        assert_eq!(ours["openai"]["key"], "ours");
        assert_eq!(ours["groq"]["key"], "g");
    }

    #[test]
    fn entries_oauth_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let mut warnings = Vec::new();
        assert!(load(&path, &mut warnings).key("openai").is_none());
        assert!(warnings.is_empty());
        std::fs::write(
            &path,
            r#"{"openai": {"type": "api_key", "key": "sk-literal"},
                "groq": {"type": "api_key", "key": "$GROQ_KEY", "env": {}},
                "acme-sso": {"type": "oauth", "access": "tok-secret", "refresh": "r", "expires": 1},
                "odd": {"type": "cookie", "value": "tok-secret"},
                "bedrock": {"type": "api_key", "env": {"AWS_PROFILE": "work"}},
                "amazon-bedrock": {"type": "api_key"}}"#,
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let keys = load(&path, &mut warnings);
        assert_eq!(keys.key("openai"), Some("sk-literal"));
        assert_eq!(keys.key("groq"), Some("$GROQ_KEY"));
        assert_eq!(keys.key("acme-sso"), None);
        assert!(keys.has("bedrock") && keys.key("bedrock").is_none());
        assert_eq!(
            keys.env("bedrock")
                .and_then(|e| e.get("AWS_PROFILE"))
                .map(String::as_str),
            Some("work")
        );
        assert!(!keys.has("amazon-bedrock"), "an empty entry adds nothing");
        let all = warnings.join("\n");
        assert!(
            all.contains("\"acme-sso\" is logged in with OAuth"),
            "{all}"
        );
        assert!(all.contains("\"odd\""), "{all}");
        assert!(!all.contains("bedrock"), "{all}");
        assert!(
            !all.contains("secret") && !all.contains("sk-literal"),
            "{all}"
        );
        #[cfg(unix)]
        assert!(all.contains("mode is 0644"), "{all}");
    }
}
