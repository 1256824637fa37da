//! Where the agent's events go. The agent defines this seam and front ends plug into it (the
//! RPC writer, a one-shot printer, a test's in-memory list), so nothing in the core knows how
//! events reach a client.

use crate::protocol::Event;
use std::pin::Pin;
use std::sync::Arc;

/// Receives every event the agent emits, in order. `emit` never waits (it is called with the
/// agent's state locked, on the runtime thread every session shares); a sink that must bound its
/// memory says so through [`ready`](EventSink::ready), which the agent awaits between chunks of
/// a streamed reply, so a client that stops reading pauses its own session's stream.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event);

    /// A warning of this session, phrased as it reads after the program's name (see
    /// [`crate::warnings`]); by default a log line.
    fn warn(&self, line: &str) {
        tracing::warn!("{line}");
    }

    /// Resolves when the sink can take more; by default at once.
    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
}

/// A shared sink, as the agent holds it.
pub type Sink = Arc<dyn EventSink>;
