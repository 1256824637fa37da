//! Which Pi extensions a session loads, found as Pi 1.6 finds them: the project's
//! `.nova/extensions/` and then Pi's `.pi/extensions/` (only when the project is trusted; an
//! entry of `.pi/` named like one of `.nova/` is left to nova's), the agent dir's `extensions/`, the
//! `extensions` setting's paths (a project's only when it is trusted), the extensions of the
//! `packages` setting ([`super::packages`], resolved by then), then each `-e`/`--extension` path;
//! `--no-extensions` turns off all but `-e`.
//!
//! In a directory, an extension is a `*.ts`/`*.js` file, or a subdirectory with a
//! `package.json` whose `pi.extensions` lists its entry files, or else an `index.ts`/`index.js`
//! (one level deep, no further). A `-e` directory is read as such a subdirectory first, and as a
//! directory of extensions when it declares none. Nothing here starts Node: with no extension
//! found, nova never starts the extension host.

use super::ConfigError;
use crate::protocol::{DiscoveredBy, SourceScope};
use std::path::{Path, PathBuf};

/// One extension entry file to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// Absolute.
    pub path: PathBuf,
    pub scope: SourceScope,
    pub source: DiscoveredBy,
    /// What Pi reports as its `baseDir`: the agent dir, or the project's `.nova` or `.pi`; none for
    /// `-e`.
    pub base_dir: Option<PathBuf>,
}

/// Where to look.
pub struct Sources<'a> {
    pub agent_dir: &'a Path,
    pub cwd: &'a Path,
    pub project_trusted: bool,
    /// The `extensions` setting's paths (the project's only when it is trusted).
    pub settings: &'a [super::ListedPath],
    /// The packages' extensions (a trusted project's included), with their setting's scope.
    pub packages: &'a [(PathBuf, SourceScope)],
    /// `-e` paths as given (relative ones from the cwd).
    pub flags: &'a [String],
    /// `--no-extensions`.
    pub no_discovery: bool,
}

/// Every extension the sources name, each once, in load order; an `Err` names a `-e` path
/// where nothing is (running without an extension asked for by name could do harm), and a
/// setting's path where nothing is goes to `warnings`.
pub fn find(sources: &Sources, warnings: &mut Vec<String>) -> Result<Vec<Extension>, ConfigError> {
    let mut found: Vec<Extension> = Vec::new();
    let mut add = |path: PathBuf, scope, source, base_dir: Option<&Path>| {
        if !found.iter().any(|e| e.path == path) {
            found.push(Extension {
                path,
                scope,
                source,
                base_dir: base_dir.map(Path::to_path_buf),
            });
        }
    };
    if !sources.no_discovery {
        if sources.project_trusted {
            let own = sources.cwd.join(".nova").join("extensions");
            for dir in [".nova", ".pi"] {
                let base = sources.cwd.join(dir);
                let extensions = base.join("extensions");
                for path in in_dir(&extensions) {
                    // `.pi/extensions/x` beside `.nova/extensions/x`: nova's copy is the one.
                    let entry = path
                        .strip_prefix(&extensions)
                        .ok()
                        .and_then(|p| p.iter().next());
                    if dir == ".pi" && entry.is_some_and(|name| own.join(name).exists()) {
                        continue;
                    }
                    add(path, SourceScope::Project, DiscoveredBy::Auto, Some(&base));
                }
            }
        }
        for path in in_dir(&sources.agent_dir.join("extensions")) {
            add(
                path,
                SourceScope::User,
                DiscoveredBy::Auto,
                Some(sources.agent_dir),
            );
        }
    }
    let listed = if sources.no_discovery {
        &[][..]
    } else {
        sources.settings
    };
    for listed in listed {
        // A project's settings name code to run: only a trusted project's count.
        if listed.scope == SourceScope::Project && !sources.project_trusted {
            continue;
        }
        let entries = if listed.path.is_dir() {
            package_entries(&listed.path)
        } else if listed.path.is_file() {
            vec![listed.path.clone()]
        } else {
            warnings.push(format!(
                "settings: \"extensions\" lists {}, where there is no extension; skipped",
                listed.path.display()
            ));
            continue;
        };
        for entry in entries {
            add(entry, listed.scope, DiscoveredBy::Local, None);
        }
    }
    if !sources.no_discovery {
        for (path, scope) in sources.packages {
            let entries = if path.is_dir() {
                package_entries(path)
            } else {
                vec![path.clone()]
            };
            for entry in entries {
                add(entry, *scope, DiscoveredBy::Local, None);
            }
        }
    }
    for flag in sources.flags {
        if let Some(package) = flag_package(flag, sources.agent_dir, sources.cwd, warnings)? {
            for (path, _) in package.extensions {
                let entries = if path.is_dir() {
                    package_entries(&path)
                } else {
                    vec![path]
                };
                for entry in entries {
                    add(entry, SourceScope::Temporary, DiscoveredBy::Cli, None);
                }
            }
            continue;
        }
        let path = crate::files::path::resolve(flag, sources.cwd);
        if path.is_dir() {
            let entries = package_entries(&path);
            for entry in entries {
                add(entry, SourceScope::Temporary, DiscoveredBy::Cli, None);
            }
        } else if path.is_file() {
            add(path, SourceScope::Temporary, DiscoveredBy::Cli, None);
        } else {
            return Err(ConfigError::NoExtension {
                flag: flag.clone(),
                path,
            });
        }
    }
    Ok(found)
}

/// What an `npm:` or `git:` source given to `-e` holds, as `nova install` put the package in
/// the agent dir (`None` for a path): its extensions here, its skills and prompt templates for
/// the session's lists. Pi fetches such a package into a cache as it starts; nova leaves
/// fetching to `nova install`, so a session never waits on the network.
pub fn flag_package(
    flag: &str,
    agent_dir: &Path,
    cwd: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<super::packages::Resolved>, ConfigError> {
    use super::packages::{self, Source};
    let source = match Source::parse(flag) {
        Ok(source @ (Source::Npm { .. } | Source::Git { .. })) => source,
        _ => return Ok(None),
    };
    let root = packages::install_root(agent_dir, cwd, SourceScope::Temporary);
    if !packages::installed_at(&root, &source).is_some_and(|p| p.is_dir()) {
        return Err(ConfigError::PackageNotInstalled {
            flag: flag.to_owned(),
        });
    }
    let entry = packages::Entry {
        source: flag.to_owned(),
        scope: SourceScope::Temporary,
        base: cwd.to_path_buf(),
        filters: [None, None, None],
    };
    Ok(Some(packages::resolve(
        &[entry],
        agent_dir,
        cwd,
        true,
        warnings,
    )))
}

/// A package directory's extensions: its own entry files, else those directly in it.
pub(super) fn package_entries(dir: &Path) -> Vec<PathBuf> {
    entries(dir).unwrap_or_else(|| in_dir(dir))
}

fn is_extension_file(name: &str) -> bool {
    name.ends_with(".ts") || name.ends_with(".js")
}

/// The extensions directly in `dir`, sorted by name so the load order does not depend on the
/// file system.
fn in_dir(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = read.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    let mut found = Vec::new();
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_file() && is_extension_file(name) {
            found.push(path);
        } else if path.is_dir()
            && let Some(entries) = entries(&path)
        {
            found.extend(entries);
        }
    }
    found
}

/// A package directory's entry files: its manifest's `pi.extensions` that exist, else its
/// `index.ts` or `index.js`; `None` when it has none.
fn entries(dir: &Path) -> Option<Vec<PathBuf>> {
    let declared: Vec<PathBuf> = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|manifest| {
            let list = manifest.get("pi")?.get("extensions")?.as_array()?.clone();
            Some(
                list.iter()
                    .filter_map(|p| p.as_str())
                    .map(|p| crate::files::path::resolve(p, dir))
                    .filter(|p| p.exists())
                    .collect(),
            )
        })
        .unwrap_or_default();
    if !declared.is_empty() {
        return Some(declared);
    }
    ["index.ts", "index.js"]
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
        .map(|p| vec![p])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::fs;

    fn sources<'a>(agent: &'a Path, cwd: &'a Path, flags: &'a [String]) -> Sources<'a> {
        Sources {
            agent_dir: agent,
            cwd,
            project_trusted: false,
            settings: &[],
            packages: &[],
            flags,
            no_discovery: false,
        }
    }

    #[test]
    fn finds_files_packages_and_indexes_one_level_deep_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let ext = tmp.path().join("agent/extensions");
        fs::create_dir_all(ext.join("pkg/src")).unwrap();
        fs::create_dir_all(ext.join("plain/deeper")).unwrap();
        fs::create_dir_all(ext.join("none")).unwrap();
        fs::write(ext.join("b.ts"), "").unwrap();
        fs::write(ext.join("a.js"), "").unwrap();
        fs::write(ext.join("notes.md"), "").unwrap();
        fs::write(ext.join("pkg/src/main.ts"), "").unwrap();
        fs::write(ext.join("pkg/index.ts"), "").unwrap();
        fs::write(
            ext.join("pkg/package.json"),
            r#"{"pi":{"extensions":["./src/main.ts","./missing.ts"]}}"#,
        )
        .unwrap();
        fs::write(ext.join("plain/index.js"), "").unwrap();
        fs::write(ext.join("plain/deeper/x.ts"), "").unwrap();
        fs::write(ext.join("none/other.ts"), "").unwrap();
        let agent = tmp.path().join("agent");
        let found = find(&sources(&agent, tmp.path(), &[]), &mut Vec::new()).unwrap();
        let names: Vec<PathBuf> = found.iter().map(|e| e.path.clone()).collect();
        assert_eq!(
            names,
            vec![
                ext.join("a.js"),
                ext.join("b.ts"),
                ext.join("pkg/src/main.ts"),
                ext.join("plain/index.js"),
            ]
        );
        assert!(found.iter().all(|e| e.scope == SourceScope::User));
    }

    #[test]
    fn the_project_counts_only_when_trusted_and_flags_survive_no_extensions() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join(".nova/extensions");
        fs::create_dir_all(&project).unwrap();
        fs::write(project.join("p.ts"), "").unwrap();
        fs::write(tmp.path().join("cli.ts"), "").unwrap();
        let agent = tmp.path().join("agent");
        let gone = vec!["gone.ts".to_owned()];
        let error = find(&sources(&agent, tmp.path(), &gone), &mut Vec::new()).unwrap_err();
        assert!(error.to_string().contains("gone.ts"), "{error}");
        let flags = vec!["cli.ts".to_owned()];
        let untrusted = find(&sources(&agent, tmp.path(), &flags), &mut Vec::new()).unwrap();
        assert_eq!(untrusted.len(), 1);
        assert_eq!(untrusted[0].path, tmp.path().join("cli.ts"));
        assert_eq!(untrusted[0].scope, SourceScope::Temporary);

        let mut trusted = sources(&agent, tmp.path(), &flags);
        trusted.project_trusted = true;
        let found = find(&trusted, &mut Vec::new()).unwrap();
        assert_eq!(found[0].path, project.join("p.ts"));
        assert_eq!(found[0].scope, SourceScope::Project);

        trusted.no_discovery = true;
        let found = find(&trusted, &mut Vec::new()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, tmp.path().join("cli.ts"));
    }

    /// Pi's project dir counts like nova's, after it, and an entry both have is nova's.
    #[test]
    fn pis_project_extensions_load_after_novas_when_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let (own, pis) = (
            tmp.path().join(".nova/extensions"),
            tmp.path().join(".pi/extensions"),
        );
        for dir in [&own, &pis] {
            fs::create_dir_all(dir.join("both")).unwrap();
            fs::write(dir.join("both/index.ts"), "").unwrap();
            fs::write(dir.join("same.ts"), "").unwrap();
        }
        fs::write(pis.join("only_pi.js"), "").unwrap();
        let agent = tmp.path().join("agent");
        let mut trusted = sources(&agent, tmp.path(), &[]);
        assert!(find(&trusted, &mut Vec::new()).unwrap().is_empty());
        trusted.project_trusted = true;
        let found: Vec<(PathBuf, Option<PathBuf>)> = find(&trusted, &mut Vec::new())
            .unwrap()
            .into_iter()
            .map(|e| (e.path, e.base_dir))
            .collect();
        let (nova_base, pi_base) = (tmp.path().join(".nova"), tmp.path().join(".pi"));
        assert_eq!(
            found,
            vec![
                (own.join("both/index.ts"), Some(nova_base.clone())),
                (own.join("same.ts"), Some(nova_base)),
                (pis.join("only_pi.js"), Some(pi_base)),
            ]
        );
    }

    /// `-e npm:…`/`-e git:…` load what `nova install` put in the agent dir, or name the
    /// command that installs it.
    #[test]
    fn package_sources_on_the_command_line_load_once_installed() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let flags = vec!["npm:@scope/tools@1.2.3".to_owned()];
        let error = find(&sources(&agent, tmp.path(), &flags), &mut Vec::new()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`nova install npm:@scope/tools@1.2.3` installs it"),
            "{error}"
        );
        let installed = agent.join("npm/node_modules/@scope/tools");
        fs::create_dir_all(installed.join("src")).unwrap();
        fs::write(
            installed.join("package.json"),
            r#"{"pi": {"extensions": ["src/main.ts"]}}"#,
        )
        .unwrap();
        fs::write(installed.join("src/main.ts"), "").unwrap();
        let mut no_discovery = sources(&agent, tmp.path(), &flags);
        no_discovery.no_discovery = true;
        let found = find(&no_discovery, &mut Vec::new()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, installed.join("src/main.ts"));
        assert_eq!(found[0].source, DiscoveredBy::Cli);
    }

    #[test]
    fn settings_paths_load_after_the_directories_unless_discovery_is_off() {
        let tmp = tempfile::tempdir().unwrap();
        let pkg = tmp.path().join("pkg");
        fs::create_dir_all(&pkg).unwrap();
        fs::write(pkg.join("index.ts"), "").unwrap();
        fs::write(tmp.path().join("one.js"), "").unwrap();
        let listed = |p: &Path| super::super::ListedPath {
            path: p.to_path_buf(),
            scope: SourceScope::User,
        };
        let mut project = listed(&tmp.path().join("one.js"));
        project.scope = SourceScope::Project;
        let settings = vec![
            project,
            listed(&pkg),
            listed(&tmp.path().join("one.js")),
            listed(&tmp.path().join("gone")),
        ];
        let agent = tmp.path().join("agent");
        let mut sources = sources(&agent, tmp.path(), &[]);
        sources.settings = &settings;
        let mut warnings = Vec::new();
        let found = find(&sources, &mut warnings).unwrap();
        let paths: Vec<&Path> = found.iter().map(|e| e.path.as_path()).collect();
        // The untrusted project's entry is left out; the user's copy of it still loads.
        assert_eq!(paths, vec![pkg.join("index.ts"), tmp.path().join("one.js")]);
        assert_eq!(found[1].scope, SourceScope::User);
        assert_eq!(found[0].source, DiscoveredBy::Local);
        assert!(warnings[0].contains("gone"), "{warnings:?}");
        sources.no_discovery = true;
        assert!(find(&sources, &mut Vec::new()).unwrap().is_empty());
    }
}
