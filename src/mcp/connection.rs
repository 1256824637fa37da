//! One live MCP session with a server, over stdio (a child process) or streamable HTTP, built on
//! the official SDK (`rmcp`): the handshake, the tool list, and the shutdown order the spec
//! asks for (close the connection, which closes a child's stdin, before any signal).

use super::McpError;
use super::config::{ServerConfig, Transport};
use super::process::{self, Process};
use crate::provider::http::SharedClient;
use crate::secret::{Prepare, resolve_all};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long a stopping server gets after its stdin closes, and again after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(1);

pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    process: Option<Process>,
}

/// Receives what the server announces on its own; nova only listens for tool list changes.
pub struct Handler {
    pub on_tools_changed: Arc<dyn Fn() + Send + Sync>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_tools_changed)();
    }

    fn get_info(&self) -> ClientConfig {
        // 2025-11-25 rather than the SDK's newest: servers then announce tool list changes
        // unprompted, where the newest version needs a subscription request first.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("nova", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// `env` or `headers` as the server gets them: a client's as it sent them, a file's with their
/// `${VAR}` and `!command` values resolved.
async fn values(
    config: &ServerConfig,
    pairs: &[(String, String)],
    prepare: Option<Prepare<'_>>,
    what: &'static str,
) -> Result<Vec<(String, String)>, McpError> {
    if config.literal_values() {
        return Ok(pairs.to_vec());
    }
    resolve_all(pairs, prepare)
        .await
        .map_err(|reason| McpError::Secret { what, reason })
}

/// Starts the server and lists its tools. The caller bounds the whole of it with the server's
/// timeout; dropping the future midway kills a child it started.
pub async fn connect(
    config: &ServerConfig,
    client: &SharedClient,
    handler: Handler,
) -> Result<(Connection, Vec<Tool>), McpError> {
    let isolation = config.isolation.as_ref();
    // A user's server runs its `!command` values where it runs itself.
    let shell = |shell: &mut tokio::process::Command| isolation.map_or(Ok(()), |i| i.shell(shell));
    let prepare: Option<Prepare> = isolation.is_some().then_some(&shell);
    let (service, process) = match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let env = values(config, env, prepare, "env").await?;
            let (process, pipes) = process::spawn(command, args, &env, cwd, isolation)?;
            let exited = process.exited();
            match handler.serve(pipes).await {
                Ok(service) => (service, Some(process)),
                Err(e) => {
                    // How the server ended says more than the broken pipe it left behind.
                    let reason = exit_reason(exited).await.unwrap_or_else(|| e.to_string());
                    process.stop(STOP_GRACE).await;
                    return Err(McpError::Handshake(reason));
                }
            }
        }
        Transport::Http { url, headers } => {
            let headers = values(config, headers, prepare, "header").await?;
            let mut custom = HashMap::new();
            for (name, value) in headers {
                let bad = |e: &dyn std::fmt::Display| McpError::BadHeader {
                    name: name.clone(),
                    reason: e.to_string(),
                };
                let name = HeaderName::try_from(name.as_str()).map_err(|e| bad(&e))?;
                let value = HeaderValue::try_from(value).map_err(|e| bad(&e))?;
                custom.insert(name, value);
            }
            let client = client
                .get()
                .map_err(|e| McpError::Client(e.to_string()))?
                .clone();
            let transport = StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom),
            );
            let service = handler
                .serve(transport)
                .await
                .map_err(|e| McpError::Handshake(e.to_string()))?;
            (service, None)
        }
    };
    let connection = Connection { service, process };
    let has_tools = connection
        .service
        .peer_info()
        .is_none_or(|info| info.capabilities.tools.is_some());
    let tools = if has_tools {
        match connection.service.list_all_tools().await {
            Ok(tools) => tools,
            Err(e) => {
                connection.stop().await;
                return Err(McpError::ListTools(e));
            }
        }
    } else {
        Vec::new()
    };
    Ok((connection, tools))
}

/// How a child that failed the handshake ended, if it did.
async fn exit_reason(mut exited: watch::Receiver<Option<String>>) -> Option<String> {
    let wait = exited.wait_for(Option::is_some);
    match tokio::time::timeout(STOP_GRACE, wait).await {
        Ok(Ok(said)) => said.clone(),
        _ => None,
    }
}

impl Connection {
    pub fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// Resolves with how a stdio server's process ended; never for HTTP.
    pub fn exited(&self) -> Option<watch::Receiver<Option<String>>> {
        self.process.as_ref().map(Process::exited)
    }

    /// Closes the session (a child's stdin with it), then stops the child's process group.
    pub async fn stop(mut self) {
        let _ = self.service.close_with_timeout(STOP_GRACE).await;
        if let Some(process) = self.process.take() {
            process.stop(STOP_GRACE).await;
        }
    }
}
