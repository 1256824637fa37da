//! `nova update --models`: refreshes the model catalog, as `pi update --models` refreshes Pi's.
//! nova's catalog comes from the model table published in Pi's provider library (the npm
//! package named by [`catalog::PACKAGE`]); the refresh fetches the newest release with npm's
//! own client (`npm pack`, so npm's registry settings, proxy and cache apply), unpacks it with
//! `tar`, and writes its chat models to the agent dir's `catalog/`, which later starts read in
//! place of the compiled-in catalog while it is the newer. `--from <dir>` reads an unpacked
//! package instead (offline, or a pinned version); `scripts/update-models.sh` uses it to
//! regenerate the repository's `data/models/`.
//!
//! `--extensions`, `--extension <source>` or a source updates Pi packages instead
//! ([`crate::package_command::update`]). nova has no self-update.

use crate::config::builtin;
use crate::config::catalog::{self, Refreshed};
use crate::frontend::{fatal, note, usage_error};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: nova update --models [--from <unpacked package dir>]
       nova update --extensions | --extension <source> | <source> [--approve|--no-approve]";

/// What `nova update` was asked.
pub enum Request {
    Models {
        from: Option<PathBuf>,
    },
    /// Pi packages: all of them, or the one named.
    Packages {
        only: Option<String>,
        trust: Option<bool>,
    },
}

/// `Some` when the arguments (after the program's name) are an update command; a malformed
/// one is a usage error right away.
pub fn parse(args: &[String]) -> Option<Result<Request, ExitCode>> {
    let (command, mut rest) = args.split_first()?;
    if command != "update" {
        return None;
    }
    let mut models = false;
    let mut from = None;
    let mut packages = false;
    let mut only = None;
    let mut trust = None;
    while let Some((flag, more)) = rest.split_first() {
        rest = more;
        match flag.as_str() {
            "--models" => models = true,
            "--self" | "self" | "pi" | "--force" => {
                return Some(Err(usage_error(&format!(
                    "{USAGE} (nova does not update itself: it updates only its model catalog \
                     and pi packages)"
                ))));
            }
            // nova has no self-update: `--all` is every package.
            "--extensions" | "--all" => packages = true,
            "-a" | "--approve" => trust = Some(true),
            "-na" | "--no-approve" => trust = Some(false),
            "--extension" => match rest.split_first() {
                Some((source, more)) => {
                    only = Some(source.clone());
                    packages = true;
                    rest = more;
                }
                None => return Some(Err(usage_error(USAGE))),
            },
            source if !source.starts_with('-') && only.is_none() => {
                only = Some(source.to_owned());
                packages = true;
            }
            "--from" => match rest.split_first() {
                Some((dir, more)) => {
                    from = Some(PathBuf::from(dir));
                    rest = more;
                }
                None => return Some(Err(usage_error(USAGE))),
            },
            _ => {
                return Some(Err(usage_error(&format!(
                    "{USAGE} (`{flag}` is not an option)"
                ))));
            }
        }
    }
    match (models, packages) {
        (true, false) => Some(Ok(Request::Models { from })),
        (false, true) => Some(Ok(Request::Packages { only, trust })),
        (true, true) => Some(Err(usage_error(&format!(
            "{USAGE} (the model catalog and packages are updated one at a time)"
        )))),
        (false, false) => Some(Err(usage_error(&format!(
            "{USAGE} (nova does not update itself: it updates only its model catalog and pi \
             packages)"
        )))),
    }
}

/// Updates what the request names.
pub async fn run(request: Request, agent_dir: &Path) -> ExitCode {
    match request {
        Request::Models { from } => models(from, agent_dir).await,
        Request::Packages { only, trust } => {
            crate::package_command::update(agent_dir, only.as_deref(), trust)
        }
    }
}

/// Fetches (or reads) the catalog's package and writes the agent dir's catalog.
async fn models(from: Option<PathBuf>, agent_dir: &Path) -> ExitCode {
    // The fetched package's directory lives until the catalog is written.
    let (package, _fetched) = match &from {
        Some(dir) => (dir.clone(), None),
        None => match fetch().await {
            Ok(tmp) => (tmp.0.join("package"), Some(tmp)),
            Err(message) => return fatal(&message),
        },
    };
    let (mut source, mut catalogs) = match catalog::from_pi_package(&package) {
        Ok(found) => found,
        Err(e) => {
            return fatal(&format!(
                "{} is not a {} package nova can read: {e}",
                package.display(),
                catalog::PACKAGE
            ));
        }
    };
    let unknown: Vec<String> = catalogs
        .keys()
        .filter(|p| builtin::find(p).is_none())
        .cloned()
        .collect();
    for provider in &unknown {
        catalogs.remove(provider);
        source.models.remove(provider);
    }
    let dir = Refreshed::dir(agent_dir);
    if let Err(e) = catalog::write(&dir, &source, &catalogs) {
        return fatal(&e);
    }
    let total: usize = source.models.values().sum();
    note(&format!(
        "wrote {total} models of {} providers from {} {} (its table of {}) to {}",
        source.models.len(),
        source.package,
        source.version,
        source.catalog_generated_at,
        dir.display()
    ));
    if !unknown.is_empty() {
        note(&format!(
            "left out providers nova cannot reach yet: {}",
            unknown.join(", ")
        ));
    }
    if let Ok(ours) = catalog::compiled_source()
        && ours.catalog_generated_at >= source.catalog_generated_at
    {
        note(&format!(
            "the catalog compiled into this nova ({} {}) is as new; it stays in use",
            ours.package, ours.version
        ));
    }
    ExitCode::SUCCESS
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fetches the newest release of the package into a new directory (`<dir>/package`).
async fn fetch() -> Result<TempDir, String> {
    let dir = std::env::temp_dir().join(format!("nova-update-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let guard = TempDir(dir);
    let spec = format!("{}@latest", catalog::PACKAGE);
    let packed = run_tool("npm", &["pack", &spec, "--silent"], &guard.0)
        .await
        .map_err(|e| format!("cannot fetch {spec} with npm: {e}"))?;
    let file = packed
        .lines()
        .rev()
        .find(|l| l.ends_with(".tgz"))
        .ok_or_else(|| format!("npm pack {spec} named no package file (it said: {packed})"))?
        .trim()
        .to_owned();
    run_tool("tar", &["-xzf", &file], &guard.0)
        .await
        .map_err(|e| format!("cannot unpack {file}: {e}"))?;
    Ok(guard)
}

/// Runs `program` in `cwd`, giving its standard output, or what went wrong.
async fn run_tool(program: &str, args: &[&str], cwd: &Path) -> Result<String, String> {
    let output = tokio::process::Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{program} is not installed"),
            _ => format!("{program} did not start: {e}"),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "{program} failed ({}){}",
            output.status,
            said.map(|s| format!(": {s}")).unwrap_or_default()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
