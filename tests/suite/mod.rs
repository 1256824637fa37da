//! The integration suite, one file per capability.

mod cli;
mod compaction;
mod crash;
mod export;
mod mock_llm;
mod nova_proc;
mod oneshot;
mod parity;
mod permission;
mod pi_client;
mod protocol;
mod providers;
mod run;
mod sandbox;
mod session_commands;
mod session_resume;
mod sessions;
mod skills;
mod tools;
mod tools_bash;
mod tools_files;
mod tools_images;
mod tools_search;
mod user_bash;
mod wire;
