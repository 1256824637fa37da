//! nova: a coding agent that speaks Pi's RPC protocol (JSON lines on stdin/stdout).

pub mod protocol;
pub mod provider;
pub mod tools;
