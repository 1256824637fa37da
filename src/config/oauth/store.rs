//! auth.json as the OAuth code reads and writes it: one lock file beside it that serialises
//! every change (refreshes, logins, `nova login`'s API keys), and writes that replace the file
//! atomically through a private temporary file, keeping the entries and fields they do not set.

use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Takes the lock that serialises changes to auth.json, waiting for another process's (on a
/// blocking thread: `flock` blocks).
pub async fn lock(auth: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
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
pub fn read_all(path: &Path) -> Result<Map<String, Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a JSON object of providers: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

pub fn read_entry(path: &Path, provider: &str) -> Result<Option<Value>, String> {
    Ok(read_all(path)?.remove(provider))
}

/// Sets `fields` in `provider`'s entry, keeping its other fields and every other entry.
pub fn write_fields(path: &Path, provider: &str, fields: Map<String, Value>) -> Result<(), String> {
    let mut all = read_all(path)?;
    let entry = all
        .entry(provider.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    if let Value::Object(entry) = entry {
        entry.extend(fields);
    }
    write_all(path, &all)
}

/// Replaces auth.json with `all`, through a private temporary file renamed over it.
pub fn write_all(path: &Path, all: &Map<String, Value>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
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
        format!("cannot write {}: {e}", path.display())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn write_back_keeps_the_rest_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let entry = serde_json::json!({"type": "oauth", "access": "a", "refresh": "r",
                                       "expires": 1, "extra": 1});
        std::fs::write(
            &path,
            serde_json::json!({"kimi-coding": entry, "openai": {"type": "api_key", "key": "k"}})
                .to_string(),
        )
        .unwrap();
        let fresh = serde_json::json!({"access": "a2", "refresh": "r2", "expires": 5});
        let Value::Object(fresh) = fresh else {
            unreachable!()
        };
        write_fields(&path, "kimi-coding", fresh).unwrap();
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
    }
}
