//! Long loops on the runtime's one thread. nova runs its tasks on a single thread, so a loop
//! that never awaits (a reply with a hundred thousand tool calls, its events, their results)
//! would keep every other task, `get_state` included, waiting until it ends. Such a loop ticks
//! a [`Pacer`] once per step, which lets the other tasks run every couple of milliseconds.

use std::time::{Duration, Instant};

/// How long a loop runs before it lets the other tasks run.
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
    /// Yields to the runtime when the loop has run for a slice since it last did.
    pub async fn tick(&mut self) {
        if self.since.elapsed() >= SLICE {
            tokio::task::yield_now().await;
            self.since = Instant::now();
        }
    }
}
