//! `permissions.mcp`: which MCP calls run, which wait for the client's `permission_response`,
//! and which are refused. Patterns are globs over the model-facing name (`mcp__fs__*`,
//! `mcp__*__delete_*`); `deny` wins over everything, `allow` exempts a call from `ask`, and a
//! call no rule names runs (MCP tools are allowed by default, as in Pi).

use globset::{Glob, GlobMatcher};

#[derive(Debug, Clone, Default)]
pub struct Rules {
    ask: Vec<Rule>,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// The settings could not be read: every call asks, so a typo never lets one through.
    ask_all: Option<String>,
}

#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    matcher: GlobMatcher,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Run,
    Ask { reason: String },
    Deny { rule: String },
}

impl Rules {
    /// An invalid pattern is an error naming it.
    pub fn new(ask: &[String], allow: &[String], deny: &[String]) -> Result<Rules, String> {
        let compile = |patterns: &[String], list: &str| -> Result<Vec<Rule>, String> {
            patterns
                .iter()
                .map(|p| {
                    Glob::new(p)
                        .map(|g| Rule {
                            pattern: p.clone(),
                            matcher: g.compile_matcher(),
                        })
                        .map_err(|e| format!("permissions.mcp.{list}: invalid pattern `{p}`: {e}"))
                })
                .collect()
        };
        Ok(Rules {
            ask: compile(ask, "ask")?,
            allow: compile(allow, "allow")?,
            deny: compile(deny, "deny")?,
            ask_all: None,
        })
    }

    /// Asks before every call, saying why.
    pub fn ask_all(reason: impl Into<String>) -> Rules {
        Rules {
            ask_all: Some(reason.into()),
            ..Rules::default()
        }
    }

    pub fn verdict(&self, tool: &str) -> Verdict {
        let first = |rules: &[Rule]| {
            rules
                .iter()
                .find(|r| r.matcher.is_match(tool))
                .map(|r| r.pattern.clone())
        };
        if let Some(rule) = first(&self.deny) {
            return Verdict::Deny { rule };
        }
        if let Some(reason) = &self.ask_all {
            return Verdict::Ask {
                reason: reason.clone(),
            };
        }
        if first(&self.allow).is_some() {
            return Verdict::Run;
        }
        match first(&self.ask) {
            Some(rule) => Verdict::Ask {
                reason: format!("{tool} matches the permissions.mcp ask rule `{rule}`"),
            },
            None => Verdict::Run,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn deny_wins_allow_exempts_and_the_default_is_to_run() {
        let rules = Rules::new(
            &strings(&["mcp__fs__*"]),
            &strings(&["mcp__fs__read_*"]),
            &strings(&["mcp__*__delete*", "mcp__fs__read_secret"]),
        )
        .unwrap();
        assert_eq!(rules.verdict("mcp__gh__search"), Verdict::Run);
        assert_eq!(rules.verdict("mcp__fs__read_file"), Verdict::Run);
        assert_eq!(
            rules.verdict("mcp__fs__write_file"),
            Verdict::Ask {
                reason: "mcp__fs__write_file matches the permissions.mcp ask rule `mcp__fs__*`"
                    .into()
            }
        );
        assert_eq!(
            rules.verdict("mcp__gh__delete_repo"),
            Verdict::Deny {
                rule: "mcp__*__delete*".into()
            }
        );
        assert_eq!(
            rules.verdict("mcp__fs__read_secret"),
            Verdict::Deny {
                rule: "mcp__fs__read_secret".into()
            }
        );
        assert_eq!(Rules::default().verdict("mcp__x__y"), Verdict::Run);
    }

    #[test]
    fn invalid_patterns_are_errors_and_ask_all_asks_for_everything() {
        let e = Rules::new(&strings(&["mcp__[x"]), &[], &[]).unwrap_err();
        assert!(
            e.contains("permissions.mcp.ask") && e.contains("mcp__[x"),
            "{e}"
        );
        let rules = Rules::ask_all("settings are broken");
        assert!(
            matches!(rules.verdict("mcp__a__b"), Verdict::Ask { reason } if reason == "settings are broken")
        );
    }
}
