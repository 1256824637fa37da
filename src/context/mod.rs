//! What the model is told: the system prompt — nova's own instructions (or the user's
//! replacement), the append text, the project's context files (one per directory, by
//! [`CONTEXT_FILE_NAMES`], from the agent dir and from the filesystem root down to the cwd, each
//! only where no other user can have written it), the skills, then the date and working directory, in Pi's order —
//! and the skills and prompt templates that `/` commands in user messages expand to.

mod frontmatter;
pub mod resources;
pub mod skills;
mod template_args;
pub mod templates;

pub use resources::{Resources, Sources as ResourceSources};

use crate::protocol::SlashCommand;
use crate::tools::Tool;
use std::path::{Path, PathBuf};

/// Everything the prompts are made of except the tool list, read from disk once; the system
/// prompt is rendered again whenever the active tools change (a model with or without image
/// input).
#[derive(Debug, Clone)]
pub struct PromptSource {
    /// Replaces nova's own instructions (`--system-prompt`, else `SYSTEM.md`).
    custom: Option<String>,
    /// Added after them (`--append-system-prompt`, else `APPEND_SYSTEM.md`).
    append: Option<String>,
    files: Vec<(PathBuf, String)>,
    cwd: PathBuf,
    /// `YYYY-MM-DD`.
    date: String,
    resources: Resources,
}

/// Where [`PromptSource::load`] reads from.
pub struct PromptFiles<'a> {
    pub agent_dir: &'a Path,
    pub cwd: &'a Path,
    /// Whether `.nova/SYSTEM.md` and `.nova/APPEND_SYSTEM.md` may be read: like Pi 1.6, nova
    /// takes a project's replacement or addition to the system prompt only from a trusted
    /// project. Context files (`AGENTS.md`) load either way, as in Pi.
    pub project_trusted: bool,
    /// `false` with `--no-context-files`: no context file ([`CONTEXT_FILE_NAMES`]) is read.
    pub context_files: bool,
    /// `--system-prompt` and `--append-system-prompt`, which win over every file.
    pub custom: Option<&'a str>,
    pub append: Option<&'a str>,
    /// `YYYY-MM-DD`.
    pub date: &'a str,
}

impl PromptSource {
    /// The second value names project files skipped because the project is not trusted, and
    /// context files skipped because other users can change them.
    pub fn load(files: &PromptFiles) -> (Self, Vec<String>) {
        let mut skipped = Vec::new();
        // nova's project dir, then Pi's, then the agent dir: the first file found is used.
        let mut candidates = |name: &str| {
            let mut paths = Vec::new();
            for dir in [".nova", ".pi"] {
                let own = files.cwd.join(dir).join(name);
                if files.project_trusted {
                    paths.push(own);
                } else if own.exists() {
                    skipped.push(own.display().to_string());
                }
            }
            paths.push(files.agent_dir.join(name));
            paths
        };
        let custom = files
            .custom
            .map(str::to_owned)
            .or_else(|| read_first(&candidates("SYSTEM.md")));
        let append = files
            .append
            .map(str::to_owned)
            .or_else(|| read_first(&candidates("APPEND_SYSTEM.md")));
        let mut warnings = Vec::new();
        if !skipped.is_empty() {
            warnings.push(format!(
                "the project is not trusted, so {} does not change the system prompt; trust it \
                 with --approve, trust.json or the trustedProjects setting",
                skipped.join(" and ")
            ));
        }
        let (context, skipped) = if files.context_files {
            context_files(files.agent_dir, files.cwd)
        } else {
            (Vec::new(), None)
        };
        warnings.extend(skipped);
        let source = PromptSource {
            custom,
            append,
            files: context,
            cwd: files.cwd.to_path_buf(),
            date: files.date.to_owned(),
            resources: Resources::default(),
        };
        (source, warnings)
    }

    /// The skills (listed in the system prompt) and templates of this process.
    pub fn with_resources(self, resources: Resources) -> Self {
        PromptSource { resources, ..self }
    }

    /// This source with the skills and templates the extensions discovered added (see
    /// [`Resources::with_discovered`]), and what was skipped.
    pub fn with_discovered(
        &self,
        skill_paths: &[PathBuf],
        prompt_paths: &[PathBuf],
    ) -> (Self, Vec<String>) {
        let (resources, warnings) =
            self.resources
                .with_discovered(skill_paths, prompt_paths, &self.cwd);
        (
            PromptSource {
                resources,
                ..self.clone()
            },
            warnings,
        )
    }

    /// A user message with its `/skill:` or template command expanded.
    pub fn expand(&self, text: String) -> String {
        self.resources.expand(text)
    }

    pub fn commands(&self) -> Vec<SlashCommand> {
        self.resources.commands()
    }

    pub fn render(&self, tools: &[Tool]) -> String {
        let mut out = self
            .custom
            .clone()
            .unwrap_or_else(|| builtin_instructions(tools));
        if let Some(append) = self.append.as_deref().filter(|a| !a.trim().is_empty()) {
            out.push_str("\n\n");
            out.push_str(append.trim_end());
        }
        if !self.files.is_empty() {
            out.push_str("\n\n# Project Context\n\nInstructions from the project and the user:\n");
            for (path, text) in &self.files {
                out.push_str(&format!("\n## {}\n\n{}\n", path.display(), text.trim_end()));
            }
        }
        // The model loads a skill by reading its file, so without `read` the list is no use.
        if let Some(block) =
            skills::prompt_block(self.resources.skills()).filter(|_| tools.contains(&Tool::Read))
        {
            out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
            out.push_str(&block);
            out.push('\n');
        }
        out.push_str(&format!(
            "\nCurrent date: {}\nCurrent working directory: {}",
            self.date,
            self.cwd.display()
        ));
        out
    }
}

fn builtin_instructions(tools: &[Tool]) -> String {
    let mut s = String::from(
        "You are nova, a coding agent working in the user's project. You read code, run \
         commands, and edit files with the tools below to do what the user asks.\n",
    );
    if tools.is_empty() {
        s.push_str(
            "\nNo tools are available in this session: answer from the conversation alone.\n",
        );
    } else {
        s.push_str("\nAvailable tools:\n");
        for tool in tools {
            s.push_str(&format!("- {}: {}\n", tool.name(), tool_summary(*tool)));
        }
    }
    s.push_str("\nGuidelines:\n");
    let has = |t: Tool| tools.contains(&t);
    if has(Tool::Read) {
        s.push_str("- Read a file before you change it; never guess at its contents.\n");
    }
    if has(Tool::Edit) {
        s.push_str(
            "- Change existing files with edit: the old text must match exactly and once.\n",
        );
    }
    if has(Tool::Write) {
        s.push_str("- Use write only for new files or complete rewrites.\n");
    }
    if has(Tool::Bash) {
        s.push_str("- Use bash to list, search, build and test; prefer commands that finish.\n");
    }
    s.push_str("- Be concise in what you say.\n- Name file paths plainly when you mention files.");
    s
}

fn tool_summary(tool: Tool) -> &'static str {
    match tool {
        Tool::Read => "show a file's text (or an image)",
        Tool::Write => "create or overwrite a file",
        Tool::Edit => "replace exact text in a file",
        Tool::Bash => "run a shell command in the working directory",
        Tool::Grep => "search file contents with a regex (honours .gitignore)",
        Tool::Find => "find files by glob pattern (honours .gitignore)",
        Tool::Ls => "list a directory's entries",
        Tool::ViewImage => "look at an image file",
        Tool::Zoom => "magnify a region of an image file",
    }
}

fn read_first(paths: &[PathBuf]) -> Option<String> {
    paths
        .iter()
        .find_map(|p| crate::files::safe_open::read_to_string(p).ok())
}

/// The names a directory's context file may have, the first found winning: Pi 1.6's list and
/// order, so a repository written for Pi (a local `AGENTS.override.md` over the committed
/// `AGENTS.md`, an upper-case `.MD`) tells nova what it tells Pi.
pub const CONTEXT_FILE_NAMES: [&str; 5] = [
    "AGENTS.override.md",
    "AGENTS.md",
    "AGENTS.MD",
    "CLAUDE.md",
    "CLAUDE.MD",
];

/// One context file per directory: the agent dir's first, then root → cwd. A file someone
/// other than the user (or root) could have written is skipped ([`foreign`]); the warning
/// names each one skipped.
fn context_files(agent_dir: &Path, cwd: &Path) -> (Vec<(PathBuf, String)>, Option<String>) {
    let mut dirs = vec![agent_dir.to_path_buf()];
    let mut ancestors: Vec<&Path> = cwd.ancestors().collect();
    ancestors.reverse();
    dirs.extend(ancestors.into_iter().map(Path::to_path_buf));
    let shadowed = shadowed_by_worktree(cwd);
    let mut seen = Vec::new();
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for dir in dirs {
        for name in CONTEXT_FILE_NAMES {
            let path = dir.join(name);
            let Ok(mut file) = crate::files::safe_open::open_regular(&path) else {
                continue;
            };
            let real = std::fs::canonicalize(&dir).map(|d| d.join(name)).ok();
            if seen.contains(&path) || (shadowed.is_some() && real == shadowed) {
                break;
            }
            seen.push(path.clone());
            if let Some(why) = foreign(&dir, &file) {
                skipped.push(format!("{} ({why})", path.display()));
                break;
            }
            let mut text = String::new();
            if std::io::Read::read_to_string(&mut file, &mut text).is_ok() {
                files.push((path, text));
            }
            break;
        }
    }
    let warning = (!skipped.is_empty()).then(|| {
        format!(
            "skipped context files other users can change: {}",
            skipped.join(", ")
        )
    });
    (files, warning)
}

/// The main checkout's context file that a linked git worktree nested inside it replaces with
/// its own (the same name at the worktree's root), as Pi 1.6 skips it: both are the one
/// repository's instructions, and loading both would give them twice. `None` in an ordinary
/// checkout, a worktree beside its main checkout, a bare layout or a submodule. Canonical,
/// since git writes the worktree's `gitdir` in that form while the cwd may be a symlink.
fn shadowed_by_worktree(cwd: &Path) -> Option<PathBuf> {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let (worktree, dot_git) = cwd
        .ancestors()
        .map(|dir| (dir, dir.join(".git")))
        .find(|(_, dot_git)| dot_git.exists())?;
    // A `.git` directory is a main checkout itself.
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let git_dir = worktree.join(text.trim().strip_prefix("gitdir:")?.trim());
    if !git_dir.join("HEAD").exists() {
        return None;
    }
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(common) => git_dir.join(common.trim()),
        Err(_) => git_dir,
    };
    let (common, worktree) = (canonical(&common)?, canonical(worktree)?);
    let main = common.parent()?;
    let nested = worktree.starts_with(main) && worktree != main;
    if !nested || canonical(&main.join(".git")).as_ref() != Some(&common) {
        return None;
    }
    CONTEXT_FILE_NAMES
        .iter()
        .find(|name| worktree.join(name).is_file())
        .map(|name| main.join(name))
}

/// Why a context file in `dir` may hold someone else's instructions, or `None` when only the
/// user (and root) can have written it: it is owned by another user than those two, or its
/// directory can be written by another user (its owner, or anyone through the mode's group or
/// other bits; a group-writable directory of the user's own group counts as theirs) — unless
/// the directory is sticky and the file is the user's, which others then cannot replace.
fn foreign(dir: &Path, file: &std::fs::File) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let (me, my_group) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let trusted = |uid: u32| uid == me || uid == 0;
    let (Ok(meta), Ok(dir_meta)) = (file.metadata(), std::fs::metadata(dir)) else {
        return Some("its owner cannot be read");
    };
    if !trusted(meta.uid()) {
        return Some("owned by another user");
    }
    let mode = dir_meta.mode();
    let writable_by_others = !trusted(dir_meta.uid())
        || mode & 0o002 != 0
        || (mode & 0o020 != 0 && dir_meta.gid() != my_group);
    let sticky_and_mine = mode & 0o1000 != 0 && meta.uid() == me;
    (writable_by_others && !sticky_and_mine).then_some("its directory is writable by other users")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn prompt_has_tools_context_files_and_footer_in_order() {
        let agent = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let cwd = project.path().join("sub");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(agent.path().join("AGENTS.md"), "global rules").unwrap();
        std::fs::write(project.path().join("CLAUDE.md"), "project rules").unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "sub rules").unwrap();
        std::fs::write(cwd.join("CLAUDE.md"), "ignored: AGENTS.md wins").unwrap();
        let files = |custom, append| PromptFiles {
            context_files: true,
            agent_dir: agent.path(),
            cwd: &cwd,
            project_trusted: false,
            custom,
            append,
            date: "2026-12-02",
        };
        let prompt = PromptSource::load(&files(None, Some("APPENDED")))
            .0
            .render(&[Tool::Read, Tool::Bash]);
        let at = |needle: &str| {
            prompt
                .find(needle)
                .unwrap_or_else(|| panic!("{needle} missing:\n{prompt}"))
        };
        assert!(at("- read:") < at("- bash:"));
        assert!(!prompt.contains("- edit:"));
        assert!(at("APPENDED") < at("# Project Context"));
        assert!(at("global rules") < at("project rules"));
        assert!(at("project rules") < at("sub rules"));
        assert!(!prompt.contains("ignored"));
        assert!(prompt.ends_with(&format!(
            "Current date: 2026-12-02\nCurrent working directory: {}",
            cwd.display()
        )));

        let custom = PromptSource::load(&files(Some("CUSTOM"), None))
            .0
            .render(&[Tool::Read]);
        assert!(custom.starts_with("CUSTOM\n\n# Project Context"));
    }

    /// A linked worktree nested in its main checkout: its own `AGENTS.md` replaces the main
    /// checkout's, which loads again once the worktree has none of that name.
    #[test]
    fn a_nested_worktrees_context_file_replaces_its_main_checkouts() {
        let agent = tempfile::tempdir().unwrap();
        let main = tempfile::tempdir().unwrap();
        let main = std::fs::canonicalize(main.path()).unwrap();
        let admin = main.join(".git/worktrees/feat");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::write(main.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(admin.join("HEAD"), "ref: refs/heads/feat\n").unwrap();
        std::fs::write(admin.join("commondir"), "../..\n").unwrap();
        let worktree = main.join("trees/feat");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(
            worktree.join(".git"),
            format!("gitdir: {}\n", admin.display()),
        )
        .unwrap();
        std::fs::write(main.join("AGENTS.md"), "MAIN RULES").unwrap();
        std::fs::write(main.join("trees/CLAUDE.md"), "BETWEEN RULES").unwrap();
        std::fs::write(worktree.join("AGENTS.md"), "WORKTREE RULES").unwrap();
        let texts = || -> Vec<String> {
            context_files(agent.path(), &worktree)
                .0
                .into_iter()
                .map(|(_, text)| text)
                .collect()
        };
        assert_eq!(texts(), ["BETWEEN RULES", "WORKTREE RULES"]);
        std::fs::rename(worktree.join("AGENTS.md"), worktree.join("CLAUDE.md")).unwrap();
        assert_eq!(texts(), ["MAIN RULES", "BETWEEN RULES", "WORKTREE RULES"]);
    }

    #[test]
    fn project_system_files_need_trust() {
        let agent = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(agent.path().join("SYSTEM.md"), "USER SYSTEM").unwrap();
        std::fs::create_dir(cwd.path().join(".nova")).unwrap();
        std::fs::write(cwd.path().join(".nova/SYSTEM.md"), "PROJECT SYSTEM").unwrap();
        std::fs::write(cwd.path().join(".nova/APPEND_SYSTEM.md"), "PROJECT APPEND").unwrap();
        let load = |project_trusted| {
            let (source, warnings) = PromptSource::load(&PromptFiles {
                context_files: true,
                agent_dir: agent.path(),
                cwd: cwd.path(),
                project_trusted,
                custom: None,
                append: None,
                date: "2026-12-02",
            });
            (source.render(&[]), warnings)
        };
        let (untrusted, warnings) = load(false);
        assert!(untrusted.starts_with("USER SYSTEM"), "{untrusted}");
        assert!(!untrusted.contains("PROJECT"), "{untrusted}");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains(".nova/SYSTEM.md and "), "{warnings:?}");
        assert!(warnings[0].contains("--approve"), "{warnings:?}");
        let (trusted, warnings) = load(true);
        assert!(
            trusted.starts_with("PROJECT SYSTEM\n\nPROJECT APPEND"),
            "{trusted}"
        );
        assert!(warnings.is_empty());
    }
}
