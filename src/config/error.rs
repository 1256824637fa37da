//! Why the configuration cannot be used as given. Each is a usage error when it comes from the
//! command line or a file the process needs (the front end prints the text and exits), except
//! models.json, which is reported and set aside, and secrets, which fail the request that
//! needed them.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// models.json is not in Pi's format; `reason` says where and why.
    #[error("{}: {reason}", path.display())]
    ModelsJson { path: PathBuf, reason: String },
    /// `--system-prompt` or `--append-system-prompt` named a file that cannot be read.
    #[error("cannot read {value}: {source}")]
    PromptFile {
        value: String,
        source: std::io::Error,
    },
    #[error("unknown tool \"{name}\" in --tools (known: {known})")]
    UnknownTool { name: String, known: String },
    /// A `--tools` or `--exclude-tools` list that cannot be read; the text says why.
    #[error("{0}")]
    ToolList(String),
    #[error(
        "--session-id {0:?}: use letters, digits, '.', '_' and '-', starting and ending with a \
         letter or digit"
    )]
    SessionId(String),
    #[error("--name needs a name that is not blank")]
    SessionName,
    #[error("cannot read the current directory: {0}")]
    Cwd(#[source] std::io::Error),
    #[error("unknown model \"{}{id}\" (see models.json)", provider.as_deref().map(|p| format!("{p}/")).unwrap_or_default())]
    UnknownModel {
        provider: Option<String>,
        id: String,
    },
    #[error("provider \"{0}\" declares no models (see models.json)")]
    NoModels(String),
    /// An MCP server the session's client gave cannot be used; the text names it and says why.
    #[error("{0}")]
    ClientMcpServer(String),
    #[error("-e {flag}: no extension file or directory at {}", path.display())]
    NoExtension { flag: String, path: PathBuf },
    /// An option nova does not have, when no extension is loaded to register it.
    #[error("unknown option --{0} (no extension is loaded to register it; see nova --help)")]
    UnknownFlag(String),
    #[error(
        "-e {flag}: the package is not installed; `nova install {flag}` installs it (nova \
         fetches no package when it starts)"
    )]
    PackageNotInstalled { flag: String },
    /// A provider's `apiKey` or header value (`what`) could not be resolved.
    #[error("{what} of provider \"{provider}\": {reason}")]
    Secret {
        what: String,
        provider: String,
        reason: String,
    },
}
