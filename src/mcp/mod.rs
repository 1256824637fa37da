//! nova as an MCP client: servers configured in `mcp.json` (Pi 1.6's shape, see [`config`]) run
//! over stdio or streamable HTTP through the official SDK (`rmcp`), and their tools are offered
//! to the model as `mcp__<server>__<tool>` beside the built-in ones.
//!
//! ```text
//! config::load ──▶ McpConfig ──Servers::start──▶ one background task per server
//!     connection::connect (process::spawn for stdio) ──▶ tools ──▶ names ──▶ ToolSpecs
//! agent turn ──Servers::specs──▶ request;  tool call ──rules──▶ Servers::call ──result──▶ ToolOutput
//! ```
//!
//! This module knows nothing of the agent or of a front end: the agent reads specs and makes
//! calls, and status changes reach it through the [`StatusFn`] it passes in.

pub mod config;
mod connection;
mod error;
mod isolate;
mod names;
mod process;
mod result;
pub mod rules;
mod servers;

pub use config::{ClientServer, ClientTransport};
pub use error::McpError;
pub use rules::{Rules, Verdict};
pub use servers::{ABORTED, McpConfig, Servers, StatusFn};
