//! The one owner of stdout. Producers hand [`Outbox`] their responses and events without ever
//! waiting (an emit can happen while the agent holds its state lock, and must not stall the
//! runtime thread that every session shares); a writer thread turns them into JSON lines.
//!
//! **Batching.** The writer sleeps until something is queued and is woken only by the item
//! that finds it asleep, so a lone event goes out at once. After each write it waits
//! [`COALESCE`] before taking the next batch: while a reply streams, deltas leave in one
//! `write` per batch rather than one (plus a thread wake-up) per delta, which is most of what
//! streaming used to cost.
//!
//! **Backpressure.** The queue holds [`CAPACITY`] lines before producers are asked to wait,
//! which they do at their own await points ([`Outbox::ready`]: the RPC loop before each
//! command, a reply's stream before each chunk), never inside an emit. While the queue is full a
//! new progress snapshot of a tool call or of the queues replaces the one already waiting, and a
//! user `bash` command's output joins its queued delta. So a client that stops reading pauses
//! the streams and the commands it sends, and the queue stays within `CAPACITY` lines plus what
//! one chunk or one command adds. SIGTERM and SIGINT still end such a process: once either
//! arrives nothing waits any more, and a full queue drops what it cannot take.

use crate::agent::EventSink;
use crate::protocol::{Event, Response};
use std::collections::VecDeque;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Lines queued before producers are asked to wait. Big enough that a fast reader never makes
/// the agent wait, small enough that a stalled one holds little memory (events share their
/// messages).
pub const CAPACITY: usize = 4096;
/// How long the writer lets a burst gather after a write: the latency a streamed delta may gain,
/// against one `write` and one wake-up per delta.
const COALESCE: Duration = Duration::from_millis(1);
/// How often a producer waiting for room looks whether a signal arrived (signal handlers only
/// set a flag).
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "the queue is bounded, and most of its items are events"
)]
enum Outgoing {
    Response(Response),
    Event(Event),
    /// Write what came before, then stop, even if some task still holds an outbox.
    Close,
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Outgoing>,
    /// The writer waits for the next item (not merely pausing between batches): the item that
    /// finds it so must wake it.
    writer_asleep: bool,
    /// The writer has stopped (stdout is gone, or it was closed): items are dropped.
    writer_gone: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake_writer: Condvar,
    /// Producers waiting in [`Outbox::ready`] for the queue to drain.
    drained: tokio::sync::Notify,
    shutting_down: Arc<AtomicBool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A cheap, cloneable handle for sending lines to the client.
#[derive(Clone, Debug)]
pub struct Outbox {
    shared: Arc<Shared>,
}

impl Outbox {
    pub fn respond(&self, response: Response) {
        self.push(Outgoing::Response(response));
    }

    /// Asks the writer to flush and stop; join its handle to wait for that.
    pub fn close(&self) {
        self.push(Outgoing::Close);
    }

    /// The flag that, once set (by a signal), stops producers from waiting for the client.
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        self.shared.shutting_down.clone()
    }

    /// Resolves once the queue has room (at once when it has, or when nova is shutting down or
    /// stdout is gone). Producers await it between units of work, outside any lock.
    pub async fn ready(&self) {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            // Registered before looking, so a drain between the look and the await still wakes.
            drained.as_mut().enable();
            if self.has_room() {
                return;
            }
            let _ = tokio::time::timeout(SHUTDOWN_POLL, drained).await;
        }
    }

    fn has_room(&self) -> bool {
        let queue = self.shared.lock();
        queue.items.len() < CAPACITY
            || queue.writer_gone
            || self.shared.shutting_down.load(Ordering::Relaxed)
    }

    fn push(&self, item: Outgoing) {
        let mut queue = self.shared.lock();
        if queue.writer_gone {
            // stdout is gone: there is no one left to tell.
            return;
        }
        if queue.items.len() >= CAPACITY {
            if self.shared.shutting_down.load(Ordering::Relaxed) {
                return;
            }
            let item = match absorb(&mut queue.items, item) {
                Some(item) => item,
                None => return,
            };
            queue.items.push_back(item);
        } else {
            queue.items.push_back(item);
        }
        if queue.writer_asleep {
            queue.writer_asleep = false;
            self.shared.wake_writer.notify_one();
        }
    }
}

/// Folds `item` into what is queued when it only restates it: a newer progress snapshot of the
/// same tool call, a newer queue listing, more output of the same user `bash` command. Returns
/// the item when it must be queued after all.
fn absorb(items: &mut VecDeque<Outgoing>, item: Outgoing) -> Option<Outgoing> {
    let Outgoing::Event(event) = item else {
        return Some(item);
    };
    for queued in items.iter_mut().rev() {
        let Outgoing::Event(old) = queued else {
            continue;
        };
        match (&mut *old, &event) {
            (
                Event::ToolExecutionUpdate {
                    tool_call_id: a, ..
                },
                Event::ToolExecutionUpdate {
                    tool_call_id: b, ..
                },
            ) if a == b => {
                *old = event;
                return None;
            }
            (Event::QueueUpdate { .. }, Event::QueueUpdate { .. }) => {
                *old = event;
                return None;
            }
            (
                Event::BashExecutionUpdate { id: a, delta },
                Event::BashExecutionUpdate { id: b, delta: more },
            ) if a == b => {
                delta.push_str(more);
                return None;
            }
            _ => {}
        }
    }
    Some(Outgoing::Event(event))
}

impl EventSink for Outbox {
    fn emit(&self, event: Event) {
        self.push(Outgoing::Event(event));
    }

    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(Outbox::ready(self))
    }
}

/// Starts the writer thread. It ends after a [`Outbox::close`] or when stdout fails, having
/// written all that was queued before; join the handle to be sure everything reached `out`.
pub fn spawn<W: Write + Send + 'static>(out: W) -> (Outbox, JoinHandle<()>) {
    let shared = Arc::new(Shared::default());
    let writer = shared.clone();
    let handle = std::thread::spawn(move || {
        write_loop(&writer, out);
        writer.lock().writer_gone = true;
        writer.drained.notify_waiters();
    });
    (Outbox { shared }, handle)
}

fn write_loop<W: Write>(shared: &Shared, mut out: W) {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut batch = VecDeque::new();
    loop {
        {
            let mut queue = shared.lock();
            while queue.items.is_empty() {
                queue.writer_asleep = true;
                queue = shared
                    .wake_writer
                    .wait(queue)
                    .unwrap_or_else(|e| e.into_inner());
            }
            queue.writer_asleep = false;
            std::mem::swap(&mut queue.items, &mut batch);
        }
        shared.drained.notify_waiters();
        let mut closing = false;
        for item in batch.drain(..) {
            let written = match &item {
                Outgoing::Response(r) => serde_json::to_writer(&mut buf, r),
                Outgoing::Event(e) => serde_json::to_writer(&mut buf, e),
                Outgoing::Close => {
                    closing = true;
                    break;
                }
            };
            if written.is_ok() {
                buf.push(b'\n');
            }
        }
        // stdout is gone (the client closed the pipe): nothing more can be delivered.
        if out.write_all(&buf).and_then(|()| out.flush()).is_err() || closing {
            return;
        }
        buf.clear();
        std::thread::sleep(COALESCE);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::ToolResultPayload;
    use std::sync::atomic::AtomicUsize;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>, Arc<AtomicUsize>);
    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            self.1.fetch_add(1, Ordering::Relaxed);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_one_line_per_item_in_order() {
        let sink = Sink::default();
        let (outbox, handle) = spawn(sink.clone());
        outbox.emit(Event::AgentStart);
        outbox.respond(Response::ok(Some("1".into()), "get_state", None));
        outbox.close();
        handle.join().unwrap();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "{\"type\":\"agent_start\"}\n{\"id\":\"1\",\"type\":\"response\",\"command\":\"get_state\",\"success\":true}\n"
        );
    }

    #[test]
    fn a_burst_is_written_in_few_writes() {
        let sink = Sink::default();
        let (outbox, handle) = spawn(sink.clone());
        for _ in 0..20_000 {
            outbox.emit(Event::TurnStart);
        }
        outbox.close();
        handle.join().unwrap();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 20_000);
        let writes = sink.1.load(Ordering::Relaxed);
        assert!(writes < 100, "{writes} writes for one burst");
    }

    /// A writer that never finishes a write, like a client that stopped reading.
    struct Stalled;
    impl Write for Stalled {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            std::thread::park();
            Ok(0)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn update(id: &str, text: &str) -> Event {
        Event::ToolExecutionUpdate {
            tool_call_id: id.into(),
            tool_name: "bash".into(),
            args: serde_json::json!({}),
            partial_result: ToolResultPayload {
                content: Vec::new(),
                details: Some(serde_json::json!(text).into()),
            },
        }
    }

    #[tokio::test]
    async fn a_stalled_reader_never_blocks_an_emit_but_holds_back_ready() {
        let (outbox, _handle) = spawn(Stalled);
        outbox.emit(Event::TurnStart);
        // The writer takes that one and stalls in its write.
        std::thread::sleep(Duration::from_millis(50));
        for i in 0..CAPACITY * 2 {
            outbox.emit(Event::SessionError {
                error: i.to_string(),
            });
        }
        // Emitting did not wait; the queue grew past its mark, and `ready` now waits.
        assert_eq!(outbox.shared.lock().items.len(), CAPACITY * 2);
        let waited = tokio::time::timeout(Duration::from_millis(100), outbox.ready()).await;
        assert!(waited.is_err(), "ready resolved with a full queue");
        // While full, a snapshot replaces its predecessor instead of queueing.
        outbox.emit(update("call-1", "first"));
        outbox.emit(update("call-1", "second"));
        assert_eq!(outbox.shared.lock().items.len(), CAPACITY * 2 + 1);
        // A signal releases every waiter and stops the growth.
        outbox.shutdown_flag().store(true, Ordering::Relaxed);
        tokio::time::timeout(Duration::from_secs(1), outbox.ready())
            .await
            .unwrap();
        outbox.emit(Event::TurnStart);
        assert_eq!(outbox.shared.lock().items.len(), CAPACITY * 2 + 1);
    }
}
