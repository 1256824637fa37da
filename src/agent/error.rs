//! Why the agent refused or failed a command, as data: front ends map these to their own wire
//! text (the RPC layer uses `Display`), and code that must branch on the kind can.

use super::QueueFull;
use super::compact::CompactError;
use crate::session::SessionError;
use crate::tools::bash::RunError;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command needs the agent idle: `what` completes "Cannot … while the agent is
    /// streaming".
    #[error("Cannot {0} while the agent is streaming; abort first.")]
    Busy(&'static str),
    #[error(
        "Agent is already processing. Specify streamingBehavior (\"steer\" or \"followUp\") to \
         queue the message."
    )]
    NeedsStreamingBehavior,
    /// `steer`, `follow_up` or a queued `prompt` met the queues' bound.
    #[error(
        "Overloaded, message not queued: {0}. Retry once the agent has taken some, or \
         clear_queue."
    )]
    QueueFull(#[from] QueueFull),
    #[error("A compaction is in progress; prompt again after its response.")]
    CompactionInProgress,
    #[error(
        "No model selected. Declare one in models.json (or start Ollama with a model pulled) and \
         pick it with set_model or --model."
    )]
    NoModel,
    #[error(
        "{}",
        crate::gate::blocked("permissions.bash", rule, "the command was not run")
    )]
    Blocked { rule: String },
    /// Deny rules exist and what the command runs is known only at run time.
    #[error(
        "Refused: {reason}; the command was not run. Write its program names out, or run it \
         from your own shell."
    )]
    Unchecked { reason: String },
    #[error("Unknown tool(s): {names}. Tools nova can offer now: {known}")]
    UnknownTools { names: String, known: String },
    /// Built-in tools the command line's `--tools`/`--no-tools` left out.
    #[error("Tools not allowed by the command line (--tools/--no-tools): {0}")]
    ToolsNotAllowed(String),
    #[error("Model not found: {provider}/{id}")]
    ModelNotFound { provider: String, id: String },
    /// A Pi command for a feature nova does not have; the text says which and why.
    #[error("nova does not support {0}")]
    Unsupported(&'static str),
    /// The command's arguments are wrong in a way serde could not see.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Compaction(#[from] CompactError),
    /// The user's `bash` command could not be run.
    #[error(transparent)]
    Bash(#[from] RunError),
    /// An extension's hook failed the command (its `user_bash` hook threw, or answered with
    /// what nova cannot carry out); the text says which and why.
    #[error("{0}")]
    Extension(String),
    /// `export_html` could not write the page; the text says where and why.
    #[error("{0}")]
    Export(String),
    /// A thread the command's work ran on could not be started.
    #[error("cannot start the {what}: {source}")]
    Thread {
        what: &'static str,
        source: std::io::Error,
    },
    /// The command's work panicked (`what` names it, e.g. "loading the session").
    #[error("{what} failed{}", .detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Crashed {
        what: &'static str,
        detail: Option<String>,
    },
    #[error("encoding the answer failed: {0}")]
    Encode(#[from] serde_json::Error),
}
