//! Values of `env` and `headers`, resolved when a server starts (never at nova's startup, since a
//! command may take seconds): a value that starts with `!` is a shell command whose trimmed
//! stdout is the value; any other value has each `${NAME}` (or `${NAME:-default}`) replaced by
//! the environment variable. A user's server runs its commands where it runs itself, apart from
//! the project ([`Isolation`]).

use super::isolate::Isolation;
use crate::sandbox::{output_within, shell_command};
use std::time::Duration;

/// How long a `!command` may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves every value of `pairs`; the error names the key.
pub async fn resolve_all(
    pairs: &[(String, String)],
    isolation: Option<&Isolation>,
) -> Result<Vec<(String, String)>, String> {
    let mut resolved = Vec::with_capacity(pairs.len());
    for (key, value) in pairs {
        let value = resolve(value, isolation, |name| std::env::var(name).ok())
            .await
            .map_err(|e| format!("\"{key}\": {e}"))?;
        resolved.push((key.clone(), value));
    }
    Ok(resolved)
}

async fn resolve(
    value: &str,
    isolation: Option<&Isolation>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    match value.strip_prefix('!') {
        Some(command) => run(command, isolation).await,
        None => interpolate(value, lookup),
    }
}

/// Replaces `${NAME}` and `${NAME:-default}`. An unset variable without a default is an error:
/// a server started with an empty token fails later with a far less helpful message.
pub fn interpolate(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
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
            (None, None) => return Err(format!("environment variable {name} is not set")),
        }
        rest = &rest[start + 2 + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

async fn run(command: &str, isolation: Option<&Isolation>) -> Result<String, String> {
    let mut shell = shell_command(command);
    if let Some(isolation) = isolation {
        isolation.apply(&mut shell, &isolation.dir, &[])?;
    }
    let output = output_within(shell, std::process::Stdio::null(), COMMAND_TIMEOUT)
        .await
        .map_err(|e| format!("cannot run `{command}`: {e}"))?
        .ok_or_else(|| format!("`{command}` did not finish within {COMMAND_TIMEOUT:?}"))?;
    if !output.status.success() {
        return Err(format!("`{command}` failed ({})", output.status));
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
    fn variables_are_replaced_inside_values() {
        assert_eq!(
            interpolate("Bearer ${TOKEN}", vars).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            interpolate("${TOKEN}-${TOKEN}", vars).unwrap(),
            "s3cret-s3cret"
        );
        assert_eq!(interpolate("${EMPTY}x", vars).unwrap(), "x");
        assert_eq!(interpolate("${NOPE:-dflt}", vars).unwrap(), "dflt");
        assert_eq!(interpolate("${TOKEN:-dflt}", vars).unwrap(), "s3cret");
        assert_eq!(interpolate("plain $TOKEN", vars).unwrap(), "plain $TOKEN");
        assert_eq!(interpolate("open ${TOKEN", vars).unwrap(), "open ${TOKEN");
        assert_eq!(
            interpolate("a ${NOPE} b", vars).unwrap_err(),
            "environment variable NOPE is not set"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_leading_bang_runs_the_whole_value() {
        assert_eq!(resolve("!echo ' hi '", None, vars).await.unwrap(), "hi");
        assert_eq!(
            resolve("!echo Bearer $(echo t)", None, vars).await.unwrap(),
            "Bearer t"
        );
        assert!(
            resolve("!exit 3", None, vars)
                .await
                .unwrap_err()
                .contains("failed")
        );
        let pairs = [("A".to_owned(), "${NOVA_TEST_SURELY_UNSET_VAR}".to_owned())];
        assert!(
            resolve_all(&pairs, None)
                .await
                .unwrap_err()
                .starts_with("\"A\": ")
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
        let resolved = resolve_all(&pairs, Some(&isolation)).await.unwrap();
        let neutral = isolation.dir.canonicalize().unwrap();
        assert_eq!(resolved[0].1, neutral.display().to_string());
    }
}
