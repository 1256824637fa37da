//! The one owner of stdout, for every front end that writes lines there. Producers hand
//! [`Outbox`] their lines without ever waiting (an emit can happen while the agent holds its
//! state lock, and must not stall the runtime thread that every session shares); a writer
//! thread encodes them. What a line is, is the front end's: RPC writes responses and events,
//! JSON mode events, print mode the answer's text; each says how its lines encode and which
//! absorb one another ([`Line`]).
//!
//! **Batching.** The writer sleeps until something is queued and is woken only by the item
//! that finds it asleep, so a lone line goes out at once. After each write it waits
//! [`COALESCE`] before taking the next batch: while a reply streams, deltas leave in one
//! `write` per batch rather than one (plus a thread wake-up) per delta, which is most of what
//! streaming used to cost.
//!
//! **Backpressure.** The queue holds [`CAPACITY`] lines before producers are asked to wait,
//! which they do at their own await points ([`Outbox::ready`]: the RPC loop before each
//! command, a reply's stream before each chunk), never inside an emit. While the queue is full a
//! line that only restates one already waiting is folded into it ([`Line::absorb`]). So a reader
//! that stops reading pauses the streams and the commands it sends, and the queue stays within
//! `CAPACITY` lines plus what one chunk or one command adds. Signals still end such a process:
//! once the shutdown flag is set nothing waits any more, and a full queue drops what it cannot
//! take.

use std::collections::VecDeque;
use std::io::Write;
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

/// What a front end writes to stdout, one line per item.
pub trait Line: Send + 'static {
    /// Appends the line, without its newline, to `buf`; `false` when it cannot be encoded
    /// (then nothing of it is written).
    fn encode(&self, buf: &mut Vec<u8>) -> bool;

    /// Called while the queue is full, for the lines already queued, newest first: folds
    /// `newer` into `self` when it only restates it (a newer snapshot, more of the same
    /// output) and says so; `newer` is then dropped.
    fn absorb(&mut self, newer: &mut Self) -> bool {
        let _ = newer;
        false
    }
}

#[derive(Debug)]
enum Item<L> {
    Line(L),
    /// Write what came before, then stop, even if some task still holds an outbox.
    Close,
}

#[derive(Debug)]
struct Queue<L> {
    items: VecDeque<Item<L>>,
    /// The writer waits for the next item (not merely pausing between batches): the item that
    /// finds it so must wake it.
    writer_asleep: bool,
    /// The writer has stopped (stdout is gone, or it was closed): items are dropped.
    writer_gone: bool,
}

#[derive(Debug)]
struct Shared<L> {
    queue: Mutex<Queue<L>>,
    wake_writer: Condvar,
    /// Producers waiting in [`Outbox::ready`] for the queue to drain.
    drained: tokio::sync::Notify,
    shutting_down: Arc<AtomicBool>,
}

impl<L> Shared<L> {
    fn lock(&self) -> MutexGuard<'_, Queue<L>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A cheap, cloneable handle for sending lines to the reader.
#[derive(Debug)]
pub struct Outbox<L> {
    shared: Arc<Shared<L>>,
}

impl<L> Clone for Outbox<L> {
    fn clone(&self) -> Self {
        Outbox {
            shared: self.shared.clone(),
        }
    }
}

impl<L: Line> Outbox<L> {
    /// Asks the writer to flush and stop; join its handle to wait for that.
    pub fn close(&self) {
        self.push_item(Item::Close);
    }

    /// The flag that, once set (by a signal), stops producers from waiting for the reader.
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

    /// Queues `line` without waiting.
    pub fn push(&self, line: L) {
        self.push_item(Item::Line(line));
    }

    fn push_item(&self, item: Item<L>) {
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

/// Folds `item` into a queued line it only restates; returns it when it must be queued after
/// all.
fn absorb<L: Line>(items: &mut VecDeque<Item<L>>, item: Item<L>) -> Option<Item<L>> {
    let Item::Line(mut line) = item else {
        return Some(item);
    };
    for queued in items.iter_mut().rev() {
        if let Item::Line(old) = queued
            && old.absorb(&mut line)
        {
            return None;
        }
    }
    Some(Item::Line(line))
}

/// Starts the writer thread. It ends after a [`Outbox::close`] or when stdout fails, having
/// written all that was queued before; join the handle to be sure everything reached `out`.
pub fn spawn<L: Line, W: Write + Send + 'static>(out: W) -> (Outbox<L>, JoinHandle<()>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue {
            items: VecDeque::new(),
            writer_asleep: false,
            writer_gone: false,
        }),
        wake_writer: Condvar::new(),
        drained: tokio::sync::Notify::new(),
        shutting_down: Arc::default(),
    });
    let writer = shared.clone();
    let handle = std::thread::spawn(move || {
        write_loop(&writer, out);
        writer.lock().writer_gone = true;
        writer.drained.notify_waiters();
    });
    (Outbox { shared }, handle)
}

fn write_loop<L: Line, W: Write>(shared: &Shared<L>, mut out: W) {
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
            let Item::Line(line) = &item else {
                closing = true;
                break;
            };
            let start = buf.len();
            if line.encode(&mut buf) {
                buf.push(b'\n');
            } else {
                buf.truncate(start);
            }
        }
        // stdout is gone (the reader closed the pipe): nothing more can be delivered.
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
    use crate::protocol::{Event, ToolResultPayload};
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
    fn a_burst_is_written_in_few_writes() {
        let sink = Sink::default();
        let (outbox, handle) = spawn::<Event, _>(sink.clone());
        for _ in 0..20_000 {
            outbox.push(Event::TurnStart);
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
                structured_content: None,
            },
        }
    }

    #[tokio::test]
    async fn a_stalled_reader_never_blocks_an_emit_but_holds_back_ready() {
        let (outbox, _handle) = spawn::<Event, _>(Stalled);
        outbox.push(Event::TurnStart);
        // The writer takes that one and stalls in its write.
        std::thread::sleep(Duration::from_millis(50));
        for i in 0..CAPACITY * 2 {
            outbox.push(Event::SessionError {
                error: i.to_string(),
            });
        }
        // Emitting did not wait; the queue grew past its mark, and `ready` now waits.
        assert_eq!(outbox.shared.lock().items.len(), CAPACITY * 2);
        let waited = tokio::time::timeout(Duration::from_millis(100), outbox.ready()).await;
        assert!(waited.is_err(), "ready resolved with a full queue");
        // While full, a snapshot replaces its predecessor instead of queueing.
        outbox.push(update("call-1", "first"));
        outbox.push(update("call-1", "second"));
        assert_eq!(outbox.shared.lock().items.len(), CAPACITY * 2 + 1);
        // A signal releases every waiter and stops the growth.
        outbox.shutdown_flag().store(true, Ordering::Relaxed);
        tokio::time::timeout(Duration::from_secs(1), outbox.ready())
            .await
            .unwrap();
        outbox.push(Event::TurnStart);
        assert_eq!(outbox.shared.lock().items.len(), CAPACITY * 2 + 1);
    }
}
