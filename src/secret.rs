//! Configured secrets, resolved in one place: `apiKey` and `headers` of models.json, `key` of
//! auth.json, `env` and `headers` of mcp.json. All follow Pi 1.6's rules — a value starting with
//! `!` is a shell command whose trimmed stdout is the value (10 s at most, under the keeper like
//! every command nova starts) — and differ only in how they name environment variables
//! ([`Syntax`]). A value nova writes itself (a key pasted into `nova login`) is stored with
//! [`literal`], so it reads back as exactly what was pasted, in nova and in Pi alike.
//!
//! Error texts name the variable or the command, never a resolved value. A command runs in
//! nova's cwd with nova's environment unless the caller prepares its shell ([`Prepare`]: a
//! user's MCP server runs its commands apart from the project).

use crate::sandbox::{output_within, shell_command};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long a `!command` may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How a value names environment variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// models.json and auth.json, as Pi 1.6 reads them: every `$NAME` or `${NAME}` in the value
    /// is replaced (unset or empty is an error), `$$` is a literal `$` and `$!` a literal `!`,
    /// everything else is literal — except that a value which is just the name of a set
    /// variable reads it, as older Pi's files expect.
    Template,
    /// mcp.json, as Claude and Pi write it: every `${NAME}` or `${NAME:-default}` inside the
    /// value is replaced (unset without a default is an error, since a server started with an
    /// empty token fails later with a far less helpful message); a lone `$NAME` stays literal.
    Interpolated,
}

/// The output of `!command` values already run, for values that are run once per process (Pi
/// caches models.json's this way; an MCP server's are run again when it restarts, so a token
/// that expired is fetched anew).
#[derive(Debug, Default)]
pub struct CommandCache(Mutex<HashMap<String, String>>);

impl CommandCache {
    fn get(&self, command: &str) -> Option<String> {
        self.0.lock().ok()?.get(command).cloned()
    }

    fn put(&self, command: &str, value: &str) {
        if let Ok(mut cache) = self.0.lock() {
            cache.insert(command.to_owned(), value.to_owned());
        }
    }
}

/// Readies the shell of a `!command` (its directory, its environment) before it runs.
pub type Prepare<'a> = &'a (dyn Fn(&mut tokio::process::Command) -> Result<(), String> + Sync);

/// Resolves one configured value; `cache`, when given, keeps each command's output.
pub async fn resolve(
    raw: &str,
    syntax: Syntax,
    cache: Option<&CommandCache>,
) -> Result<String, String> {
    resolve_with(raw, syntax, cache, None, |name| std::env::var(name).ok()).await
}

/// [`resolve`], reading variables through `lookup` (an auth.json entry's `env` over the
/// process environment).
pub async fn resolve_in(
    raw: &str,
    syntax: Syntax,
    cache: Option<&CommandCache>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    resolve_with(raw, syntax, cache, None, lookup).await
}

async fn resolve_with(
    raw: &str,
    syntax: Syntax,
    cache: Option<&CommandCache>,
    prepare: Option<Prepare<'_>>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    if let Some(command) = raw.strip_prefix('!') {
        if let Some(hit) = cache.and_then(|c| c.get(command)) {
            return Ok(hit);
        }
        let value = run(command, prepare).await?;
        if let Some(cache) = cache {
            cache.put(command, &value);
        }
        return Ok(value);
    }
    match syntax {
        Syntax::Template => template(raw, lookup),
        Syntax::Interpolated => interpolate(raw, lookup),
    }
}

/// Resolves every value of `pairs` ([`Syntax::Interpolated`], nothing cached), commands in
/// the shell `prepare` readies; the error names the key.
pub async fn resolve_all(
    pairs: &[(String, String)],
    prepare: Option<Prepare<'_>>,
) -> Result<Vec<(String, String)>, String> {
    let mut resolved = Vec::with_capacity(pairs.len());
    for (key, value) in pairs {
        let lookup = |name: &str| std::env::var(name).ok();
        let value = resolve_with(value, Syntax::Interpolated, None, prepare, lookup)
            .await
            .map_err(|e| format!("\"{key}\": {e}"))?;
        resolved.push((key.clone(), value));
    }
    Ok(resolved)
}

fn unset(name: &str) -> String {
    format!("environment variable {name} is not set")
}

/// `value` written so that [`Syntax::Template`] reads it back unchanged: every `$` doubled and
/// a leading `!` escaped as `$!`, as Pi 1.6 documents both escapes.
pub fn literal(value: &str) -> String {
    let escaped = value.replace('$', "$$");
    match escaped.strip_prefix('!') {
        Some(rest) => format!("$!{rest}"),
        None => escaped,
    }
}

fn template(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let is_name_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let read = |name: &str| {
        lookup(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| unset(name))
    };
    if value.starts_with(is_name_start)
        && value.chars().all(is_name)
        && let Some(set) = lookup(value)
    {
        return Ok(set);
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix(['$', '!']) {
            out.push_str(&after[..1]);
            rest = tail;
        } else if let Some(braced) = after.strip_prefix('{')
            && let Some(end) = braced.find('}')
        {
            let name = &braced[..end];
            if name.starts_with(is_name_start) && name.chars().all(is_name) {
                out.push_str(&read(name)?);
            } else {
                out.push_str(&rest[at..at + 2 + end + 1]);
            }
            rest = &braced[end + 1..];
        } else if after.starts_with(is_name_start) {
            let len = after.find(|c| !is_name(c)).unwrap_or(after.len());
            out.push_str(&read(&after[..len])?);
            rest = &after[len..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn interpolate(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        out.push_str(&rest[..start]);
        let inner = &rest[start + 2..start + 2 + len];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(unset(name)),
        }
        rest = &rest[start + 2 + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

async fn run(command: &str, prepare: Option<Prepare<'_>>) -> Result<String, String> {
    let mut shell = shell_command(command);
    if let Some(prepare) = prepare {
        prepare(&mut shell).map_err(|e| format!("command `{command}` could not run: {e}"))?;
    }
    let output = output_within(shell, std::process::Stdio::piped(), COMMAND_TIMEOUT)
        .await
        .map_err(|e| format!("command `{command}` could not run: {e}"))?
        .ok_or_else(|| format!("command `{command}` took longer than 10 s"))?;
    if !output.status.success() {
        return Err(format!(
            "command `{command}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn interpolated_values_replace_every_variable() {
        let i = |v| interpolate(v, vars);
        assert_eq!(i("Bearer ${TOKEN}").unwrap(), "Bearer s3cret");
        assert_eq!(i("${TOKEN}-${TOKEN}").unwrap(), "s3cret-s3cret");
        assert_eq!(i("${EMPTY}x").unwrap(), "x");
        assert_eq!(i("${NOPE:-dflt}").unwrap(), "dflt");
        assert_eq!(i("${TOKEN:-dflt}").unwrap(), "s3cret");
        assert_eq!(i("plain $TOKEN").unwrap(), "plain $TOKEN");
        assert_eq!(i("open ${TOKEN").unwrap(), "open ${TOKEN");
        assert_eq!(
            i("a ${NOPE} b").unwrap_err(),
            "environment variable NOPE is not set"
        );
    }

    #[test]
    fn templates_read_variables_and_escapes_as_pi_does() {
        let t = |v| template(v, vars);
        assert_eq!(t("$TOKEN").unwrap(), "s3cret");
        assert_eq!(t("${TOKEN}").unwrap(), "s3cret");
        assert_eq!(t("Bearer ${TOKEN}!").unwrap(), "Bearer s3cret!");
        assert_eq!(t("$TOKEN-x").unwrap(), "s3cret-x");
        assert_eq!(
            t("TOKEN").unwrap(),
            "s3cret",
            "older Pi: a set variable's bare name"
        );
        assert_eq!(t("NOPE").unwrap(), "NOPE");
        assert_eq!(t("literal-key").unwrap(), "literal-key");
        assert_eq!(t("$$TOKEN $!x $").unwrap(), "$TOKEN !x $");
        assert_eq!(t("${not a name} ${open").unwrap(), "${not a name} ${open");
        assert_eq!(t("5$").unwrap(), "5$");
        for unset in ["$NOPE", "a${NOPE}", "$EMPTY"] {
            assert!(t(unset).unwrap_err().contains("is not set"), "{unset}");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_literal_reads_back_exactly_and_runs_nothing() {
        for pasted in [
            "!touch /tmp/x",
            "$HOME",
            "${TOKEN}",
            "a$$b",
            "$!",
            "plain",
            "",
            "!",
        ] {
            let stored = literal(pasted);
            assert!(!stored.starts_with('!'), "{stored}");
            let read = resolve_with(&stored, Syntax::Template, None, None, vars).await;
            assert_eq!(read.unwrap(), pasted);
        }
        assert_eq!(literal("!k$y"), "$!k$$y");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_leading_bang_runs_the_whole_value_once_when_cached() {
        for syntax in [Syntax::Template, Syntax::Interpolated] {
            let r = |v| resolve_with(v, syntax, None, None, vars);
            assert_eq!(r("!echo ' hi '").await.unwrap(), "hi");
            assert_eq!(r("!echo Bearer $(echo t)").await.unwrap(), "Bearer t");
            let failed = r("!echo why >&2; exit 3").await.unwrap_err();
            assert!(
                failed.contains("failed") && failed.contains("why"),
                "{failed}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let counter = dir.path().join("runs");
        let command = format!("!echo x >> {0}; wc -l < {0}", counter.display());
        let cache = CommandCache::default();
        for _ in 0..3 {
            let value = resolve_with(&command, Syntax::Template, Some(&cache), None, vars).await;
            assert_eq!(value.unwrap(), "1");
        }
        let pairs = [("A".to_owned(), "${NOVA_TEST_SURELY_UNSET_VAR}".to_owned())];
        assert!(
            resolve_all(&pairs, None)
                .await
                .unwrap_err()
                .starts_with("\"A\": ")
        );
    }
}
