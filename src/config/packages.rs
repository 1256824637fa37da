//! Pi packages: the `packages` setting's sources (`npm:name[@version]`, `git:host/user/repo[@ref]`
//! or a git URL, a local path), where nova keeps what it installed for them, and what each one
//! contributes to a session — its extensions, skills and prompt templates, narrowed by the
//! setting's filters — found as Pi 1.6 finds them (its `docs/packages.md`).
//!
//! Nothing here runs npm or git: `nova install`/`update` ([`crate::package_command`]) fetch; a
//! session only reads what is already there, and names a configured package that is not.
//!
//! Installed packages live in the agent dir, never in the project: the user's under
//! `<agent dir>/npm` and `<agent dir>/git/<host>/<path>` (where Pi keeps them), a project's under
//! `<agent dir>/projects/--<cwd slug>--/` in the same layout, so a repository never gets a
//! `node_modules` written into it and two projects never share a pinned version.

use crate::protocol::SourceScope;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A package source as written in settings or on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `npm:<spec>`: `name` without the version, which may be a range, a tag or `file:…`.
    Npm {
        spec: String,
        name: String,
        version: Option<String>,
    },
    /// A git repository: `repo` is what `git clone` gets; `host`/`path` name it without the ref.
    Git {
        repo: String,
        host: String,
        path: String,
        reference: Option<String>,
    },
    /// A file or directory, relative to the settings file that lists it (or the cwd, typed).
    Local(String),
}

/// Why a source cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{text}: {problem}")]
pub struct BadSource {
    pub text: String,
    pub problem: &'static str,
}

impl Source {
    pub fn parse(text: &str) -> Result<Source, BadSource> {
        let text = text.trim();
        let bad = |problem| BadSource {
            text: text.to_owned(),
            problem,
        };
        if let Some(spec) = text.strip_prefix("npm:") {
            let spec = spec.trim();
            // A scoped name starts with `@`: the version's `@` is the one after it.
            let at = spec
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == '@')
                .map(|(i, _)| i);
            let (name, version) = match at {
                Some(i) => (&spec[..i], Some(&spec[i + 1..]).filter(|v| !v.is_empty())),
                None => (spec, None),
            };
            if name.is_empty() || name.contains("..") || name.starts_with('/') {
                return Err(bad("not an npm package name"));
            }
            return Ok(Source::Npm {
                spec: spec.to_owned(),
                name: name.to_owned(),
                version: version.map(str::to_owned),
            });
        }
        let url = match text.strip_prefix("git:") {
            Some(rest) => rest.trim(),
            None if ["https://", "http://", "ssh://", "git://"]
                .iter()
                .any(|p| text.starts_with(p)) =>
            {
                text
            }
            None if ["github:", "http:", "https:", "ssh:", "builtin:"]
                .iter()
                .any(|p| text.starts_with(p)) =>
            {
                return Err(bad("not a source nova can install"));
            }
            None => return Ok(Source::Local(text.to_owned())),
        };
        git(url).ok_or_else(|| bad("not a git repository nova can read (git:host/user/repo[@ref])"))
    }

    /// What makes two sources the same package whatever their version or ref: the npm name,
    /// the repository, or the absolute path (relative ones from `base`).
    pub fn identity(&self, base: &Path) -> String {
        match self {
            Source::Npm { name, .. } => format!("npm:{name}"),
            Source::Git { host, path, .. } => format!("git:{host}/{path}"),
            Source::Local(path) => format!("local:{}", local_path(path, base).display()),
        }
    }

    /// An exact npm version or a git ref: `nova update` leaves it where it is.
    pub fn pinned(&self) -> bool {
        match self {
            Source::Npm { version, .. } => version.as_deref().is_some_and(exact_version),
            Source::Git { reference, .. } => reference.is_some(),
            Source::Local(_) => false,
        }
    }
}

/// `1.2.3`, `1.2.3-rc.1`, `v1.2.3`: one version, not a range or a tag.
fn exact_version(version: &str) -> bool {
    let version = version.strip_prefix('v').unwrap_or(version);
    let core = version.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `git@host:user/repo`, `scheme://host/user/repo` or `host/user/repo` (a host with a dot, or
/// `localhost`), each with an optional `@ref` after the path.
fn git(url: &str) -> Option<Source> {
    let split_ref = |path: &str| -> (String, Option<String>) {
        match path.split_once('@') {
            Some((p, r)) if !p.is_empty() && !r.is_empty() => (p.to_owned(), Some(r.to_owned())),
            _ => (path.to_owned(), None),
        }
    };
    let (repo, host, path, reference) = if let Some(rest) = url.strip_prefix("git@") {
        let (host, path) = rest.split_once(':')?;
        let (path, reference) = split_ref(path);
        (
            format!("git@{host}:{path}"),
            host.to_owned(),
            path,
            reference,
        )
    } else if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next().unwrap_or(authority);
        let host = host.split(':').next().unwrap_or(host);
        let (path, reference) = split_ref(path.trim_start_matches('/'));
        (
            format!("{scheme}://{authority}/{path}"),
            host.to_owned(),
            path,
            reference,
        )
    } else {
        let (host, path) = url.split_once('/')?;
        if !host.contains('.') && host != "localhost" {
            return None;
        }
        let (path, reference) = split_ref(path);
        (
            format!("https://{host}/{path}"),
            host.to_owned(),
            path,
            reference,
        )
    };
    let path = path.trim_end_matches(".git").to_owned();
    let unsafe_part = |s: &str| {
        s.is_empty()
            || s.contains(['\\', '\0'])
            || s.starts_with('/')
            || s.split('/').any(|p| p == ".." || p == "." || p.is_empty())
    };
    if unsafe_part(&host) || host.contains('/') || unsafe_part(&path) || !path.contains('/') {
        return None;
    }
    Some(Source::Git {
        repo,
        host,
        path,
        reference,
    })
}

/// A local source's absolute path, `..` and `.` resolved by their text.
pub fn local_path(path: &str, base: &Path) -> PathBuf {
    let path = path.strip_prefix("file:").unwrap_or(path);
    crate::files::path::lexical(&crate::files::path::resolve(path, base))
}

/// The three kinds of resource a package gives nova (Pi's themes have no use here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Extensions,
    Skills,
    Prompts,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Extensions, Kind::Skills, Kind::Prompts];

    fn key(self) -> &'static str {
        match self {
            Kind::Extensions => "extensions",
            Kind::Skills => "skills",
            Kind::Prompts => "prompts",
        }
    }
}

/// One entry of a `packages` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub source: String,
    pub scope: SourceScope,
    /// The directory of the settings file that lists it: its relative paths count from there.
    pub base: PathBuf,
    /// The object form's `extensions`, `skills`, `prompts`: `None` loads all the package
    /// declares, `Some([])` none, patterns narrow it.
    pub filters: [Option<Vec<String>>; 3],
}

impl Entry {
    fn filter(&self, kind: Kind) -> Option<&[String]> {
        self.filters[kind as usize].as_deref()
    }

    fn filtered(&self) -> bool {
        self.filters.iter().any(Option::is_some)
    }
}

/// Reads one file's `packages` value (strings, or objects with `source` and filters).
pub fn from_settings(
    value: Value,
    file: &Path,
    scope: SourceScope,
    warnings: &mut Vec<String>,
) -> Vec<Entry> {
    let base = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let Value::Array(items) = value else {
        warnings.push(format!(
            "settings: \"packages\" in {} is not a list; ignored",
            file.display()
        ));
        return Vec::new();
    };
    let mut entries = Vec::new();
    for item in items {
        let (source, filters) = match item {
            Value::String(source) => (source, [None, None, None]),
            Value::Object(mut object) => {
                let Some(Value::String(source)) = object.remove("source") else {
                    warnings.push(format!(
                        "settings: a \"packages\" entry in {} has no \"source\"; ignored",
                        file.display()
                    ));
                    continue;
                };
                let filters = Kind::ALL.map(|kind| {
                    let listed = object.remove(kind.key())?;
                    match serde_json::from_value::<Vec<String>>(listed) {
                        Ok(patterns) => Some(patterns),
                        Err(e) => {
                            warnings.push(format!(
                                "settings: \"{}\" of package {source} in {}: {e}; loading none",
                                kind.key(),
                                file.display()
                            ));
                            Some(Vec::new())
                        }
                    }
                });
                (source, filters)
            }
            other => {
                warnings.push(format!(
                    "settings: \"packages\" in {} lists {other}, which is not a source; ignored",
                    file.display()
                ));
                continue;
            }
        };
        entries.push(Entry {
            source,
            scope,
            base: base.clone(),
            filters,
        });
    }
    entries
}

/// Where a scope's installed packages live.
pub fn install_root(agent_dir: &Path, cwd: &Path, scope: SourceScope) -> PathBuf {
    match scope {
        SourceScope::Project => agent_dir
            .join("projects")
            .join(crate::session::paths::cwd_slug(cwd)),
        SourceScope::User | SourceScope::Temporary => agent_dir.to_path_buf(),
    }
}

/// Where an npm or git source is installed in `root` (`None` for a local one).
pub fn installed_at(root: &Path, source: &Source) -> Option<PathBuf> {
    match source {
        Source::Npm { name, .. } => Some(root.join("npm/node_modules").join(name)),
        Source::Git { host, path, .. } => Some(root.join("git").join(host).join(path)),
        Source::Local(_) => None,
    }
}

/// The packages' resources for one session, in load order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Extension entry files (or a package directory for the loader to read), with the scope
    /// of the setting that named their package.
    pub extensions: Vec<(PathBuf, SourceScope)>,
    pub skills: Vec<(PathBuf, SourceScope)>,
    pub prompts: Vec<(PathBuf, SourceScope)>,
}

/// The settings' packages (a project's only when it is trusted; a project entry replaces the
/// user's of the same package), resolved to their resources. A package that is not installed
/// or not there is named in `warnings` and skipped.
pub fn resolve(
    entries: &[Entry],
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Resolved {
    let mut chosen: Vec<(&Entry, Source, String)> = Vec::new();
    let ordered = entries
        .iter()
        .filter(|e| e.scope == SourceScope::Project && trusted)
        .chain(entries.iter().filter(|e| e.scope != SourceScope::Project));
    for entry in ordered {
        let source = match Source::parse(&entry.source) {
            Ok(source) => source,
            Err(e) => {
                warnings.push(format!("settings: package {e}; skipped"));
                continue;
            }
        };
        let identity = source.identity(&entry.base);
        if !chosen.iter().any(|(_, _, id)| *id == identity) {
            chosen.push((entry, source, identity));
        }
    }
    let mut out = Resolved::default();
    for (entry, source, _) in chosen {
        let root = match &source {
            Source::Local(path) => {
                let path = local_path(path, &entry.base);
                if path.is_file() {
                    out.extensions.push((path, entry.scope));
                    continue;
                }
                if !path.is_dir() {
                    warnings.push(format!(
                        "settings: package {} is not there ({}); skipped",
                        entry.source,
                        path.display()
                    ));
                    continue;
                }
                path
            }
            installed => {
                let root = install_root(agent_dir, cwd, entry.scope);
                let Some(path) = installed_at(&root, installed).filter(|p| p.is_dir()) else {
                    warnings.push(format!(
                        "settings: package {} is not installed; `nova update --extensions` \
                         installs it",
                        entry.source
                    ));
                    continue;
                };
                path
            }
        };
        match package(&root, entry) {
            Some(found) => {
                let tag = |paths: Vec<PathBuf>| paths.into_iter().map(|p| (p, entry.scope));
                out.extensions.extend(tag(found.extensions));
                out.skills.extend(tag(found.skills));
                out.prompts.extend(tag(found.prompts));
            }
            // A directory that declares nothing is one extension, as the loader reads it.
            None => out.extensions.push((root, entry.scope)),
        }
    }
    let dedup = |list: &mut Vec<(PathBuf, SourceScope)>| {
        let mut seen = std::collections::HashSet::new();
        list.retain(|(p, _)| seen.insert(p.clone()));
    };
    dedup(&mut out.extensions);
    dedup(&mut out.skills);
    dedup(&mut out.prompts);
    out
}

/// What one package directory holds, each kind in file-name order.
#[derive(Debug, Default)]
struct Found {
    extensions: Vec<PathBuf>,
    skills: Vec<PathBuf>,
    prompts: Vec<PathBuf>,
}

impl Found {
    fn of(&mut self, kind: Kind) -> &mut Vec<PathBuf> {
        match kind {
            Kind::Extensions => &mut self.extensions,
            Kind::Skills => &mut self.skills,
            Kind::Prompts => &mut self.prompts,
        }
    }
}

/// The package's `pi` manifest object, if its package.json has one.
fn manifest(root: &Path) -> Option<serde_json::Map<String, Value>> {
    let text = std::fs::read_to_string(root.join("package.json")).ok()?;
    match serde_json::from_str::<Value>(&text).ok()?.get("pi")? {
        Value::Object(pi) => Some(pi.clone()),
        _ => None,
    }
}

fn manifest_list(
    manifest: Option<&serde_json::Map<String, Value>>,
    kind: Kind,
) -> Option<Vec<String>> {
    let list = manifest?.get(kind.key())?.as_array()?;
    Some(
        list.iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    )
}

/// A package's resources: with a filter, each kind it names narrows what the package declares;
/// else the manifest's lists, else the conventional `extensions/`, `skills/`, `prompts/`
/// directories. `None` when the package declares nothing and no filter applies.
fn package(root: &Path, entry: &Entry) -> Option<Found> {
    let manifest = manifest(root);
    let declares = manifest.as_ref().is_some_and(|m| {
        ["extensions", "skills", "prompts", "themes"]
            .iter()
            .any(|k| m.contains_key(*k))
    });
    let mut found = Found::default();
    let mut any = false;
    for kind in Kind::ALL {
        let listed = manifest_list(manifest.as_ref(), kind);
        let all = match &listed {
            Some(entries) => from_manifest(root, entries, kind),
            None if declares && !entry.filtered() => Vec::new(),
            None => {
                let dir = root.join(kind.key());
                any |= dir.is_dir();
                resource_files(&dir, kind)
            }
        };
        let files = match entry.filter(kind) {
            Some([]) => Vec::new(),
            Some(patterns) => apply(&all, patterns, root),
            None => all,
        };
        found.of(kind).extend(files);
    }
    (declares || any || entry.filtered()).then_some(found)
}

/// A manifest list: its paths and globs (relative to the package), expanded, then its own
/// `!`/`+`/`-` patterns applied.
fn from_manifest(root: &Path, entries: &[String], kind: Kind) -> Vec<PathBuf> {
    let (overrides, plain): (Vec<&String>, Vec<&String>) =
        entries.iter().partition(|e| e.starts_with(['!', '+', '-']));
    let mut files = Vec::new();
    for entry in plain {
        let paths = if entry.contains(['*', '?']) {
            expand_glob(root, entry)
        } else {
            vec![crate::files::path::lexical(&root.join(entry))]
        };
        for path in paths {
            if path.is_file() {
                files.push(path);
            } else if path.is_dir() {
                files.extend(resource_files(&path, kind));
            }
        }
    }
    let overrides: Vec<String> = overrides.into_iter().cloned().collect();
    if overrides.is_empty() {
        files
    } else {
        apply(&files, &overrides, root)
    }
}

/// The package's paths a glob matches (relative to the package), in name order, leaving out
/// hidden entries and `node_modules` (name one directly to reach into it).
fn expand_glob(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    let Ok(glob) = crate::glob::Glob::path(pattern, crate::glob::Case::Sensitive) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for path in sorted_entries(&dir) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            if let Ok(rel) = path.strip_prefix(root)
                && glob.is_match(rel)
            {
                out.push(path.clone());
            }
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    paths.sort();
    paths
}

/// A resource directory's files, as Pi collects them from a package: extensions as the
/// extensions loader finds them; skills a `SKILL.md` (the directory is one skill), the
/// Markdown files at its top, and each `SKILL.md` below; prompts every Markdown file below.
fn resource_files(dir: &Path, kind: Kind) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    match kind {
        Kind::Extensions => super::extensions::package_entries(dir),
        Kind::Skills => skill_files(dir, true),
        Kind::Prompts => markdown_below(dir),
    }
}

fn visible(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    !name.starts_with('.') && name != "node_modules"
}

fn is_markdown(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "md")
}

fn skill_files(dir: &Path, top: bool) -> Vec<PathBuf> {
    let skill = dir.join("SKILL.md");
    if skill.is_file() {
        return vec![skill];
    }
    let mut out = Vec::new();
    for path in sorted_entries(dir).into_iter().filter(|p| visible(p)) {
        if top && is_markdown(&path) {
            out.push(path);
        } else if path.is_dir() {
            out.extend(skill_files(&path, false));
        }
    }
    out
}

fn markdown_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in sorted_entries(dir).into_iter().filter(|p| visible(p)) {
        if is_markdown(&path) {
            out.push(path);
        } else if path.is_dir() {
            out.extend(markdown_below(&path));
        }
    }
    out
}

/// Pi's filter patterns over `all`: plain globs keep what they match (everything when there
/// are none), `!glob` drops, `+path` puts back one exact path, `-path` drops one exact path
/// (last word). Globs match a file's path in the package, its name or its absolute path; a
/// skill's `SKILL.md` also answers to its directory.
fn apply(all: &[PathBuf], patterns: &[String], root: &Path) -> Vec<PathBuf> {
    let mut includes = Vec::new();
    let mut excludes = Vec::new();
    let mut force_in = Vec::new();
    let mut force_out = Vec::new();
    for p in patterns {
        match p.chars().next() {
            Some('+') => force_in.push(&p[1..]),
            Some('-') => force_out.push(&p[1..]),
            Some('!') => excludes.push(&p[1..]),
            _ => includes.push(p.as_str()),
        }
    }
    let mut kept: Vec<PathBuf> = all
        .iter()
        .filter(|f| includes.is_empty() || matches_glob(f, &includes, root))
        .filter(|f| !matches_glob(f, &excludes, root))
        .cloned()
        .collect();
    for f in all {
        if !kept.contains(f) && matches_exact(f, &force_in, root) {
            kept.push(f.clone());
        }
    }
    kept.retain(|f| !matches_exact(f, &force_out, root));
    // Back in the package's order.
    all.iter().filter(|f| kept.contains(f)).cloned().collect()
}

/// The forms a file answers to: its path in the package, its name, its absolute path, and for
/// a `SKILL.md` the same three of its directory.
fn names(file: &Path, root: &Path) -> Vec<String> {
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let mut out = Vec::new();
    let mut add = |p: &Path| {
        out.push(text(p.strip_prefix(root).unwrap_or(p)));
        out.push(
            p.file_name()
                .map(|n| text(Path::new(n)))
                .unwrap_or_default(),
        );
        out.push(text(p));
    };
    add(file);
    if file.file_name().is_some_and(|n| n == "SKILL.md")
        && let Some(dir) = file.parent()
    {
        add(dir);
    }
    out
}

fn matches_glob(file: &Path, patterns: &[&str], root: &Path) -> bool {
    let forms = names(file, root);
    patterns.iter().any(|p| {
        let p = p.strip_prefix("./").unwrap_or(p);
        crate::glob::Glob::path(p, crate::glob::Case::Sensitive)
            .is_ok_and(|g| forms.iter().any(|f| g.is_match(f)))
    })
}

fn matches_exact(file: &Path, patterns: &[&str], root: &Path) -> bool {
    let forms = names(file, root);
    patterns.iter().any(|p| {
        let p = p.strip_prefix("./").unwrap_or(p).trim_end_matches('/');
        forms.iter().enumerate().any(|(i, f)| i % 3 != 1 && f == p)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn sources_parse_as_pi_reads_them() {
        assert_eq!(
            Source::parse("npm:@scope/tools@1.2.3").unwrap(),
            Source::Npm {
                spec: "@scope/tools@1.2.3".into(),
                name: "@scope/tools".into(),
                version: Some("1.2.3".into())
            }
        );
        let plain = Source::parse("npm:tools").unwrap();
        assert!(!plain.pinned());
        assert!(Source::parse("npm:tools@1.2.3").unwrap().pinned());
        assert!(!Source::parse("npm:tools@^1.2").unwrap().pinned());
        assert_eq!(plain.identity(Path::new("/")), "npm:tools");
        let git = Source::parse("git:github.com/user/repo@v1").unwrap();
        assert_eq!(
            git,
            Source::Git {
                repo: "https://github.com/user/repo".into(),
                host: "github.com".into(),
                path: "user/repo".into(),
                reference: Some("v1".into())
            }
        );
        assert!(git.pinned());
        let ssh = Source::parse("git:git@github.com:user/repo.git").unwrap();
        assert_eq!(ssh.identity(Path::new("/")), "git:github.com/user/repo");
        let url = Source::parse("https://example.com/a/b").unwrap();
        assert_eq!(url.identity(Path::new("/")), "git:example.com/a/b");
        assert!(Source::parse("git:example.com/../etc").is_err());
        assert!(Source::parse("git:nohost/user/repo").is_err());
        assert!(Source::parse("github:user/repo").is_err());
        assert_eq!(
            Source::parse("./pkg").unwrap().identity(Path::new("/a/b")),
            "local:/a/b/pkg"
        );
        assert_eq!(
            Source::parse("../pkg").unwrap().identity(Path::new("/a/b")),
            "local:/a/pkg"
        );
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn entry(source: &Path, filters: [Option<Vec<String>>; 3]) -> Entry {
        Entry {
            source: source.display().to_string(),
            scope: SourceScope::User,
            base: PathBuf::from("/"),
            filters,
        }
    }

    #[test]
    fn a_package_gives_its_conventional_directories_or_its_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let conv = tmp.path().join("conv");
        write(&conv.join("extensions/a.ts"), "");
        write(&conv.join("extensions/sub/index.js"), "");
        write(&conv.join("skills/one/SKILL.md"), "");
        write(&conv.join("skills/top.md"), "");
        write(&conv.join("prompts/deep/review.md"), "");
        write(&conv.join("prompts/notes.txt"), "");
        let found = resolve(
            &[entry(&conv, [None, None, None])],
            tmp.path(),
            tmp.path(),
            false,
            &mut Vec::new(),
        );
        let paths = |l: &[(PathBuf, SourceScope)]| -> Vec<PathBuf> {
            l.iter()
                .map(|(p, _)| p.strip_prefix(tmp.path()).unwrap().to_path_buf())
                .collect()
        };
        assert_eq!(
            paths(&found.extensions),
            vec![
                PathBuf::from("conv/extensions/a.ts"),
                "conv/extensions/sub/index.js".into()
            ]
        );
        assert_eq!(
            paths(&found.skills),
            vec![
                PathBuf::from("conv/skills/one/SKILL.md"),
                "conv/skills/top.md".into()
            ]
        );
        assert_eq!(
            paths(&found.prompts),
            vec![PathBuf::from("conv/prompts/deep/review.md")]
        );

        let man = tmp.path().join("man");
        write(
            &man.join("package.json"),
            r#"{"pi":{"extensions":["./src/*.ts","!src/legacy.ts"],"prompts":["./res/p.md"]}}"#,
        );
        write(&man.join("src/main.ts"), "");
        write(&man.join("src/legacy.ts"), "");
        write(&man.join("extensions/ignored.ts"), "");
        write(&man.join("res/p.md"), "");
        write(&man.join("skills/s/SKILL.md"), "");
        let found = resolve(
            &[entry(&man, [None, None, None])],
            tmp.path(),
            tmp.path(),
            false,
            &mut Vec::new(),
        );
        assert_eq!(
            paths(&found.extensions),
            vec![PathBuf::from("man/src/main.ts")]
        );
        assert_eq!(paths(&found.prompts), vec![PathBuf::from("man/res/p.md")]);
        // The manifest declares resources, so an undeclared directory is not read.
        assert!(found.skills.is_empty());

        // A directory that declares nothing is itself one extension.
        let bare = tmp.path().join("bare");
        write(&bare.join("index.ts"), "");
        let found = resolve(
            &[entry(&bare, [None, None, None])],
            tmp.path(),
            tmp.path(),
            false,
            &mut Vec::new(),
        );
        assert_eq!(paths(&found.extensions), vec![PathBuf::from("bare")]);
    }

    #[test]
    fn filters_narrow_what_the_package_declares() {
        let tmp = tempfile::tempdir().unwrap();
        let pkg = tmp.path().join("pkg");
        for f in ["a.ts", "b.ts", "legacy.ts"] {
            write(&pkg.join("extensions").join(f), "");
        }
        write(&pkg.join("prompts/review.md"), "");
        write(&pkg.join("prompts/other.md"), "");
        write(&pkg.join("skills/s/SKILL.md"), "");
        let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        let found = resolve(
            &[entry(
                &pkg,
                [
                    strings(&[
                        "extensions/*.ts",
                        "!extensions/legacy.ts",
                        "-extensions/b.ts",
                    ]),
                    strings(&[]),
                    strings(&["prompts/review.md"]),
                ],
            )],
            tmp.path(),
            tmp.path(),
            false,
            &mut Vec::new(),
        );
        let names = |l: &[(PathBuf, SourceScope)]| -> Vec<String> {
            l.iter()
                .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(&found.extensions), vec!["a.ts"]);
        assert!(found.skills.is_empty());
        assert_eq!(names(&found.prompts), vec!["review.md"]);

        // `+path` puts back what `!` dropped; a filter never reaches what is not declared.
        let found = resolve(
            &[entry(
                &pkg,
                [
                    strings(&["!*.ts", "+extensions/legacy.ts", "nowhere/x.ts"]),
                    None,
                    None,
                ],
            )],
            tmp.path(),
            tmp.path(),
            false,
            &mut Vec::new(),
        );
        assert_eq!(names(&found.extensions), vec!["legacy.ts"]);
        assert_eq!(found.skills.len(), 1);
    }

    #[test]
    fn project_entries_need_trust_and_replace_the_users() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("proj");
        let installed = |root: &Path| {
            let dir = root.join("npm/node_modules/tools");
            write(&dir.join("extensions/t.ts"), "");
            dir
        };
        let user_copy = installed(&agent);
        let project_copy = installed(&install_root(&agent, &cwd, SourceScope::Project));
        let mut user = entry(Path::new("npm:tools"), [None, None, None]);
        user.source = "npm:tools".into();
        let mut project = user.clone();
        project.scope = SourceScope::Project;
        let mut missing = user.clone();
        missing.source = "npm:absent@1.0.0".into();
        let entries = [user, project, missing];
        let mut warnings = Vec::new();
        let untrusted = resolve(&entries, &agent, &cwd, false, &mut warnings);
        assert_eq!(
            untrusted.extensions,
            vec![(user_copy.join("extensions/t.ts"), SourceScope::User)]
        );
        assert!(
            warnings[0].contains("npm:absent@1.0.0 is not installed"),
            "{warnings:?}"
        );
        let trusted = resolve(&entries, &agent, &cwd, true, &mut Vec::new());
        assert_eq!(
            trusted.extensions,
            vec![(project_copy.join("extensions/t.ts"), SourceScope::Project)]
        );
    }

    #[test]
    fn settings_entries_are_strings_or_objects_with_filters() {
        let mut warnings = Vec::new();
        let entries = from_settings(
            serde_json::json!([
                "npm:a",
                {"source": "./b", "extensions": ["x.ts"], "skills": []},
                {"extensions": []},
                7
            ]),
            Path::new("/home/u/.nova/agent/settings.json"),
            SourceScope::User,
            &mut warnings,
        );
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].base, Path::new("/home/u/.nova/agent"));
        assert_eq!(entries[1].filters[0], Some(vec!["x.ts".to_owned()]));
        assert_eq!(entries[1].filters[1], Some(vec![]));
        assert_eq!(entries[1].filters[2], None);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
    }
}
