//! Flags, agent dir, `models.json` and `settings.json` → what the process shares
//! ([`Process`]), then one validated [`Config`] per session ([`Process::session`]).

pub mod auth;
pub mod builtin;
pub mod catalog;
pub mod cli;
mod error;
pub mod extensions;
pub mod models;
pub mod oauth;
pub mod packages;
pub mod radius;
pub mod scope;
mod serve;
pub mod settings;
mod tools;
pub mod trust;

use crate::gate::classify::Gate;
use crate::mcp::{self, McpConfig};
use crate::protocol::{Model, ThinkingLevel};
use crate::warnings::Warnings;
pub use cli::{Cli, Mode};
pub use error::ConfigError;
pub use models::{DiscoveredModel, ProviderConfig, Registry};
pub use scope::ScopedModel;
pub use serve::{AttachArgs, LogFormat, ServeArgs};
pub use settings::{
    CompactionSettings, ListedPath, McpPermissions, OllamaSettings, RetrySettings, Settings,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
pub use tools::{ToolFlags, ToolSelection};

#[derive(Debug)]
pub struct Config {
    pub agent_dir: PathBuf,
    pub cwd: PathBuf,
    /// Shared by every session of the process.
    pub registry: Arc<Registry>,
    pub settings: Settings,
    /// The startup model; `None` when nothing is declared (then `prompt` explains why).
    pub model: Option<Model>,
    /// `--model`/`--provider` named it: a resumed session's model does not replace it.
    pub model_explicit: bool,
    /// `--thinking`, else the level the scope's pattern gave the startup model.
    pub thinking_level: Option<ThinkingLevel>,
    /// `--models`, else `enabledModels`: what `cycle_model` goes through (all models when empty).
    pub scope: Vec<ScopedModel>,
    pub tools: ToolSelection,
    /// The bash permission gate's rules (`permissions.bash` in settings), compiled.
    pub permissions: Gate,
    /// `compaction` in settings.
    pub compaction: CompactionSettings,
    /// `--sandbox` and `sandbox` in settings.
    pub sandbox: crate::sandbox::Sandbox,
    /// The MCP servers of the `mcp.json` files, `permissions.mcp` and the startup wait.
    pub mcp: McpConfig,
    /// `--system-prompt`, already read from its file when it named one.
    pub system_prompt: Option<String>,
    pub append_system_prompt: Option<String>,
    pub no_session: bool,
    /// `--max-turns`, else the `maxTurns` setting.
    pub max_turns: Option<u32>,
    pub session_dir: Option<PathBuf>,
    /// Which conversation it starts with.
    pub resume: Resume,
    /// `--name`: the display name the session gets.
    pub session_name: Option<String>,
    /// Problems with this session's settings files, reported once on stderr; nova runs on
    /// without them.
    pub warnings: Vec<String>,
    /// What the session finds wrong later (the sandbox's checks, MCP servers, a provider): the
    /// agent routes them to its front end.
    pub later: Warnings,
    /// The Pi extensions the session loads ([`extensions::find`]); none means no Node.
    pub extensions: Vec<extensions::Extension>,
    /// The command line's options for them (`pi.registerFlag`), which their host checks.
    pub extension_flags: Vec<cli::ExtensionFlag>,
}

/// Pi's variable for where sessions go, which nova reads under the same name.
pub const SESSION_DIR_VAR: &str = "PI_CODING_AGENT_SESSION_DIR";

/// Where sessions are kept and looked up, in Pi's order: `--session-dir`, else
/// `$PI_CODING_AGENT_SESSION_DIR`, else the `sessionDir` setting (a relative one counting from
/// `cwd`, `~` the home directory); `None` for the agent dir's per-directory default.
fn chosen_session_dir(flag: Option<&Path>, setting: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    if let Some(dir) = flag {
        return Some(dir.to_path_buf());
    }
    let env = std::env::var(SESSION_DIR_VAR)
        .ok()
        .filter(|d| !d.trim().is_empty());
    env.as_deref()
        .or(setting)
        .map(|dir| crate::files::path::resolve(dir, cwd))
}

/// `$NOVA_AGENT_DIR`, else `~/.nova/agent`.
pub fn agent_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("NOVA_AGENT_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".nova").join("agent")
}

/// What every session of the process shares, read once: the agent dir, the model registry
/// (models.json, or the local Ollama's models; with the built-in providers) and the command
/// line, whose flags each session starts from.
#[derive(Debug)]
pub struct Process {
    pub agent_dir: PathBuf,
    /// `--session-dir`, which confines session lookups to itself.
    pub session_dir: Option<PathBuf>,
    pub registry: Arc<Registry>,
    cli: Cli,
    /// `--system-prompt` and `--append-system-prompt`, already read from their files.
    system_prompt: Option<String>,
    append_system_prompt: Option<String>,
    tools: ToolSelection,
    /// Problems with models.json; those of settings files are reported by each session.
    pub warnings: Vec<String>,
    /// The directory nova was started in, the only one `--approve` trusts.
    start_dir: Option<PathBuf>,
}

/// How a session begins: a new conversation, a stored one, or the newest one of its cwd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    New,
    /// `--session`: an id, a unique id prefix or a path, as a person types it.
    Query(String),
    /// The session whose header id is exactly this (a client naming one it listed).
    Id(String),
    /// A session file; a relative path is taken from the session's cwd.
    Path(PathBuf),
    /// `--continue`: the newest session of the cwd, or a new one when it has none.
    Newest,
    /// `--session-id`: the cwd's session with exactly this id, else a new one with it.
    OwnId(String),
    /// `--fork`: a copy of a session (found as [`Resume::Query`] finds it) as a new session of
    /// the cwd, whose id is `id` when given.
    Fork {
        query: String,
        id: Option<String>,
    },
}

/// A model named by its id, and by its provider when more than one declares that id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub provider: Option<String>,
    pub id: String,
}

/// One session a front end asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSpec {
    /// Where its tools work, whose project settings, sandbox and files apply.
    pub cwd: PathBuf,
    pub resume: Resume,
    /// The model to start with, instead of the settings' default (a resumed conversation
    /// keeps it too).
    pub model: Option<ModelChoice>,
    /// MCP servers the client brings (ACP's `session/new`), beside those of the mcp.json
    /// files; one of the same name replaces the file's.
    pub mcp_servers: Vec<mcp::ClientServer>,
    /// `--name`: the display name the session gets.
    pub name: Option<String>,
    /// What the user's extensions' `project_trust` handlers decided (see [`Process::trust_voters`]),
    /// which only `--approve`/`--no-approve` overrule.
    pub trust_vote: Option<bool>,
}

impl SessionSpec {
    /// A new conversation in `cwd` with the default model and only the configured MCP servers.
    pub fn new(cwd: PathBuf) -> SessionSpec {
        SessionSpec {
            cwd,
            resume: Resume::New,
            model: None,
            mcp_servers: Vec::new(),
            name: None,
            trust_vote: None,
        }
    }
}

/// Reads what the process shares. An `Err` is a usage error: the caller prints it and exits 2.
///
/// Without a `models.json`, `discover` is asked which models the Ollama server at the given
/// base URL has pulled; asking is the caller's business (it is HTTP), so configuration stays
/// plain file reading. The registry follows the user's settings only (`ollama.*`): a project
/// cannot change what the whole process discovers.
pub async fn load_process(
    cli: Cli,
    agent_dir: PathBuf,
    discover: impl AsyncFnOnce(&str) -> Vec<DiscoveredModel>,
) -> Result<Process, ConfigError> {
    let mut warnings = Vec::new();
    // Its warnings are the user file's, which every session reports when it reads the file.
    let user_settings = settings::load(
        &settings::Sources {
            user: &agent_dir.join("settings.json"),
            project: None,
            pi_project: None,
            cwd: &agent_dir,
            trust_flag: Some(false),
            trust_file: &agent_dir.join(trust::TRUST_FILE),
        },
        &mut Vec::new(),
    );
    let max_context = user_settings.ollama.max_discovered_context;
    let mut registry = match Registry::from_file(&agent_dir.join("models.json"), &mut warnings) {
        Ok(Some(r)) => r,
        Ok(None) => discover_ollama(discover, max_context).await,
        Err(e) => {
            warnings.push(format!("ignoring models.json: {e}"));
            discover_ollama(discover, max_context).await
        }
    };
    registry.set_auth(auth::load(&agent_dir.join("auth.json"), &mut warnings));
    // A key on the command line for a provider named there (`--provider`, or a built-in one
    // in `--model provider/id`) is that provider's, and enables it when it is built in.
    let named = cli.provider.clone().or_else(|| {
        let (provider, _) = cli.model.as_deref()?.split_once('/')?;
        builtin::find(provider).map(|b| b.name.to_owned())
    });
    if let (Some(key), Some(provider)) = (&cli.api_key, &named) {
        registry.set_runtime_key(provider.clone(), key.clone());
    }
    let enabled: Vec<&builtin::Builtin> = builtin::CATALOG
        .iter()
        .filter(|b| builtin_enabled(&registry, b))
        .collect();
    // `nova update --models` may have fetched a newer catalog than the one compiled in.
    let refreshed = catalog::Refreshed::find(&agent_dir);
    for builtin in enabled {
        let found = match refreshed.as_ref().and_then(|r| r.text(builtin.name)) {
            Some(text) => builtin.provider_and_models_from(&text).or_else(|e| {
                warnings.push(format!("ignoring the refreshed catalog: {e}"));
                builtin.provider_and_models()
            }),
            None => builtin.provider_and_models(),
        };
        let (provider, mut models) = match found {
            Ok(found) => found,
            Err(e) => {
                warnings.push(e);
                continue;
            }
        };
        // A login that names the models its account may use (Copilot's) hides the others, as
        // Pi does.
        if let Some(allowed) = registry.login_models(builtin.name) {
            models.retain(|m| allowed.contains(&m.id));
        }
        // The account's own Radius catalog, once fetched, replaces Pi's baseline.
        if builtin.name == "radius"
            && let Some(cached) = radius::cached_models(&agent_dir)
        {
            models = cached;
        }
        registry.add_builtin(provider, models);
    }
    if let Some(key) = cli.api_key.as_ref().filter(|_| named.is_none()) {
        let target = cli
            .model
            .as_deref()
            .and_then(|m| {
                registry
                    .resolve(None, m)
                    .or_else(|| registry.resolve(None, scope::split_thinking(m).0))
            })
            .or_else(|| registry.models().first())
            .map(|m| m.provider.clone());
        if let Some(provider) = target {
            registry.set_runtime_key(provider, key.clone());
        }
    }
    registry.set_keep_alive(user_settings.ollama.keep_alive.as_ref());
    let start_dir = std::env::current_dir().ok();
    Ok(Process {
        system_prompt: cli.system_prompt.as_deref().map(text_or_file).transpose()?,
        append_system_prompt: append_system_prompt(&cli.append_system_prompt)?,
        tools: ToolSelection::from_flags(ToolFlags {
            tools: cli.tools.as_deref(),
            exclude: &cli.exclude_tools,
            no_tools: cli.no_tools,
            no_builtin_tools: cli.no_builtin_tools,
        })?,
        session_dir: chosen_session_dir(
            cli.session_dir.as_deref(),
            user_settings.session_dir.as_deref(),
            start_dir.as_deref().unwrap_or(Path::new("/")),
        ),
        agent_dir,
        registry: Arc::new(registry),
        cli,
        warnings,
        start_dir,
    })
}

impl Process {
    /// The session the command line asks for, in the process's working directory.
    pub fn cli_session(&self) -> Result<SessionSpec, ConfigError> {
        let cwd = std::env::current_dir().map_err(ConfigError::Cwd)?;
        let cli = &self.cli;
        if let Some(id) = &cli.session_id {
            check_session_id(id)?;
        }
        let resume = match (&cli.fork, &cli.session, &cli.session_id) {
            (Some(query), _, id) => Resume::Fork {
                query: query.clone(),
                id: id.clone(),
            },
            (None, Some(query), _) => Resume::Query(query.clone()),
            (None, None, Some(id)) => Resume::OwnId(id.clone()),
            (None, None, None) if cli.continue_newest || cli.resume => Resume::Newest,
            (None, None, None) => Resume::New,
        };
        let model = match (&self.cli.model, &self.cli.provider) {
            (Some(id), provider) => Some(ModelChoice {
                provider: provider.clone(),
                id: id.clone(),
            }),
            (None, _) => None,
        };
        let name = match cli.name.as_deref().map(str::trim) {
            Some("") => return Err(ConfigError::SessionName),
            name => name.map(str::to_owned),
        };
        Ok(SessionSpec {
            resume,
            model,
            name,
            ..SessionSpec::new(cwd)
        })
    }

    /// `--approve` trusts the directory nova was started in and no other (an editor opens
    /// many folders with the flags it was configured with once); `--no-approve` distrusts
    /// every one.
    fn trust_flag(&self, cwd: &Path) -> Option<bool> {
        match self.cli.trust_override() {
            Some(true) => {
                let same = |a: &Path, b: &Path| {
                    a.canonicalize()
                        .ok()
                        .zip(b.canonicalize().ok())
                        .is_some_and(|(a, b)| a == b)
                };
                self.start_dir
                    .as_deref()
                    .is_some_and(|start| same(start, cwd))
                    .then_some(true)
            }
            other => other,
        }
    }

    /// The extensions to ask for their `project_trust` vote before `spec`'s session is
    /// resolved: the user's own (the agent dir's, the user's settings and packages, `-e`),
    /// never the project's, and none when the command line decides or the project has nothing
    /// trust governs.
    pub fn trust_voters(&self, spec: &SessionSpec) -> Vec<extensions::Extension> {
        let (agent_dir, cwd) = (&self.agent_dir, &spec.cwd);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if self.trust_flag(cwd).is_some() || !trust::protected_resources(cwd, home.as_deref()) {
            return Vec::new();
        }
        // Read as for an untrusted project, which leaves every project source out; what is
        // wrong with the files is reported when the session itself reads them.
        let ignored = &mut Vec::new();
        let settings = settings::load(
            &settings::Sources {
                user: &agent_dir.join("settings.json"),
                project: None,
                pi_project: None,
                cwd,
                trust_flag: Some(false),
                trust_file: &agent_dir.join(trust::TRUST_FILE),
            },
            ignored,
        );
        let packaged = packages::resolve(&settings.packages, agent_dir, cwd, false, ignored);
        extensions::find(
            &extensions::Sources {
                agent_dir,
                cwd,
                project_trusted: false,
                settings: &settings.extensions,
                packages: &packaged.extensions,
                flags: &self.cli.extensions,
                no_discovery: self.cli.no_extensions,
            },
            ignored,
        )
        .unwrap_or_default()
    }

    /// Everything one session needs, resolved for its cwd: the project's settings (and trust),
    /// the startup model, the gate's rules, the sandbox and the MCP servers. An `Err` is a
    /// usage error (an unknown model named on the command line).
    pub fn session(&self, spec: &SessionSpec) -> Result<Config, ConfigError> {
        let (cli, agent_dir, cwd) = (&self.cli, &self.agent_dir, &spec.cwd);
        let mut warnings = Vec::new();
        let later = Warnings::default();
        let mut settings = settings::load(
            &settings::Sources {
                user: &agent_dir.join("settings.json"),
                project: Some(&cwd.join(".nova").join("settings.json")),
                pi_project: Some(&cwd.join(".pi").join("settings.json")),
                cwd,
                trust_flag: self.trust_flag(cwd).or(spec.trust_vote),
                trust_file: &agent_dir.join(trust::TRUST_FILE),
            },
            &mut warnings,
        );
        let packaged = packages::resolve(
            &settings.packages,
            agent_dir,
            cwd,
            settings.project_trusted,
            &mut warnings,
        );
        // A package's skills and templates load as the settings' own lists do, after them.
        let listed = |found: Vec<(PathBuf, crate::protocol::SourceScope)>| {
            found
                .into_iter()
                .map(|(path, scope)| ListedPath { path, scope })
        };
        settings.skills.extend(listed(packaged.skills));
        settings.prompts.extend(listed(packaged.prompts));
        // `-e npm:…`/`-e git:…`: the package's skills and templates come too, as in Pi (its
        // extensions, and a missing package's error, are `extensions::find`'s).
        for flag in &cli.extensions {
            if let Ok(Some(package)) =
                extensions::flag_package(flag, agent_dir, cwd, &mut Vec::new())
            {
                settings.skills.extend(listed(package.skills));
                settings.prompts.extend(listed(package.prompts));
            }
        }
        let registry = &self.registry;
        let patterns = cli.models.as_ref().or(settings.enabled_models.as_ref());
        let scope = patterns
            .map(|p| scope::resolve(p, registry, &mut warnings))
            .unwrap_or_default();
        let named = Named {
            model: spec.model.as_ref(),
            provider: cli.provider.as_deref(),
        };
        let scoped_start = scoped_startup(named, &settings, &scope);
        let (model, suffix_level) = match scoped_start {
            Some(s) => (Some(s.model.clone()), s.thinking),
            None => startup_model(named, &settings, registry)?,
        };
        let thinking_level = cli.thinking.or(suffix_level);
        let permissions = permission_rules(&settings, &mut warnings);
        let compaction = settings.compaction;
        let sandbox = crate::sandbox::Sandbox::start(
            cli.sandbox,
            settings.sandbox.clone(),
            cwd,
            agent_dir,
            &mut warnings,
            &later,
        );
        let mut mcp = mcp_config(agent_dir, cwd, &settings, &mut warnings);
        mcp::config::add_client_servers(&mut mcp.servers, &spec.mcp_servers, agent_dir, cwd)
            .map_err(ConfigError::ClientMcpServer)?;
        if cli.no_mcp {
            mcp.servers.clear();
        }
        let extensions = extensions::find(
            &extensions::Sources {
                agent_dir,
                cwd,
                project_trusted: settings.project_trusted,
                settings: &settings.extensions,
                packages: &packaged.extensions,
                flags: &cli.extensions,
                no_discovery: cli.no_extensions,
            },
            &mut warnings,
        )?;
        // With no extension to register it, an option nova does not have is known to be
        // unknown now; otherwise the host says so once they have loaded.
        if let (true, Some(flag)) = (extensions.is_empty(), cli.extension_flags.first()) {
            return Err(ConfigError::UnknownFlag(flag.name.clone()));
        }
        Ok(Config {
            extensions,
            extension_flags: cli.extension_flags.clone(),
            system_prompt: self.system_prompt.clone(),
            append_system_prompt: self.append_system_prompt.clone(),
            no_session: cli.no_session,
            max_turns: cli.max_turns.or(settings.max_turns),
            model_explicit: named.is_some(),
            thinking_level,
            scope,
            resume: spec.resume.clone(),
            session_name: spec.name.clone(),
            session_dir: chosen_session_dir(
                cli.session_dir.as_deref(),
                settings.session_dir.as_deref(),
                cwd,
            ),
            agent_dir: agent_dir.clone(),
            cwd: cwd.clone(),
            registry: registry.clone(),
            settings,
            model,
            tools: self.tools.clone(),
            permissions,
            compaction,
            sandbox,
            mcp,
            warnings,
            later,
        })
    }
}

/// Reads the `mcp.json` files (no server starts here). Invalid `permissions.mcp` rules fail
/// closed, as bash's do: every MCP call asks until they are fixed.
fn mcp_config(
    agent_dir: &Path,
    cwd: &Path,
    settings: &Settings,
    warnings: &mut Vec<String>,
) -> McpConfig {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let files = mcp::config::Files {
        user: &agent_dir.join("mcp.json"),
        claude: &cwd.join(".mcp.json"),
        pi_project: &cwd.join(".pi").join("mcp.json"),
        project: &cwd.join(".nova").join("mcp.json"),
        cwd,
        agent_dir,
        home: home.as_deref(),
        trusted: settings.project_trusted,
    };
    let servers = mcp::config::load(&files, warnings);
    let rules = settings
        .mcp_permissions
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|p| mcp::Rules::new(&p.ask, &p.allow, &p.deny));
    let rules = match rules {
        Ok(rules) => rules,
        Err(e) => {
            if !servers.is_empty() {
                warnings.push(format!(
                    "settings: {e}; asking before every MCP call until this is fixed"
                ));
            }
            mcp::Rules::ask_all(format!("asked for every MCP call: {e}"))
        }
    };
    McpConfig {
        servers,
        rules,
        startup_wait: settings.mcp_startup_wait,
    }
}

/// Pi lists a built-in provider's models once it has a key: its variable (`OPENAI_API_KEY`, …),
/// or an `apiKey` given to the provider of that name in models.json; Bedrock's also once AWS
/// credentials are in the environment; Cloudflare's only once the ids its address needs are
/// set too.
fn builtin_enabled(registry: &Registry, builtin: &builtin::Builtin) -> bool {
    let configured = registry
        .provider(builtin.name)
        .is_some_and(|p| p.api_key.is_some());
    let aws = builtin.api == crate::provider::Api::BedrockConverseStream
        && builtin::aws_enabled(|name| std::env::var(name).ok());
    let addressed = builtin
        .address_vars
        .iter()
        .all(|name| registry.provider_var(builtin.name, name).is_some());
    addressed
        && (configured
            || aws
            || registry.has_stored_key(builtin.name)
            || builtin::env_key(builtin.name).is_some())
}

async fn discover_ollama(
    discover: impl AsyncFnOnce(&str) -> Vec<DiscoveredModel>,
    max_context: u64,
) -> Registry {
    let base = ollama_base_url();
    let found = discover(&base).await;
    Registry::ollama_default(&base, found, max_context)
}

/// `$OLLAMA_HOST` as Ollama itself reads it (a bare `host:port` is allowed), else the default.
fn ollama_base_url() -> String {
    match std::env::var("OLLAMA_HOST") {
        Ok(h) if h.contains("://") => h,
        Ok(h) if !h.is_empty() => format!("http://{h}"),
        _ => "http://127.0.0.1:11434".to_owned(),
    }
}

/// Pi's start within a scope when no model is named: the settings' default if the scope has
/// it, else the scope's first model.
fn scoped_startup<'a>(
    named: Named<'_>,
    settings: &Settings,
    scope: &'a [ScopedModel],
) -> Option<&'a ScopedModel> {
    if named.is_some() {
        return None;
    }
    let default = |s: &&ScopedModel| {
        settings.default_model.as_deref() == Some(s.model.id.as_str())
            && settings
                .default_provider
                .as_deref()
                .is_none_or(|p| p == s.model.provider)
    };
    scope.iter().find(default).or(scope.first())
}

/// The startup model a session's spec names, or the provider `--provider` names alone.
#[derive(Clone, Copy)]
struct Named<'a> {
    model: Option<&'a ModelChoice>,
    provider: Option<&'a str>,
}

impl Named<'_> {
    fn is_some(self) -> bool {
        self.model.is_some() || self.provider.is_some()
    }
}

/// The startup model, and the thinking level a named model's `:<level>` suffix asks for (Pi's
/// `--model sonnet:high`; an id with a colon of its own, such as `qwen3:8b`, is tried whole
/// first).
fn startup_model(
    named: Named<'_>,
    settings: &Settings,
    registry: &Registry,
) -> Result<(Option<Model>, Option<ThinkingLevel>), ConfigError> {
    if let Some(ModelChoice { provider, id }) = named.model {
        let exact = registry.resolve(provider.as_deref(), id).map(|m| (m, None));
        let suffixed = || {
            let (base, level) = scope::split_thinking(id);
            let level = level?;
            registry
                .resolve(provider.as_deref(), base)
                .map(|m| (m, Some(level)))
        };
        return exact
            .or_else(suffixed)
            .map(|(m, level)| (Some(m.clone()), level))
            .ok_or_else(|| ConfigError::UnknownModel {
                provider: provider.clone(),
                id: id.clone(),
            });
    }
    if let Some(p) = named.provider {
        return registry
            .models()
            .iter()
            .find(|m| m.provider == p)
            .map(|m| (Some(m.clone()), None))
            .ok_or_else(|| ConfigError::NoModels(p.to_owned()));
    }
    if let Some(m) = settings
        .default_model
        .as_deref()
        .and_then(|m| registry.resolve(settings.default_provider.as_deref(), m))
    {
        return Ok((Some(m.clone()), None));
    }
    Ok((registry.models().first().cloned(), None))
}

/// Invalid rules fail closed: every bash command asks until the settings are fixed, so a typo
/// in a `deny` list never silently lets a command through.
fn permission_rules(settings: &Settings, warnings: &mut Vec<String>) -> Gate {
    let rules = settings.bash_permissions.as_ref().map_err(String::clone);
    rules.and_then(Gate::new).unwrap_or_else(|e| {
        warnings.push(format!(
            "settings: {e}; asking before every bash command until this is fixed"
        ));
        Gate::ask_always()
    })
}

/// Pi's rule for a session id a person chooses: letters, digits, `.`, `_` and `-`, starting
/// and ending with a letter or digit (it becomes part of a file name).
fn check_session_id(id: &str) -> Result<(), ConfigError> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid = alnum(id.chars().next())
        && alnum(id.chars().last())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        Err(ConfigError::SessionId(id.to_owned()))
    }
}

/// Every `--append-system-prompt`, each text or a file's text, in order, a blank line between.
fn append_system_prompt(values: &[String]) -> Result<Option<String>, ConfigError> {
    if values.is_empty() {
        return Ok(None);
    }
    let texts = values
        .iter()
        .map(|v| text_or_file(v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(texts.join("\n\n")))
}

/// Pi's rule for prompt flags: a value naming an existing file means that file's text.
fn text_or_file(value: &str) -> Result<String, ConfigError> {
    let path = Path::new(value);
    if path.is_file() {
        return std::fs::read_to_string(path).map_err(|source| ConfigError::PromptFile {
            value: value.to_owned(),
            source,
        });
    }
    Ok(value.to_owned())
}
