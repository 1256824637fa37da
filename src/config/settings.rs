//! `settings.json`: the agent dir's (the user's), with the project's `.nova/settings.json`
//! merged over it one level deep (as Pi merges `.pi/settings.json`), decoded with serde into
//! typed [`Settings`].
//!
//! Each key decodes on its own ([`Lenient`]): a bad value is reported naming its key and falls
//! back to the default while every other key still applies; unknown keys are ignored.
//!
//! Safety settings (`permissions`) come from the project file only to tighten what the user
//! set, unless the user trusts the project (`--trust-project`, or the cwd listed in the user's
//! `trustedProjects`): a cloned repository, or a model that wrote into it, must not be able to
//! switch the gate off. `trustedProjects` itself is read from the user's file only.

use crate::protocol::QueueMode;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub default_provider: Option<String>,
    pub default_model: Option<String>,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    /// How long a provider may send nothing before the turn fails.
    pub stream_idle_timeout: Duration,
    pub compaction: CompactionSettings,
    /// `permissions.bash`, after the project rule above. `Err` when a settings file could not be
    /// read as JSON or the rules are invalid: the gate then asks before every command.
    pub bash_permissions: Result<BashPermissions, String>,
    /// `permissions.mcp`, after the same project rule; `Err` makes every MCP call ask.
    pub mcp_permissions: Result<McpPermissions, String>,
    /// `mcpStartupWaitSeconds`: how long the first prompt waits for MCP servers still starting.
    pub mcp_startup_wait: Duration,
    /// Whether the project's safety settings were taken as they are.
    pub project_trusted: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_provider: None,
            default_model: None,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            stream_idle_timeout: Duration::from_secs(120),
            compaction: CompactionSettings::default(),
            bash_permissions: Ok(BashPermissions::default()),
            mcp_permissions: Ok(McpPermissions::default()),
            mcp_startup_wait: Duration::from_secs(10),
            project_trusted: false,
        }
    }
}

/// The `compaction` object, with Pi's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    pub enabled: bool,
    /// Room left free for the next reply (and for the summary itself).
    pub reserve_tokens: u64,
    /// Roughly how much of the newest conversation survives a compaction verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
        }
    }
}

/// `permissions.bash`: when the gate asks, and the user's patterns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BashPermissions {
    pub mode: Option<PermissionMode>,
    pub ask: Vec<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// `permissions.mcp`: globs over MCP tools' model-facing names (`mcp__server__tool`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpPermissions {
    pub ask: Vec<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// Ordered from the loosest to the strictest, so "tighten" is "raise".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionMode {
    Never,
    Flagged,
    Always,
}

/// One key's value: absent, decoded, or the reason it could not be.
#[derive(Debug, Clone, PartialEq)]
pub struct Lenient<T>(Option<Result<T, String>>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        if value.is_null() {
            return Ok(Lenient(None));
        }
        Ok(Lenient(Some(
            serde_json::from_value(value).map_err(|e| e.to_string()),
        )))
    }
}

impl<T> Lenient<T> {
    /// The value, or `None` after recording why `key` was ignored.
    fn take(self, key: &str, warnings: &mut Vec<String>) -> Option<T> {
        match self.0? {
            Ok(v) => Some(v),
            Err(e) => {
                warnings.push(format!("settings: \"{key}\": {e}; ignored"));
                None
            }
        }
    }
}

/// The keys nova reads, as they appear in the merged file.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct File {
    default_provider: Lenient<String>,
    default_model: Lenient<String>,
    steering_mode: Lenient<QueueMode>,
    follow_up_mode: Lenient<QueueMode>,
    stream_idle_timeout_seconds: Lenient<f64>,
    mcp_startup_wait_seconds: Lenient<f64>,
    compaction: Lenient<Map<String, Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CompactionFile {
    enabled: Lenient<bool>,
    reserve_tokens: Lenient<u64>,
    keep_recent_tokens: Lenient<u64>,
}

impl CompactionSettings {
    /// The defaults with every valid key of the `compaction` object applied.
    fn from_map(map: Map<String, Value>, warnings: &mut Vec<String>) -> Self {
        let file: CompactionFile = serde_json::from_value(Value::Object(map)).unwrap_or_default();
        let mut s = CompactionSettings::default();
        if let Some(v) = file.enabled.take("compaction.enabled", warnings) {
            s.enabled = v;
        }
        if let Some(v) = file
            .reserve_tokens
            .take("compaction.reserveTokens", warnings)
        {
            s.reserve_tokens = v;
        }
        if let Some(v) = file
            .keep_recent_tokens
            .take("compaction.keepRecentTokens", warnings)
        {
            s.keep_recent_tokens = v;
        }
        s
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Permissions {
    bash: Option<BashPermissions>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PermissionsForMcp {
    mcp: Option<McpPermissions>,
}

/// Where settings come from.
pub struct Sources<'a> {
    pub user: &'a Path,
    pub project: &'a Path,
    pub cwd: &'a Path,
    /// `--trust-project`.
    pub trust_flag: bool,
}

/// Reads and merges both files. Problems are collected as warnings; a bad value falls back to
/// its default rather than stopping nova.
pub fn load(sources: &Sources, warnings: &mut Vec<String>) -> Settings {
    let mut unreadable = None;
    let mut read = |path: &Path, warnings: &mut Vec<String>| match read_object(path) {
        Ok(map) => map,
        Err(e) => {
            warnings.push(e.clone());
            unreadable = Some(e);
            None
        }
    };
    let mut user = read(sources.user, warnings).unwrap_or_default();
    let mut project = read(sources.project, warnings).unwrap_or_default();

    let trusted_list = user.remove("trustedProjects");
    project.remove("trustedProjects");
    let project_trusted = sources.trust_flag || is_trusted(trusted_list, sources.cwd, warnings);
    let user_permissions = user.remove("permissions");
    let project_permissions = project.remove("permissions");

    let mut merged = user;
    merge_one_level(&mut merged, project);
    let file: File = serde_json::from_value(Value::Object(merged)).unwrap_or_default();
    let mut s = Settings {
        project_trusted,
        ..Settings::default()
    };
    s.default_provider = file.default_provider.take("defaultProvider", warnings);
    s.default_model = file.default_model.take("defaultModel", warnings);
    if let Some(mode) = file.steering_mode.take("steeringMode", warnings) {
        s.steering_mode = mode;
    }
    if let Some(mode) = file.follow_up_mode.take("followUpMode", warnings) {
        s.follow_up_mode = mode;
    }
    match file
        .stream_idle_timeout_seconds
        .take("streamIdleTimeoutSeconds", warnings)
    {
        Some(secs) if secs > 0.0 && secs.is_finite() => {
            s.stream_idle_timeout = Duration::from_secs_f64(secs)
        }
        Some(_) => warnings.push(
            "settings: \"streamIdleTimeoutSeconds\" must be a positive number; ignored".into(),
        ),
        None => {}
    }
    match file
        .mcp_startup_wait_seconds
        .take("mcpStartupWaitSeconds", warnings)
    {
        Some(secs) if secs >= 0.0 && secs.is_finite() => {
            s.mcp_startup_wait = Duration::from_secs_f64(secs)
        }
        Some(_) => warnings.push(
            "settings: \"mcpStartupWaitSeconds\" must be a number of seconds; ignored".into(),
        ),
        None => {}
    }
    if let Some(compaction) = file.compaction.take("compaction", warnings) {
        s.compaction = CompactionSettings::from_map(compaction, warnings);
    }
    s.mcp_permissions = match &unreadable {
        Some(e) => Err(e.clone()),
        None => mcp_permissions(
            user_permissions.clone(),
            project_permissions.clone(),
            project_trusted,
            warnings,
        ),
    };
    s.bash_permissions = match unreadable {
        Some(e) => Err(e),
        None => bash_permissions(
            user_permissions,
            project_permissions,
            project_trusted,
            warnings,
        ),
    };
    s
}

/// The user's `permissions.mcp` with the project's merged in: as it is when trusted, else
/// without the project's `allow` (a project may add what asks or is refused, never exempt).
fn mcp_permissions(
    user: Option<Value>,
    project: Option<Value>,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Result<McpPermissions, String> {
    let decode = |value: Option<Value>, file: &str| -> Result<McpPermissions, String> {
        let Some(value) = value else {
            return Ok(McpPermissions::default());
        };
        serde_json::from_value::<PermissionsForMcp>(value)
            .map(|p| p.mcp.unwrap_or_default())
            .map_err(|e| format!("{file} permissions.mcp: {e}"))
    };
    let mut rules = decode(user, "user settings")?;
    let mut project = decode(project, "project settings")?;
    if !trusted && !project.allow.is_empty() {
        warnings.push(
            "the project's .nova/settings.json may only tighten permissions; ignoring its \
             permissions.mcp \"allow\" rules (trust the project with --trust-project or the \
             trustedProjects setting)"
                .into(),
        );
        project.allow.clear();
    }
    rules.ask.extend(project.ask);
    rules.allow.extend(project.allow);
    rules.deny.extend(project.deny);
    Ok(rules)
}

/// The user's `permissions.bash` with the project's merged in: as it is when trusted, else
/// only what tightens it.
fn bash_permissions(
    user: Option<Value>,
    project: Option<Value>,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Result<BashPermissions, String> {
    let decode = |value: Option<Value>, file: &str| -> Result<BashPermissions, String> {
        let Some(value) = value else {
            return Ok(BashPermissions::default());
        };
        serde_json::from_value::<Permissions>(value)
            .map(|p| p.bash.unwrap_or_default())
            .map_err(|e| format!("{file} permissions.bash: {e}"))
    };
    let mut rules = decode(user, "user settings")?;
    let project = decode(project, "project settings")?;
    if !trusted {
        let mut ignored = Vec::new();
        if !project.allow.is_empty() {
            ignored.push("its \"allow\" rules");
        }
        if project
            .mode
            .is_some_and(|m| m < rules.mode.unwrap_or(PermissionMode::Flagged))
        {
            ignored.push("a looser \"mode\"");
        }
        if !ignored.is_empty() {
            warnings.push(format!(
                "the project's .nova/settings.json may only tighten permissions; ignoring {} \
                 (trust the project with --trust-project or the trustedProjects setting)",
                ignored.join(" and ")
            ));
        }
        let strictest = rules.mode.max(project.mode);
        rules.mode = strictest;
        rules.ask.extend(project.ask);
        rules.deny.extend(project.deny);
        return Ok(rules);
    }
    if project.mode.is_some() {
        rules.mode = project.mode;
    }
    rules.ask.extend(project.ask);
    rules.allow.extend(project.allow);
    rules.deny.extend(project.deny);
    Ok(rules)
}

/// Whether the user's `trustedProjects` lists `cwd` (compared after resolving symlinks).
fn is_trusted(list: Option<Value>, cwd: &Path, warnings: &mut Vec<String>) -> bool {
    let Some(list) = list else {
        return false;
    };
    let paths: Vec<PathBuf> = match serde_json::from_value(list) {
        Ok(p) => p,
        Err(e) => {
            warnings.push(format!("settings: \"trustedProjects\": {e}; ignored"));
            return false;
        }
    };
    let here = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    paths
        .iter()
        .any(|p| p.canonicalize().unwrap_or_else(|_| p.clone()) == here)
}

/// `Ok(None)` when the file does not exist. An invalid file is an error naming the file, line
/// and column.
fn read_object(path: &Path) -> Result<Option<Map<String, Value>>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(o)) => Ok(Some(o)),
        Ok(_) => Err(format!(
            "{}: settings must be a JSON object",
            path.display()
        )),
        Err(e) => Err(format!(
            "{}:{}:{}: invalid JSON: {e}",
            path.display(),
            e.line(),
            e.column()
        )),
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

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
