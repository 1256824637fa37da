//! Why an MCP server did not start. The text becomes the server's failed status (and the
//! warning that reports it), so each variant reads as the end of "server x failed to start: …".

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The directory a user's server runs in could not be made.
    #[error("cannot create {}: {source}", path.display())]
    IsolationDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The directory exists but another user could have filled it.
    #[error(
        "{} is not a directory of this user's that only they may write; not starting a server there",
        .0.display()
    )]
    UnsafeDir(PathBuf),
    #[error("cannot run `{command}` in {}: {source}", cwd.display())]
    Spawn {
        command: String,
        cwd: PathBuf,
        source: std::io::Error,
    },
    #[error("`{0}` started without its pipes")]
    NoPipes(String),
    /// An `env` or `headers` value (`what`) could not be resolved.
    #[error("{what} {reason}")]
    Secret { what: &'static str, reason: String },
    #[error("header \"{name}\": {reason}")]
    BadHeader { name: String, reason: String },
    /// The shared HTTP client could not be built.
    #[error("{0}")]
    Client(String),
    /// The server broke off the handshake: how it ended, or what the protocol layer said.
    #[error("{0}")]
    Handshake(String),
    #[error("listing its tools failed: {0}")]
    ListTools(#[source] rmcp::ServiceError),
    #[error("did not start within {0:?}")]
    Timeout(Duration),
}
