//! LLM providers: each wire format is a pure state machine (`build_request` + an accumulator
//! that turns body bytes into [`ProviderEvent`]s) behind thin HTTP glue in [`http`].
//!
//! The agent sees only `ProviderEvent` deltas; it never sees provider bytes or JSON text.

pub mod error;
pub mod lines;

pub use error::ProviderError;

use crate::protocol::{Model, StopReason, Usage};
use serde_json::Value;

/// One normalised step of a streamed reply. Deltas carry no block boundaries; the agent's
/// assembler derives them.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    Text(String),
    Thinking(String),
    /// A fragment of tool call number `index` (0-based within the reply). `id` and `name` are set
    /// on the fragment that introduces them; `arguments` is a piece of the JSON argument text.
    ToolCall {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    Usage(Usage),
    Finish(StopReason),
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

/// The wire format a model is reached through (`api` in models.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Ollama,
    OpenAiCompletions,
}

impl Api {
    pub fn parse(s: &str) -> Option<Api> {
        match s {
            "ollama" => Some(Api::Ollama),
            "openai-completions" => Some(Api::OpenAiCompletions),
            _ => None,
        }
    }
}

/// Everything one request needs, with secrets already resolved.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub model: &'a Model,
    pub system_prompt: &'a str,
    pub messages: &'a [crate::protocol::Message],
    pub tools: &'a [ToolSpec],
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
}
