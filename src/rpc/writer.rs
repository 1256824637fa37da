//! The one owner of stdout. Everything the client reads passes through [`Outbox`] to a thread
//! that writes one JSON line per item and flushes whenever the queue runs dry, so a burst of
//! deltas costs a few writes while a lone event still goes out at once.
//!
//! The queue is bounded: when the client stops reading, stdout's pipe fills, the writer blocks,
//! the queue fills and every producer waits in [`Outbox`], so a client that never reads pauses
//! nova instead of growing its memory. SIGTERM and SIGINT still end such a process: once either
//! arrives, a full queue drops what it cannot take rather than waiting for a reader that may
//! never come.

use crate::agent::EventSink;
use crate::protocol::{Event, Response};
use crossbeam_channel::{Receiver, SendTimeoutError, Sender};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Items queued for stdout at most. Big enough that a fast reader never makes the agent wait,
/// small enough that a stalled one holds little memory (events share their messages).
const CAPACITY: usize = 4096;
/// How often a producer waiting on a full queue looks whether nova is shutting down.
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
enum Outgoing {
    Response(Response),
    Event(Event),
    /// Write what came before, then stop, even if some task still holds an outbox.
    Close,
}

/// A cheap, cloneable handle for sending lines to the client.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: Sender<Outgoing>,
    shutting_down: Arc<AtomicBool>,
}

impl Outbox {
    pub fn respond(&self, response: Response) {
        self.send(Outgoing::Response(response));
    }

    /// Asks the writer to flush and stop; join its handle to wait for that.
    pub fn close(&self) {
        self.send(Outgoing::Close);
    }

    /// The flag that, once set (by a signal), stops producers waiting on a full queue.
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        self.shutting_down.clone()
    }

    fn send(&self, mut item: Outgoing) {
        if self.shutting_down.load(Ordering::Relaxed) {
            let _ = self.tx.try_send(item);
            return;
        }
        loop {
            match self.tx.send_timeout(item, SHUTDOWN_POLL) {
                // A disconnected writer means stdout is gone: there is no one left to tell.
                Ok(()) | Err(SendTimeoutError::Disconnected(_)) => return,
                Err(SendTimeoutError::Timeout(back)) => {
                    if self.shutting_down.load(Ordering::Relaxed) {
                        return;
                    }
                    item = back;
                }
            }
        }
    }
}

impl EventSink for Outbox {
    fn emit(&self, event: Event) {
        self.send(Outgoing::Event(event));
    }
}

/// Starts the writer thread. It ends when every [`Outbox`] clone is dropped, after writing all
/// that was queued; join the handle to be sure everything reached `out`.
pub fn spawn<W: Write + Send + 'static>(out: W) -> (Outbox, JoinHandle<()>) {
    let (tx, rx) = crossbeam_channel::bounded(CAPACITY);
    let handle = std::thread::spawn(move || write_loop(rx, out));
    let outbox = Outbox {
        tx,
        shutting_down: Arc::new(AtomicBool::new(false)),
    };
    (outbox, handle)
}

fn write_loop<W: Write>(rx: Receiver<Outgoing>, out: W) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(item) = next {
            let written = match &item {
                Outgoing::Response(r) => serde_json::to_writer(&mut out, r),
                Outgoing::Event(e) => serde_json::to_writer(&mut out, e),
                Outgoing::Close => {
                    let _ = out.flush();
                    return;
                }
            };
            if written.is_err() || out.write_all(b"\n").is_err() {
                // stdout is gone (client closed the pipe): nothing more can be delivered.
                return;
            }
            next = rx.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
    let _ = out.flush();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
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
        drop(outbox);
        handle.join().unwrap();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "{\"type\":\"agent_start\"}\n{\"id\":\"1\",\"type\":\"response\",\"command\":\"get_state\",\"success\":true}\n"
        );
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

    #[test]
    fn a_stalled_reader_blocks_producers_until_shutdown() {
        let (outbox, _handle) = spawn(Stalled);
        let producer = outbox.clone();
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = sent.clone();
        // 1 KB lines, so the writer's 64 KiB buffer holds few of them.
        let line = "x".repeat(1024);
        let thread = std::thread::spawn(move || {
            for _ in 0..CAPACITY * 2 {
                producer.emit(Event::SessionError {
                    error: line.clone(),
                });
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let before = sent.load(Ordering::Relaxed);
        // The queue and the writer's buffer hold what was taken: the producer waits.
        assert!(before <= CAPACITY + 64, "{before} items were taken");
        outbox.shutdown_flag().store(true, Ordering::Relaxed);
        thread.join().unwrap();
        assert_eq!(sent.load(Ordering::Relaxed), CAPACITY * 2);
    }
}
