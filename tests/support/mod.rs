//! Test support: a scripted LLM server speaking the real wire formats, a driver for the nova
//! binary over pipes, and independent mirror types for everything nova writes to stdout.
#![allow(dead_code)]

pub mod mock_llm;
pub mod nova_proc;
pub mod wire;
