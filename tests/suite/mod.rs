//! The integration suite, one file per capability.

mod cli;
mod compaction;
mod crash;
mod export;
mod mock_llm;
mod nova_proc;
mod permission;
mod protocol;
mod providers;
mod run;
mod sandbox;
mod sessions;
mod tools;
mod wire;
