//! Command-line flags, with Pi's names.

use crate::protocol::ThinkingLevel;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// JSON lines on stdin/stdout (Pi's RPC protocol).
    Rpc,
    /// Run the prompts, writing the session header and then every event as a JSON line.
    Json,
    /// The Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim, Emacs).
    Acp,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "nova",
    version,
    about = "A coding agent: Pi's RPC protocol over JSON lines, or prompts run from the shell.",
    after_help = "Examples:\n  nova --mode rpc --model ollama/qwen3:8b\n  \
                  nova -p \"Why does the build fail?\"\n  \
                  git diff | nova -p \"Review this change\" @CONTRIBUTING.md\n  \
                  nova -c -p \"and now fix it\"\n\n\
                  Exit codes: 0 success, 1 the run failed (provider error, aborted, output cut \
                  off), 2 usage error."
)]
pub struct Cli {
    /// Interface to run. Without one, prompts (arguments or piped stdin) run in print mode.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Print mode: run the prompts, print the final answer on stdout, exit.
    #[arg(short = 'p', long = "print")]
    pub print: bool,
    /// Prompts, run in turn; piped stdin and `@path` files (text or images) go with the first.
    #[arg(value_name = "PROMPT|@FILE")]
    pub prompts: Vec<String>,
    /// Print and JSON modes: run flagged bash commands instead of refusing them (no one is
    /// there to ask).
    #[arg(long)]
    pub approve_flagged: bool,
    /// Print and JSON modes: report progress (tool calls, compactions) on stderr.
    #[arg(long)]
    pub verbose: bool,
    /// Provider of the startup model (a name in models.json).
    #[arg(long)]
    pub provider: Option<String>,
    /// Startup model: `<id>` or `<provider>/<id>`.
    #[arg(long)]
    pub model: Option<String>,
    /// API key for the startup model's provider (`--provider`, else the provider of `--model`,
    /// else the first model's), over every other key, as Pi's flag is.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Models that `cycle_model` goes through, comma-separated: ids, `provider/id`s or globs,
    /// each optionally ending in `:<thinking level>`.
    #[arg(long, value_delimiter = ',', value_name = "PATTERNS")]
    pub models: Option<Vec<String>>,
    /// Startup thinking level: off, minimal, low, medium, high, xhigh or max.
    #[arg(long, value_name = "LEVEL", value_parser = parse_thinking_level)]
    pub thinking: Option<ThinkingLevel>,
    /// The most replies one prompt may take before its run stops with an error (over the
    /// maxTurns setting); for unattended runs, whose model may repeat itself for ever.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// Keep the session in memory only; write nothing.
    #[arg(long)]
    pub no_session: bool,
    /// Directory for session files.
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Resume a session: its id, a unique prefix of it, or its file.
    #[arg(long, value_name = "ID|PREFIX|PATH", conflicts_with_all = ["no_session", "continue_newest"])]
    pub session: Option<String>,
    /// Resume the newest session of this directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "no_session")]
    pub continue_newest: bool,
    /// Replace the built-in system prompt (text, or a file to read it from).
    #[arg(long, value_name = "TEXT|FILE")]
    pub system_prompt: Option<String>,
    /// Append to the system prompt (text, or a file to read it from).
    #[arg(long, value_name = "TEXT|FILE")]
    pub append_system_prompt: Option<String>,
    /// Active tools, comma-separated (default: read,bash,edit,write,grep,find,ls, plus
    /// view_image,zoom for models that take images).
    #[arg(long, value_delimiter = ',', value_name = "A,B,…")]
    pub tools: Option<Vec<String>>,
    /// Take this project's .nova/settings.json as it is, even where it loosens the permission
    /// gate (otherwise it may only tighten it).
    #[arg(long)]
    pub trust_project: bool,
    /// Disable every tool.
    #[arg(long, conflicts_with = "tools")]
    pub no_tools: bool,
    /// Sandbox for the agent's commands: workspace-write, read-only or off (overrides
    /// sandbox.mode in settings).
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<crate::sandbox::Mode>,
    /// Load a skill file, or the skills in a directory (repeatable).
    #[arg(long = "skill", value_name = "PATH")]
    pub skills: Vec<PathBuf>,
    /// Load a prompt template, or the templates in a directory (repeatable).
    #[arg(long = "prompt-template", value_name = "PATH")]
    pub prompt_templates: Vec<PathBuf>,
}

fn parse_thinking_level(name: &str) -> Result<ThinkingLevel, String> {
    ThinkingLevel::parse(name).ok_or_else(|| {
        let names: Vec<&str> = ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect();
        format!("valid levels are {}", names.join(", "))
    })
}
