//! Why a command could not be put in the sandbox. The bash tool shows the text to the model;
//! callers that need the cause find it as the error's source.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A placeholder for a protected path that does not exist yet could not be made or opened.
    #[error("cannot protect {}: {source}", path.display())]
    Protect {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The placeholder's path was removed again each time it was made.
    #[error("cannot protect {}: it kept disappearing", .0.display())]
    Vanishing(PathBuf),
    /// The launcher's instructions could not be encoded (a path that is not UTF-8).
    #[error("cannot describe the sandbox to the launcher: {0}")]
    Describe(#[source] serde_json::Error),
}
