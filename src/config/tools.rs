//! Which tools a session starts with, from Pi's flags: `--tools` (names or `*` patterns, or
//! only `+name`/`-name` entries changing the default set), `--exclude-tools` (patterns, MCP
//! tools included), `--no-builtin-tools` and `--no-tools`.

use super::ConfigError;
use crate::glob::Glob;
use crate::protocol::Model;
use crate::tools::{Tool, default_tools};

/// The startup selection. The default built-in set follows the model (image tools only for
/// models that take images); a named set does not.
#[derive(Debug, Clone)]
pub struct ToolSelection {
    builtin: Builtin,
    mcp: Mcp,
    /// `--exclude-tools`, applied last, to built-in and MCP tools alike.
    exclude: Vec<Glob>,
}

#[derive(Debug, Clone)]
enum Builtin {
    /// The model's default set with `+name` entries added and `-name` entries removed.
    Default {
        add: Vec<Tool>,
        remove: Vec<Tool>,
    },
    Only(Vec<Tool>),
}

/// Which MCP tools are offered (before `exclude`).
#[derive(Debug, Clone)]
enum Mcp {
    All,
    /// `--tools` named some (`mcp__…` entries, or `+mcp__…` ones after `--no-tools`).
    Matching(Vec<Glob>),
}

/// The command line's tool flags, as given.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolFlags<'a> {
    pub tools: Option<&'a [String]>,
    pub exclude: &'a [String],
    pub no_tools: bool,
    pub no_builtin_tools: bool,
}

impl Default for ToolSelection {
    fn default() -> Self {
        ToolSelection {
            builtin: Builtin::Default {
                add: Vec::new(),
                remove: Vec::new(),
            },
            mcp: Mcp::All,
            exclude: Vec::new(),
        }
    }
}

impl ToolSelection {
    /// No tool at all (`--no-tools`).
    pub fn none() -> Self {
        ToolSelection {
            builtin: Builtin::Only(Vec::new()),
            mcp: Mcp::Matching(Vec::new()),
            exclude: Vec::new(),
        }
    }

    /// The selection the flags describe. An `Err` names a bad list: a name that is neither a
    /// built-in tool, a pattern nor an MCP tool's, or `+`/`-` entries mixed with plain ones.
    pub fn from_flags(flags: ToolFlags<'_>) -> Result<ToolSelection, ConfigError> {
        let entries: Vec<&str> = flags
            .tools
            .unwrap_or_default()
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        let modifiers = entries.iter().filter(|e| e.starts_with(['+', '-'])).count();
        let bad = |reason: String| ConfigError::ToolList(reason);
        if modifiers > 0 && modifiers < entries.len() {
            return Err(bad(
                "--tools: tool names cannot be mixed with +name or -name entries".into(),
            ));
        }
        let exclude = entries_to_globs(flags.exclude.iter().map(String::as_str))?;
        let none_by_default = flags.no_tools || flags.no_builtin_tools;
        let mcp_all = !flags.no_tools;
        if flags.tools.is_none() {
            return Ok(ToolSelection {
                builtin: if none_by_default {
                    Builtin::Only(Vec::new())
                } else {
                    Builtin::Default {
                        add: Vec::new(),
                        remove: Vec::new(),
                    }
                },
                mcp: if mcp_all {
                    Mcp::All
                } else {
                    Mcp::Matching(Vec::new())
                },
                exclude,
            });
        }
        if modifiers > 0 {
            let (mut add, mut remove, mut mcp_added) = (Vec::new(), Vec::new(), Vec::new());
            for entry in &entries {
                let (sign, name) = entry.split_at(1);
                if name.contains('*') {
                    return Err(bad(format!(
                        "--tools: +name and -name entries take exact tool names, not patterns: \
                         {entry}"
                    )));
                }
                match (Tool::from_name(name), sign) {
                    (Some(tool), "+") => {
                        remove.retain(|t| *t != tool);
                        add.push(tool);
                    }
                    (Some(tool), _) => {
                        add.retain(|t| *t != tool);
                        remove.push(tool);
                    }
                    (None, "+") if name.starts_with("mcp__") => mcp_added.push(name),
                    (None, _) if name.starts_with("mcp__") => {}
                    (None, _) => return Err(unknown(name)),
                }
            }
            let builtin = if none_by_default {
                Builtin::Only(add)
            } else {
                Builtin::Default { add, remove }
            };
            let mcp = if mcp_all {
                Mcp::All
            } else {
                Mcp::Matching(entries_to_globs(mcp_added.into_iter())?)
            };
            let mut exclude = exclude;
            // `-mcp__x` takes one MCP tool away, as `--exclude-tools mcp__x` would.
            let removed_mcp = entries
                .iter()
                .filter_map(|e| e.strip_prefix('-'))
                .filter(|n| n.starts_with("mcp__"));
            exclude.extend(entries_to_globs(removed_mcp)?);
            return Ok(ToolSelection {
                builtin,
                mcp,
                exclude,
            });
        }
        let mut builtin = Vec::new();
        for entry in &entries {
            let matched: Vec<Tool> = if entry.contains('*') {
                let glob = pattern(entry)?;
                Tool::ALL
                    .iter()
                    .copied()
                    .filter(|t| glob.is_match(t.name()))
                    .collect()
            } else if let Some(tool) = Tool::from_name(entry) {
                vec![tool]
            } else if entry.starts_with("mcp__") {
                Vec::new()
            } else {
                return Err(unknown(entry));
            };
            for tool in matched {
                if !builtin.contains(&tool) {
                    builtin.push(tool);
                }
            }
        }
        let mcp_entries: Vec<&str> = entries
            .iter()
            .copied()
            .filter(|e| e.starts_with("mcp__"))
            .collect();
        let mcp = if mcp_entries.is_empty() && mcp_all {
            Mcp::All
        } else {
            Mcp::Matching(entries_to_globs(mcp_entries.into_iter())?)
        };
        Ok(ToolSelection {
            builtin: Builtin::Only(builtin),
            mcp,
            exclude,
        })
    }

    /// The built-in tools offered with `model`.
    pub fn active(&self, model: Option<&Model>) -> Vec<Tool> {
        let mut tools = match &self.builtin {
            Builtin::Default { add, remove } => {
                let mut tools = default_tools(model.is_some_and(Model::accepts_images));
                tools.retain(|t| !remove.contains(t));
                for tool in add {
                    if !tools.contains(tool) {
                        tools.push(*tool);
                    }
                }
                tools
            }
            Builtin::Only(tools) => tools.clone(),
        };
        tools.retain(|t| !self.excluded(t.name()));
        tools
    }

    /// Whether the command line lets the built-in `tool` be offered at all: a resumed session's
    /// recorded set and `set_active_tools` can narrow the selection, never widen it.
    pub fn allows(&self, tool: Tool) -> bool {
        let listed = match &self.builtin {
            Builtin::Default { remove, .. } => !remove.contains(&tool),
            Builtin::Only(tools) => tools.contains(&tool),
        };
        listed && !self.excluded(tool.name())
    }

    /// Whether the MCP tool `name` is offered.
    pub fn offers_mcp(&self, name: &str) -> bool {
        let selected = match &self.mcp {
            Mcp::All => true,
            Mcp::Matching(globs) => globs.iter().any(|g| g.is_match(name)),
        };
        selected && !self.excluded(name)
    }

    fn excluded(&self, name: &str) -> bool {
        self.exclude.iter().any(|g| g.is_match(name))
    }
}

fn unknown(name: &str) -> ConfigError {
    let known: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
    ConfigError::UnknownTool {
        name: name.to_owned(),
        known: known.join(", "),
    }
}

/// A tool name or pattern where `*` spans any characters (tool names hold no path).
fn pattern(entry: &str) -> Result<Glob, ConfigError> {
    Glob::name(entry).map_err(|e| ConfigError::ToolList(format!("{entry}: {e}")))
}

fn entries_to_globs<'a>(entries: impl Iterator<Item = &'a str>) -> Result<Vec<Glob>, ConfigError> {
    entries
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(pattern)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn select(
        tools: Option<&[&str]>,
        exclude: &[&str],
        no_tools: bool,
        nbt: bool,
    ) -> ToolSelection {
        let tools: Option<Vec<String>> = tools.map(|t| t.iter().map(|s| s.to_string()).collect());
        let exclude: Vec<String> = exclude.iter().map(|s| s.to_string()).collect();
        ToolSelection::from_flags(ToolFlags {
            tools: tools.as_deref(),
            exclude: &exclude,
            no_tools,
            no_builtin_tools: nbt,
        })
        .unwrap()
    }

    fn names(s: &ToolSelection) -> Vec<&'static str> {
        s.active(None).iter().map(|t| t.name()).collect()
    }

    #[test]
    fn plain_names_and_patterns_replace_the_default() {
        let s = select(Some(&["read", "*rep"]), &[], false, false);
        assert_eq!(names(&s), ["read", "grep"]);
        assert!(s.offers_mcp("mcp__fs__read"), "MCP tools stay");
        let s = select(Some(&["read", "mcp__fs__*"]), &[], false, false);
        assert!(s.offers_mcp("mcp__fs__read") && !s.offers_mcp("mcp__web__get"));
    }

    #[test]
    fn modifiers_change_the_default() {
        let s = select(Some(&["-write", "-edit"]), &[], false, false);
        assert_eq!(names(&s), ["read", "bash", "grep", "find", "ls"]);
        let s = select(Some(&["+read"]), &[], true, false);
        assert_eq!(names(&s), ["read"]);
        assert!(
            !s.offers_mcp("mcp__fs__read"),
            "--no-tools keeps MCP tools out"
        );
        let err = ToolSelection::from_flags(ToolFlags {
            tools: Some(&["read".into(), "+bash".into()]),
            ..ToolFlags::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("mixed"), "{err}");
    }

    #[test]
    fn exclusions_apply_last_to_every_tool() {
        let s = select(None, &["b*", "mcp__fs__*"], false, false);
        assert!(!names(&s).contains(&"bash"));
        assert!(!s.offers_mcp("mcp__fs__write") && s.offers_mcp("mcp__web__get"));
        let s = select(None, &[], false, true);
        assert!(names(&s).is_empty() && s.offers_mcp("mcp__web__get"));
        let s = select(None, &[], true, false);
        assert!(names(&s).is_empty() && !s.offers_mcp("mcp__web__get"));
    }
}
