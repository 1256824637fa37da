//! The runtime of sessions: what the process shares (the HTTP client, the model registry, the
//! agent dir and the command line's flags), built once, and [`Runtime::prepare`], which resolves
//! everything one session needs for the cwd a front end names — its project settings and trust,
//! sandbox, MCP servers, session file, context files, skills and templates. The RPC and one-shot
//! front ends open the session the command line describes; a front end whose client names the
//! cwd (ACP, a server of many sessions) opens as many as it is asked for, side by side, in the
//! runtime's table of [live sessions](super::LiveSessions).

use super::{Agent, LiveSessions, Sink, startup_session};
use crate::config::{self, ConfigError, Process, SessionSpec};
use crate::context::{self, PromptFiles, PromptSource};
use crate::protocol::SessionListing;
use crate::provider::{self, http::SharedClient};
use crate::session::paths::Scope;
use crate::session::{Header, Session, SessionError};
use std::path::PathBuf;
use std::time::Duration;

/// How long the zero-configuration start waits for a local Ollama to list its models.
const OLLAMA_DISCOVERY_TIMEOUT: Duration = Duration::from_millis(1500);

pub struct Runtime {
    process: Process,
    client: SharedClient,
    /// `--skill` and `--prompt-template`, which every session loads.
    skill_flags: Vec<PathBuf>,
    template_flags: Vec<PathBuf>,
    live: LiveSessions,
    /// What `--no-skills`, `--no-prompt-templates` and `--no-context-files` leave on.
    discover: Discover,
}

/// Which files every session looks for on its own.
#[derive(Debug, Clone, Copy)]
struct Discover {
    skills: bool,
    templates: bool,
    context_files: bool,
}

/// One session with everything resolved, not yet started: a front end can show its header
/// before the first event.
pub struct Prepared {
    config: config::Config,
    session: Session,
    prompt_source: PromptSource,
    client: SharedClient,
    /// Problems with this session's files, each naming its file; nothing here stopped it.
    pub warnings: Vec<String>,
}

/// Why a session cannot be opened: its configuration (an unknown model on the command line)
/// or its session file (one that cannot be resumed).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl Runtime {
    /// Reads models.json in `agent_dir` (or asks the local Ollama for its models). An `Err` is
    /// a usage error.
    pub async fn load(mut cli: config::Cli, agent_dir: PathBuf) -> Result<Runtime, ConfigError> {
        let skill_flags = std::mem::take(&mut cli.skills);
        let template_flags = std::mem::take(&mut cli.prompt_templates);
        let discovery = Discover {
            skills: !cli.no_skills,
            templates: !cli.no_prompt_templates,
            context_files: !cli.no_context_files,
        };
        let client = SharedClient::default();
        let discover = async |base: &str| match client.get() {
            Ok(c) => discover_ollama(c, base).await,
            Err(_) => Vec::new(),
        };
        let process = config::load_process(cli, agent_dir, discover).await?;
        Ok(Runtime {
            process,
            client,
            skill_flags,
            template_flags,
            live: LiveSessions::default(),
            discover: discovery,
        })
    }

    /// The sessions running in this process.
    pub fn live(&self) -> &LiveSessions {
        &self.live
    }

    /// Every model the registry holds: those of models.json, and of each built-in provider
    /// that has a key.
    pub fn models(&self) -> &[crate::protocol::Model] {
        self.process.registry.models()
    }

    /// Problems with what the process shares (models.json).
    pub fn warnings(&self) -> &[String] {
        &self.process.warnings
    }

    pub fn agent_dir(&self) -> &std::path::Path {
        &self.process.agent_dir
    }

    /// The user's extensions to ask for their `project_trust` vote before preparing `spec`
    /// (none when no vote is due).
    pub fn trust_voters(&self, spec: &SessionSpec) -> Vec<config::extensions::Extension> {
        self.process.trust_voters(spec)
    }

    /// The session the command line asks for, in the process's working directory.
    pub fn cli_session(&self) -> Result<SessionSpec, OpenError> {
        Ok(self.process.cli_session()?)
    }

    /// The stored sessions of `cwd`'s directory, or of every directory without one, newest
    /// first; read off the runtime thread (thousands of files take a while).
    pub async fn list_sessions(&self, cwd: Option<PathBuf>) -> Vec<SessionListing> {
        let agent_dir = self.process.agent_dir.clone();
        let session_dir = self.process.session_dir.clone();
        tokio::task::spawn_blocking(move || {
            let all = cwd.is_none();
            let cwd = cwd.unwrap_or_default();
            let scope = Scope {
                agent_dir: &agent_dir,
                cwd: &cwd,
                session_dir: session_dir.as_deref(),
            };
            crate::session::list(scope, all)
        })
        .await
        .unwrap_or_default()
    }

    /// Resolves one session for `spec.cwd`. An `Err` names what cannot be opened (an unknown
    /// model on the command line, a session that cannot be resumed).
    pub fn prepare(&self, spec: &SessionSpec) -> Result<Prepared, OpenError> {
        let config = self.process.session(spec)?;
        let (mut session, session_warnings) = startup_session(&config)?;
        if let Some(name) = &config.session_name {
            session.append_session_info(name)?;
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let (resources, resource_warnings) = context::Resources::load(&context::ResourceSources {
            agent_dir: &config.agent_dir,
            cwd: &config.cwd,
            home: home.as_deref(),
            settings: &config.settings,
            skill_flags: &self.skill_flags,
            template_flags: &self.template_flags,
            discover_skills: self.discover.skills,
            discover_templates: self.discover.templates,
        });
        let date = humantime::format_rfc3339(std::time::SystemTime::now()).to_string();
        let (prompt_source, prompt_warnings) = PromptSource::load(&PromptFiles {
            agent_dir: &config.agent_dir,
            cwd: &config.cwd,
            project_trusted: config.settings.project_trusted,
            context_files: self.discover.context_files,
            custom: config.system_prompt.as_deref(),
            append: config.append_system_prompt.as_deref(),
            date: date.get(..10).unwrap_or(&date),
        });
        let mut warnings = config.warnings.clone();
        warnings.extend(session_warnings);
        warnings.extend(resource_warnings);
        warnings.extend(prompt_warnings);
        Ok(Prepared {
            prompt_source: prompt_source.with_resources(resources),
            config,
            session,
            client: self.client.clone(),
            warnings,
        })
    }
}

impl Prepared {
    pub fn header(&self) -> &Header {
        self.session.header()
    }

    pub fn cwd(&self) -> &std::path::Path {
        &self.config.cwd
    }

    /// The Pi extensions the session loads (none: no extension host).
    pub fn extensions(&self) -> &[config::extensions::Extension] {
        &self.config.extensions
    }

    /// The command line's options for the extensions' flags.
    pub fn extension_flags(&self) -> &[config::cli::ExtensionFlag] {
        &self.config.extension_flags
    }

    pub fn agent_dir(&self) -> &std::path::Path {
        &self.config.agent_dir
    }

    pub fn project_trusted(&self) -> bool {
        self.config.settings.project_trusted
    }

    /// How long an extension's hooks may hold up their call.
    pub fn extension_hook_timeout(&self) -> std::time::Duration {
        self.config.settings.extension_hook_timeout
    }

    /// Continues in a new session holding the whole conversation resolved (ACP's
    /// `session/fork`), as [`Agent::clone_session`] does for a running one: a new file whose
    /// `parentSession` is the old one.
    pub fn clone_session(&mut self) -> Result<(), SessionError> {
        let dir = super::sessions::file_dir(&self.config);
        self.session = self.session.clone_session(dir)?;
        Ok(())
    }

    /// Starts the session: its MCP servers start, and its events go to `sink`.
    pub fn start(self, sink: Sink) -> Agent {
        Agent::new(
            self.config,
            self.session,
            self.prompt_source,
            self.client,
            sink,
        )
    }
}

/// The models a local Ollama has pulled, each with its trained context length, asked for all
/// at once (`/api/show` per model) so that startup waits for the slowest answer only.
async fn discover_ollama(client: &reqwest::Client, base: &str) -> Vec<config::DiscoveredModel> {
    let names = provider::http::list_ollama_models(client, base, OLLAMA_DISCOVERY_TIMEOUT)
        .await
        .unwrap_or_default();
    let mut shows = tokio::task::JoinSet::new();
    for (i, name) in names.iter().enumerate() {
        let (client, base, name) = (client.clone(), base.to_owned(), name.clone());
        shows.spawn(async move {
            let length = provider::http::ollama_context_length(
                &client,
                &base,
                &name,
                OLLAMA_DISCOVERY_TIMEOUT,
            )
            .await;
            (i, length.ok().flatten())
        });
    }
    let mut lengths = vec![None; names.len()];
    while let Some(joined) = shows.join_next().await {
        if let Ok((i, length)) = joined {
            lengths[i] = length;
        }
    }
    names
        .into_iter()
        .zip(lengths)
        .map(|(name, trained_context)| config::DiscoveredModel {
            name,
            trained_context,
        })
        .collect()
}
