//! The built-in tools. Each runs as its own task, reports progress through
//! [`ToolContext::on_update`], and turns every failure into an error result, never a crashed run.

use crate::protocol::{ContentBlock, ToolResultPayload};
use crate::provider::ToolSpec;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Active when neither `--tools` nor `--no-tools` says otherwise (Pi's default set).
pub const DEFAULT_TOOLS: &[&str] = &["read", "bash", "edit", "write"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Read,
    Write,
    Edit,
    Bash,
}

/// Called with the whole output so far each time a tool has more to show.
pub type UpdateFn = Arc<dyn Fn(ToolResultPayload) + Send + Sync>;

#[derive(Clone)]
pub struct ToolContext {
    pub cwd: PathBuf,
    pub cancel: CancellationToken,
    pub on_update: UpdateFn,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<ContentBlock>,
    pub details: Option<Value>,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: true,
        }
    }
}

impl Tool {
    pub const ALL: &'static [Tool] = &[Tool::Read, Tool::Write, Tool::Edit, Tool::Bash];

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.iter().copied().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::Edit => "edit",
            Tool::Bash => "bash",
        }
    }
}
