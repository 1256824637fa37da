//! The skills and prompt templates of this process, found once at startup (and after them
//! those the extensions' `resources_discover` handlers name, once they answer), and what `/`
//! commands in user messages turn into.
//!
//! Skills are looked for, in this order (the first skill of a name wins): `<agent dir>/skills`,
//! `~/.agents/skills`, `<cwd>/.nova/skills`, Pi's `<cwd>/.pi/skills`, `.agents/skills` in the cwd
//! and each parent up to the git root (or `/`), the `skills` setting, then `--skill`. Templates:
//! `<agent dir>/prompts`, `<cwd>/.nova/prompts`, `<cwd>/.pi/prompts`, the `prompts` setting, then
//! `--prompt-template`. A file reached twice
//! (through a symlink, or listed again) counts once.
//!
//! The project's own places (`.nova/skills`, `.nova/prompts`, `.agents/skills` in the project,
//! and the lists in `.nova/settings.json`) are read only when the project is trusted, as Pi 1.6
//! reads them only after its trust decision: a skill or template is text the model follows, so
//! a cloned repository must not put one in front of it unasked.

use super::skills::{self, Skill};
use super::templates::{self, Template};
use crate::config::Settings;
use crate::protocol::{
    CommandSource, DiscoveredBy, SlashCommand, SourceInfo, SourceOrigin, SourceScope,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Where resources are looked for.
pub struct Sources<'a> {
    pub agent_dir: &'a Path,
    pub cwd: &'a Path,
    /// For `~/.agents/skills`.
    pub home: Option<&'a Path>,
    /// Its `skills` and `prompts` lists.
    pub settings: &'a Settings,
    /// `--skill` and `--prompt-template`, relative to the cwd.
    pub skill_flags: &'a [PathBuf],
    pub template_flags: &'a [PathBuf],
    /// `false` with `--no-skills` / `--no-prompt-templates`: only the flags' paths are read.
    pub discover_skills: bool,
    pub discover_templates: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Resources {
    skills: Vec<Skill>,
    templates: Vec<Template>,
}

impl Resources {
    /// Finds every skill and template. The second value lists what was skipped or is dubious,
    /// each naming its file, for stderr; nothing here stops nova.
    pub fn load(sources: &Sources) -> (Resources, Vec<String>) {
        let trusted = sources.settings.project_trusted;
        let mut skipped = Vec::new();
        let mut usable = |(path, location): (PathBuf, Location)| {
            if trusted || location.scope() != SourceScope::Project {
                return Some((path, location));
            }
            if path.exists() {
                skipped.push(path.display().to_string());
            }
            None
        };
        let mut skills = Found::new("skill");
        for (path, location) in skill_locations(sources).into_iter().filter_map(&mut usable) {
            skills::load(&path, &location, &mut skills);
        }
        let mut templates = Found::new("prompt template");
        for (path, location) in template_locations(sources)
            .into_iter()
            .filter_map(&mut usable)
        {
            templates::load(&path, &location, &mut templates);
        }
        let (skills, mut warnings) = skills.into_parts();
        let (templates, template_warnings) = templates.into_parts();
        warnings.extend(template_warnings);
        if !skipped.is_empty() {
            warnings.push(format!(
                "the project is not trusted, so its skills and prompt templates are not loaded \
                 ({}); trust it with --approve, trust.json or the trustedProjects setting",
                skipped.join(", ")
            ));
        }
        (Resources { skills, templates }, warnings)
    }

    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// These resources and, after them, the skills and templates at the paths the
    /// extensions' `resources_discover` handlers named (files or directories, relative to
    /// `cwd`); a name already taken keeps its first holder, as between any two places. The
    /// second value lists what was skipped, each naming its file.
    pub fn with_discovered(
        &self,
        skill_paths: &[PathBuf],
        prompt_paths: &[PathBuf],
        cwd: &Path,
    ) -> (Resources, Vec<String>) {
        let place = |p: &PathBuf| {
            let absolute = crate::files::path::resolve(&p.to_string_lossy(), cwd);
            (crate::files::path::lexical(&absolute), Location::Extension)
        };
        let mut skills = Found::new("skill");
        for skill in &self.skills {
            skills.add(skill.name.clone(), &skill.path.clone(), skill.clone());
        }
        for (path, location) in skill_paths.iter().map(place) {
            skills::load(&path, &location, &mut skills);
        }
        let mut templates = Found::new("prompt template");
        for template in &self.templates {
            let path = PathBuf::from(&template.info.path);
            templates.add(template.name.clone(), &path, template.clone());
        }
        for (path, location) in prompt_paths.iter().map(place) {
            templates::load(&path, &location, &mut templates);
        }
        let (skills, mut warnings) = skills.into_parts();
        let (templates, template_warnings) = templates.into_parts();
        warnings.extend(template_warnings);
        (Resources { skills, templates }, warnings)
    }

    /// A user message as the model gets it: `/skill:name rest` and `/template args` expanded
    /// (in that order, as Pi does); anything else, unknown names included, unchanged.
    pub fn expand(&self, text: String) -> String {
        let text = skills::expand(&text, &self.skills).unwrap_or(text);
        templates::expand(&text, &self.templates).unwrap_or(text)
    }

    /// `get_commands`: the templates, then the skills, each in the order they were found.
    pub fn commands(&self) -> Vec<SlashCommand> {
        let templates = self.templates.iter().map(|t| SlashCommand {
            name: t.name.clone(),
            description: Some(t.description.clone()),
            source: CommandSource::Prompt,
            source_info: t.info.clone(),
        });
        let skills = self.skills.iter().map(|s| SlashCommand {
            name: format!("skill:{}", s.name),
            description: Some(s.description.clone()),
            source: CommandSource::Skill,
            source_info: s.info.clone(),
        });
        templates.chain(skills).collect()
    }
}

fn skill_locations(sources: &Sources) -> Vec<(PathBuf, Location)> {
    if !sources.discover_skills {
        return listed(&[], sources.skill_flags, sources.cwd);
    }
    let mut out = vec![auto(
        sources.agent_dir.join("skills"),
        SourceScope::User,
        sources.agent_dir,
    )];
    if let Some(home) = sources.home {
        let agents = home.join(".agents");
        out.push(auto(agents.join("skills"), SourceScope::User, &agents));
    }
    // nova's project dir first (the first skill of a name wins), then Pi's.
    for project in [sources.cwd.join(".nova"), sources.cwd.join(".pi")] {
        out.push(auto(project.join("skills"), SourceScope::Project, &project));
    }
    for dir in up_to_git_root(sources.cwd) {
        let agents = dir.join(".agents");
        out.push(auto(agents.join("skills"), SourceScope::Project, &agents));
    }
    out.extend(listed(
        &sources.settings.skills,
        sources.skill_flags,
        sources.cwd,
    ));
    out
}

fn template_locations(sources: &Sources) -> Vec<(PathBuf, Location)> {
    if !sources.discover_templates {
        return listed(&[], sources.template_flags, sources.cwd);
    }
    let mut out = vec![auto(
        sources.agent_dir.join("prompts"),
        SourceScope::User,
        sources.agent_dir,
    )];
    for project in [sources.cwd.join(".nova"), sources.cwd.join(".pi")] {
        out.push(auto(
            project.join("prompts"),
            SourceScope::Project,
            &project,
        ));
    }
    out.extend(listed(
        &sources.settings.prompts,
        sources.template_flags,
        sources.cwd,
    ));
    out
}

fn auto(path: PathBuf, scope: SourceScope, base: &Path) -> (PathBuf, Location) {
    (
        path,
        Location::Auto {
            scope,
            base: base.to_path_buf(),
        },
    )
}

/// The paths from settings (already absolute), then those from the command line.
fn listed(
    settings: &[crate::config::ListedPath],
    flags: &[PathBuf],
    cwd: &Path,
) -> Vec<(PathBuf, Location)> {
    let from_settings = settings.iter().map(|l| {
        (
            crate::files::path::lexical(&l.path),
            Location::Setting { scope: l.scope },
        )
    });
    let from_flags = flags.iter().map(|p| {
        let absolute = crate::files::path::resolve(&p.to_string_lossy(), cwd);
        (crate::files::path::lexical(&absolute), Location::Flag)
    });
    from_settings.chain(from_flags).collect()
}

/// `cwd` and its parents, nearest first, up to the first that holds `.git` (all of them when
/// none does).
fn up_to_git_root(cwd: &Path) -> Vec<&Path> {
    let ancestors: Vec<&Path> = cwd.ancestors().collect();
    match ancestors.iter().position(|d| d.join(".git").exists()) {
        Some(root) => ancestors[..=root].to_vec(),
        None => ancestors,
    }
}

/// How a resource's directory or file was named, which its `sourceInfo` reports.
#[derive(Debug, Clone)]
pub(super) enum Location {
    /// A conventional directory; `base` is the configuration directory it lives in.
    Auto { scope: SourceScope, base: PathBuf },
    /// A path in the user's or the project's settings.
    Setting { scope: SourceScope },
    /// `--skill` or `--prompt-template`.
    Flag,
    /// Named by an extension's `resources_discover` handler.
    Extension,
}

impl Location {
    fn scope(&self) -> SourceScope {
        match self {
            Location::Auto { scope, .. } | Location::Setting { scope } => *scope,
            Location::Flag | Location::Extension => SourceScope::Temporary,
        }
    }

    pub(super) fn source_info(&self, file: &Path) -> SourceInfo {
        let text = |p: &Path| p.to_string_lossy().into_owned();
        let (source, scope, base_dir) = match self {
            Location::Auto { scope, base } => (DiscoveredBy::Auto, *scope, Some(text(base))),
            Location::Setting { scope } => (DiscoveredBy::Local, *scope, None),
            Location::Flag | Location::Extension => (
                DiscoveredBy::Local,
                SourceScope::Temporary,
                file.parent().map(text),
            ),
        };
        SourceInfo {
            path: text(file),
            source,
            scope,
            origin: SourceOrigin::TopLevel,
            base_dir,
        }
    }
}

/// What a discovery pass has found so far: the first resource of each name, in order, and
/// the problems to report.
pub(super) struct Found<T> {
    kind: &'static str,
    items: Vec<T>,
    /// Name → the file that holds it.
    names: HashMap<String, PathBuf>,
    /// Canonical paths of the files loaded, so one reached twice counts once.
    files: HashSet<PathBuf>,
    warnings: Vec<String>,
}

impl<T> Found<T> {
    pub(super) fn new(kind: &'static str) -> Self {
        Found {
            kind,
            items: Vec::new(),
            names: HashMap::new(),
            files: HashSet::new(),
            warnings: Vec::new(),
        }
    }

    pub(super) fn add(&mut self, name: String, path: &Path, item: T) {
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if !self.files.insert(canonical) {
            return;
        }
        if let Some(winner) = self.names.get(&name) {
            let warning = format!(
                "{}: {} \"{name}\" ignored: {} has the same name",
                path.display(),
                self.kind,
                winner.display()
            );
            self.warnings.push(warning);
            return;
        }
        self.names.insert(name, path.to_path_buf());
        self.items.push(item);
    }

    pub(super) fn warn(&mut self, path: &Path, reason: &str) {
        self.warnings.push(format!("{}: {reason}", path.display()));
    }

    pub(super) fn into_parts(self) -> (Vec<T>, Vec<String>) {
        (self.items, self.warnings)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_stop_at_the_git_root() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("repo/a/b");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(dir.path().join("repo/.git"), "gitdir: elsewhere").unwrap();
        let found = up_to_git_root(&cwd);
        assert_eq!(
            found,
            [
                cwd.as_path(),
                &dir.path().join("repo/a"),
                &dir.path().join("repo")
            ]
        );
        assert_eq!(up_to_git_root(Path::new("/")), [Path::new("/")]);
    }
}
