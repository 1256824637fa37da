//! Whether a project's own files are trusted, decided as Pi 1.6 decides it: the command line
//! (`--approve` / `--no-approve`) first; then, for a project that has files trust governs
//! ([`protected_resources`]), the `project_trust` vote of the user's own extensions (those of
//! the agent dir, the user's settings and `-e`; the front end asks them before the session is
//! resolved, and a vote they ask to remember is saved with [`remember`]); then the saved
//! decisions in the agent dir's
//! `trust.json` (a canonical directory → `true`, `false` or `null`; the closest directory with
//! a decision wins); then nova's `trustedProjects` list (its older spelling of a saved `true`
//! for exactly that directory); then the user's `defaultProjectTrust` (`"ask"`, `"always"` or
//! `"never"`). nova asks no one at startup, so `"ask"` means not trusted, as it does in Pi's
//! print, JSON and RPC modes.
//!
//! Everything here comes from the user's side (the flag, the agent dir, the user's settings):
//! a project can never trust itself.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The file of saved decisions, in the agent dir.
pub const TRUST_FILE: &str = "trust.json";

/// What decides, in Pi's order.
pub struct Inputs<'a> {
    /// `Some(true)` for `--approve`, `Some(false)` for `--no-approve`, when they apply here;
    /// else the user's extensions' `project_trust` vote, when one decided.
    pub flag: Option<bool>,
    /// The agent dir's `trust.json`.
    pub trust_file: &'a Path,
    /// The user's `trustedProjects`, taken out of their settings.
    pub trusted_projects: Option<Value>,
    /// The user's `defaultProjectTrust`, taken out of their settings.
    pub default: Option<Value>,
    pub cwd: &'a Path,
}

/// The decision for `inputs.cwd`; problems with the files are pushed to `warnings` and the
/// file is then taken as saying nothing.
pub fn decide(inputs: Inputs<'_>, warnings: &mut Vec<String>) -> bool {
    if let Some(decision) = inputs.flag {
        return decision;
    }
    let here = canonical(inputs.cwd);
    if let Some(decision) = saved(inputs.trust_file, &here, warnings) {
        return decision;
    }
    if listed(inputs.trusted_projects, &here, warnings) {
        return true;
    }
    match inputs.default {
        None => false,
        Some(Value::String(s)) if s == "always" => true,
        Some(Value::String(s)) if s == "ask" || s == "never" => false,
        Some(other) => {
            warnings.push(format!(
                "settings: \"defaultProjectTrust\" must be \"ask\", \"always\" or \"never\", not \
                 {other}; taken as \"ask\""
            ));
            false
        }
    }
}

/// Whether `cwd` has files that only a trusted project may use, as Pi tells (its `.pi/` and
/// nova's `.nova/` settings, MCP servers, extensions, skills, prompts, themes and system
/// prompt files, or an `.agents/skills` in it or above it other than the user's own): only
/// then are the user's extensions asked to vote.
pub fn protected_resources(cwd: &Path, home: Option<&Path>) -> bool {
    const GOVERNED: [&str; 8] = [
        "settings.json",
        "mcp.json",
        "extensions",
        "skills",
        "prompts",
        "themes",
        "SYSTEM.md",
        "APPEND_SYSTEM.md",
    ];
    let here = canonical(cwd);
    let governed = [".nova", ".pi"]
        .iter()
        .any(|dir| GOVERNED.iter().any(|f| here.join(dir).join(f).exists()));
    let users = home.map(|h| canonical(h).join(".agents").join("skills"));
    governed
        || here.ancestors().any(|dir| {
            let skills = dir.join(".agents").join("skills");
            users.as_ref() != Some(&skills) && skills.is_dir()
        })
}

/// Saves `trusted` as the decision for `cwd` in `file` (Pi's `remember: true`), keeping the
/// other directories' decisions; written beside and renamed, so a reader never sees half.
pub fn remember(file: &Path, cwd: &Path, trusted: bool) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| {
        format!("cannot save the trust decision in {}: {e}", file.display())
    };
    let mut decisions = match crate::files::safe_open::read_to_string(file) {
        Ok(text) => {
            serde_json::from_str::<serde_json::Map<String, Value>>(&text).map_err(|e| fail(&e))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Map::new(),
        Err(e) => return Err(fail(&e)),
    };
    decisions.insert(canonical(cwd).display().to_string(), Value::Bool(trusted));
    let text = serde_json::to_string_pretty(&decisions).map_err(|e| fail(&e))?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
    }
    let temp = file.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&temp, text + "\n")
        .and_then(|()| std::fs::rename(&temp, file))
        .map_err(|e| fail(&e))
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// The decision `trust.json` saved for `here` or its closest ancestor that has one.
fn saved(file: &Path, here: &Path, warnings: &mut Vec<String>) -> Option<bool> {
    let text = match crate::files::safe_open::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warnings.push(format!("cannot read {}: {e}; ignored", file.display()));
            return None;
        }
    };
    let decisions = match serde_json::from_str::<serde_json::Map<String, Value>>(&text) {
        Ok(map) => map,
        Err(e) => {
            warnings.push(format!(
                "{}: {e}; its saved trust decisions are ignored",
                file.display()
            ));
            return None;
        }
    };
    let decisions: Vec<(PathBuf, bool)> = decisions
        .into_iter()
        .filter_map(|(dir, decision)| Some((PathBuf::from(dir), decision.as_bool()?)))
        .collect();
    here.ancestors().find_map(|dir| {
        decisions
            .iter()
            .find(|(saved, _)| saved == dir)
            .map(|(_, decision)| *decision)
    })
}

/// Whether `trustedProjects` lists `here` (each entry compared after resolving symlinks).
fn listed(list: Option<Value>, here: &Path, warnings: &mut Vec<String>) -> bool {
    let Some(list) = list else {
        return false;
    };
    match serde_json::from_value::<Vec<PathBuf>>(list) {
        Ok(paths) => paths.iter().any(|p| canonical(p) == here),
        Err(e) => {
            warnings.push(format!("settings: \"trustedProjects\": {e}; ignored"));
            false
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decide_in(
        cwd: &Path,
        trust_file: &Path,
        flag: Option<bool>,
        default: Option<Value>,
    ) -> (bool, Vec<String>) {
        let mut warnings = Vec::new();
        let inputs = Inputs {
            flag,
            trust_file,
            trusted_projects: None,
            default,
            cwd,
        };
        (decide(inputs, &mut warnings), warnings)
    }

    #[test]
    fn a_remembered_vote_is_the_saved_decision_and_keeps_the_others() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let file = root.path().join("agent/trust.json");
        remember(&file, &a, true).unwrap();
        remember(&file, &b, false).unwrap();
        assert!(decide_in(&a, &file, None, None).0);
        assert!(!decide_in(&b, &file, None, Some(json!("always"))).0);
        std::fs::write(&file, "[").unwrap();
        assert!(
            remember(&file, &a, true).is_err(),
            "an unreadable file is not overwritten"
        );
    }

    #[test]
    fn only_governed_files_ask_for_a_decision() {
        let root = tempfile::tempdir().unwrap();
        let (home, project) = (root.path().join("home"), root.path().join("home/p"));
        std::fs::create_dir_all(project.join(".pi")).unwrap();
        std::fs::create_dir_all(home.join(".agents/skills")).unwrap();
        assert!(
            !protected_resources(&project, Some(&home)),
            "a bare .pi, the user's skills"
        );
        std::fs::write(project.join(".pi/SYSTEM.md"), "x").unwrap();
        assert!(protected_resources(&project, Some(&home)));
    }

    #[test]
    fn the_closest_saved_decision_wins_and_the_flag_over_it() {
        let root = tempfile::tempdir().unwrap();
        let root_path = root.path().canonicalize().unwrap();
        let inner = root_path.join("a/b");
        std::fs::create_dir_all(&inner).unwrap();
        let file = root_path.join("trust.json");
        let save = |v: Value| std::fs::write(&file, v.to_string()).unwrap();
        let key = |p: &Path| p.display().to_string();
        save(json!({ key(&root_path): true }));
        assert!(
            decide_in(&inner, &file, None, None).0,
            "a parent's decision covers it"
        );
        save(json!({ key(&root_path): true, key(&root_path.join("a")): false }));
        assert!(
            !decide_in(&inner, &file, None, None).0,
            "the closest decides"
        );
        assert!(
            decide_in(&inner, &file, Some(true), None).0,
            "--approve first"
        );
        save(json!({ key(&root_path): false, key(&root_path.join("a")): null }));
        assert!(
            !decide_in(&inner, &file, None, Some(json!("always"))).0,
            "null is no decision; the parent's false still stands"
        );
        save(json!({}));
        assert!(decide_in(&inner, &file, None, Some(json!("always"))).0);
        assert!(!decide_in(&inner, &file, None, Some(json!("ask"))).0);
        let (trusted, warnings) = decide_in(&inner, &file, None, Some(json!(3)));
        assert!(
            !trusted && warnings[0].contains("defaultProjectTrust"),
            "{warnings:?}"
        );
        std::fs::write(&file, "{").unwrap();
        let (trusted, warnings) = decide_in(&inner, &file, None, None);
        assert!(
            !trusted && warnings[0].contains("trust.json"),
            "{warnings:?}"
        );
    }
}
