//! Keeping the project out of the user's own stdio servers. A server from `<agent dir>/mcp.json`
//! is the user's program, but started inside a repository it would load the repository's code:
//! `python3 -m pkg` finds the cwd's `pkg.py`, node, `npx` and `uv` look for packages and project
//! files from the cwd upwards, and a relative `command` or argument names a file there. So such a
//! server starts in a directory of nova's own ([`neutral_dir`], unless its entry names a `cwd`),
//! and the search paths it inherits from nova lose the entries that point into the project
//! ([`environment`]). The project's own servers (`.mcp.json`, `.nova/mcp.json`) need the user's
//! trust and start in the project, as before.

use super::McpError;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// The directory under the agent dir that the user's servers start in.
pub const NEUTRAL_DIR: &str = "mcp-cwd";

/// How a user's server, and the `!command` values of its entry, are kept apart from the project.
#[derive(Debug, Clone, PartialEq)]
pub struct Isolation {
    /// The project (nova's cwd), whose entries leave the search paths.
    pub project: PathBuf,
    /// [`neutral_dir`]: where the server starts unless its entry names a `cwd`, and where its
    /// `!command` values run.
    pub dir: PathBuf,
}

impl Isolation {
    /// Readies `command` to run in `cwd` (created first when it is [`Isolation::dir`]) with the
    /// project off its search paths; `configured` are the entry's own variables.
    pub fn apply(
        &self,
        command: &mut tokio::process::Command,
        cwd: &Path,
        configured: &[(String, String)],
    ) -> Result<(), McpError> {
        if cwd == self.dir {
            prepare(cwd)?;
        }
        command.current_dir(cwd);
        for (name, value) in environment(std::env::vars_os(), &self.project, configured, cwd) {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        Ok(())
    }

    /// Readies the shell of one of the entry's `!command` values: it runs in
    /// [`Isolation::dir`]. Its error is text, as the secret resolver takes it.
    pub fn shell(&self, shell: &mut tokio::process::Command) -> Result<(), String> {
        self.apply(shell, &self.dir, &[]).map_err(|e| e.to_string())
    }
}

/// Lists of directories a program searches for programs, modules or libraries: entries in the
/// project, relative entries and empty ones (both name the working directory) are removed.
const SEARCH_PATHS: [&str; 10] = [
    "PATH",
    "PYTHONPATH",
    "NODE_PATH",
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    "GEM_PATH",
    "CLASSPATH",
    "LD_LIBRARY_PATH",
    "GOPATH",
];

/// Variables naming one place a program loads code or settings from: removed when they lie
/// in the project (a project's virtualenv, a startup file) or mention it (`NODE_OPTIONS`).
const CODE_PLACES: [&str; 12] = [
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NPM_CONFIG_PREFIX",
    "NPM_CONFIG_USERCONFIG",
    "GEM_HOME",
    "BASH_ENV",
    "ENV",
    "UV_PROJECT",
];

/// Where the user's servers start: `<agent dir>/mcp-cwd`, or, when the agent dir lies in the
/// project (nova started in the home directory, say), a directory of the user's in the system's
/// temporary directory. Created when a server starts ([`prepare`]).
pub fn neutral_dir(agent_dir: &Path, project: &Path) -> PathBuf {
    let dir = agent_dir.join(NEUTRAL_DIR);
    if !inside(&dir, project) {
        return dir;
    }
    std::env::temp_dir().join(format!("nova-mcp-{}", nix::unistd::getuid()))
}

/// Creates `dir` (mode 0700) unless it exists, and refuses one another user could have filled:
/// it must be a real directory of this user's that nobody else may write.
pub fn prepare(dir: &Path) -> Result<(), McpError> {
    let failed = |source| McpError::IsolationDir {
        path: dir.to_owned(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(failed)?;
    let meta = std::fs::symlink_metadata(dir).map_err(failed)?;
    let ours = meta.uid() == nix::unistd::getuid().as_raw();
    if !meta.is_dir() || !ours || meta.mode() & 0o022 != 0 {
        return Err(McpError::UnsafeDir(dir.to_owned()));
    }
    Ok(())
}

/// What changes in the environment a user's server inherits: each variable to set anew
/// (`Some`) or to remove (`None`). Variables the server's entry sets in `env` are its own and
/// left alone; `PWD` becomes `cwd`.
pub fn environment(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    project: &Path,
    configured: &[(String, String)],
    cwd: &Path,
) -> Vec<(OsString, Option<OsString>)> {
    let own = |name: &OsStr| configured.iter().any(|(k, _)| OsStr::new(k) == name);
    let mut changes = Vec::new();
    for (name, value) in inherited {
        if own(&name) {
            continue;
        }
        let key = name.to_str().unwrap_or_default();
        if SEARCH_PATHS.contains(&key) {
            let entries: Vec<PathBuf> = std::env::split_paths(&value).collect();
            let kept: Vec<&PathBuf> = entries
                .iter()
                .filter(|entry| entry.is_absolute() && !inside(entry, project))
                .collect();
            if kept.len() < entries.len() {
                // Entries that came out of a split hold no `:`, so they join again.
                let joined = std::env::join_paths(kept).ok().filter(|j| !j.is_empty());
                changes.push((name, joined));
            }
        } else if CODE_PLACES.contains(&key) && mentions(&value, project) {
            changes.push((name, None));
        }
    }
    if !own(OsStr::new("PWD")) {
        changes.push(("PWD".into(), Some(cwd.as_os_str().to_owned())));
    }
    changes
}

/// `value` names the project or a place in it: as a path, or somewhere in its text.
fn mentions(value: &OsStr, project: &Path) -> bool {
    let path = Path::new(value);
    if path.is_absolute() && inside(path, project) {
        return true;
    }
    let text = value.to_string_lossy();
    [Some(project.to_path_buf()), project.canonicalize().ok()]
        .into_iter()
        .flatten()
        .any(|p| text.contains(&*p.to_string_lossy()))
}

/// `path` is `project` or lies under it, symbolic links followed as far as they exist.
pub fn inside(path: &Path, project: &Path) -> bool {
    let project = real(project);
    real(path).starts_with(&project)
}

/// `path` with `.`/`..` resolved and the links of its longest existing start followed.
fn real(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return lexical(&out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return lexical(path),
        }
    }
}

fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn search_paths_lose_project_relative_and_empty_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("proj");
        std::fs::create_dir_all(project.join("bin")).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(project.join("bin"), &link).unwrap();
        let p = project.display();
        let inherited = os(&[
            (
                "PATH",
                &format!(
                    "{p}/bin:.:/usr/bin::bin:{}:{p}/../proj/x:/bin",
                    link.display()
                ),
            ),
            ("PYTHONPATH", &format!("{p}")),
            ("NODE_PATH", "/usr/lib/node_modules"),
            ("VIRTUAL_ENV", &format!("{p}/.venv")),
            ("NODE_OPTIONS", &format!("--require {p}/hook.js")),
            ("CONDA_PREFIX", "/opt/conda"),
            ("HOME", &format!("{p}")),
            ("RUBYLIB", "lib"),
            ("GEM_PATH", &format!("{p}/gems")),
        ]);
        let cwd = Path::new("/n");
        let configured = [("GEM_PATH".to_owned(), "x".to_owned())];
        let mut changes = environment(inherited, &project, &configured, cwd);
        changes.sort();
        let expected: Vec<(OsString, Option<OsString>)> = vec![
            ("NODE_OPTIONS".into(), None),
            ("PATH".into(), Some("/usr/bin:/bin".into())),
            ("PWD".into(), Some("/n".into())),
            ("PYTHONPATH".into(), None),
            ("RUBYLIB".into(), None),
            ("VIRTUAL_ENV".into(), None),
        ];
        assert_eq!(changes, expected);
    }

    #[test]
    fn the_neutral_dir_is_the_agent_dirs_unless_that_lies_in_the_project() {
        let tmp = tempfile::tempdir().unwrap();
        let (agent, project) = (tmp.path().join("agent"), tmp.path().join("proj"));
        assert_eq!(neutral_dir(&agent, &project), agent.join(NEUTRAL_DIR));
        let inner = project.join(".nova/agent");
        let dir = neutral_dir(&inner, &project);
        assert!(!inside(&dir, &project), "{}", dir.display());
        assert!(dir.starts_with(std::env::temp_dir()));
    }

    #[test]
    fn prepare_makes_a_private_dir_and_refuses_one_others_may_write() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        prepare(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        prepare(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(
            prepare(&dir)
                .unwrap_err()
                .to_string()
                .contains("only they may write")
        );
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
        assert!(
            prepare(&link).is_err(),
            "a link is not the directory itself"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_users_command_runs_in_the_neutral_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let isolation = Isolation {
            project: std::env::current_dir().unwrap(),
            dir: tmp.path().join("neutral"),
        };
        let pairs = [("WHERE".to_owned(), "!pwd -P".to_owned())];
        let shell = |s: &mut tokio::process::Command| isolation.shell(s);
        let resolved = crate::secret::resolve_all(&pairs, Some(&shell))
            .await
            .unwrap();
        let neutral = isolation.dir.canonicalize().unwrap();
        assert_eq!(resolved[0].1, neutral.display().to_string());
    }

    #[test]
    fn inside_follows_links_and_dot_dot() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("proj");
        std::fs::create_dir_all(&project).unwrap();
        assert!(inside(&project, &project));
        assert!(inside(&project.join("not/yet"), &project));
        assert!(!inside(&project.join("../other"), &project));
        assert!(!inside(&tmp.path().join("proj2"), &project));
    }
}
