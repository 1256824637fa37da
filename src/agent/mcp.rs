//! The agent's side of MCP: servers start with the agent, their tools join each request's
//! specs, and a call to one goes through `permissions.mcp` (asking through the one permission
//! path, [`super::permission`]) before it reaches [`crate::mcp::Servers::call`].

use super::exec::{Call, Ran, Slot};
use super::permission::{self, Permission, Question, answered};
use super::toolset::Tools;
use super::{Agent, Sink};
use crate::mcp::{McpConfig, Servers, Verdict};
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

    /// The built-in tools' specs, then those of the MCP servers that are ready now and that the
    /// tool set offers, then the extensions' tools.
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
            .chain(mcp)
            .cloned()
            .chain(extensions.into_iter().flatten())
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
    let approval = match servers.verdict(name) {
        Verdict::Run => None,
        Verdict::Deny { rule } => {
            let not_done = format!("{name} was not called");
            let text = permission::blocked("permissions.mcp", &rule, &not_done);
            return Some(Slot::Done(ToolOutput::error(text)));
        }
        // MCP rules match names only, so no call is left unchecked; were one, it would ask.
        Verdict::Ask { reason } | Verdict::Unchecked { reason } => {
            match agent.ask_permission(Question {
                tool_call_id: call.0.clone(),
                tool_name: name.clone(),
                command: args.to_string(),
                reason,
                allow_rule: Some("permissions.mcp"),
            }) {
                Permission::Granted => None,
                Permission::Refused(text) => return Some(Slot::Done(ToolOutput::error(text))),
                Permission::Pending(answer) => Some(answer),
            }
        }
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
