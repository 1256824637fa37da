//! Where the agent's events go. The agent defines this seam and front ends plug into it (the
//! RPC writer, a one-shot printer, a test's in-memory list), so nothing in the core knows how
//! events reach a client.

use crate::protocol::Event;
use std::sync::Arc;

/// Receives every event the agent emits, in order. `emit` may block (the RPC writer does when
/// the client stops reading), which pauses the agent instead of buffering without limit.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event);
}

/// A shared sink, as the agent holds it.
pub type Sink = Arc<dyn EventSink>;
