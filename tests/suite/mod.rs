//! The integration suite, one file per capability.

mod mock_llm;
mod wire;
