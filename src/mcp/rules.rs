//! `permissions.mcp`: which MCP calls run, which wait for the client's `permission_response`,
//! and which are refused. Patterns are globs over the tool's name (`mcp__fs__*`,
//! `mcp__*__delete_*`), in the spelling the model sees (`mcp__my_fs__write_file`) or in the
//! server's own (`mcp__my-fs__write_file`: the configured server name and the tool's own name);
//! `deny` wins over everything, `allow` exempts a call from `ask`, and a call no rule names runs
//! (MCP tools are allowed by default, as in Pi). A rule that names no configured server's tool
//! is found by [`Rules::unmatched`], so that a typo does not go unnoticed.

use super::names::sanitize;
pub use crate::gate::classify::Verdict;
use crate::glob::{self, Glob};

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
    matcher: Glob,
}

impl Rules {
    /// An invalid pattern is an error naming it.
    pub fn new(ask: &[String], allow: &[String], deny: &[String]) -> Result<Rules, String> {
        let compile = |patterns: &[String], list: &str| -> Result<Vec<Rule>, String> {
            patterns
                .iter()
                .map(|p| {
                    Glob::name(p)
                        .map(|matcher| Rule {
                            pattern: p.clone(),
                            matcher,
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

    /// What the rules say about calling `tool` (the model-facing name); `own` is the server's
    /// configured name and the tool's own name, when known.
    pub fn verdict(&self, tool: &str, own: Option<(&str, &str)>) -> Verdict {
        let names = spellings(tool, own);
        let first = |rules: &[Rule]| {
            rules
                .iter()
                .find(|r| names.iter().any(|n| r.matcher.is_match(n)))
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

    /// One line for each rule that matches no tool of a ready server (`known`: each server's
    /// configured name, and its tools' model-facing and own names) and could not name a tool of
    /// a server whose tools are not known (`unknown`: failed, disabled).
    pub fn unmatched(&self, known: &[(&str, Vec<(&str, &str)>)], unknown: &[&str]) -> Vec<String> {
        let names: Vec<String> = known
            .iter()
            .flat_map(|(server, tools)| {
                tools
                    .iter()
                    .flat_map(|(name, tool)| spellings(name, Some((server, tool))))
            })
            .collect();
        let prefixes: Vec<String> = unknown
            .iter()
            .flat_map(|s| [s.to_string(), sanitize(s)])
            .map(|s| format!("mcp__{s}__"))
            .collect();
        let servers: Vec<&str> = known
            .iter()
            .map(|(s, _)| *s)
            .chain(unknown.iter().copied())
            .collect();
        let lists = [
            ("ask", &self.ask),
            ("allow", &self.allow),
            ("deny", &self.deny),
        ];
        lists
            .into_iter()
            .flat_map(|(list, rules)| rules.iter().map(move |r| (list, r)))
            .filter(|(_, rule)| {
                !names.iter().any(|n| rule.matcher.is_match(n))
                    && !prefixes
                        .iter()
                        .any(|p| glob::could_start_with(&rule.pattern, p))
            })
            .map(|(list, rule)| {
                format!(
                    "the permissions.mcp.{list} rule `{}` matches no tool of the configured \
                     servers ({}), so it does nothing; tools are named mcp__<server>__<tool>",
                    rule.pattern,
                    servers.join(", ")
                )
            })
            .collect()
    }
}

/// The names a call answers to: the model-facing one, and every mix of the server's configured
/// name or its sanitised form with the tool's own name or its sanitised form.
fn spellings(name: &str, own: Option<(&str, &str)>) -> Vec<String> {
    let mut names = vec![name.to_owned()];
    if let Some((server, tool)) = own {
        for server in [server.to_owned(), sanitize(server)] {
            for tool in [tool.to_owned(), sanitize(tool)] {
                let spelled = format!("mcp__{server}__{tool}");
                if !names.contains(&spelled) {
                    names.push(spelled);
                }
            }
        }
    }
    names
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
        assert_eq!(rules.verdict("mcp__gh__search", None), Verdict::Run);
        assert_eq!(rules.verdict("mcp__fs__read_file", None), Verdict::Run);
        assert_eq!(
            rules.verdict("mcp__fs__write_file", None),
            Verdict::Ask {
                reason: "mcp__fs__write_file matches the permissions.mcp ask rule `mcp__fs__*`"
                    .into()
            }
        );
        assert_eq!(
            rules.verdict("mcp__gh__delete_repo", None),
            Verdict::Deny {
                rule: "mcp__*__delete*".into()
            }
        );
        assert_eq!(
            rules.verdict("mcp__fs__read_secret", None),
            Verdict::Deny {
                rule: "mcp__fs__read_secret".into()
            }
        );
        assert_eq!(Rules::default().verdict("mcp__x__y", None), Verdict::Run);
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
            matches!(rules.verdict("mcp__a__b", None), Verdict::Ask { reason } if reason == "settings are broken")
        );
    }

    #[test]
    fn rules_match_the_servers_own_spelling_too() {
        let rules = Rules::new(
            &strings(&["mcp__my-fs__write_*", "mcp__srv__list.dir"]),
            &[],
            &strings(&["mcp__my-fs__delete_file"]),
        )
        .unwrap();
        let own = Some(("my-fs", "write_file"));
        assert_eq!(
            rules.verdict("mcp__my_fs__write_file", own),
            Verdict::Ask {
                reason: "mcp__my_fs__write_file matches the permissions.mcp ask rule \
                         `mcp__my-fs__write_*`"
                    .into()
            }
        );
        assert_eq!(
            rules.verdict("mcp__my_fs__delete_file", Some(("my-fs", "delete_file"))),
            Verdict::Deny {
                rule: "mcp__my-fs__delete_file".into()
            }
        );
        // The tool's own name, and a model-facing name shortened with a hash.
        assert!(matches!(
            rules.verdict("mcp__srv__list_dir", Some(("srv", "list.dir"))),
            Verdict::Ask { .. }
        ));
        assert!(matches!(
            rules.verdict("mcp__my_fs__write_x_1a2b3c4d", Some(("my-fs", "write.x"))),
            Verdict::Ask { .. }
        ));
        assert_eq!(
            rules.verdict("mcp__my_fs__read_file", Some(("my-fs", "read_file"))),
            Verdict::Run
        );
        // Without the server's names only the model-facing one counts.
        assert_eq!(rules.verdict("mcp__my_fs__write_file", None), Verdict::Run);
    }

    #[test]
    fn rules_that_name_no_tool_are_found() {
        let rules = Rules::new(
            &strings(&["mcp__fs__wirte_*", "mcp__my-fs__write_*", "mcp__gh__*"]),
            &strings(&["mcp__my_fs__read_{file,dir}"]),
            &strings(&["mcp__*__delete_*", "mcp__[gh]h__x"]),
        )
        .unwrap();
        let known = [(
            "my-fs",
            vec![
                ("mcp__my_fs__write_file", "write_file"),
                ("mcp__my_fs__read_dir", "read_dir"),
            ],
        )];
        let lines = rules.unmatched(&known, &["gh"]);
        assert_eq!(
            lines,
            vec![
                "the permissions.mcp.ask rule `mcp__fs__wirte_*` matches no tool of the \
                 configured servers (my-fs, gh), so it does nothing; tools are named \
                 mcp__<server>__<tool>"
            ]
        );
        // Once gh is not configured, its rules and the catch-all deny name nothing either.
        let lines = rules.unmatched(&known, &[]);
        let patterns: Vec<&str> = lines.iter().map(|l| l.split('`').nth(1).unwrap()).collect();
        assert_eq!(
            patterns,
            [
                "mcp__fs__wirte_*",
                "mcp__gh__*",
                "mcp__*__delete_*",
                "mcp__[gh]h__x"
            ]
        );
        assert!(Rules::default().unmatched(&known, &[]).is_empty());
    }
}
