//! The integration suite, one file per capability.

mod cli;
mod compaction;
mod crash;
mod export;
mod mcp;
mod mcp_faults;
mod mcp_servers;
mod mock_llm;
mod nova_proc;
mod permission;
mod protocol;
mod providers;
mod run;
mod session_commands;
mod session_resume;
mod sessions;
mod tools;
mod tools_bash;
mod tools_files;
mod tools_images;
mod tools_search;
mod wire;
