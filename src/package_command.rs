//! `nova install`, `remove` (`uninstall`), `list` and `update --extensions`: Pi 1.6's package
//! commands under its words. A package is installed into the agent dir
//! ([`crate::config::packages`] says where) and named in the user's `settings.json`, or with
//! `-l` in the project's `.nova/settings.json`, whose packages load only when the project is
//! trusted. npm and git run as child processes, their output on stderr; nothing here reaches a
//! network address itself.

use crate::config::packages::{self, Entry, Source};
use crate::config::{settings, trust};
use crate::frontend::{fatal, usage_error};
use crate::protocol::SourceScope;
use serde_json::{Map, Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode, Stdio};

/// What the command line asks.
pub enum Command {
    Install { source: String, local: bool },
    Remove { source: String, local: bool },
    List,
}

/// A package command with the trust flag it was given.
pub struct Request {
    command: Command,
    /// `--approve` / `--no-approve`.
    trust: Option<bool>,
}

const USAGE: &str = "usage:
  nova install <source> [-l] [--approve|--no-approve]
  nova remove <source> [-l] [--approve|--no-approve]     (alias: nova uninstall)
  nova list [--approve|--no-approve]
  nova update --extensions | --extension <source> | <source>

Pi packages: <source> is npm:<name>[@<version>], git:<host>/<user>/<repo>[@<ref>] (or a git URL),
or a local path. A package is installed into the agent dir and added to the user's settings.json,
or with -l (--local) to the project's .nova/settings.json, which is read only when the project
is trusted.";

/// `Some` when the arguments (after the program's name) are a package command; a malformed one
/// is a usage error right away.
pub fn parse(args: &[String]) -> Option<Result<Request, ExitCode>> {
    let (word, rest) = args.split_first()?;
    let kind = match word.as_str() {
        "install" => "install",
        "remove" | "uninstall" => "remove",
        "list" => "list",
        _ => return None,
    };
    let mut local = false;
    let mut trust = None;
    let mut sources = Vec::new();
    for arg in rest {
        match arg.as_str() {
            "-l" | "--local" if kind != "list" => local = true,
            "-a" | "--approve" => trust = Some(true),
            "-na" | "--no-approve" => trust = Some(false),
            "-h" | "--help" => {
                let _ = writeln!(std::io::stdout(), "{USAGE}");
                return Some(Err(ExitCode::SUCCESS));
            }
            flag if flag.starts_with('-') && flag.len() > 1 && !flag.starts_with("-/") => {
                return Some(Err(usage_error(&format!(
                    "nova {word}: `{flag}` is not an option\n{USAGE}"
                ))));
            }
            source => sources.push(source.to_owned()),
        }
    }
    let command = match (kind, sources.as_slice()) {
        ("list", []) => Command::List,
        ("install", [source]) => Command::Install {
            source: source.clone(),
            local,
        },
        ("remove", [source]) => Command::Remove {
            source: source.clone(),
            local,
        },
        ("list", _) => {
            return Some(Err(usage_error(&format!(
                "nova list takes no source\n{USAGE}"
            ))));
        }
        (_, []) => {
            return Some(Err(usage_error(&format!(
                "nova {word}: which package? (a source is missing)\n{USAGE}"
            ))));
        }
        _ => {
            return Some(Err(usage_error(&format!(
                "nova {word} takes one source\n{USAGE}"
            ))));
        }
    };
    Some(Ok(Request { command, trust }))
}

/// Where the commands work: the agent dir, the cwd and the project's trust.
struct Place {
    agent_dir: PathBuf,
    cwd: PathBuf,
    trust: Option<bool>,
}

impl Place {
    fn new(agent_dir: &Path, trust: Option<bool>) -> Result<Place, String> {
        let cwd = std::env::current_dir()
            .map_err(|e| format!("cannot read the working directory: {e}"))?;
        Ok(Place {
            agent_dir: agent_dir.to_path_buf(),
            cwd,
            trust,
        })
    }

    fn settings_file(&self, scope: SourceScope) -> PathBuf {
        match scope {
            SourceScope::Project => self.cwd.join(".nova").join("settings.json"),
            SourceScope::User | SourceScope::Temporary => self.agent_dir.join("settings.json"),
        }
    }

    /// Both files' packages and whether the project's count, as a session would read them.
    fn configured(&self) -> (Vec<Entry>, bool) {
        let mut warnings = Vec::new();
        let settings = settings::load(
            &settings::Sources {
                user: &self.settings_file(SourceScope::User),
                project: Some(&self.settings_file(SourceScope::Project)),
                pi_project: Some(&self.cwd.join(".pi").join("settings.json")),
                cwd: &self.cwd,
                trust_flag: self.trust,
                trust_file: &self.agent_dir.join(trust::TRUST_FILE),
            },
            &mut warnings,
        );
        (settings.packages, settings.project_trusted)
    }

    fn root(&self, scope: SourceScope) -> PathBuf {
        packages::install_root(&self.agent_dir, &self.cwd, scope)
    }
}

/// Runs a package command.
pub fn run(request: Request, agent_dir: &Path) -> ExitCode {
    let place = match Place::new(agent_dir, request.trust) {
        Ok(place) => place,
        Err(e) => return fatal(&e),
    };
    let result = match request.command {
        Command::Install { source, local } => install(&place, &source, scope_of(local)),
        Command::Remove { source, local } => remove(&place, &source, scope_of(local)),
        Command::List => list(&place),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(&e),
    }
}

fn scope_of(local: bool) -> SourceScope {
    if local {
        SourceScope::Project
    } else {
        SourceScope::User
    }
}

fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

fn install(place: &Place, text: &str, scope: SourceScope) -> Result<(), String> {
    let source = Source::parse(text).map_err(|e| e.to_string())?;
    say(&format!("Installing {text}..."));
    let recorded = match &source {
        Source::Local(path) => {
            let path = packages::local_path(path, &place.cwd);
            if !path.exists() {
                return Err(format!("{text}: {} does not exist", path.display()));
            }
            // Kept relative to the settings file that lists it, as Pi writes it.
            let file = place.settings_file(scope);
            relative(&path, file.parent().unwrap_or(Path::new("/")))
        }
        installed => {
            fetch(&place.root(scope), installed)?;
            text.trim().to_owned()
        }
    };
    add_to_settings(place, scope, &source, &recorded)?;
    say(&format!("Installed {text}"));
    Ok(())
}

fn remove(place: &Place, text: &str, scope: SourceScope) -> Result<(), String> {
    let source = Source::parse(text).map_err(|e| e.to_string())?;
    let file = place.settings_file(scope);
    let mut settings = read_settings(&file)?;
    let identity = source.identity(&place.cwd);
    let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let listed = settings
        .get("packages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let kept: Vec<Value> = listed
        .iter()
        .filter(|entry| {
            let named = entry
                .as_str()
                .or_else(|| entry.get("source").and_then(Value::as_str));
            named
                .and_then(|s| Source::parse(s).ok())
                .is_none_or(|s| s.identity(&base) != identity)
        })
        .cloned()
        .collect();
    if kept.len() == listed.len() {
        return Err(format!("No matching package found for {text}"));
    }
    say(&format!("Removing {text}..."));
    let root = place.root(scope);
    match &source {
        Source::Npm { name, .. } => {
            let prefix = root.join("npm");
            if prefix.is_dir() {
                run_tool(
                    Process::new(crate::exthost::npm())
                        .args(["uninstall", name, "--prefix"])
                        .arg(&prefix)
                        .args(["--legacy-peer-deps", "--no-audit", "--no-fund"]),
                    "npm",
                )?;
            }
        }
        Source::Git { .. } => {
            if let Some(dir) = packages::installed_at(&root, &source) {
                std::fs::remove_dir_all(&dir)
                    .or_else(|e| match e.kind() {
                        std::io::ErrorKind::NotFound => Ok(()),
                        _ => Err(e),
                    })
                    .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            }
        }
        Source::Local(_) => {}
    }
    settings.insert("packages".into(), Value::Array(kept));
    write_settings(&file, &settings)?;
    say(&format!("Removed {text}"));
    Ok(())
}

fn list(place: &Place) -> Result<(), String> {
    let (entries, trusted) = place.configured();
    let mut out = String::new();
    for (scope, title) in [
        (SourceScope::User, "User packages:"),
        (SourceScope::Project, "Project packages:"),
    ] {
        if scope == SourceScope::Project && !trusted {
            continue;
        }
        let of_scope: Vec<&Entry> = entries.iter().filter(|e| e.scope == scope).collect();
        if of_scope.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(title);
        out.push('\n');
        for entry in of_scope {
            out.push_str(&format!("  {}\n", entry.source));
            let at = Source::parse(&entry.source).ok().and_then(|s| match &s {
                Source::Local(path) => Some(packages::local_path(path, &entry.base)),
                installed => packages::installed_at(&place.root(scope), installed),
            });
            match at.filter(|p| p.exists()) {
                Some(path) => out.push_str(&format!("    {}\n", path.display())),
                None => out.push_str("    (not installed)\n"),
            }
        }
    }
    if out.is_empty() {
        out.push_str("No packages installed.\n");
    }
    if !trusted && entries.iter().any(|e| e.scope == SourceScope::Project) {
        crate::frontend::note(
            "the project is not trusted, so its packages are not listed and do not load \
             (--approve trusts it)",
        );
    }
    let _ = write!(std::io::stdout(), "{out}");
    Ok(())
}

/// `nova update --extensions` (every configured package) or `nova update <source>` (one):
/// an npm package that is not pinned goes to its newest matching version, a git one to its
/// branch's or ref's head, a missing one is installed; each change is reported.
pub fn update(agent_dir: &Path, only: Option<&str>, trust_flag: Option<bool>) -> ExitCode {
    let place = match Place::new(agent_dir, trust_flag) {
        Ok(place) => place,
        Err(e) => return fatal(&e),
    };
    let (entries, trusted) = place.configured();
    let wanted = match only.map(Source::parse).transpose() {
        Ok(wanted) => wanted.map(|s| s.identity(&place.cwd)),
        Err(e) => return usage_error(&e.to_string()),
    };
    let chosen: Vec<(&Entry, Source)> = entries
        .iter()
        .filter(|e| e.scope != SourceScope::Project || trusted)
        .filter_map(|e| Some((e, Source::parse(&e.source).ok()?)))
        .filter(|(e, s)| wanted.as_ref().is_none_or(|w| s.identity(&e.base) == *w))
        .collect();
    if let (Some(only), true) = (only, chosen.is_empty()) {
        return fatal(&format!("No matching package found for {only}"));
    }
    let mut changed = 0;
    let mut failed = 0;
    for (entry, source) in chosen {
        let root = place.root(entry.scope);
        let Some(dir) = packages::installed_at(&root, &source) else {
            continue;
        };
        let missing = !dir.is_dir();
        if source.pinned() && !missing {
            continue;
        }
        let before = version_of(&dir, &source);
        let result = if missing {
            fetch(&root, &source)
        } else {
            refresh(&root, &dir, &source)
        };
        if let Err(e) = result {
            crate::frontend::note(&format!("{}: {e}", entry.source));
            failed += 1;
            continue;
        }
        let after = version_of(&dir, &source);
        if before != after {
            changed += 1;
            let scope = if entry.scope == SourceScope::Project {
                " (project)"
            } else {
                ""
            };
            let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
            say(&format!(
                "{}{scope} {} -> {}",
                entry.source,
                shown(&before),
                shown(&after)
            ));
        }
    }
    if failed > 0 {
        return ExitCode::FAILURE;
    }
    if changed == 0 {
        say("Packages are already up to date");
    }
    ExitCode::SUCCESS
}

/// An npm package's version, or a git checkout's commit (its first 7 digits).
fn version_of(dir: &Path, source: &Source) -> Option<String> {
    match source {
        Source::Npm { .. } => {
            let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
            let manifest: Value = serde_json::from_str(&text).ok()?;
            manifest.get("version")?.as_str().map(str::to_owned)
        }
        Source::Git { .. } => {
            let out = Process::new("git")
                .args(["rev-parse", "HEAD"])
                .current_dir(dir)
                .stderr(Stdio::null())
                .output()
                .ok()?;
            let head = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            (out.status.success() && head.len() >= 7).then(|| head[..7].to_owned())
        }
        Source::Local(_) => None,
    }
}

/// Installs an npm or git source into `root`.
fn fetch(root: &Path, source: &Source) -> Result<(), String> {
    match source {
        Source::Npm { spec, .. } => npm_install(root, spec),
        Source::Git {
            repo, reference, ..
        } => {
            let Some(dir) = packages::installed_at(root, source) else {
                return Ok(());
            };
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let cloned = run_tool(git().arg("clone").arg("--").arg(repo).arg(&dir), "git")
                .and_then(|()| match reference {
                    Some(r) => run_tool(git().args(["checkout", r]).current_dir(&dir), "git"),
                    None => Ok(()),
                })
                .and_then(|()| git_dependencies(&dir));
            if cloned.is_err() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            cloned
        }
        Source::Local(_) => Ok(()),
    }
}

/// Brings an installed npm or git source up to date.
fn refresh(root: &Path, dir: &Path, source: &Source) -> Result<(), String> {
    match source {
        Source::Npm {
            name,
            version,
            spec,
        } => {
            // A bare name keeps the range npm saved at install: ask for the newest outright.
            let wanted = match version {
                Some(_) => spec.clone(),
                None => format!("{name}@latest"),
            };
            npm_install(root, &wanted)
        }
        Source::Git { reference, .. } => {
            let target = reference.as_deref().unwrap_or("HEAD");
            run_tool(
                git().args(["fetch", "origin", target]).current_dir(dir),
                "git",
            )?;
            run_tool(
                git()
                    .args(["reset", "--hard", "FETCH_HEAD"])
                    .current_dir(dir),
                "git",
            )?;
            run_tool(git().args(["clean", "-fdx"]).current_dir(dir), "git")?;
            git_dependencies(dir)
        }
        Source::Local(_) => Ok(()),
    }
}

/// git that fails rather than asks for a password nobody can type here.
fn git() -> Process {
    let mut git = Process::new("git");
    git.env("GIT_TERMINAL_PROMPT", "0");
    git
}

/// A cloned package's own runtime dependencies; Pi's packages are the host's, not its.
fn git_dependencies(dir: &Path) -> Result<(), String> {
    if !dir.join("package.json").is_file() {
        return Ok(());
    }
    run_tool(
        Process::new(crate::exthost::npm())
            .args([
                "install",
                "--omit=dev",
                "--legacy-peer-deps",
                "--no-audit",
                "--no-fund",
            ])
            .current_dir(dir),
        "npm",
    )
}

/// `npm install <spec>` into `<root>/npm`, a private project of its own. Peer dependencies are
/// not installed: Pi's packages are the extension host's, resolved there.
fn npm_install(root: &Path, spec: &str) -> Result<(), String> {
    let prefix = root.join("npm");
    std::fs::create_dir_all(&prefix)
        .map_err(|e| format!("cannot create {}: {e}", prefix.display()))?;
    let manifest = prefix.join("package.json");
    if !manifest.is_file() {
        std::fs::write(
            &manifest,
            "{\"name\": \"nova-packages\", \"private\": true}\n",
        )
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
    }
    run_tool(
        Process::new(crate::exthost::npm())
            .arg("install")
            .arg(spec)
            .arg("--prefix")
            .arg(&prefix)
            .args(["--legacy-peer-deps", "--no-audit", "--no-fund"]),
        "npm",
    )
}

/// Runs a tool with its output on stderr (stdout is this command's report).
fn run_tool(command: &mut Process, name: &str) -> Result<(), String> {
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("{name} is not installed (it is not on the PATH)")
            }
            _ => format!("{name} did not start: {e}"),
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

/// `path` relative to `base` when it is below it or near it, as Pi writes local sources.
fn relative(path: &Path, base: &Path) -> String {
    let path_parts: Vec<_> = path.components().collect();
    let base_parts: Vec<_> = base.components().collect();
    let common = path_parts
        .iter()
        .zip(&base_parts)
        .take_while(|(a, b)| a == b)
        .count();
    if common <= 1 {
        return path.display().to_string();
    }
    let mut out = PathBuf::new();
    for _ in common..base_parts.len() {
        out.push("..");
    }
    for part in &path_parts[common..] {
        out.push(part);
    }
    match out.as_os_str().is_empty() {
        true => ".".into(),
        false => out.display().to_string(),
    }
}

fn read_settings(file: &Path) -> Result<Map<String, Value>, String> {
    match std::fs::read_to_string(file) {
        Ok(text) => match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(format!(
                "{}: settings must be a JSON object",
                file.display()
            )),
            Err(e) => Err(format!(
                "{}: invalid JSON ({e}); fix it first, nothing was changed",
                file.display()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    }
}

/// Written beside and renamed, so a session starting meanwhile never reads half a file.
fn write_settings(file: &Path, settings: &Map<String, Value>) -> Result<(), String> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(settings).map_err(|e| e.to_string())? + "\n";
    let temp = file.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&temp, text)
        .and_then(|()| std::fs::rename(&temp, file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            format!("cannot write {}: {e}", file.display())
        })
}

/// Adds the source to the scope's settings, or replaces the entry of the same package (its
/// filters kept).
fn add_to_settings(
    place: &Place,
    scope: SourceScope,
    source: &Source,
    recorded: &str,
) -> Result<(), String> {
    let file = place.settings_file(scope);
    let mut settings = read_settings(&file)?;
    let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let identity = source.identity(&place.cwd);
    let mut listed = match settings.remove("packages") {
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(format!(
                "{}: \"packages\" is not a list; fix it first, nothing was changed",
                file.display()
            ));
        }
        None => Vec::new(),
    };
    let same = listed.iter_mut().find(|entry| {
        entry
            .as_str()
            .or_else(|| entry.get("source").and_then(Value::as_str))
            .and_then(|s| Source::parse(s).ok())
            .is_some_and(|s| s.identity(&base) == identity)
    });
    match same {
        Some(Value::Object(object)) => {
            object.insert("source".into(), json!(recorded));
        }
        Some(entry) => *entry = json!(recorded),
        None => listed.push(json!(recorded)),
    }
    settings.insert("packages".into(), Value::Array(listed));
    write_settings(&file, &settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_sources_are_written_relative_to_their_settings_file() {
        assert_eq!(
            relative(Path::new("/w/p/pkg"), Path::new("/w/p/.nova")),
            "../pkg"
        );
        assert_eq!(
            relative(Path::new("/h/.nova/agent/x"), Path::new("/h/.nova/agent")),
            "x"
        );
        assert_eq!(relative(Path::new("/a"), Path::new("/b/c")), "/a");
    }
}
