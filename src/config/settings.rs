//! `settings.json`: the agent dir's, with the project's `.nova/settings.json` merged over it one
//! level deep (as Pi merges `.pi/settings.json`).

use crate::protocol::QueueMode;
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub default_provider: Option<String>,
    pub default_model: Option<String>,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    /// How long a provider may send nothing before the turn fails.
    pub stream_idle_timeout: Duration,
    /// `permissions.bash`, validated by the permission gate.
    pub bash_permissions: Option<Value>,
    /// `compaction`, validated by the compaction settings.
    pub compaction: Option<Value>,
    /// `sandbox`, validated by the sandbox.
    pub sandbox: Option<Value>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_provider: None,
            default_model: None,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            stream_idle_timeout: Duration::from_secs(120),
            bash_permissions: None,
            compaction: None,
            sandbox: None,
        }
    }
}

/// Reads and merges both files. Problems are collected as warnings; a bad value falls back to
/// its default rather than stopping nova.
pub fn load(global: &Path, project: &Path, warnings: &mut Vec<String>) -> Settings {
    let mut merged = Map::new();
    for path in [global, project] {
        if let Some(object) = read_object(path, warnings) {
            merge_one_level(&mut merged, object);
        }
    }
    from_map(&merged, warnings)
}

fn read_object(path: &Path, warnings: &mut Vec<String>) -> Option<Map<String, Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warnings.push(format!("cannot read {}: {e}", path.display()));
            return None;
        }
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(o)) => Some(o),
        Ok(_) => {
            warnings.push(format!(
                "{}: settings must be a JSON object",
                path.display()
            ));
            None
        }
        Err(e) => {
            warnings.push(format!("{}: invalid JSON: {e}", path.display()));
            None
        }
    }
}

fn merge_one_level(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(b)), Value::Object(o)) => b.extend(o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

fn from_map(map: &Map<String, Value>, warnings: &mut Vec<String>) -> Settings {
    let mut s = Settings::default();
    let mut string = |key: &str| match map.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(v)) => Some(v.clone()),
        Some(_) => {
            warnings.push(format!("settings: \"{key}\" must be a string; ignored"));
            None
        }
    };
    s.default_provider = string("defaultProvider");
    s.default_model = string("defaultModel");
    let steering = string("steeringMode");
    let follow_up = string("followUpMode");
    for (key, value, slot) in [
        ("steeringMode", steering, &mut s.steering_mode),
        ("followUpMode", follow_up, &mut s.follow_up_mode),
    ] {
        match value.as_deref() {
            None => {}
            Some("all") => *slot = QueueMode::All,
            Some("one-at-a-time") => *slot = QueueMode::OneAtATime,
            Some(other) => warnings.push(format!(
                "settings: \"{key}\" must be \"all\" or \"one-at-a-time\", not \"{other}\"; ignored"
            )),
        }
    }
    s.bash_permissions = map.get("permissions").and_then(|p| p.get("bash")).cloned();
    s.compaction = map.get("compaction").cloned();
    s.sandbox = map.get("sandbox").cloned();
    match map.get("streamIdleTimeoutSeconds") {
        None => {}
        Some(v) => match v.as_f64().filter(|n| *n > 0.0 && n.is_finite()) {
            Some(secs) => s.stream_idle_timeout = Duration::from_secs_f64(secs),
            None => warnings.push(
                "settings: \"streamIdleTimeoutSeconds\" must be a positive number; ignored".into(),
            ),
        },
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn project_settings_merge_over_global_one_level_deep() {
        let dir = tempfile::tempdir().unwrap();
        let global = dir.path().join("g.json");
        let project = dir.path().join("p.json");
        std::fs::write(
            &global,
            r#"{"defaultProvider":"a","defaultModel":"m","steeringMode":"all","compaction":{"enabled":true,"reserveTokens":1}}"#,
        )
        .unwrap();
        std::fs::write(
            &project,
            r#"{"defaultModel":"n","compaction":{"enabled":false},"streamIdleTimeoutSeconds":2}"#,
        )
        .unwrap();
        let mut merged = Map::new();
        let mut warnings = vec![];
        for p in [&global, &project] {
            merge_one_level(&mut merged, read_object(p, &mut warnings).unwrap());
        }
        assert_eq!(
            merged["compaction"],
            serde_json::json!({"enabled":false,"reserveTokens":1})
        );
        let s = load(&global, &project, &mut warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(s.default_provider.as_deref(), Some("a"));
        assert_eq!(s.default_model.as_deref(), Some("n"));
        assert_eq!(s.steering_mode, QueueMode::All);
        assert_eq!(s.follow_up_mode, QueueMode::OneAtATime);
        assert_eq!(s.stream_idle_timeout, Duration::from_secs(2));
    }

    #[test]
    fn bad_values_warn_and_fall_back() {
        let dir = tempfile::tempdir().unwrap();
        let global = dir.path().join("g.json");
        std::fs::write(&global, r#"{"steeringMode":"sometimes","defaultModel":3}"#).unwrap();
        let mut warnings = vec![];
        let s = load(&global, &dir.path().join("missing.json"), &mut warnings);
        assert_eq!(s, Settings::default());
        assert_eq!(warnings.len(), 2, "{warnings:?}");

        std::fs::write(&global, "{oops").unwrap();
        let mut warnings = vec![];
        load(&global, &dir.path().join("missing.json"), &mut warnings);
        assert!(warnings[0].contains("invalid JSON"), "{warnings:?}");
    }
}
