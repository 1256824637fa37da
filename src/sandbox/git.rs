//! The files through which git runs programs later, for the sandbox's [policy](super::policy):
//! in every git directory of the workspace, the one git opens (hooks, config, the worktree
//! config) and the pointers that send git to another one (`.git` files, `commondir`, linked
//! worktrees' `gitdir`), for the projects' own repositories, their submodules
//! (`.git/modules/…`) and linked worktrees (`.git/worktrees/…`), and repositories nested below
//! the cwd.
//!
//! Git directories and the directories holding them are pinned (a mount point cannot be
//! renamed or removed), so a command cannot move one out of where nova looks, change it, and
//! move it back.

use super::placeholder::Placeholder;
use super::policy::Guard;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

/// The startup walk for nested repositories reads at most this many directory entries...
pub const WALK_ENTRIES: usize = 50_000;
/// ...and protects at most this many repositories.
pub const WALK_REPOS: usize = 64;
/// Directories the walk does not enter: dependency trees no one runs git in.
const WALK_SKIPPED: &[&str] = &["node_modules"];
/// Marks a cache directory (cargo's `target/`, for one): the walk does not enter it.
const CACHE_TAG: &str = "CACHEDIR.TAG";

/// At most this many directories under one `.git/modules` and one `.git/worktrees`.
const SUBDIRS: usize = 512;
/// How many `commondir` and `modules` levels are followed (a cycle ends here).
const DEPTH: usize = 6;

/// `commondir` naming the git dir itself: git then reads the dir it opened, as without one.
pub const COMMONDIR_PLACEHOLDER: Placeholder = Placeholder::File(".\n");

/// Guards being collected, and the git dirs already visited (worktrees and their common dir
/// name each other).
#[derive(Debug, Default)]
pub struct Guards {
    pub list: Vec<(PathBuf, Guard)>,
    visited: Vec<PathBuf>,
}

impl Guards {
    pub fn push(&mut self, guard: (PathBuf, Guard)) {
        self.list.push(guard);
    }

    /// The guards of the `.git` entry of a work tree: a directory is pinned and its git dir
    /// guarded; a file (linked worktree, submodule) is read-only and the git dir it names
    /// guarded.
    pub fn dot_git(&mut self, dot_git: &Path) {
        if let Ok(text) = fs::read_to_string(dot_git) {
            self.push((dot_git.to_path_buf(), Guard::ReadOnly(".git", None)));
            if let Some(target) = text
                .lines()
                .find_map(|l| l.strip_prefix("gitdir:"))
                .map(str::trim)
            {
                let base = dot_git.parent().unwrap_or(Path::new("/"));
                self.git_dir(&base.join(target), 0);
            }
        } else if dot_git.is_dir() {
            self.push((dot_git.to_path_buf(), Guard::Pinned));
            self.git_dir(dot_git, 0);
        }
    }

    /// The guards of one git directory.
    fn git_dir(&mut self, dir: &Path, depth: usize) {
        let real = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        if depth > DEPTH || !dir.is_dir() || self.visited.contains(&real) {
            return;
        }
        let commondir = dir.join("commondir");
        let common = fs::read_to_string(&commondir)
            .ok()
            .map(|c| dir.join(c.trim_end_matches(['\n', '\r'])))
            // Naming the dir itself (as the placeholder does) is the same as naming none.
            .filter(|common| fs::canonicalize(common).ok().as_ref() != Some(&real));
        self.visited.push(real);
        if let Some(common) = common {
            // A linked worktree's own dir: hooks and config come from the common dir.
            self.push((commondir, Guard::ReadOnly(".git/commondir", None)));
            self.push((
                dir.join("gitdir"),
                Guard::ReadOnly(".git/worktrees/*/gitdir", None),
            ));
            self.push((
                dir.join("config.worktree"),
                Guard::ReadOnly(".git/config.worktree", Some(Placeholder::File(""))),
            ));
            self.git_dir(&common, depth + 1);
            return;
        }
        self.list.extend([
            (
                dir.join("hooks"),
                Guard::ReadOnly(".git/hooks", Some(Placeholder::Dir)),
            ),
            (
                dir.join("config"),
                Guard::ReadOnly(".git/config", Some(Placeholder::File(""))),
            ),
            (
                dir.join("config.worktree"),
                Guard::ReadOnly(".git/config.worktree", Some(Placeholder::File(""))),
            ),
            (
                commondir,
                Guard::ReadOnly(".git/commondir", Some(COMMONDIR_PLACEHOLDER)),
            ),
        ]);
        let worktrees = dir.join("worktrees");
        if worktrees.is_dir() {
            self.push((worktrees.clone(), Guard::Pinned));
            for admin in subdirs(&worktrees) {
                self.push((admin.clone(), Guard::Pinned));
                self.git_dir(&admin, depth + 1);
            }
        }
        self.modules(&dir.join("modules"), depth);
    }

    /// Submodules' git dirs live under `modules/<name>`, where a name may hold `/`: every
    /// directory down to one with a `HEAD` is pinned, and that one is a git dir.
    fn modules(&mut self, dir: &Path, depth: usize) {
        if depth > DEPTH || !dir.is_dir() {
            return;
        }
        self.push((dir.to_path_buf(), Guard::Pinned));
        for sub in subdirs(dir) {
            if sub.join("HEAD").is_file() {
                self.push((sub.clone(), Guard::Pinned));
                self.git_dir(&sub, depth + 1);
            } else {
                self.modules(&sub, depth + 1);
            }
        }
    }

    /// The guards for a project directory (the cwd or a writable root): its `.git`, or, where
    /// it has none but lies inside a repository, an empty `.git` placeholder, so a command
    /// cannot make it a repository of its own that git, run there later, would take instead of
    /// the enclosing one. (A directory in no repository may become one: `git init` works.)
    pub fn project(&mut self, project: &Path) {
        let dot_git = project.join(".git");
        if fs::symlink_metadata(&dot_git).is_ok() {
            self.dot_git(&dot_git);
        } else if project
            .ancestors()
            .skip(1)
            .any(|dir| fs::symlink_metadata(dir.join(".git")).is_ok())
        {
            self.push((dot_git, Guard::ReadOnly(".git", Some(Placeholder::Dir))));
        }
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .take(SUBDIRS)
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// Repositories nested below `root`: their `.git` entries (directories or files), found breadth
/// first within [`WALK_ENTRIES`] entries and [`WALK_REPOS`] repositories, without following
/// symlinks or entering `.git` directories, `node_modules` and cache directories
/// (`CACHEDIR.TAG`). The second value says why the walk stopped early, if it did.
pub fn nested_repos(root: &Path) -> (Vec<PathBuf>, Option<String>) {
    let mut found = Vec::new();
    let mut queue = VecDeque::from([root.to_path_buf()]);
    let mut read = 0usize;
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut below = Vec::new();
        let mut cache = false;
        for entry in entries {
            read += 1;
            if read > WALK_ENTRIES {
                return (
                    found,
                    Some(format!(
                        "stopped looking for git repositories below the cwd after \
                         {WALK_ENTRIES} entries; those further down are not protected"
                    )),
                );
            }
            let Ok(entry) = entry else { continue };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if name == OsStr::new(".git") {
                if dir != root && (kind.is_dir() || kind.is_file()) {
                    found.push(entry.path());
                    if found.len() == WALK_REPOS {
                        return (
                            found,
                            Some(format!(
                                "protecting the first {WALK_REPOS} git repositories below the \
                                 cwd only"
                            )),
                        );
                    }
                }
            } else if name == OsStr::new(CACHE_TAG) {
                cache = true;
            } else if kind.is_dir() && !WALK_SKIPPED.iter().any(|s| name == OsStr::new(s)) {
                below.push(entry.path());
            }
        }
        if !cache {
            queue.extend(below);
        }
    }
    (found, None)
}

/// The directories between `root` (excluded) and the work tree holding `dot_git` (included):
/// pinned, so that the repository stays where the walk found it.
pub fn chain(root: &Path, dot_git: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = dot_git
        .ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(root) && *dir != root)
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}
