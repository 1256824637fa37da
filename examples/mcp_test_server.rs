//! A stdio MCP server for nova's integration tests, built on the official SDK's server side. It
//! misbehaves on request, so the tests can check how nova copes with real faults.
//!
//! Flags: `--slow-start SECONDS` (sleep before answering anything), `--exit-at-start` (print to
//! stderr and exit 7 before the handshake). Tools: `echo {text}`, `slow {seconds}` (notices
//! cancellation), `hang` (never answers), `crash` (exits in the middle of the call), `huge
//! {lines}`, `picture` (text plus a PNG), `fail` (an `isError` result), `grow` (adds the tool
//! `extra` and announces the changed list), `extra`, `todos {todos}` (answers with the todo list
//! it is given as structured content, as a server that keeps one would).
//!
//! When `MCP_TEST_LOG` names a file, the start (with the working directory, and the value of each
//! variable `MCP_TEST_LOG_ENV` names, comma-separated), each call and each cancellation append a
//! line to it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ErrorData, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A 1×1 PNG.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";

#[derive(Clone, Default)]
struct Faulty {
    grown: Arc<AtomicBool>,
}

fn log(line: &str) {
    if let Ok(path) = std::env::var("MCP_TEST_LOG") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }
}

fn tool(name: &'static str, description: &'static str, properties: Value) -> Tool {
    let schema = json!({"type": "object", "properties": properties});
    let Value::Object(schema) = schema else {
        unreachable!()
    };
    Tool::new(name, description, schema)
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t)]).into())
}

impl ServerHandler for Faulty {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = vec![
            tool(
                "echo",
                "Echo the text back.",
                json!({"text": {"type": "string"}}),
            ),
            tool(
                "slow",
                "Answer after some seconds.",
                json!({"seconds": {"type": "number"}}),
            ),
            tool("hang", "Never answer.", json!({})),
            tool("crash", "Exit in the middle of the call.", json!({})),
            tool(
                "huge",
                "Return many lines.",
                json!({"lines": {"type": "integer"}}),
            ),
            tool("picture", "Return a text and a picture.", json!({})),
            tool("fail", "Report an error.", json!({})),
            tool("grow", "Add the tool `extra`.", json!({})),
            tool(
                "todos",
                "Keep a todo list.",
                json!({"todos": {"type": "array"}}),
            ),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(tool("extra", "Appears after grow.", json!({})));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        log(&format!(
            "call {} {}",
            request.name,
            Value::Object(args.clone())
        ));
        match request.name.as_ref() {
            "echo" => text(args.get("text").and_then(Value::as_str).unwrap_or_default()),
            "slow" => {
                let secs = args.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs_f64(secs)) => text("done slowly"),
                    () = context.ct.cancelled() => {
                        log("cancelled slow");
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
            "hang" => std::future::pending().await,
            "crash" => {
                eprintln!("crashing on purpose");
                std::process::exit(3);
            }
            "huge" => {
                let lines = args.get("lines").and_then(Value::as_u64).unwrap_or(10_000);
                text(
                    (1..=lines)
                        .map(|i| format!("line {i}\n"))
                        .collect::<String>(),
                )
            }
            "picture" => Ok(CallToolResult::success(vec![
                ContentBlock::text("a picture:"),
                ContentBlock::image(PIXEL, "image/png"),
            ])
            .into()),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("it failed")]).into()),
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                context.peer.notify_tool_list_changed().await.unwrap();
                text("grown")
            }
            "extra" => text("extra works"),
            "todos" => {
                let todos = args.get("todos").cloned().unwrap_or_default();
                Ok(CallToolResult::structured(json!({ "todos": todos })).into())
            }
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        log(&format!(
            "notification cancelled {:?}",
            notification.request_id
        ));
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--exit-at-start") {
        eprintln!("refusing to start");
        std::process::exit(7);
    }
    if let Some(i) = args.iter().position(|a| a == "--slow-start") {
        let secs: f64 = args[i + 1].parse().unwrap();
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    }
    log(&format!(
        "started pid {} pgid {}",
        std::process::id(),
        nix::unistd::getpgrp()
    ));
    log(&format!(
        "cwd {}",
        std::env::current_dir().unwrap().display()
    ));
    for name in std::env::var("MCP_TEST_LOG_ENV")
        .unwrap_or_default()
        .split(',')
    {
        if !name.is_empty() {
            log(&format!("env {name}={:?}", std::env::var(name).ok()));
        }
    }
    let service = Faulty::default()
        .serve(rmcp::transport::stdio())
        .await
        .expect("the handshake");
    let _ = service.waiting().await;
}
