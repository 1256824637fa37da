//! The built-in tools. Each runs as its own task, reports progress through
//! [`ToolContext::on_update`], and turns every failure into an error result, never a crashed run.

pub mod bash;
mod diff;
mod edit;
mod edit_match;
pub mod exec;
mod find;
mod grep;
pub mod image;
mod ls;
pub mod output;
mod read;
mod search;
pub mod terminal;
pub mod truncate;
mod utf8;
pub mod validate;
mod view_image;
mod write;
mod zoom;

use crate::files::{fs, path, safe_open};
use crate::protocol::ToolSpec;
use crate::protocol::{ContentBlock, StructuredContent, ToolDetails, ToolResultPayload};
use crate::sandbox::Sandbox;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Active when neither `--tools` nor `--no-tools` says otherwise.
pub fn default_tools(model_takes_images: bool) -> Vec<Tool> {
    let mut tools = vec![
        Tool::Read,
        Tool::Bash,
        Tool::Edit,
        Tool::Write,
        Tool::Grep,
        Tool::Find,
        Tool::Ls,
    ];
    if model_takes_images {
        tools.extend([Tool::ViewImage, Tool::Zoom]);
    }
    tools
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Read,
    Write,
    Edit,
    Bash,
    Grep,
    Find,
    Ls,
    ViewImage,
    Zoom,
}

/// Called with the whole output so far each time a tool has more to show.
pub type UpdateFn = Arc<dyn Fn(ToolResultPayload) + Send + Sync>;

/// A client that holds the files open (an editor, over ACP): `read` and `edit` read text
/// through it, so they see unsaved changes. Nothing is written through it: a path handed to an
/// editor is opened by name, following whatever symlink is there by then, so `write` and `edit`
/// write through nova's own walk ([`safe_open`]) and the editor sees the change on disk. An
/// `Err` is the client's own word for what failed.
pub trait EditorFiles: Send + Sync {
    fn read(&self, path: &Path) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;
}

pub use terminal::{EditorTerminal, TerminalExit};

#[derive(Clone)]
pub struct ToolContext {
    pub cwd: PathBuf,
    pub cancel: CancellationToken,
    pub on_update: UpdateFn,
    /// Wraps bash commands (file tools are checked by the permission gate before they run).
    pub sandbox: Arc<Sandbox>,
    /// Where a command's full-output file is recorded, to be removed with the session.
    pub outputs: Arc<output::OutputFiles>,
    /// For `write` and `edit`: the path the permission gate checked (symlinks and `..`
    /// resolved). The tool acts on exactly this path, through [`safe_open`], and never resolves
    /// the model's path again. `None` outside the gate (unit tests), where the tool resolves it.
    pub write_target: Option<PathBuf>,
    /// The editor's files, when the client offers them.
    pub editor: Option<Arc<dyn EditorFiles>>,
    /// The editor's terminals, which `bash` runs its command in when the client offers them.
    pub terminal: Option<Arc<dyn EditorTerminal>>,
    /// The call this context runs (an editor shows its terminal with it).
    pub call_id: String,
    /// What `bash` tells its command about the session.
    pub env: bash::SessionEnv,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<ContentBlock>,
    pub details: Option<ToolDetails>,
    pub is_error: bool,
    /// What a finished call produced, for programs (`bash` and `read`).
    pub structured: Option<Box<StructuredContent>>,
}

#[cfg(test)]
impl ToolContext {
    /// A context in `dir` that nobody cancels and whose updates go nowhere.
    pub(crate) fn quiet(dir: &std::path::Path) -> ToolContext {
        ToolContext {
            cwd: dir.to_path_buf(),
            cancel: CancellationToken::new(),
            on_update: Arc::new(|_| {}),
            sandbox: Arc::new(Sandbox::off()),
            outputs: Arc::default(),
            write_target: None,
            editor: None,
            terminal: None,
            call_id: String::new(),
            env: bash::SessionEnv::default(),
        }
    }
}

impl ToolContext {
    /// The path a write to `raw` acts on: the one the gate checked, else resolved here.
    fn write_target(&self, raw: &str) -> PathBuf {
        self.write_target
            .clone()
            .unwrap_or_else(|| crate::sandbox::resolve_for_write(&path::resolve(raw, &self.cwd)))
    }
}

impl ToolOutput {
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: true,
            structured: None,
        }
    }

    pub fn text(text: impl Into<String>, details: Option<ToolDetails>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details,
            is_error: false,
            structured: None,
        }
    }
}

/// What a tool's own code returns: a result, or the text of the error result.
type ToolResult = Result<ToolOutput, String>;

impl Tool {
    pub const ALL: &'static [Tool] = &[
        Tool::Read,
        Tool::Write,
        Tool::Edit,
        Tool::Bash,
        Tool::Grep,
        Tool::Find,
        Tool::Ls,
        Tool::ViewImage,
        Tool::Zoom,
    ];

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.iter().copied().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::Edit => "edit",
            Tool::Bash => "bash",
            Tool::Grep => "grep",
            Tool::Find => "find",
            Tool::Ls => "ls",
            Tool::ViewImage => "view_image",
            Tool::Zoom => "zoom",
        }
    }

    /// The name, description and parameter schema the model is shown.
    pub fn spec(self) -> ToolSpec {
        match self {
            Tool::Read => read::spec(),
            Tool::Write => write::spec(),
            Tool::Edit => edit::spec(),
            Tool::Bash => bash::spec(),
            Tool::Grep => grep::spec(),
            Tool::Find => find::spec(),
            Tool::Ls => ls::spec(),
            Tool::ViewImage => view_image::spec(),
            Tool::Zoom => zoom::spec(),
        }
    }

    /// Validates `args` against [`Tool::spec`], then runs the tool. Every failure, including
    /// cancellation through `ctx.cancel`, comes back as an error output.
    pub async fn execute(self, args: Value, ctx: ToolContext) -> ToolOutput {
        let prepared = match self {
            Tool::Edit => edit::prepare(&args),
            _ => args.clone(),
        };
        let valid = match validate::validate(self.name(), &self.spec().parameters, &prepared) {
            Ok(v) => v,
            Err(text) => return ToolOutput::error(text),
        };
        let result = match self {
            Tool::Read => run(valid, |a| read::run(a, &ctx)).await,
            Tool::Write => run(valid, |a| write::run(a, &ctx)).await,
            Tool::Edit => run(valid, |a| edit::run(a, &ctx)).await,
            Tool::Bash => run(valid, |a| bash::run(a, &ctx)).await,
            Tool::Grep => run(valid, |a| grep::run(a, &ctx)).await,
            Tool::Find => run(valid, |a| find::run(a, &ctx)).await,
            Tool::Ls => run(valid, |a| ls::run(a, &ctx)).await,
            Tool::ViewImage => run(valid, |a| view_image::run(a, &ctx)).await,
            Tool::Zoom => run(valid, |a| zoom::run(a, &ctx)).await,
        };
        result.unwrap_or_else(ToolOutput::error)
    }
}

/// Decodes validated arguments into the tool's own type and runs it.
async fn run<A, F, Fut>(args: Value, f: F) -> ToolResult
where
    A: DeserializeOwned,
    F: FnOnce(A) -> Fut,
    Fut: Future<Output = ToolResult>,
{
    let args: A = serde_json::from_value(args).map_err(|e| format!("Invalid arguments: {e}"))?;
    f(args).await
}

/// Runs a tool's blocking file work: on the file tools' share of the blocking pool, within
/// [`fs::FILE_TIME`], ended at once by `cancel` (see [`fs::bounded`]). Work that writes asks the
/// [`safe_open::Commit`] before it replaces anything, so "aborted" means "nothing written".
async fn blocking<F>(cancel: &CancellationToken, f: F) -> ToolResult
where
    F: FnOnce(&safe_open::Commit) -> ToolResult + Send + 'static,
{
    fs::bounded(fs::Threads::Tools, cancel, fs::FILE_TIME, f).await
}
