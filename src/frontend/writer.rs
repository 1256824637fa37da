//! The one owner of stdout, for every front end that writes lines there. Producers hand
//! [`Outbox`] their lines without ever waiting (an emit can happen while the agent holds its
//! state lock, and must not stall the runtime thread that every session shares); a writer
//! thread encodes them. What a line is, is the front end's: RPC writes responses and events,
//! JSON mode events, print mode the answer's text; each says how its lines encode, what they
//! weigh and which absorb one another ([`Line`]).
//!
//! **Batching.** The writer sleeps until something is queued and is woken only by the item
//! that finds it asleep, so a lone line goes out at once. After each write it waits
//! [`COALESCE`] before taking the next batch: while a reply streams, deltas leave in one
//! `write` per batch rather than one (plus a thread wake-up) per delta, which is most of what
//! streaming used to cost.
//!
//! **Backpressure.** The queue holds [`CAPACITY`] lines or [`CAPACITY_BYTES`] (by the lines'
//! [weight](Line::weight), counting those the writer has taken and not yet written) before
//! producers are asked to wait, which they do at their own await points ([`Outbox::ready`]: the
//! RPC loop before each command, a reply's stream before each chunk), never inside an emit.
//! While the queue is full a line that only restates one already waiting is folded into it
//! ([`Line::absorb`]): the replaced line is dropped unencoded. So a reader that stops reading
//! pauses the streams and the commands it sends, and the queue stays within its bounds plus
//! what one chunk or one command adds. Signals still end such a process: once the shutdown flag
//! is set nothing waits any more, and a full queue drops what it cannot take.
//!
//! **Memory.** The writer takes a batch of at most [`BATCH_LINES`] lines or [`BATCH_BYTES`] at
//! a time, so the rest stay queued where a newer snapshot can still replace them, and encodes
//! into one buffer of [`SPOOL`] bytes that goes out whenever it fills: a burst, or one line
//! carrying a whole conversation (`agent_end`, `get_messages`), passes through it in pieces and
//! never grows it.

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
/// Bytes queued (by weight) before producers are asked to wait: a line count alone would let
/// thousands of megabyte-long snapshots wait for a slow reader.
pub const CAPACITY_BYTES: usize = 4 * 1024 * 1024;
/// The most lines the writer takes from the queue at once.
const BATCH_LINES: usize = 1024;
/// The most bytes (by weight) the writer takes from the queue at once, unless one line alone
/// weighs more; a served connection's batch too.
pub const BATCH_BYTES: usize = 256 * 1024;
/// The writer's buffer: encoded lines gather in it and go out in one `write` when it fills or
/// the batch ends.
const SPOOL: usize = 64 * 1024;
/// Slots an idle queue keeps: a burst's thousands are given back once it has drained.
const IDLE_SLOTS: usize = 64;
/// How long the writer lets a burst gather after a write: the latency a streamed delta may gain,
/// against one `write` and one wake-up per delta.
const COALESCE: Duration = Duration::from_millis(1);
/// How often a producer waiting for room looks whether a signal arrived (signal handlers only
/// set a flag).
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

/// What a front end writes to stdout, one line per item.
pub trait Line: Send + 'static {
    /// Writes the line, without its newline, to `out`. An error is `out`'s, or the line's own
    /// when it cannot be encoded (which wire types never fail to be).
    fn encode(&self, out: &mut impl Write) -> std::io::Result<()>;

    /// About how many bytes the line takes once encoded: what the queue's byte bound counts.
    /// Asked as the line is queued, so it must cost a walk over the line's fields, not an
    /// encoding ([`crate::protocol::weigh`]).
    fn weight(&self) -> usize;

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
struct Queued<L> {
    item: Item<L>,
    /// The line's [`Line::weight`], as counted in [`Queue::bytes`].
    weight: usize,
}

#[derive(Debug)]
struct Queue<L> {
    items: VecDeque<Queued<L>>,
    /// The weight of the queued lines and of those the writer has taken but not yet written.
    bytes: usize,
    /// The writer waits for the next item (not merely pausing between batches): the item that
    /// finds it so must wake it.
    writer_asleep: bool,
    /// The writer has stopped (stdout is gone, or it was closed): items are dropped.
    writer_gone: bool,
}

impl<L> Queue<L> {
    fn full(&self) -> bool {
        self.items.len() >= CAPACITY || self.bytes >= CAPACITY_BYTES
    }
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
        self.push_item(Item::Close, 0);
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
        !queue.full() || queue.writer_gone || self.shared.shutting_down.load(Ordering::Relaxed)
    }

    /// Queues `line` without waiting.
    pub fn push(&self, line: L) {
        let weight = line.weight();
        self.push_item(Item::Line(line), weight);
    }

    fn push_item(&self, item: Item<L>, weight: usize) {
        let mut queue = self.shared.lock();
        if queue.writer_gone {
            // stdout is gone: there is no one left to tell.
            return;
        }
        let item = if queue.full() {
            if self.shared.shutting_down.load(Ordering::Relaxed) {
                return;
            }
            match absorb(&mut queue, item) {
                Some(item) => item,
                None => return,
            }
        } else {
            item
        };
        queue.bytes += weight;
        queue.items.push_back(Queued { item, weight });
        if queue.writer_asleep {
            queue.writer_asleep = false;
            self.shared.wake_writer.notify_one();
        }
    }
}

/// Folds `item` into a queued line it only restates (the queue's weight follows); returns it
/// when it must be queued after all.
fn absorb<L: Line>(queue: &mut Queue<L>, item: Item<L>) -> Option<Item<L>> {
    let Item::Line(mut line) = item else {
        return Some(item);
    };
    let Queue { items, bytes, .. } = queue;
    for queued in items.iter_mut().rev() {
        if let Item::Line(old) = &mut queued.item
            && old.absorb(&mut line)
        {
            let weight = old.weight();
            *bytes = *bytes - queued.weight + weight;
            queued.weight = weight;
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
            bytes: 0,
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

fn write_loop<L: Line, W: Write>(shared: &Shared<L>, out: W) {
    let mut spool = Spool::new(out);
    let mut batch = Vec::with_capacity(BATCH_LINES);
    loop {
        let mut taken = 0;
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
            while batch.len() < BATCH_LINES
                && (batch.is_empty() || taken < BATCH_BYTES)
                && let Some(queued) = queue.items.pop_front()
            {
                taken += queued.weight;
                batch.push(queued.item);
            }
            if queue.items.is_empty() && queue.items.capacity() > IDLE_SLOTS {
                queue.items.shrink_to(IDLE_SLOTS);
            }
        }
        let mut closing = false;
        for item in batch.drain(..) {
            match item {
                Item::Line(line) if !closing && spool.is_open() => spool.line(&line),
                Item::Line(_) => {}
                Item::Close => closing = true,
            }
        }
        spool.finish_batch();
        // What was taken no longer waits: producers held back by the byte bound may go on.
        shared.lock().bytes -= taken;
        shared.drained.notify_waiters();
        // stdout is gone (the reader closed the pipe): nothing more can be delivered.
        if !spool.is_open() || closing {
            return;
        }
        std::thread::sleep(COALESCE);
    }
}

/// The writer's one buffer in front of stdout. Lines gather in it up to [`SPOOL`] bytes; what
/// would overflow it first sends what it holds, and a piece bigger than it goes straight out,
/// so its capacity never grows past [`SPOOL`] however long a line or a burst is.
struct Spool<W> {
    out: W,
    buf: Vec<u8>,
    /// Where the line being encoded starts in `buf`, while none of it has gone out.
    line_start: Option<usize>,
    /// A write to `out` failed: nothing more can be delivered.
    broken: bool,
}

impl<W: Write> Spool<W> {
    fn new(out: W) -> Self {
        Spool {
            out,
            buf: Vec::with_capacity(SPOOL),
            line_start: None,
            broken: false,
        }
    }

    fn is_open(&self) -> bool {
        !self.broken
    }

    /// Encodes `line` and its newline.
    fn line<L: Line>(&mut self, line: &L) {
        self.line_start = Some(self.buf.len());
        let encoded = line.encode(self);
        if self.broken {
            return;
        }
        if let Err(e) = encoded {
            tracing::error!("a line could not be encoded and was left out: {e}");
            if let Some(start) = self.line_start {
                self.buf.truncate(start);
                return;
            }
            // Part of it is out already: end it, so the lines after it still parse.
        }
        let _ = self.write_all(b"\n");
    }

    /// Sends what the batch left in the buffer.
    fn finish_batch(&mut self) {
        if self.send().is_ok() && self.out.flush().is_err() {
            self.broken = true;
        }
    }

    fn send(&mut self) -> std::io::Result<()> {
        self.line_start = None;
        if self.broken {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        let sent = self.out.write_all(&self.buf);
        self.buf.clear();
        self.broken = sent.is_err();
        sent
    }
}

impl<W: Write> Write for Spool<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > SPOOL {
            self.send()?;
            if data.len() > SPOOL {
                let sent = self.out.write_all(data);
                self.broken = sent.is_err();
                sent?;
                return Ok(data.len());
            }
        }
        if self.broken {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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

    fn queue_update(texts: usize) -> Event {
        Event::QueueUpdate {
            steering: Vec::new(),
            follow_up: (0..texts).map(|_| Arc::from("q".repeat(1024))).collect(),
            pending_message_count: texts,
        }
    }

    #[tokio::test]
    async fn a_few_heavy_lines_fill_the_queue_and_newer_snapshots_replace_them() {
        let (outbox, _handle) = spawn::<Event, _>(Stalled);
        outbox.push(Event::TurnStart);
        std::thread::sleep(Duration::from_millis(50));
        // Snapshots of a growing queue, about 1 MB each: a handful reach the byte bound, far
        // below the line bound.
        let mut pushed = 0;
        while !outbox.shared.lock().full() {
            pushed += 1;
            outbox.push(queue_update(1000 + pushed));
        }
        assert!(pushed <= CAPACITY_BYTES / 1_000_000 + 1, "{pushed} lines");
        let waited = tokio::time::timeout(Duration::from_millis(100), outbox.ready()).await;
        assert!(waited.is_err(), "ready resolved past the byte bound");
        // From now on each newer snapshot takes the place of the newest queued one, and the
        // queue's weight follows it instead of growing.
        let before = outbox.shared.lock().bytes - queue_update(1000 + pushed).weight();
        for i in 0..100 {
            outbox.push(queue_update(2000 + i));
        }
        let queue = outbox.shared.lock();
        assert_eq!(queue.items.len(), pushed);
        let Some(Queued {
            item: Item::Line(Event::QueueUpdate { follow_up, .. }),
            weight,
        }) = queue.items.back()
        else {
            panic!("the newest line is not a snapshot");
        };
        assert_eq!(follow_up.len(), 2099);
        assert_eq!(queue.bytes, before + weight);
    }

    /// A line that writes `len` bytes in pieces of `piece`, then fails when `fail` says so.
    struct Long {
        len: usize,
        piece: usize,
        fail: bool,
    }
    impl Line for Long {
        fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
            let chunk = vec![b'x'; self.piece];
            for _ in 0..self.len / self.piece {
                out.write_all(&chunk)?;
            }
            if self.fail {
                return Err(std::io::Error::other("cannot encode"));
            }
            Ok(())
        }
        fn weight(&self) -> usize {
            self.len
        }
    }

    #[test]
    fn the_spool_never_grows_and_drops_a_line_that_fails_before_any_of_it_went_out() {
        let sink = Sink::default();
        let mut spool = Spool::new(sink.clone());
        let lines = [
            Long {
                len: 10 << 20,
                piece: 128,
                fail: false,
            },
            Long {
                len: 10 << 20,
                piece: 1 << 20,
                fail: false,
            },
            Long {
                len: 1000,
                piece: 10,
                fail: true,
            },
            Long {
                len: 3,
                piece: 1,
                fail: false,
            },
        ];
        for line in &lines {
            spool.line(line);
            assert_eq!(spool.buf.capacity(), SPOOL);
        }
        spool.finish_batch();
        let out = sink.0.lock().unwrap();
        assert_eq!(out.len(), 2 * ((10 << 20) + 1) + 4);
        assert!(out.ends_with(b"x\nxxx\n"));
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 3);
    }
}
