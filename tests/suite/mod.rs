//! The integration suite, one file per capability.

mod mock_llm;
mod nova_proc;
mod providers;
mod wire;
