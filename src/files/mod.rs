//! Opening files safely, shared by every layer that reads or writes them: the file tools,
//! configuration and context files, MCP configs, session files and exports. Nothing here knows
//! who calls it.
//!
//! - [`safe_open`]: act on exactly the path that was checked, never through a symlink, and only
//!   on regular files.
//! - [`fs`]: file work off the async threads, bounded in time, and Node-style error texts.
//! - [`path`]: a model's or user's path made absolute.

pub mod fs;
pub mod path;
pub mod safe_open;
