//! nova: a coding agent that speaks Pi's RPC protocol (JSON lines on stdin/stdout).
//!
//! ```text
//! stdin line ──frontend::reader──▶ frontend::parse ──▶ protocol::Command ──agent::port──▶ agent::Agent
//!    agent run ──provider::http::stream──▶ ProviderEvent (parsed from NDJSON / SSE bodies)
//!    agent run ──tools::Tool::execute──▶ ToolOutput (one task per call)
//!    agent emits protocol::Event ──agent::Fanout──▶ each subscriber's queue (RPC: frontend::Outbox
//!    ──▶ the stdout thread ──▶ stdout line)
//! ```
//!
//! `agent::Runtime` is built once per process, prepares each session for its cwd and keeps the
//! table of live sessions; a front end opens a session there with its first subscriber.
//! Commands arrive as `protocol::Command` and run through the session port (`agent::port`,
//! Pi's command table, answering through a small reply trait), the model speaks through
//! `provider::ProviderEvent`, and everything the client sees is a `protocol::Response` or
//! `protocol::Event`. `print` is another front end: prompts from the command line in, the
//! answer or the same events out; `acp` the third, the Agent Client Protocol for editors. Front
//! ends only frame: what they share (the stdin record reader, the stdout writer, the signal
//! setup) is in `frontend`, which none of them owns.

pub mod acp;
pub mod agent;
pub mod attach;
pub mod auth_command;
pub mod commands;
pub mod config;
pub mod context;
pub mod export;
pub mod exthost;
pub mod files;
pub mod frontend;
pub mod gate;
pub mod glob;
pub mod import;
pub mod login;
pub mod mcp;
pub mod pace;
pub mod package_command;
pub mod print;
pub mod protocol;
pub mod provider;
pub mod rpc;
pub mod sandbox;
#[cfg(feature = "schema")]
pub mod schema;
pub mod secret;
pub mod serve;
pub mod session;
pub mod tools;
pub mod update;
pub mod warnings;
