//! The one glob engine: every pattern nova matches (permission rules, `find`, model scopes,
//! MCP tool names) is compiled here, once, by `globset`. The flavours differ only where their
//! users genuinely differ: which characters are special and whether `*` stops at `/`.

mod prefix;

pub use prefix::could_start_with;

use globset::{GlobBuilder, GlobMatcher};
use std::path::Path;

/// A compiled pattern; matching never allocates a new matcher.
#[derive(Debug, Clone)]
pub struct Glob(GlobMatcher);

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(#[from] globset::Error);

/// Whether letters match their other case too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Sensitive,
    Insensitive,
}

impl Glob {
    /// A permission pattern over command text: only `*` (any run of characters, spaces and `/`
    /// included) and `?` (one byte, so one ASCII character) are special, and the whole text
    /// must match. Users write these against shell commands, where `[`, `{`, `\` and `,` are
    /// ordinary text (`test [ -f x ]`, `echo {a,b}`), so they are escaped before globset sees
    /// them; runs of `*` become one, since `**` means nothing more here and globset would read
    /// `**/` as "any directories, or none".
    pub fn command(pattern: &str) -> Result<Glob, Error> {
        let mut escaped = String::with_capacity(pattern.len() * 2);
        let mut previous = None;
        for c in pattern.chars() {
            match c {
                '*' if previous == Some('*') => continue,
                '*' | '?' => {}
                '[' | ']' | '{' | '}' | '\\' => escaped.push('\\'),
                _ => {}
            }
            escaped.push(c);
            previous = Some(c);
        }
        build(
            GlobBuilder::new(&escaped)
                .literal_separator(false)
                .backslash_escape(true),
        )
    }

    /// A path glob in globset's own syntax (`*`, `?`, `[…]`, `{a,b}`, `**`), where `*` and
    /// `?` stay within one path component, as `find` (fd) and model scopes (Pi) read them.
    pub fn path(pattern: &str, case: Case) -> Result<Glob, Error> {
        build(
            GlobBuilder::new(pattern)
                .literal_separator(true)
                .case_insensitive(case == Case::Insensitive),
        )
    }

    /// A glob over MCP tool names (`mcp__fs__*`) in globset's syntax: names hold no path, so
    /// `*` spans everything.
    pub fn name(pattern: &str) -> Result<Glob, Error> {
        build(GlobBuilder::new(pattern).literal_separator(false))
    }

    /// Whether the whole of `text` matches.
    pub fn is_match(&self, text: impl AsRef<Path>) -> bool {
        self.0.is_match(text)
    }
}

fn build(builder: &mut GlobBuilder<'_>) -> Result<Glob, Error> {
    Ok(Glob(builder.build()?.compile_matcher()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn command(pattern: &str, text: &str) -> bool {
        Glob::command(pattern).unwrap().is_match(text)
    }

    #[test]
    fn command_patterns_treat_brackets_braces_and_backslashes_as_text() {
        for (pattern, text, matches) in [
            ("test [ -f x ]", "test [ -f x ]", true),
            ("test [ -f x ]", "test   -f x  ", false),
            ("ls [ab]", "ls a", false),
            ("ls [ab]", "ls [ab]", true),
            ("ls [!a]", "ls b", false),
            ("echo {a,b}", "echo a", false),
            ("echo {a,b}", "echo {a,b}", true),
            ("echo }{", "echo }{", true),
            ("echo a,b", "echo a,b", true),
            (r"printf \n", r"printf \n", true),
            (r"printf \n", "printf n", false),
            (r"echo \*", r"echo \anything", true),
            (r"trailing \", r"trailing \", true),
            ("[*", "[[x", true),
        ] {
            assert_eq!(command(pattern, text), matches, "{pattern:?} on {text:?}");
        }
    }

    #[test]
    fn command_stars_cross_slashes_and_never_mean_directories() {
        for (pattern, text, matches) in [
            ("*", "/usr/bin/rm -rf /", true),
            ("rm *", "rm a/b/c", true),
            ("**/bin/rm", "bin/rm", false),
            ("**/bin/rm", "/usr/bin/rm", true),
            ("a/**/b", "a/b", false),
            ("a/**/b", "a//b", true),
            ("?", "/", true),
            ("?", "\n", true),
            // One byte, as docs/safety.md says: `é` is two.
            ("caf?", "café", false),
            ("caf??", "café", true),
            ("caf*", "café", true),
        ] {
            assert_eq!(command(pattern, text), matches, "{pattern:?} on {text:?}");
        }
    }

    #[test]
    fn path_and_name_globs_keep_globsets_syntax() {
        let path = |p: &str, case, text: &str| Glob::path(p, case).unwrap().is_match(text);
        assert!(path("src/**/*.rs", Case::Sensitive, "src/a/b.rs"));
        assert!(!path("*.rs", Case::Sensitive, "src/b.rs"));
        assert!(path("*.{rs,toml}", Case::Sensitive, "Cargo.toml"));
        assert!(!path("*.RS", Case::Sensitive, "b.rs"));
        assert!(path("*.RS", Case::Insensitive, "b.rs"));
        let name = |p: &str, text: &str| Glob::name(p).unwrap().is_match(text);
        assert!(name("mcp__*__delete_*", "mcp__fs__delete_file"));
        assert!(name("mcp__fs__[rw]*", "mcp__fs__write"));
        assert!(!name("mcp__fs__[rw]*", "mcp__fs__list"));
        assert!(Glob::name("mcp__[x").is_err());
        assert!(Glob::path("{a", Case::Sensitive).is_err());
    }
}
