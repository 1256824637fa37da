//! The one owner of stdout. Everything the client reads passes through [`Outbox`] to a thread
//! that writes one JSON line per item and flushes whenever the queue runs dry, so a burst of
//! deltas costs a few writes while a lone event still goes out at once.

use crate::protocol::{Event, Response};
use std::io::Write;
use std::sync::mpsc;
use std::thread::JoinHandle;

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
    tx: mpsc::Sender<Outgoing>,
}

impl Outbox {
    pub fn respond(&self, response: Response) {
        // A closed channel means the process is shutting down; there is no one left to tell.
        let _ = self.tx.send(Outgoing::Response(response));
    }

    pub fn emit(&self, event: Event) {
        let _ = self.tx.send(Outgoing::Event(event));
    }

    /// Asks the writer to flush and stop; join its handle to wait for that.
    pub fn close(&self) {
        let _ = self.tx.send(Outgoing::Close);
    }
}

/// Starts the writer thread. It ends when every [`Outbox`] clone is dropped, after writing all
/// that was queued; join the handle to be sure everything reached `out`.
pub fn spawn<W: Write + Send + 'static>(out: W) -> (Outbox, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || write_loop(rx, out));
    (Outbox { tx }, handle)
}

fn write_loop<W: Write>(rx: mpsc::Receiver<Outgoing>, out: W) {
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
    use std::sync::{Arc, Mutex};

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
}
