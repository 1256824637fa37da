//! Long loops on the runtime's one thread. nova runs its tasks on a single thread, so a loop
//! that never awaits (a reply with a hundred thousand tool calls, its events, their results)
//! would keep every other task, `get_state` included, waiting until it ends; and since emitting
//! an event never waits, it would also queue its events without bound. Such a loop ticks a
//! [`Pacer`] once per step: every couple of milliseconds it waits until the events' receiver is
//! ready for more, then lets the other tasks run.

use std::time::{Duration, Instant};

/// How long a loop runs before it pauses.
const SLICE: Duration = Duration::from_millis(2);

pub struct Pacer {
    since: Instant,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer {
            since: Instant::now(),
        }
    }
}

impl Pacer {
    /// When the loop has run for a slice since it last paused: awaits `ready()` (the sink of
    /// what the loop emits), then yields to the runtime.
    pub async fn tick<F: Future<Output = ()>>(&mut self, ready: impl FnOnce() -> F) {
        if self.since.elapsed() >= SLICE {
            ready().await;
            tokio::task::yield_now().await;
            self.since = Instant::now();
        }
    }
}
