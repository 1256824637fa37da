//! Turning a model-supplied path into an absolute one. Models often copy paths from prompts
//! (`@file` mentions, `~/…`) or from text with odd spaces, so those are cleaned up first.

use std::path::{Component, Path, PathBuf};

/// Spaces a model may emit instead of U+0020 (no-break, en/em and friends, ideographic).
fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

fn expand(raw: &str) -> PathBuf {
    let stripped = raw.strip_prefix('@').unwrap_or(raw);
    let cleaned: String = stripped
        .chars()
        .map(|c| if is_unicode_space(c) { ' ' } else { c })
        .collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match (cleaned.as_str(), home) {
        ("~", Some(home)) => home,
        (s, Some(home)) if s.starts_with("~/") => home.join(&s[2..]),
        (s, _) => PathBuf::from(s),
    }
}

/// Resolves `raw` against `cwd`. `..` components are kept as given: the file system resolves
/// them, and collapsing them textually would be wrong across symlinks.
pub fn resolve(raw: &str, cwd: &Path) -> PathBuf {
    let expanded = expand(raw);
    if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    }
}

/// `a/b/../c` → `a/c`, `.` dropped, by the text alone, as Pi resolves configured paths: for
/// paths that are shown or compared as names (settings, packages). Never for a path that is then
/// opened: across a symlink `..` means something else on disk.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_absolute_at_and_spaces() {
        let cwd = Path::new("/work/p");
        assert_eq!(resolve("src/a.rs", cwd), PathBuf::from("/work/p/src/a.rs"));
        assert_eq!(resolve("/etc/x", cwd), PathBuf::from("/etc/x"));
        assert_eq!(resolve("@src/a.rs", cwd), PathBuf::from("/work/p/src/a.rs"));
        assert_eq!(
            resolve("my\u{00A0}file\u{3000}x.txt", cwd),
            PathBuf::from("/work/p/my file x.txt")
        );
    }

    #[test]
    fn expands_home() {
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        let cwd = Path::new("/work/p");
        assert_eq!(resolve("~", cwd), home);
        assert_eq!(resolve("~/a/b", cwd), home.join("a/b"));
        assert_eq!(resolve("~x", cwd), PathBuf::from("/work/p/~x"));
    }

    #[test]
    fn lexical_drops_dots_and_folds_parents_by_text() {
        assert_eq!(lexical(Path::new("/a/b/../c/./d")), PathBuf::from("/a/c/d"));
        assert_eq!(lexical(Path::new("/../x")), PathBuf::from("/x"));
    }
}
