//! Test support: a scripted LLM server speaking the real wire formats, a driver for the nova
//! binary over pipes, and independent mirror types for everything nova writes to stdout.
//!
//! A typical test:
//!
//! ```ignore
//! let mock = MockLlm::start();
//! mock.push(Reply::text("hello").text_chunks(3));
//! let mut nova = Nova::builder().ollama(&mock).spawn();
//! let events = nova.run_prompt("hi"); // prompt response … agent_settled
//! assert!(events.iter().any(|e| e["type"] == "agent_end"));
//! mock.assert_no_violations();
//! ```
//!
//! Mid-stream ordering (steer, abort) uses a [`mock_llm::Gate`]:
//! `Reply::text("abcd").text_chunks(4).gate_after(2, &gate)`, then `gate.wait_reached(..)`,
//! send the command, `gate.open()`. No sleeps.
#![allow(dead_code)]

pub mod big_png;
pub mod mcp;
pub mod mock_llm;
pub mod nova_proc;
pub mod schema;
pub mod wire;
