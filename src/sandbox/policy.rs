//! Where the agent may write: the writable roots, and the paths inside them that stay
//! read-only. The launcher's mounts and Landlock rules and the file tools' permission check are
//! all computed from one [`Policy`], so commands and file tools share one boundary.

use super::settings::Mode;
use std::ffi::OsStr;
use std::fs;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    mode: Mode,
    cwd: PathBuf,
    /// Canonical; empty unless the mode is `workspace-write`.
    writable: Vec<PathBuf>,
    /// The cwd and `sandbox.writableRoots`: the directories whose `.git` parts are protected.
    projects: Vec<PathBuf>,
    agent_dir: PathBuf,
}

/// A file-tool write the user must approve first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRefusal {
    /// The path the write would really change (`..` and symlinks resolved).
    pub path: PathBuf,
    pub reason: String,
}

/// Existing paths inside the writable roots that the launcher mounts over, canonical.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Bind-mounted onto themselves and remounted read-only.
    pub read_only: Vec<PathBuf>,
    /// Bind-mounted onto themselves, still writable: a mount point cannot be renamed or
    /// removed, so `.git` cannot be swapped for a directory with other hooks.
    pub pinned: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    ReadOnly(&'static str),
    Pinned,
}

impl Policy {
    /// `extra_roots` must exist (they are canonicalised here, as every path the policy keeps).
    pub fn new(mode: Mode, cwd: &Path, extra_roots: &[PathBuf], agent_dir: &Path) -> Policy {
        let cwd = canonical(cwd);
        let extra: Vec<PathBuf> = extra_roots.iter().map(|p| canonical(p)).collect();
        let mut writable = Vec::new();
        if mode == Mode::WorkspaceWrite {
            writable.push(cwd.clone());
            writable.push(canonical(&std::env::temp_dir()));
            writable.push(canonical(Path::new("/tmp")));
            writable.extend(extra.iter().cloned());
            dedup(&mut writable);
        }
        let mut projects = vec![cwd.clone()];
        projects.extend(extra);
        dedup(&mut projects);
        Policy {
            mode,
            agent_dir: canonical(agent_dir),
            cwd,
            writable,
            projects,
        }
    }

    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// What the launcher must mount over right now: the protected paths that exist and lie
    /// inside a writable root (everything else is read-only through Landlock already).
    pub fn protected(&self) -> Protected {
        let mut protected = Protected::default();
        for (path, guard) in self.guards() {
            if !path.exists() {
                continue;
            }
            let path = canonical(&path);
            if !self.is_writable(&path) {
                continue;
            }
            match guard {
                Guard::ReadOnly(_) => protected.read_only.push(path),
                Guard::Pinned => protected.pinned.push(path),
            }
        }
        dedup(&mut protected.read_only);
        dedup(&mut protected.pinned);
        protected
    }

    /// `Some` when a file tool writing `path` (absolute) must ask first: in `read-only` mode,
    /// outside the writable roots, or inside a protected path.
    pub fn file_write_reason(&self, path: &Path) -> Option<WriteRefusal> {
        self.refusal_for(resolve_for_write(path))
    }

    /// [`Policy::file_write_reason`] for a path [`resolve_for_write`] already resolved: the one
    /// the tool will write, checked as it is rather than resolved again.
    pub fn refusal_for(&self, resolved: PathBuf) -> Option<WriteRefusal> {
        let reason = match self.mode {
            Mode::Off => return None,
            Mode::ReadOnly => {
                "the sandbox is read-only (mode \"read-only\"), so every file change needs \
                 approval"
                    .to_owned()
            }
            Mode::WorkspaceWrite if !self.is_writable(&resolved) => format!(
                "{} is outside the sandbox's writable roots ({})",
                resolved.display(),
                self.roots_text()
            ),
            Mode::WorkspaceWrite => {
                let label = self
                    .guards()
                    .into_iter()
                    .find_map(|(guarded, guard)| match guard {
                        Guard::ReadOnly(label)
                            if resolved.starts_with(&guarded)
                                || resolved.starts_with(canonical(&guarded)) =>
                        {
                            Some(label)
                        }
                        _ => None,
                    })?;
                format!(
                    "{} is inside {label}, which the sandbox keeps read-only",
                    resolved.display()
                )
            }
        };
        Some(WriteRefusal {
            path: resolved,
            reason,
        })
    }

    /// The writable roots for people to read: `/a/b, /tmp`.
    pub fn roots_text(&self) -> String {
        let roots: Vec<String> = self
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        roots.join(", ")
    }

    fn is_writable(&self, path: &Path) -> bool {
        self.writable.iter().any(|root| path.starts_with(root))
    }

    /// Every protected path, whether or not it exists (a file tool must not create one either).
    fn guards(&self) -> Vec<(PathBuf, Guard)> {
        let mut guards = vec![(self.cwd.join(".nova"), Guard::ReadOnly(".nova/"))];
        // An agent dir that holds the workspace would make all of it read-only.
        if !self.cwd.starts_with(&self.agent_dir) {
            guards.push((
                self.agent_dir.clone(),
                Guard::ReadOnly("nova's agent directory"),
            ));
        }
        for project in &self.projects {
            let dot_git = project.join(".git");
            let git_dirs = match fs::read_to_string(&dot_git) {
                // A linked worktree or submodule: `.git` is a file naming the real git dir.
                Ok(text) => {
                    guards.push((dot_git.clone(), Guard::ReadOnly(".git")));
                    linked_git_dirs(project, &text)
                }
                Err(_) => {
                    guards.push((dot_git.clone(), Guard::Pinned));
                    vec![dot_git]
                }
            };
            for dir in git_dirs {
                guards.push((dir.join("hooks"), Guard::ReadOnly(".git/hooks")));
                guards.push((dir.join("config"), Guard::ReadOnly(".git/config")));
            }
        }
        guards
    }
}

/// The git dir a `.git` file points to, and the common dir it shares with the main worktree
/// (where hooks and config live).
fn linked_git_dirs(project: &Path, dot_git: &str) -> Vec<PathBuf> {
    let Some(target) = dot_git
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
    else {
        return Vec::new();
    };
    let git_dir = project.join(target);
    let mut dirs = vec![git_dir.clone()];
    if let Ok(common) = fs::read_to_string(git_dir.join("commondir")) {
        dirs.push(git_dir.join(common.trim()));
    }
    dirs
}

/// The path a write to `path` (absolute) really changes: `..` and symlinks resolved as the file
/// system would, and for a path that does not exist yet, its nearest existing ancestor resolved
/// with the missing part (which the tool creates as plain directories) appended.
pub fn resolve_for_write(path: &Path) -> PathBuf {
    let mut base = PathBuf::from("/");
    let mut missing: Vec<&OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                if missing.pop().is_none() {
                    base.pop();
                }
            }
            Component::Normal(name) if missing.is_empty() => {
                match fs::canonicalize(base.join(name)) {
                    Ok(real) => base = real,
                    Err(_) => missing.push(name),
                }
            }
            Component::Normal(name) => missing.push(name),
        }
    }
    missing.into_iter().fold(base, |p, name| p.join(name))
}

fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = Vec::with_capacity(paths.len());
    paths.retain(|p| {
        let new = !seen.contains(p);
        if new {
            seen.push(p.clone());
        }
        new
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        /// An existing directory outside every writable root, never written to.
        outside: PathBuf,
        cwd: PathBuf,
        agent: PathBuf,
    }

    fn fixture() -> Fixture {
        let project = tempfile::tempdir().unwrap();
        let cwd = project.path().canonicalize().unwrap();
        let agent = cwd.join("agent");
        fs::create_dir_all(cwd.join(".nova")).unwrap();
        fs::create_dir_all(cwd.join(".git/hooks")).unwrap();
        fs::write(cwd.join(".git/config"), "").unwrap();
        fs::create_dir_all(&agent).unwrap();
        Fixture {
            outside: PathBuf::from("/usr"),
            _dir: project,
            cwd,
            agent,
        }
    }

    fn reason(policy: &Policy, path: &Path) -> Option<String> {
        policy.file_write_reason(path).map(|r| r.reason)
    }

    #[test]
    fn resolves_dot_dot_symlinks_and_missing_tails() {
        let f = fixture();
        symlink(&f.outside, f.cwd.join("link")).unwrap();
        let cwd = &f.cwd;
        assert_eq!(
            resolve_for_write(&cwd.join("a/b/../c.txt")),
            cwd.join("a/c.txt")
        );
        assert_eq!(
            resolve_for_write(&cwd.join("new/../../x")),
            cwd.parent().unwrap().join("x")
        );
        assert_eq!(resolve_for_write(&cwd.join("link/f")), f.outside.join("f"));
        assert_eq!(
            resolve_for_write(&cwd.join("link/../y")),
            f.outside.parent().unwrap().join("y")
        );
        // After climbing out of the missing part, existing symlinks count again.
        assert_eq!(
            resolve_for_write(&cwd.join("new/../link/z")),
            f.outside.join("z")
        );
        assert_eq!(resolve_for_write(Path::new("/../..")), PathBuf::from("/"));
    }

    #[test]
    fn workspace_write_asks_outside_the_roots_and_in_protected_paths() {
        let f = fixture();
        let policy = Policy::new(Mode::WorkspaceWrite, &f.cwd, &[], &f.agent);
        let cwd = &f.cwd;
        assert_eq!(reason(&policy, &cwd.join("src/new/main.rs")), None);
        assert_eq!(reason(&policy, &cwd.join(".git/objects/ab")), None);
        assert_eq!(reason(&policy, &std::env::temp_dir().join("scratch")), None);
        let outside = reason(&policy, &f.outside.join("x")).unwrap();
        assert!(
            outside.contains("outside the sandbox's writable roots"),
            "{outside}"
        );
        assert!(outside.contains(&cwd.display().to_string()), "{outside}");

        symlink(&f.outside, cwd.join("escape")).unwrap();
        let refusal = policy.file_write_reason(&cwd.join("escape/x")).unwrap();
        assert_eq!(refusal.path, f.outside.join("x"));

        for (rel, label) in [
            (".nova/settings.json", ".nova/"),
            (".git/hooks/pre-commit", ".git/hooks"),
            (".git/config", ".git/config"),
            ("x/../.nova/new/deep", ".nova/"),
            ("agent/settings.json", "agent directory"),
        ] {
            let r = reason(&policy, &cwd.join(rel)).unwrap_or_default();
            assert!(r.contains(label) && r.contains("read-only"), "{rel}: {r}");
        }
        // A symlink into a protected directory is the protected directory.
        symlink(cwd.join(".nova"), cwd.join("sneaky")).unwrap();
        assert!(reason(&policy, &cwd.join("sneaky/settings.json")).is_some());
    }

    #[test]
    fn extra_roots_read_only_and_off() {
        let f = fixture();
        let extra = f.cwd.join("extra");
        fs::create_dir_all(extra.join(".git/hooks")).unwrap();
        let roots = [f.outside.clone(), extra.clone()];
        let policy = Policy::new(Mode::WorkspaceWrite, &f.cwd, &roots, &f.agent);
        assert_eq!(reason(&policy, &f.outside.join("x")), None);
        assert!(reason(&policy, &extra.join(".git/hooks/post-merge")).is_some());
        assert!(policy.protected().pinned.contains(&extra.join(".git")));

        let policy = Policy::new(Mode::ReadOnly, &f.cwd, &[], &f.agent);
        assert!(policy.writable().is_empty());
        assert!(
            reason(&policy, &f.cwd.join("a.txt"))
                .unwrap()
                .contains("read-only")
        );
        assert_eq!(policy.protected(), Protected::default());

        let policy = Policy::new(Mode::Off, &f.cwd, &[], &f.agent);
        assert_eq!(reason(&policy, &f.outside.join("x")), None);
        assert_eq!(reason(&policy, &f.cwd.join(".nova/settings.json")), None);
    }

    #[test]
    fn protected_lists_existing_paths_inside_writable_roots() {
        let f = fixture();
        let policy = Policy::new(Mode::WorkspaceWrite, &f.cwd, &[], &f.agent);
        let p = policy.protected();
        let cwd = &f.cwd;
        assert_eq!(
            p.read_only,
            [
                cwd.join(".nova"),
                f.agent.clone(),
                cwd.join(".git/hooks"),
                cwd.join(".git/config")
            ]
        );
        assert_eq!(p.pinned, [cwd.join(".git")]);

        fs::remove_dir_all(cwd.join(".git")).unwrap();
        let p = policy.protected();
        assert_eq!(p.read_only, [cwd.join(".nova"), f.agent.clone()]);
        assert!(p.pinned.is_empty());

        // An agent dir holding the workspace is left alone rather than freezing it all.
        fs::create_dir(f.agent.join(".nova")).unwrap();
        let policy = Policy::new(Mode::WorkspaceWrite, &f.agent, &[], cwd);
        assert_eq!(policy.protected().read_only, [f.agent.join(".nova")]);
        assert_eq!(reason(&policy, &f.agent.join("a.txt")), None);
    }

    #[test]
    fn linked_worktrees_protect_the_pointer_and_the_common_hooks() {
        let f = fixture();
        let main_git = f.cwd.join("main/.git");
        let wt_git = main_git.join("worktrees/wt");
        fs::create_dir_all(main_git.join("hooks")).unwrap();
        fs::write(main_git.join("config"), "").unwrap();
        fs::create_dir_all(&wt_git).unwrap();
        fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let wt = f.cwd.join("wt");
        fs::create_dir_all(&wt).unwrap();
        fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();

        let policy = Policy::new(Mode::WorkspaceWrite, &wt, &[], &f.agent);
        let p = policy.protected();
        assert!(p.read_only.contains(&wt.join(".git")), "{p:?}");
        assert!(p.read_only.contains(&main_git.join("hooks")), "{p:?}");
        assert!(p.read_only.contains(&main_git.join("config")), "{p:?}");
        assert!(p.pinned.is_empty());
        assert!(reason(&policy, &wt.join(".git")).is_some());
    }
}
