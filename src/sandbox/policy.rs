//! Where the agent may write: the writable roots, and the paths inside them that stay
//! read-only. The launcher's mounts and Landlock rules and the file tools' permission check are
//! all computed from one [`Policy`], so commands and file tools share one boundary.

use super::git::{self, Guards};
use super::placeholder::Placeholder;
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
    /// The `.git` entries of repositories nested below the cwd, as [`Policy::find_nested`]
    /// found them.
    nested: Vec<PathBuf>,
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

/// How a path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Guard {
    /// Read-only to commands, and the file tools ask; the label names it for people. Where the
    /// path is missing, the placeholder stands in for it while commands run, so that a command
    /// cannot create it either ([`super::placeholder`]).
    ReadOnly(&'static str, Option<Placeholder>),
    /// A directory that must stay where it is (a mount point cannot be renamed or removed), and
    /// stays writable.
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
            nested: Vec::new(),
        }
    }

    /// Looks for repositories nested below the cwd (a bounded walk, see [`git::nested_repos`])
    /// and protects them from now on. Returns why the walk stopped early, if it did.
    pub fn find_nested(&mut self) -> Option<String> {
        if self.mode != Mode::WorkspaceWrite {
            return None;
        }
        let (nested, cut_short) = git::nested_repos(&self.cwd);
        self.nested = nested;
        cut_short
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
                Guard::ReadOnly(..) => protected.read_only.push(path),
                Guard::Pinned => protected.pinned.push(path),
            }
        }
        for paths in [&mut protected.read_only, &mut protected.pinned] {
            dedup(paths);
            // A bind mount hides what was mounted below it: parents first.
            paths.sort_by_key(|p| p.components().count());
        }
        protected
    }

    /// The missing protected paths that need a placeholder while a command runs (those whose
    /// directory lies inside a writable root), with the placeholder for each.
    pub fn placeholders(&self) -> Vec<(PathBuf, Placeholder)> {
        let mut wanted: Vec<(PathBuf, Placeholder)> = Vec::new();
        for (path, guard) in self.guards() {
            let Guard::ReadOnly(_, Some(placeholder)) = guard else {
                continue;
            };
            let Some(dir) = path.parent().filter(|d| d.is_dir()) else {
                continue;
            };
            let path = canonical(dir).join(path.file_name().unwrap_or_default());
            if self.is_writable(&path) && !wanted.iter().any(|(p, _)| *p == path) {
                wanted.push((path, placeholder));
            }
        }
        wanted
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
                        Guard::ReadOnly(label, _)
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

    /// The root `resolved` lies in — a writable root, or, without a workspace sandbox, the cwd
    /// or a `writableRoots` entry — when it lies in no protected path (missing ones included).
    pub fn workspace_root(&self, resolved: &Path) -> Option<&Path> {
        let roots = match self.mode {
            Mode::WorkspaceWrite => &self.writable,
            Mode::Off | Mode::ReadOnly => &self.projects,
        };
        let root = roots.iter().find(|root| resolved.starts_with(root))?;
        let guarded = self.guards().into_iter().any(|(guarded, _)| {
            resolved.starts_with(&guarded) || resolved.starts_with(canonical(&guarded))
        });
        (!guarded).then_some(root.as_path())
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
        let mut guards = Guards::default();
        // A missing `.nova/` is a placeholder only while commands run: nova does not write into
        // a project that has none (a one-shot run without a session leaves nothing behind).
        guards.push((
            self.cwd.join(".nova"),
            Guard::ReadOnly(".nova/", Some(Placeholder::Dir)),
        ));
        // Claude's MCP servers, which nova starts in a trusted project.
        guards.push((
            self.cwd.join(".mcp.json"),
            Guard::ReadOnly(".mcp.json", Some(Placeholder::Dir)),
        ));
        // An agent dir that holds the workspace would make all of it read-only.
        if !self.cwd.starts_with(&self.agent_dir) {
            guards.push((
                self.agent_dir.clone(),
                Guard::ReadOnly("nova's agent directory", None),
            ));
        }
        for project in &self.projects {
            guards.project(project);
        }
        for dot_git in &self.nested {
            for dir in git::chain(&self.cwd, dot_git) {
                guards.push((dir, Guard::Pinned));
            }
            guards.dot_git(dot_git);
        }
        guards.list
    }
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
            // Missing today, and as protected.
            (".git/commondir", ".git/commondir"),
            (".git/config.worktree", ".git/config.worktree"),
            (".mcp.json", ".mcp.json"),
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
        // What is missing gets a placeholder while commands run, then is protected the same.
        assert_eq!(
            policy.placeholders(),
            [
                (cwd.join(".nova"), Placeholder::Dir),
                (cwd.join(".mcp.json"), Placeholder::Dir),
                (cwd.join(".git/hooks"), Placeholder::Dir),
                (cwd.join(".git/config"), Placeholder::File("")),
                (cwd.join(".git/config.worktree"), Placeholder::File("")),
                (cwd.join(".git/commondir"), Placeholder::File(".\n")),
            ]
        );
        fs::create_dir(cwd.join(".mcp.json")).unwrap();
        fs::write(cwd.join(".git/commondir"), ".\n").unwrap();
        let p = policy.protected();
        assert!(p.read_only.contains(&cwd.join(".mcp.json")), "{p:?}");
        assert!(p.read_only.contains(&cwd.join(".git/commondir")), "{p:?}");
        // A commondir naming the git dir itself, however spelled, leaves it the git dir.
        fs::write(cwd.join(".git/commondir"), "./\n").unwrap();
        assert!(
            policy
                .protected()
                .read_only
                .contains(&cwd.join(".git/hooks"))
        );
        fs::remove_file(cwd.join(".git/commondir")).unwrap();
        fs::remove_dir(cwd.join(".mcp.json")).unwrap();

        fs::remove_dir_all(cwd.join(".git")).unwrap();
        let p = policy.protected();
        assert_eq!(p.read_only, [cwd.join(".nova"), f.agent.clone()]);
        assert!(p.pinned.is_empty());
        // A directory in no repository may become one.
        assert_eq!(
            policy.placeholders(),
            [
                (cwd.join(".nova"), Placeholder::Dir),
                (cwd.join(".mcp.json"), Placeholder::Dir)
            ]
        );

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

        fs::write(
            wt_git.join("gitdir"),
            format!("{}\n", wt.join(".git").display()),
        )
        .unwrap();

        let policy = Policy::new(Mode::WorkspaceWrite, &wt, &[], &f.agent);
        let p = policy.protected();
        for path in [
            wt.join(".git"),
            wt_git.join("commondir"),
            wt_git.join("gitdir"),
            main_git.join("hooks"),
            main_git.join("config"),
        ] {
            assert!(p.read_only.contains(&path), "{path:?}: {p:?}");
        }
        // The worktrees' dirs stay where the pointers say (the fixture lies under /tmp, so
        // inside a writable root).
        assert_eq!(p.pinned, [main_git.join("worktrees"), wt_git.clone()]);
        assert!(reason(&policy, &wt.join(".git")).is_some());
        let wanted: Vec<PathBuf> = policy.placeholders().into_iter().map(|(p, _)| p).collect();
        assert!(
            wanted.contains(&wt_git.join("config.worktree")),
            "{wanted:?}"
        );
        assert!(wanted.contains(&main_git.join("commondir")), "{wanted:?}");
        assert!(!wanted.contains(&wt_git.join("commondir")), "{wanted:?}");
    }

    #[test]
    fn submodules_and_nested_repositories_are_protected_like_the_top_one() {
        let f = fixture();
        let cwd = &f.cwd;
        // A submodule (its git dir under .git/modules, a name with a slash, a nested one) and
        // a repository nested in the work tree, plus one inside node_modules, not looked at.
        let sub_git = cwd.join(".git/modules/libs/a");
        let inner_git = sub_git.join("modules/b");
        for dir in [&sub_git, &inner_git] {
            fs::create_dir_all(dir.join("hooks")).unwrap();
            fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
            fs::write(dir.join("config"), "").unwrap();
        }
        fs::create_dir_all(cwd.join("libs/a")).unwrap();
        fs::write(
            cwd.join("libs/a/.git"),
            "gitdir: ../../.git/modules/libs/a\n",
        )
        .unwrap();
        let vendored = cwd.join("vendor/lib/.git");
        fs::create_dir_all(vendored.join("hooks")).unwrap();
        fs::write(vendored.join("config"), "").unwrap();
        fs::create_dir_all(cwd.join("node_modules/x/.git/hooks")).unwrap();

        let mut policy = Policy::new(Mode::WorkspaceWrite, cwd, &[], &f.agent);
        assert_eq!(policy.find_nested(), None);
        let p = policy.protected();
        for path in [
            sub_git.join("hooks"),
            sub_git.join("config"),
            inner_git.join("hooks"),
            inner_git.join("config"),
            cwd.join("libs/a/.git"),
            vendored.join("hooks"),
            vendored.join("config"),
        ] {
            assert!(p.read_only.contains(&path), "{path:?}: {p:?}");
        }
        for path in [
            cwd.join(".git"),
            cwd.join(".git/modules"),
            cwd.join(".git/modules/libs"),
            sub_git.clone(),
            sub_git.join("modules"),
            inner_git.clone(),
            // The directories holding nested work trees cannot be moved away either.
            cwd.join("libs"),
            cwd.join("libs/a"),
            cwd.join("vendor"),
            cwd.join("vendor/lib"),
            vendored.clone(),
        ] {
            assert!(p.pinned.contains(&path), "{path:?}: {p:?}");
        }
        let depths: Vec<usize> = p.pinned.iter().map(|p| p.components().count()).collect();
        assert!(depths.is_sorted(), "parents are mounted first: {p:?}");
        assert!(
            !p.read_only
                .iter()
                .any(|p| p.starts_with(cwd.join("node_modules")))
        );

        for rel in [
            ".git/modules/libs/a/hooks/post-checkout",
            ".git/modules/libs/a/config",
            ".git/modules/libs/a/modules/b/commondir",
            "libs/a/.git",
            "vendor/lib/.git/hooks/pre-commit",
            "vendor/lib/.git/commondir",
        ] {
            assert!(reason(&policy, &cwd.join(rel)).is_some(), "{rel}");
        }
        assert_eq!(reason(&policy, &cwd.join("vendor/lib/src.rs")), None);
        assert_eq!(reason(&policy, &vendored.join("objects/ab")), None);
    }

    #[test]
    fn a_project_inside_a_repository_cannot_become_one_of_its_own() {
        let f = fixture();
        let sub = f.cwd.join("sub");
        fs::create_dir_all(&sub).unwrap();
        let policy = Policy::new(Mode::WorkspaceWrite, &sub, &[], &f.agent);
        let wanted = policy.placeholders();
        assert!(
            wanted.contains(&(sub.join(".git"), Placeholder::Dir)),
            "{wanted:?}"
        );
        let r = reason(&policy, &sub.join(".git/config")).unwrap_or_default();
        assert!(r.contains(".git") && r.contains("read-only"), "{r}");
    }

    #[test]
    fn the_nested_walk_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..git::WALK_REPOS + 3 {
            fs::create_dir_all(root.join(format!("r{i}/.git"))).unwrap();
        }
        fs::create_dir_all(root.join("target/deep/.git")).unwrap();
        fs::write(root.join("target/CACHEDIR.TAG"), "").unwrap();
        let (found, cut_short) = git::nested_repos(root);
        assert_eq!(found.len(), git::WALK_REPOS);
        assert!(cut_short.unwrap().contains("first 64"));
        assert!(!found.iter().any(|p| p.starts_with(root.join("target"))));
    }
}
