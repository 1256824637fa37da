//! The tools the model is offered. Until a client names a set with `set_active_tools` (Pi
//! #7432, declined there), that is the command line's built-in selection (which follows the
//! model: image tools only for a model that takes images) and every tool of the MCP servers
//! that are ready. A named set is exact, built-in and MCP names alike, and is recorded in the
//! session as a `custom` entry, so it comes back with the session as a model change does.
//! Extension tools are offered like MCP tools: all of them until a set is named, then those it
//! names. `--tools`/`--no-tools` bound every set: a built-in tool they leave out is never offered,
//! whatever a resumed session recorded, and `set_active_tools` naming one is refused.

use super::{Agent, CommandError, State};
use crate::config::ToolSelection;
use crate::context::PromptSource;
use crate::protocol::{Model, ToolInfo, ToolSource, ToolSpec};
use crate::tools::Tool;
use std::sync::Arc;

/// The active tools with the system prompt that describes them, shared cheaply with each turn.
#[derive(Clone)]
pub(super) struct Tools {
    pub(super) active: Arc<[Tool]>,
    pub(super) specs: Arc<[ToolSpec]>,
    pub(super) system_prompt: Arc<str>,
    /// The client's set, which also decides the MCP tools; `None` offers the MCP tools the
    /// startup selection offers.
    named: Option<Arc<[String]>>,
    startup: Arc<ToolSelection>,
}

impl Tools {
    pub(super) fn new(
        startup: &ToolSelection,
        named: Option<Arc<[String]>>,
        source: &PromptSource,
        model: Option<&Model>,
    ) -> Self {
        let active: Vec<Tool> = match &named {
            None => startup.active(model),
            Some(names) => names
                .iter()
                .filter_map(|n| Tool::from_name(n))
                .filter(|&t| startup.allows(t))
                .collect(),
        };
        Tools {
            specs: active.iter().map(|t| t.spec()).collect(),
            system_prompt: source.render(&active).into(),
            active: active.into(),
            named,
            startup: Arc::new(startup.clone()),
        }
    }

    /// Whether the model may see and call the MCP tool `name`.
    pub(super) fn offers_mcp(&self, name: &str) -> bool {
        match &self.named {
            Some(names) => names.iter().any(|n| n == name),
            None => self.startup.offers_mcp(name),
        }
    }

    /// Whether the model may see the extension tool `name`.
    pub(super) fn offers_extension(&self, name: &str) -> bool {
        self.named
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    }
}

impl Agent {
    /// The tools for `model` under the client's set (`None`: the startup selection).
    pub(super) fn tools_for(&self, named: Option<Arc<[String]>>, model: Option<&Model>) -> Tools {
        Tools::new(
            &self.inner.tool_selection,
            named,
            &self.prompt_source(),
            model,
        )
    }

    /// The current set for another model.
    pub(super) fn retool(&self, state: &mut State, model: Option<&Model>) {
        state.tools = self.tools_for(state.tools.named.clone(), model);
    }

    /// Records a client's set in a new session file (see `record_settings_if_new`).
    pub(super) fn record_tools(&self, state: &mut State) {
        if let Some(names) = state.tools.named.clone()
            && let Err(e) = state.session.append_active_tools(&names)
        {
            self.report_session_error(&e);
        }
    }

    /// Every tool nova could offer now (built-in, the MCP servers' that are ready, the
    /// extensions'), each with its schema and whether the next request offers it. An extension
    /// tool with a built-in's name replaces the built-in, as in Pi.
    pub fn tools(&self) -> Vec<ToolInfo> {
        let mcp = self.inner.mcp.as_ref().map(|s| s.specs());
        let extensions = self.extensions().map(|e| e.tool_specs());
        let state = self.state();
        let builtin = Tool::ALL
            .iter()
            .filter(|t| !super::extensions::has_tool_named(extensions.as_deref(), t.name()))
            .map(|&t| ToolInfo {
                spec: t.spec(),
                source: ToolSource::Builtin,
                active: state.tools.active.contains(&t),
            });
        let mcp = mcp
            .iter()
            .flat_map(|specs| specs.iter())
            .map(|spec| ToolInfo {
                active: state.tools.offers_mcp(&spec.name),
                spec: spec.clone(),
                source: ToolSource::Mcp,
            });
        let extensions = extensions.iter().flatten().map(|spec| ToolInfo {
            active: state.tools.offers_extension(&spec.name),
            spec: spec.clone(),
            source: ToolSource::Extension,
        });
        builtin.chain(mcp).chain(extensions).collect()
    }

    /// Makes `names` the tools of the next request (in that order; repeats dropped). Every name
    /// must be a built-in tool, one an MCP server declares or an extension's; otherwise nothing
    /// changes and the error names the unknown ones.
    pub fn set_active_tools(&self, names: Vec<String>) -> Result<Vec<ToolInfo>, CommandError> {
        let mcp = self.inner.mcp.as_ref();
        let extensions = self.extensions();
        let known = |name: &str| {
            Tool::from_name(name).is_some()
                || mcp.is_some_and(|s| s.knows(name))
                || extensions.is_some_and(|e| e.has_tool(name))
        };
        let unknown: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !known(n))
            .collect();
        if !unknown.is_empty() {
            let mut offered: Vec<String> = Tool::ALL.iter().map(|t| t.name().to_owned()).collect();
            if let Some(servers) = mcp {
                offered.extend(servers.specs().iter().map(|s| s.name.to_string()));
            }
            if let Some(extensions) = extensions {
                offered.extend(extensions.tool_specs().iter().map(|s| s.name.to_string()));
            }
            return Err(CommandError::UnknownTools {
                names: unknown.join(", "),
                known: offered.join(", "),
            });
        }
        let bounded: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| Tool::from_name(n).is_some_and(|t| !self.inner.tool_selection.allows(t)))
            .collect();
        if !bounded.is_empty() {
            return Err(CommandError::ToolsNotAllowed(bounded.join(", ")));
        }
        let mut set: Vec<String> = Vec::with_capacity(names.len());
        for name in names {
            if !set.contains(&name) {
                set.push(name);
            }
        }
        {
            let mut state = self.state();
            if let Err(e) = state.session.append_active_tools(&set) {
                self.report_session_error(&e);
            }
            let model = state.model.clone();
            state.tools = self.tools_for(Some(set.into()), model.as_ref());
        }
        Ok(self.tools())
    }
}
