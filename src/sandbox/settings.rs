//! The `sandbox` object of `settings.json` and the `--sandbox` mode names.

use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// How much the agent's commands may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write under the cwd, the temp directories and `sandbox.writableRoots`; read everywhere.
    WorkspaceWrite,
    /// Read everywhere, write nowhere (but harmless devices such as `/dev/null`).
    ReadOnly,
    /// No sandbox: commands run with nova's own rights.
    Off,
}

impl Mode {
    pub const NAMES: &'static str = "\"workspace-write\", \"read-only\" or \"off\"";

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::WorkspaceWrite => "workspace-write",
            Mode::ReadOnly => "read-only",
            Mode::Off => "off",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "workspace-write" => Ok(Mode::WorkspaceWrite),
            "read-only" => Ok(Mode::ReadOnly),
            "off" => Ok(Mode::Off),
            other => Err(format!(
                "unknown sandbox mode \"{other}\" (use {})",
                Mode::NAMES
            )),
        }
    }
}

/// `sandbox` in settings, as written (roots are resolved against the cwd later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: Mode,
    pub writable_roots: Vec<String>,
    /// `false` denies TCP `connect` and `bind` where the kernel allows it.
    pub network: bool,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: Mode::WorkspaceWrite,
            writable_roots: Vec::new(),
            network: true,
        }
    }
}

impl SandboxSettings {
    /// What invalid settings fall back to: a typo must never loosen the sandbox.
    pub fn strictest() -> Self {
        SandboxSettings {
            mode: Mode::ReadOnly,
            writable_roots: Vec::new(),
            network: false,
        }
    }

    /// Reads the `sandbox` settings object (absent or null: the defaults; unknown keys are
    /// ignored). A bad value is an error naming its key.
    pub fn from_settings(sandbox: Option<&Value>) -> Result<Self, String> {
        let mut settings = SandboxSettings::default();
        let map = match sandbox {
            None | Some(Value::Null) => return Ok(settings),
            Some(Value::Object(map)) => map,
            Some(_) => return Err("settings: \"sandbox\" must be an object".into()),
        };
        match map.get("mode") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                settings.mode = s
                    .parse()
                    .map_err(|e| format!("settings: \"sandbox.mode\": {e}"))?;
            }
            Some(_) => {
                return Err(format!(
                    "settings: \"sandbox.mode\" must be {}",
                    Mode::NAMES
                ));
            }
        }
        match map.get("writableRoots") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::String(s) if !s.is_empty() => {
                            settings.writable_roots.push(s.clone());
                        }
                        _ => {
                            return Err(
                                "settings: \"sandbox.writableRoots\" must be a list of paths"
                                    .into(),
                            );
                        }
                    }
                }
            }
            Some(_) => {
                return Err("settings: \"sandbox.writableRoots\" must be a list of paths".into());
            }
        }
        match map.get("network") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => settings.network = *b,
            Some(_) => return Err("settings: \"sandbox.network\" must be true or false".into()),
        }
        Ok(settings)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_values_and_errors() {
        assert_eq!(
            SandboxSettings::from_settings(None),
            Ok(SandboxSettings::default())
        );
        let s = SandboxSettings::from_settings(Some(&json!({
            "mode": "read-only", "writableRoots": ["~/.cache", "/opt/x"], "network": false,
            "other": 1
        })))
        .unwrap();
        assert_eq!(s.mode, Mode::ReadOnly);
        assert_eq!(s.writable_roots, ["~/.cache", "/opt/x"]);
        assert!(!s.network);

        let err = |v: Value| SandboxSettings::from_settings(Some(&v)).unwrap_err();
        assert!(err(json!({"mode": "readonly"})).contains("\"sandbox.mode\""));
        assert!(err(json!({"mode": 1})).contains("\"sandbox.mode\""));
        assert!(err(json!({"writableRoots": "/x"})).contains("\"sandbox.writableRoots\""));
        assert!(err(json!({"writableRoots": [""]})).contains("\"sandbox.writableRoots\""));
        assert!(err(json!({"network": "no"})).contains("\"sandbox.network\""));
        assert!(err(json!([])).contains("\"sandbox\""));
    }

    #[test]
    fn mode_names_round_trip() {
        for mode in [Mode::WorkspaceWrite, Mode::ReadOnly, Mode::Off] {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
        }
        assert!("on".parse::<Mode>().unwrap_err().contains("\"on\""));
    }
}
