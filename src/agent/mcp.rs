//! The agent's side of MCP: servers start with the agent, their tools join each request's
//! specs, and a call to one goes through the gate (its `permissions.mcp` rules, the session's
//! approval mode and remembered answers, [`crate::gate`]) before it reaches
//! [`crate::mcp::Servers::call`].

use super::exec::{Call, Ran, Slot};
use super::permission::{Permission, answered};
use super::toolset::Tools;
use super::{Agent, Sink};
use crate::gate::{Request, Source};
use crate::mcp::{McpConfig, Servers};
use crate::protocol::ToolSpec;
use crate::protocol::{Event, McpServer};
use crate::provider::http::SharedClient;
use crate::tools::ToolOutput;
use crate::warnings::Warnings;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Starts the configured servers in the background; `None` without any.
pub(super) fn start(
    config: McpConfig,
    client: &SharedClient,
    sink: &Sink,
    warnings: &Warnings,
) -> Option<Servers> {
    let sink = sink.clone();
    let on_status = Arc::new(move |server: McpServer| sink.emit(Event::McpServerStatus { server }));
    Servers::start(config, client.clone(), on_status, warnings.clone())
}

impl Agent {
    /// Every configured MCP server and its status (`get_mcp_servers`).
    pub fn mcp_servers(&self) -> Vec<McpServer> {
        self.inner
            .mcp
            .as_ref()
            .map(Servers::statuses)
            .unwrap_or_default()
    }

    /// Stops the MCP servers; nova calls it on its way out.
    pub async fn shutdown(&self) {
        if let Some(servers) = &self.inner.mcp {
            servers.shutdown().await;
        }
    }

    /// The first prompt waits for servers still starting (abort ends the wait).
    pub(super) async fn wait_for_mcp(&self, cancel: &CancellationToken) {
        if let Some(servers) = &self.inner.mcp {
            tokio::select! {
                () = servers.wait_for_startup() => {}
                () = cancel.cancelled() => {}
            }
        }
    }

    /// The built-in tools' specs (less those an extension tool replaces), then those of the MCP
    /// servers that are ready now and that the tool set offers, then the extensions' tools it
    /// offers.
    pub(super) fn tool_specs(&self, tools: &Tools) -> Arc<[ToolSpec]> {
        let extensions = self.extensions().map(|e| e.tool_specs());
        if self.inner.mcp.is_none() && extensions.is_none() {
            return tools.specs.clone();
        }
        let mcp = self.inner.mcp.as_ref().map(|s| s.specs());
        let mcp = mcp
            .iter()
            .flat_map(|specs| specs.iter())
            .filter(|s| tools.offers_mcp(&s.name));
        tools
            .specs
            .iter()
            .filter(|s| !super::extensions::has_tool_named(extensions.as_deref(), &s.name))
            .chain(mcp)
            .chain(
                extensions
                    .iter()
                    .flatten()
                    .filter(|s| tools.offers_extension(&s.name)),
            )
            .cloned()
            .collect()
    }
}

/// A slot for a call to an MCP tool, or `None` when `call` names none.
pub(super) fn prepare(agent: &Agent, cancel: &CancellationToken, call: &Call) -> Option<Slot> {
    let servers = agent.inner.mcp.as_ref()?;
    let (_, name, args) = call;
    if !servers.knows(name) {
        return None;
    }
    let request = Request::Tool {
        source: Source::Mcp,
        name,
        args: &args.to_string(),
        rules: servers.verdict(name),
    };
    let approval = match agent.gate(&request, &call.0, name, &format!("{name} was not called")) {
        Permission::Granted => None,
        Permission::Refused(text) => return Some(Slot::Done(ToolOutput::error(text))),
        Permission::Pending(answer) => Some(answer),
    };
    let (servers, cancel, name, args) = (
        servers.clone(),
        cancel.child_token(),
        name.clone(),
        args.clone(),
    );
    Some(Slot::Running(tokio::spawn(async move {
        if let Some(answer) = approval
            && let Err(refused) = answered(answer, &cancel, crate::mcp::ABORTED).await
        {
            return Ran::not_run(refused);
        }
        Ran::timed(servers.call(&name, args, &cancel)).await
    })))
}
