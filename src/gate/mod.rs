//! The permission gate: whether a call may run, may run after asking, or is refused.
//!
//! [`classify`] reads a bash command as bash will run it and says whether it is flagged; it
//! depends on nothing of nova but the glob engine, so it can be tested and fuzzed alone.

pub mod classify;
