//! Command-line flags, with Pi 1.6's names and meanings, its short forms included. Flags that
//! mean something only to Pi's terminal UI (themes, the TUI mode) are accepted and ignored, so
//! a command line written for Pi runs unchanged; `--help` says which.

use crate::protocol::ThinkingLevel;
use clap::{ArgAction, CommandFactory, Parser, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Pi's default: run the prompts and print the final answer (nova has no terminal UI, so
    /// this is print mode).
    Text,
    /// JSON lines on stdin/stdout (Pi's RPC protocol).
    Rpc,
    /// Run the prompts, writing the session header and then every event as a JSON line.
    Json,
    /// The Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim, Emacs).
    Acp,
}

/// Pi's `--tui-mode` values; nova has no terminal UI and ignores the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TuiMode {
    Fullscreen,
    Regular,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "nova",
    version,
    disable_version_flag = true,
    about = "A coding agent: Pi's RPC protocol over JSON lines, or prompts run from the shell.",
    after_help = "Commands:\n  \
                  nova auth <command>   log in or out, print credentials, check readiness \
                  (nova auth --help)\n  \
                  nova login|logout <provider>   the same as nova auth login|logout\n\n\
                  Examples:\n  nova --mode rpc --model ollama/qwen3:8b\n  \
                  nova -p \"Why does the build fail?\"\n  \
                  git diff | nova -p \"Review this change\" @CONTRIBUTING.md\n  \
                  nova -c -p \"and now fix it\"\n  \
                  nova --model anthropic/claude-sonnet-4-5:high -p \"Solve this\"\n\n\
                  Accepted for Pi's command lines and ignored (nova has no terminal UI): \
                  --theme, --use-theme, --no-themes, --tui-mode.\n\n\
                  Exit codes: 0 success, 1 the run failed (provider error, aborted, output cut \
                  off), 2 usage error."
)]
pub struct Cli {
    /// Interface to run: text (print mode; the default with prompts), json, rpc or acp.
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
    /// Startup model: `<id>` or `<provider>/<id>`, optionally ending in `:<thinking level>`.
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
    /// Startup thinking level: off, minimal, low, medium, high, xhigh or max (over a `--model`
    /// suffix).
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
    #[arg(long, value_name = "ID|PREFIX|PATH", conflicts_with_all = ["no_session", "continue_newest", "resume", "fork"])]
    pub session: Option<String>,
    /// Resume the newest session of this directory.
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["no_session", "fork"])]
    pub continue_newest: bool,
    /// Pi's session picker. nova has no terminal UI: it resumes the newest session of this
    /// directory, as --continue does (a client picks another with switch_session).
    #[arg(short = 'r', long, conflicts_with_all = ["no_session", "fork"])]
    pub resume: bool,
    /// This directory's session with this id, or a new session with this id when there is none
    /// (letters, digits, `.`, `_`, `-`; starting and ending with a letter or digit). With
    /// --fork: the id of the new session.
    #[arg(long, value_name = "ID", conflicts_with_all = ["session", "continue_newest", "resume"])]
    pub session_id: Option<String>,
    /// Copy a session (its file, id or id prefix) into a new session of this directory and
    /// continue there.
    #[arg(long, value_name = "ID|PREFIX|PATH", conflicts_with = "no_session")]
    pub fork: Option<String>,
    /// The session's display name.
    #[arg(short = 'n', long, value_name = "NAME")]
    pub name: Option<String>,
    /// Replace the built-in system prompt (text, or a file to read it from).
    #[arg(long, value_name = "TEXT|FILE")]
    pub system_prompt: Option<String>,
    /// Append to the system prompt (text, or a file to read it from); repeatable.
    #[arg(long, value_name = "TEXT|FILE")]
    pub append_system_prompt: Vec<String>,
    /// Active tools, comma-separated names or `*` patterns (default: read,bash,edit,write,
    /// grep,find,ls, plus view_image,zoom for models that take images). A list of only `+name`
    /// and `-name` entries adds to or removes from the default instead. MCP tools stay unless
    /// an entry starts with `mcp__`.
    #[arg(
        short = 't',
        long,
        value_delimiter = ',',
        value_name = "A,B,…",
        allow_hyphen_values = true
    )]
    pub tools: Option<Vec<String>>,
    /// Tools to leave out, comma-separated names or `*` patterns, MCP tools included.
    #[arg(long, value_delimiter = ',', value_name = "A,B,…")]
    pub exclude_tools: Vec<String>,
    /// Disable every tool, MCP tools included, but those --tools names (short form -nt).
    #[arg(long)]
    pub no_tools: bool,
    /// Disable the built-in tools but keep MCP tools (short form -nbt).
    #[arg(long)]
    pub no_builtin_tools: bool,
    /// Trust this project's files for this run (`.nova/` and `.pi/` settings, MCP servers,
    /// skills, prompts): the process's own directory only — in ACP, not the other folders an
    /// editor opens. `--trust-project` is nova's older name for it.
    #[arg(
        short = 'a',
        long,
        alias = "trust-project",
        conflicts_with = "no_approve"
    )]
    pub approve: bool,
    /// Do not trust any project's files for this run, whatever trust.json or the settings say
    /// (short form -na).
    #[arg(long)]
    pub no_approve: bool,
    /// Sandbox for the agent's commands: workspace-write, read-only or off (overrides
    /// sandbox.mode in settings).
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<crate::sandbox::Mode>,
    /// Load a skill file, or the skills in a directory (repeatable).
    #[arg(long = "skill", value_name = "PATH")]
    pub skills: Vec<PathBuf>,
    /// Load no skills but those named with --skill (short form -ns).
    #[arg(long)]
    pub no_skills: bool,
    /// Load a prompt template, or the templates in a directory (repeatable).
    #[arg(long = "prompt-template", value_name = "PATH")]
    pub prompt_templates: Vec<PathBuf>,
    /// Load no prompt templates but those named with --prompt-template (short form -np).
    #[arg(long)]
    pub no_prompt_templates: bool,
    /// Leave the context files (AGENTS.md, CLAUDE.md) out of the system prompt (short form -nc).
    #[arg(long)]
    pub no_context_files: bool,
    /// Start no MCP server and offer no MCP tool.
    #[arg(long)]
    pub no_mcp: bool,
    /// Load a Pi extension file or directory (repeatable); see docs/extensions.md.
    #[arg(short = 'e', long = "extension", value_name = "PATH")]
    pub extensions: Vec<String>,
    /// Load no discovered extension; -e paths still load (short form -ne).
    #[arg(long)]
    pub no_extensions: bool,
    /// Accepted: nova makes no network request at startup anyway (it refreshes no catalog and
    /// checks for no update; the one request it may make, asking a local Ollama which models
    /// it has, stays on loopback).
    #[arg(long)]
    pub offline: bool,
    /// List the available models (those whose provider has a key), optionally only those
    /// matching a search, and exit.
    #[arg(long, value_name = "SEARCH", num_args = 0..=1, default_missing_value = "")]
    pub list_models: Option<String>,
    /// Write a session file as an HTML page and exit; the page goes to the first argument after
    /// the flags when there is one, else beside the session file.
    #[arg(long, value_name = "SESSION_FILE")]
    pub export: Option<PathBuf>,
    /// Accepted and ignored (a theme of Pi's terminal UI).
    #[arg(long, value_name = "PATH")]
    pub theme: Vec<PathBuf>,
    /// Accepted and ignored (a theme of Pi's terminal UI).
    #[arg(long, value_name = "NAME")]
    pub use_theme: Option<String>,
    /// Accepted and ignored (themes of Pi's terminal UI).
    #[arg(long)]
    pub no_themes: bool,
    /// Accepted and ignored (Pi's terminal UI mode: fullscreen or regular).
    #[arg(long, value_enum, value_name = "MODE")]
    pub tui_mode: Option<TuiMode>,
    /// Print the version.
    #[arg(short = 'v', long, short_alias = 'V', action = ArgAction::Version)]
    pub version: (),
    /// `--name [value]` options nova does not have, in order: flags an extension may register
    /// (`pi.registerFlag`). Which are is known only once the extensions have loaded; one that
    /// none registers is a usage error then.
    #[arg(skip)]
    pub extension_flags: Vec<ExtensionFlag>,
}

/// A `--name`, `--name value` or `--name=value` on the command line that is not nova's. As in
/// Pi, the argument after `--name` is its value unless it starts with `-` or `@`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionFlag {
    pub name: String,
    pub value: Option<String>,
}

impl Cli {
    /// Parses the command line after the program's name, Pi's several-letter short options
    /// (`-na`, `-nbt`, `-xt`, …) included.
    pub fn parse_args(args: &[String]) -> Result<Cli, clap::Error> {
        let (args, extension_flags) = pi_short_options(args);
        let argv = std::iter::once(OsString::from("nova")).chain(args);
        let mut cli = Cli::try_parse_from(argv)?;
        cli.extension_flags = extension_flags;
        Ok(cli)
    }

    /// `Some(true)` for `--approve`, `Some(false)` for `--no-approve`.
    pub fn trust_override(&self) -> Option<bool> {
        match (self.approve, self.no_approve) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
}

/// Pi's short options of more than one letter, which clap cannot declare: each becomes its long
/// form. An argument that is the value of the option before it (`--name -na`) stays as it is,
/// and nothing after `--` is touched.
const LONG_SHORTS: [(&str, &str); 8] = [
    ("-na", "--no-approve"),
    ("-ne", "--no-extensions"),
    ("-ns", "--no-skills"),
    ("-np", "--no-prompt-templates"),
    ("-nc", "--no-context-files"),
    ("-nbt", "--no-builtin-tools"),
    ("-nt", "--no-tools"),
    ("-xt", "--exclude-tools"),
];

/// Also takes out the options nova does not have, as [`ExtensionFlag`]s.
fn pi_short_options(args: &[String]) -> (Vec<OsString>, Vec<ExtensionFlag>) {
    let mut command = Cli::command();
    // Until it is built, an argument does not know how many values it takes.
    command.build();
    // The long name of an option that must be followed by a value, as Pi's parser takes the
    // next argument whatever it looks like.
    let value_option = |arg: &str| -> Option<String> {
        let found = if let Some(long) = arg.strip_prefix("--") {
            command.get_arguments().find(|a| {
                a.get_long() == Some(long)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&long))
            })
        } else {
            let mut chars = arg.strip_prefix('-')?.chars();
            let (c, None) = (chars.next()?, chars.next()) else {
                return None;
            };
            command.get_arguments().find(|a| a.get_short() == Some(c))
        }?;
        let required = found.get_action().takes_values()
            && found.get_num_args().is_some_and(|n| n.min_values() > 0);
        required.then(|| found.get_long().map(str::to_owned))?
    };
    let nova_has = |long: &str| {
        command.get_arguments().any(|a| {
            a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|al| al.contains(&long))
        })
    };
    let mut out = Vec::with_capacity(args.len());
    let mut flags = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            out.push(OsString::from(arg));
            out.extend(iter.by_ref().map(OsString::from));
            break;
        }
        let arg = LONG_SHORTS
            .iter()
            .find(|(short, _)| short == arg)
            .map_or(arg.as_str(), |(_, long)| *long);
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            if !nova_has(name) {
                let value = value.or_else(|| {
                    let next = iter.as_slice().first()?;
                    let taken = !next.starts_with('-') && !next.starts_with('@');
                    taken.then(|| iter.next().cloned()).flatten()
                });
                flags.push(ExtensionFlag {
                    name: name.to_owned(),
                    value,
                });
                continue;
            }
        }
        // `--name=-na` keeps clap from reading a value that starts with `-` as an option.
        match value_option(arg).zip(iter.as_slice().first()) {
            Some((long, value)) => {
                iter.next();
                out.push(OsString::from(format!("--{long}={value}")));
            }
            None => out.push(OsString::from(arg)),
        }
    }
    (out, flags)
}

fn parse_thinking_level(name: &str) -> Result<ThinkingLevel, String> {
    ThinkingLevel::parse(name).ok_or_else(|| {
        let names: Vec<&str> = ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect();
        format!("valid levels are {}", names.join(", "))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Cli::parse_args(&args).unwrap()
    }

    #[test]
    fn several_letter_short_options_are_their_long_forms() {
        let cli = parse(&[
            "-na", "-ne", "-ns", "-np", "-nc", "-nbt", "-xt", "bash", "x",
        ]);
        assert!(cli.no_approve && cli.no_extensions && cli.no_skills);
        assert!(cli.no_prompt_templates && cli.no_context_files && cli.no_builtin_tools);
        assert_eq!(cli.exclude_tools, ["bash"]);
        assert_eq!(cli.prompts, ["x"]);
        assert!(parse(&["-nt"]).no_tools);
    }

    #[test]
    fn a_value_or_anything_after_the_separator_is_not_rewritten() {
        let cli = parse(&["-n", "-na", "--session-id", "-nc", "--", "-np"]);
        assert_eq!(cli.name.as_deref(), Some("-na"));
        assert_eq!(cli.session_id.as_deref(), Some("-nc"));
        assert!(!cli.no_approve && !cli.no_context_files);
        assert_eq!(cli.prompts, ["-np"]);
        let cli = parse(&[
            "--append-system-prompt",
            "-nt",
            "--append-system-prompt",
            "b",
        ]);
        assert_eq!(cli.append_system_prompt, ["-nt", "b"]);
        assert!(!cli.no_tools);
    }

    #[test]
    fn options_nova_does_not_have_are_kept_for_the_extensions() {
        let cli = parse(&[
            "--plan", "--who", "alice", "--model", "m", "--x=-1", "--y", "@f", "--z", "p",
        ]);
        let flag = |name: &str, value: Option<&str>| ExtensionFlag {
            name: name.into(),
            value: value.map(Into::into),
        };
        assert_eq!(
            cli.extension_flags,
            [
                flag("plan", None),
                flag("who", Some("alice")),
                flag("x", Some("-1")),
                flag("y", None),
                flag("z", Some("p")),
            ]
        );
        assert_eq!(cli.model.as_deref(), Some("m"));
        assert_eq!(cli.prompts, ["@f"]);
        assert!(parse(&["--", "--plan"]).extension_flags.is_empty());
        assert!(parse(&["--model=x"]).extension_flags.is_empty());
        let args = ["--bogus".to_owned(), "-q".to_owned()];
        assert!(
            Cli::parse_args(&args).is_err(),
            "a short option stays clap's"
        );
    }

    #[test]
    fn optional_values() {
        assert_eq!(parse(&["--list-models"]).list_models.as_deref(), Some(""));
        assert_eq!(
            parse(&["--list-models", "son"]).list_models.as_deref(),
            Some("son")
        );
        let cli = parse(&["--export", "s.jsonl", "out.html"]);
        assert_eq!(cli.export, Some(PathBuf::from("s.jsonl")));
        assert_eq!(cli.prompts, ["out.html"]);
        assert_eq!(
            parse(&["-t", "+grep,-write"]).tools.unwrap(),
            ["+grep", "-write"]
        );
    }
}
