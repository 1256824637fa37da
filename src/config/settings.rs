//! `settings.json`: the agent dir's (the user's), with the project's `.pi/settings.json` (Pi's,
//! for a repository that keeps one) and then its `.nova/settings.json` merged over it one level
//! deep (as Pi merges `.pi/settings.json`), decoded with serde into typed [`Settings`].
//!
//! Each key decodes on its own ([`Lenient`]): a bad value is reported naming its key and falls
//! back to the default while every other key still applies; unknown keys are ignored.
//!
//! Safety settings (`permissions`, `sandbox`) come from the project file only to tighten what
//! the user set, unless the user trusts the project ([`super::trust`]: `--approve`, a saved
//! decision in `trust.json`, `trustedProjects`, `defaultProjectTrust`): a cloned repository, or
//! a model that wrote into it, must not be able to switch the gate off. What decides trust is
//! read from the user's side only.
//!
//! `skills` and `prompts` (lists of files or directories) are not merged but added up, user's
//! first, as in Pi: a relative path counts from the directory of the file that lists it.

use crate::gate::classify::{Mode as GateMode, Rules};
use crate::protocol::{QueueMode, SourceScope, ThinkingLevel};
use crate::sandbox::{Mode as SandboxMode, SandboxSettings};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub default_provider: Option<String>,
    pub default_model: Option<String>,
    /// The thinking level a session starts with and a model switch goes to (Pi's `medium` when
    /// unset).
    pub default_thinking_level: Option<ThinkingLevel>,
    /// Model patterns that scope `cycle_model` (the same syntax as `--models`).
    pub enabled_models: Option<Vec<String>>,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    /// How long a provider may send nothing before the turn fails.
    pub stream_idle_timeout: Duration,
    pub compaction: CompactionSettings,
    pub retry: RetrySettings,
    pub ollama: OllamaSettings,
    /// `permissions.bash`, after the project rule above. `Err` when a settings file could not be
    /// read as JSON or the rules are invalid: the gate then asks before every command.
    pub bash_permissions: Result<Rules, String>,
    /// `sandbox`, after the project rule above; `Err` names what was invalid.
    pub sandbox: Result<SandboxSettings, String>,
    /// `permissions.mcp`, after the same project rule; `Err` makes every MCP call ask.
    pub mcp_permissions: Result<McpPermissions, String>,
    /// `mcpStartupWaitSeconds`: how long the first prompt waits for MCP servers still starting.
    pub mcp_startup_wait: Duration,
    /// `extensionHookTimeoutSeconds`: how long an extension's hooks (`tool_call`,
    /// `tool_result`, `input`, `before_agent_start`, `context`) may hold up their call.
    pub extension_hook_timeout: Duration,
    /// `maxTurns`: the most replies one prompt may take (none: no limit, as in Pi).
    pub max_turns: Option<u32>,
    /// Whether the project's safety settings were taken as they are.
    pub project_trusted: bool,
    /// `skills`: more places to load skills from.
    pub skills: Vec<ListedPath>,
    /// `prompts`: more places to load prompt templates from.
    pub prompts: Vec<ListedPath>,
    /// `extensions`: Pi extension files or directories to load.
    pub extensions: Vec<ListedPath>,
    /// `packages`: Pi packages, the user's then the project's (a project's count only when it
    /// is trusted; [`super::packages::resolve`] decides).
    pub packages: Vec<super::packages::Entry>,
    /// `sessionDir`, as written (resolved from the cwd by whoever uses it): the user's, or a
    /// trusted project's.
    pub session_dir: Option<String>,
}

/// An entry of the `skills` or `prompts` setting, made absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPath {
    pub path: PathBuf,
    /// Which settings file listed it.
    pub scope: SourceScope,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_provider: None,
            default_model: None,
            default_thinking_level: None,
            enabled_models: None,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            stream_idle_timeout: Duration::from_secs(120),
            compaction: CompactionSettings::default(),
            retry: RetrySettings::default(),
            ollama: OllamaSettings::default(),
            bash_permissions: Ok(Rules::default()),
            sandbox: Ok(SandboxSettings::default()),
            mcp_permissions: Ok(McpPermissions::default()),
            mcp_startup_wait: Duration::from_secs(10),
            extension_hook_timeout: Duration::from_secs(30),
            max_turns: None,
            project_trusted: false,
            skills: Vec::new(),
            prompts: Vec::new(),
            extensions: Vec::new(),
            packages: Vec::new(),
            session_dir: None,
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

/// The `retry` object: Pi 1.6's agent-level automatic retry, with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    pub enabled: bool,
    /// Retries after the first failure (so `maxRetries + 1` requests at most).
    pub max_retries: u32,
    /// The first wait; each further retry doubles it.
    pub base_delay: Duration,
    /// `maxAgentDelayMs`: the longest wait. Backoff stops growing there, and a server asking
    /// (`Retry-After`) for longer is not retried at all.
    pub max_delay: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// The `ollama` object: how nova asks an Ollama server to hold its models.
#[derive(Debug, Clone, PartialEq)]
pub struct OllamaSettings {
    /// The most context a model found without a models.json is loaded with (its trained
    /// length when smaller). Ollama reserves memory for the whole length up front.
    pub max_discovered_context: u64,
    /// `keep_alive` for every request: a duration such as `"30m"`, or seconds (`-1`: forever).
    pub keep_alive: Option<Value>,
}

impl Default for OllamaSettings {
    fn default() -> Self {
        OllamaSettings {
            max_discovered_context: crate::config::models::DEFAULT_OLLAMA_MAX_CONTEXT,
            keep_alive: None,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct OllamaFile {
    max_discovered_context: Lenient<u64>,
    keep_alive: Lenient<Value>,
}

impl OllamaSettings {
    /// The defaults with every valid key of the `ollama` object applied.
    fn from_map(map: Map<String, Value>, warnings: &mut Vec<String>) -> Self {
        let file: OllamaFile = serde_json::from_value(Value::Object(map)).unwrap_or_default();
        let mut s = OllamaSettings::default();
        match file
            .max_discovered_context
            .take("ollama.maxDiscoveredContext", warnings)
        {
            Some(0) => warnings.push(
                "settings: \"ollama.maxDiscoveredContext\" must be a positive number of tokens; ignored"
                    .into(),
            ),
            Some(n) => s.max_discovered_context = tokens("ollama.maxDiscoveredContext", n, warnings),
            None => {}
        }
        match file.keep_alive.take("ollama.keepAlive", warnings) {
            Some(v @ (Value::String(_) | Value::Number(_))) => s.keep_alive = Some(v),
            Some(other) => warnings.push(format!(
                "settings: \"ollama.keepAlive\" is {other}; expected a duration such as \"30m\" or a number of seconds; ignored"
            )),
            None => {}
        }
        s
    }
}

/// `permissions.mcp`: globs over MCP tools' model-facing names (`mcp__server__tool`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpPermissions {
    pub ask: Vec<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
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
    default_thinking_level: Lenient<ThinkingLevel>,
    enabled_models: Lenient<Vec<String>>,
    steering_mode: Lenient<QueueMode>,
    follow_up_mode: Lenient<QueueMode>,
    stream_idle_timeout_seconds: Lenient<f64>,
    mcp_startup_wait_seconds: Lenient<f64>,
    extension_hook_timeout_seconds: Lenient<f64>,
    compaction: Lenient<Map<String, Value>>,
    ollama: Lenient<Map<String, Value>>,
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
            s.reserve_tokens = tokens("compaction.reserveTokens", v, warnings);
        }
        if let Some(v) = file
            .keep_recent_tokens
            .take("compaction.keepRecentTokens", warnings)
        {
            s.keep_recent_tokens = tokens("compaction.keepRecentTokens", v, warnings);
        }
        s
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RetryFile {
    enabled: Lenient<bool>,
    max_retries: Lenient<u32>,
    base_delay_ms: Lenient<u64>,
    max_agent_delay_ms: Lenient<u64>,
}

/// The most retries a setting may ask for: each one is a paid request, and Pi's default is 3.
pub const MAX_RETRIES: u32 = 10;
/// The longest backoff or `maxAgentDelayMs` a setting may ask for.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

impl RetrySettings {
    /// `self` with every valid key of a `retry` object applied, within [`MAX_RETRIES`] and
    /// [`MAX_RETRY_DELAY`]. Pi's `retry.provider.*` keys (retries inside the HTTP client) have
    /// no counterpart in nova and are ignored.
    fn apply(mut self, map: Map<String, Value>, warnings: &mut Vec<String>) -> Self {
        let file: RetryFile = serde_json::from_value(Value::Object(map)).unwrap_or_default();
        if let Some(v) = file.enabled.take("retry.enabled", warnings) {
            self.enabled = v;
        }
        if let Some(v) = file.max_retries.take("retry.maxRetries", warnings) {
            self.max_retries = v.min(MAX_RETRIES);
            if v > MAX_RETRIES {
                warnings.push(format!(
                    "settings: \"retry.maxRetries\" is {v}; at most {MAX_RETRIES} retries are made"
                ));
            }
        }
        let delay = |value: Option<u64>, key: &str, warnings: &mut Vec<String>| {
            let ms = value?;
            let max = MAX_RETRY_DELAY.as_millis() as u64;
            if ms > max {
                warnings.push(format!(
                    "settings: \"{key}\" is {ms} ms; at most {max} ms (one hour) is used"
                ));
            }
            Some(Duration::from_millis(ms.min(max)))
        };
        let base = file.base_delay_ms.take("retry.baseDelayMs", warnings);
        if let Some(d) = delay(base, "retry.baseDelayMs", warnings) {
            self.base_delay = d;
        }
        let max = file
            .max_agent_delay_ms
            .take("retry.maxAgentDelayMs", warnings);
        if let Some(d) = delay(max, "retry.maxAgentDelayMs", warnings) {
            self.max_delay = d;
        }
        self
    }

    /// The user's settings with an untrusted project's `retry` taken only where it means
    /// fewer requests, later: retries off, fewer of them, longer waits. A project that could
    /// raise them would let a cloned repository run up the user's bill against a failing
    /// provider.
    fn tightened_by(self, project: RetrySettings, warnings: &mut Vec<String>) -> Self {
        let mut ignored = Vec::new();
        if project.enabled && !self.enabled {
            ignored.push("\"enabled\": true");
        }
        if project.max_retries > self.max_retries {
            ignored.push("a higher \"maxRetries\"");
        }
        if project.base_delay < self.base_delay {
            ignored.push("a shorter \"baseDelayMs\"");
        }
        if project.max_delay < self.max_delay {
            ignored.push("a shorter \"maxAgentDelayMs\"");
        }
        warn_untightened("retry", &ignored, warnings);
        RetrySettings {
            enabled: self.enabled && project.enabled,
            max_retries: self.max_retries.min(project.max_retries),
            base_delay: self.base_delay.max(project.base_delay),
            max_delay: self.max_delay.max(project.max_delay),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PermissionsForMcp {
    mcp: Option<McpPermissions>,
}

/// Where settings come from.
pub struct Sources<'a> {
    pub user: &'a Path,
    /// `None` for what the process shares, which no project may change.
    pub project: Option<&'a Path>,
    /// Pi's `.pi/settings.json` of the same project, below `project`: a key both set is
    /// `project`'s.
    pub pi_project: Option<&'a Path>,
    pub cwd: &'a Path,
    /// `--approve` (`Some(true)`) or `--no-approve` (`Some(false)`), where it applies.
    pub trust_flag: Option<bool>,
    /// The agent dir's `trust.json`: the saved trust decisions.
    pub trust_file: &'a Path,
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
    // Pi's file first, then nova's, each with the file its relative paths count from.
    let mut projects: Vec<(&Path, Map<String, Value>)> = [sources.pi_project, sources.project]
        .into_iter()
        .flatten()
        .map(|path| (path, read(path, warnings).unwrap_or_default()))
        .collect();

    // What decides trust is the user's alone: a project's own say is dropped unread.
    for (_, project) in &mut projects {
        project.remove("trustedProjects");
        project.remove("defaultProjectTrust");
    }
    let project_trusted = super::trust::decide(
        super::trust::Inputs {
            flag: sources.trust_flag,
            trust_file: sources.trust_file,
            trusted_projects: user.remove("trustedProjects"),
            default: user.remove("defaultProjectTrust"),
            cwd: sources.cwd,
        },
        warnings,
    );
    let mut listed = |key: &str, warnings: &mut Vec<String>| {
        let mut paths = listed_paths(&mut user, key, sources.user, SourceScope::User, warnings);
        for (file, project) in &mut projects {
            paths.extend(listed_paths(
                project,
                key,
                file,
                SourceScope::Project,
                warnings,
            ));
        }
        paths
    };
    let skills = listed("skills", warnings);
    let prompts = listed("prompts", warnings);
    let extensions = listed("extensions", warnings);
    let mut packages = Vec::new();
    if let Some(value) = user.remove("packages") {
        packages.extend(super::packages::from_settings(
            value,
            sources.user,
            SourceScope::User,
            warnings,
        ));
    }
    for (file, project) in &mut projects {
        if let Some(value) = project.remove("packages") {
            packages.extend(super::packages::from_settings(
                value,
                file,
                SourceScope::Project,
                warnings,
            ));
        }
    }
    let mut project = Map::new();
    for (_, file) in projects {
        merge_one_level(&mut project, file);
    }
    let session_dir = session_dir(
        user.remove("sessionDir"),
        project.remove("sessionDir"),
        project_trusted,
        warnings,
    );
    let user_permissions = user.remove("permissions");
    let project_permissions = project.remove("permissions");
    let user_sandbox = user.remove("sandbox");
    let project_sandbox = project.remove("sandbox");
    let user_retry = user.remove("retry");
    let project_retry = project.remove("retry");
    let max_turns = max_turns(
        user.remove("maxTurns"),
        project.remove("maxTurns"),
        project_trusted,
        warnings,
    );
    let mut merged = user;
    merge_one_level(&mut merged, project);
    let file: File = serde_json::from_value(Value::Object(merged)).unwrap_or_default();
    let mut s = Settings {
        project_trusted,
        max_turns,
        skills,
        prompts,
        extensions,
        packages,
        session_dir,
        ..Settings::default()
    };
    s.default_provider = file.default_provider.take("defaultProvider", warnings);
    s.default_model = file.default_model.take("defaultModel", warnings);
    s.default_thinking_level = file
        .default_thinking_level
        .take("defaultThinkingLevel", warnings);
    s.enabled_models = file.enabled_models.take("enabledModels", warnings);
    if let Some(mode) = file.steering_mode.take("steeringMode", warnings) {
        s.steering_mode = mode;
    }
    if let Some(mode) = file.follow_up_mode.take("followUpMode", warnings) {
        s.follow_up_mode = mode;
    }
    let idle = file
        .stream_idle_timeout_seconds
        .take("streamIdleTimeoutSeconds", warnings);
    if let Some(d) = positive_seconds(idle, "streamIdleTimeoutSeconds", 3600.0, warnings) {
        s.stream_idle_timeout = d;
    }
    match file
        .mcp_startup_wait_seconds
        .take("mcpStartupWaitSeconds", warnings)
    {
        Some(secs) if secs >= 0.0 && secs.is_finite() => {
            s.mcp_startup_wait = seconds("mcpStartupWaitSeconds", secs, 600.0, warnings)
        }
        Some(_) => warnings.push(
            "settings: \"mcpStartupWaitSeconds\" must be a number of seconds; ignored".into(),
        ),
        None => {}
    }
    let hooks = file
        .extension_hook_timeout_seconds
        .take("extensionHookTimeoutSeconds", warnings);
    if let Some(d) = positive_seconds(hooks, "extensionHookTimeoutSeconds", 3600.0, warnings) {
        s.extension_hook_timeout = d;
    }
    if let Some(compaction) = file.compaction.take("compaction", warnings) {
        s.compaction = CompactionSettings::from_map(compaction, warnings);
    }
    s.retry = retry(user_retry, project_retry, project_trusted, warnings);
    if let Some(ollama) = file.ollama.take("ollama", warnings) {
        s.ollama = OllamaSettings::from_map(ollama, warnings);
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
    s.sandbox = sandbox(user_sandbox, project_sandbox, project_trusted, warnings);
    s
}

/// `secs` (finite, not negative) as a duration of at most `max` seconds: a huge value would
/// wait for ever, and one past `Duration`'s range could not be represented at all.
/// A setting that must be a positive number of seconds: at most `max`, and `None` with a
/// warning when it is zero, negative or not finite.
fn positive_seconds(
    secs: Option<f64>,
    key: &str,
    max: f64,
    warnings: &mut Vec<String>,
) -> Option<Duration> {
    let secs = secs?;
    if secs > 0.0 && secs.is_finite() {
        return Some(seconds(key, secs, max, warnings));
    }
    warnings.push(format!(
        "settings: \"{key}\" must be a positive number; ignored"
    ));
    None
}

fn seconds(key: &str, secs: f64, max: f64, warnings: &mut Vec<String>) -> Duration {
    if secs > max {
        warnings.push(format!(
            "settings: \"{key}\" is {secs} seconds; at most {max} seconds is used"
        ));
    }
    Duration::from_secs_f64(secs.min(max))
}

/// A token count from settings, at most [`MAX_TOKENS_SETTING`].
fn tokens(key: &str, n: u64, warnings: &mut Vec<String>) -> u64 {
    if n > MAX_TOKENS_SETTING {
        warnings.push(format!(
            "settings: \"{key}\" is {n} tokens; at most {MAX_TOKENS_SETTING} is used"
        ));
    }
    n.min(MAX_TOKENS_SETTING)
}

/// Larger than any model's context window; token settings past it can only be mistakes (and
/// would overflow the arithmetic that compares them with a window).
pub const MAX_TOKENS_SETTING: u64 = 1 << 24;

/// The user's `retry` with the project's applied over it: key by key when trusted, else
/// only where it tightens.
fn retry(
    user: Option<Value>,
    project: Option<Value>,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> RetrySettings {
    let object = |value: Option<Value>, warnings: &mut Vec<String>| {
        let value: Lenient<Map<String, Value>> =
            serde_json::from_value(value.unwrap_or(Value::Null)).unwrap_or_default();
        value.take("retry", warnings)
    };
    let mut settings = RetrySettings::default();
    if let Some(map) = object(user, warnings) {
        settings = settings.apply(map, warnings);
    }
    match object(project, warnings) {
        Some(map) if trusted => settings.apply(map, warnings),
        Some(map) => {
            let wanted = settings.apply(map, warnings);
            settings.tightened_by(wanted, warnings)
        }
        None => settings,
    }
}

/// `maxTurns`, a positive whole number. A limit keeps an unattended run from looping, so an
/// untrusted project may lower the user's but not raise or remove it.
fn max_turns(
    user: Option<Value>,
    project: Option<Value>,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Option<u32> {
    let read = |value: Option<Value>, warnings: &mut Vec<String>| {
        let value = value.filter(|v| !v.is_null())?;
        match value.as_u64().filter(|n| *n > 0) {
            Some(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
            None => {
                warnings.push(format!(
                    "settings: \"maxTurns\" must be a whole number above 0, not {value}; ignored"
                ));
                None
            }
        }
    };
    let user = read(user, warnings);
    let project = read(project, warnings);
    match (user, project) {
        (_, None) => user,
        (_, Some(p)) if trusted => Some(p),
        (Some(u), Some(p)) if p > u => {
            warn_untightened("maxTurns", &["a higher limit"], warnings);
            Some(u)
        }
        (_, Some(p)) => Some(p),
    }
}

/// `sessionDir`: the user's, or a trusted project's. Sessions are files nova itself writes,
/// outside the sandbox, so an untrusted project (a cloned repository, or a model that wrote into
/// it) must not choose where; Pi reads it regardless, before asking about trust.
fn session_dir(
    user: Option<Value>,
    project: Option<Value>,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let read = |value: Option<Value>, warnings: &mut Vec<String>| match value? {
        Value::String(dir) if !dir.trim().is_empty() => Some(dir),
        Value::Null => None,
        other => {
            warnings.push(format!(
                "settings: \"sessionDir\" must be a directory's path, not {other}; ignored"
            ));
            None
        }
    };
    let user = read(user, warnings);
    match read(project, warnings) {
        Some(dir) if trusted => Some(dir),
        Some(_) => {
            warnings.push(
                "the project is not trusted, so its \"sessionDir\" setting is ignored (trust \
                 it with --approve, trust.json or the trustedProjects setting)"
                    .to_owned(),
            );
            user
        }
        None => user,
    }
}

/// The one line an untrusted project's loosening gets: what of `what` was `ignored`, and how to
/// trust the project.
fn warn_untightened(what: &str, ignored: &[&str], warnings: &mut Vec<String>) {
    if !ignored.is_empty() {
        warnings.push(format!(
            "the project's .nova/settings.json may only tighten {what}; ignoring {} \
             (trust the project with --approve, trust.json or the trustedProjects setting)",
            ignored.join(" and ")
        ));
    }
}

/// How strict a sandbox mode is, for "a project may only tighten".
fn strictness(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::Off => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::ReadOnly => 2,
    }
}

/// The user's `sandbox` with the project's merged in: key by key when trusted, else only a
/// stricter mode and `network: false`.
fn sandbox(
    user: Option<Value>,
    project: Option<Value>,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Result<SandboxSettings, String> {
    if trusted {
        // Key by key when both are objects; otherwise whichever value stands is validated, so a
        // malformed one is still reported.
        let merged = match (user, project) {
            (Some(Value::Object(mut u)), Some(Value::Object(p))) => {
                u.extend(p);
                Some(Value::Object(u))
            }
            (None, other) | (other, None) => other,
            (Some(Value::Object(_)), bad) | (bad, _) => bad,
        };
        return SandboxSettings::from_settings(merged.as_ref());
    }
    let mut settings = SandboxSettings::from_settings(user.as_ref())?;
    let Some(project) = project else {
        return Ok(settings);
    };
    let wanted =
        SandboxSettings::from_settings(Some(&project)).map_err(|e| format!("project {e}"))?;
    let set = |key: &str| project.get(key).is_some_and(|v| !v.is_null());
    let mut ignored = Vec::new();
    if set("mode") {
        if strictness(wanted.mode) >= strictness(settings.mode) {
            settings.mode = wanted.mode;
        } else {
            ignored.push("a looser \"mode\"");
        }
    }
    if !wanted.writable_roots.is_empty() {
        ignored.push("its \"writableRoots\"");
    }
    if set("network") && wanted.network && !settings.network {
        ignored.push("\"network\": true");
    }
    settings.network &= wanted.network;
    warn_untightened("the sandbox", &ignored, warnings);
    Ok(settings)
}

/// How strict a gate mode is, for "a project may only tighten".
fn gate_strictness(mode: GateMode) -> u8 {
    match mode {
        GateMode::Never => 0,
        GateMode::Flagged => 1,
        GateMode::Always => 2,
    }
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
        warn_untightened(
            "permissions",
            &["its permissions.mcp \"allow\" rules"],
            warnings,
        );
        project.allow.clear();
    }
    rules.ask.extend(project.ask);
    rules.allow.extend(project.allow);
    rules.deny.extend(project.deny);
    Ok(rules)
}

/// The user's `permissions.bash` with the project's merged in: as it is when trusted, else
/// only what tightens it. The gate validates its own section (`Rules::from_settings`).
fn bash_permissions(
    user: Option<Value>,
    project: Option<Value>,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Result<Rules, String> {
    let bash = |value: &Option<Value>| value.as_ref().and_then(|p| p.get("bash")).cloned();
    let (user, project) = (bash(&user), bash(&project));
    let mut rules =
        Rules::from_settings(user.as_ref()).map_err(|e| format!("user settings {e}"))?;
    let wanted =
        Rules::from_settings(project.as_ref()).map_err(|e| format!("project settings {e}"))?;
    let mode_set = project
        .as_ref()
        .and_then(|p| p.get("mode"))
        .is_some_and(|m| !m.is_null());
    rules.ask.extend(wanted.ask);
    rules.deny.extend(wanted.deny);
    if trusted {
        if mode_set {
            rules.mode = wanted.mode;
        }
        rules.allow.extend(wanted.allow);
        return Ok(rules);
    }
    let mut ignored = Vec::new();
    if !wanted.allow.is_empty() {
        ignored.push("its \"allow\" rules");
    }
    if mode_set {
        if gate_strictness(wanted.mode) >= gate_strictness(rules.mode) {
            rules.mode = wanted.mode;
        } else {
            ignored.push("a looser \"mode\"");
        }
    }
    warn_untightened("permissions", &ignored, warnings);
    Ok(rules)
}

/// Takes `key` (a list of paths) out of one file's settings, resolved against the directory
/// of `file`; `~` is the home directory.
fn listed_paths(
    settings: &mut Map<String, Value>,
    key: &str,
    file: &Path,
    scope: SourceScope,
    warnings: &mut Vec<String>,
) -> Vec<ListedPath> {
    let Some(value) = settings.remove(key) else {
        return Vec::new();
    };
    let entries: Vec<String> = match serde_json::from_value(value) {
        Ok(e) => e,
        Err(e) => {
            warnings.push(format!(
                "settings: \"{key}\" in {}: {e}; ignored",
                file.display()
            ));
            return Vec::new();
        }
    };
    let dir = file.parent().unwrap_or(Path::new(""));
    entries
        .iter()
        .map(|entry| ListedPath {
            path: crate::files::path::resolve(entry, dir),
            scope,
        })
        .collect()
}

/// `Ok(None)` when the file does not exist. An invalid file is an error naming the file, line
/// and column.
fn read_object(path: &Path) -> Result<Option<Map<String, Value>>, String> {
    let text = match crate::files::safe_open::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    parse_object(&text, path).map(Some)
}

/// The text of a settings file (`path` names it in errors) as its object: what nova reads, and
/// what `nova import pi` checks Pi's file with.
pub fn parse_object(text: &str, path: &Path) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(text) {
        Ok(Value::Object(o)) => Ok(o),
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
