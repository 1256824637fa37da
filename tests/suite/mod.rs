//! The integration suite, one file per capability.

mod mock_llm;
mod nova_proc;
mod protocol;
mod run;
mod wire;
