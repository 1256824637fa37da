//! Where a wire format writes its request body. Every wire format builds its body the same way
//! (a serde value borrowing the prepared conversation) and hands it to a [`BodyEncoder`]:
//!
//! - [`Buffer`]: the whole body in one buffer sized up front — every body below
//!   [`STREAMED_BODY_BYTES`], and every Bedrock body (its signature hashes the bytes);
//! - [`Writer`]: serialised through a writer, so the body is never whole in memory. A body
//!   above [`STREAMED_BODY_BYTES`] is written twice from the shared conversation: once into a
//!   [`Counter`] for its `Content-Length`, then into a [`ChunkSender`] that hands it to the HTTP
//!   client in small chunks as the socket takes them. Counting costs a second serialisation of
//!   a body that large (about as long as the first); holding it would cost a second copy of the
//!   conversation, which is what made a long conversation peak at 3× its size.

use super::{Request, prepare};
use bytes::Bytes;
use serde::Serialize;
use std::io::{self, Write};
use tokio::sync::mpsc;

/// Bodies expected above this are streamed rather than held (see the module docs). Below it
/// the second serialisation would cost more time than the copy costs memory.
pub const STREAMED_BODY_BYTES: usize = 32 << 20;

/// How much of a streamed body is handed over at a time.
const CHUNK_BYTES: usize = 64 * 1024;

/// Chunks a streamed body may have written ahead of the socket: the whole bound on what
/// streaming holds in memory.
pub const CHUNKS_AHEAD: usize = 4;

/// Writes a body that a wire format built from `prepared` for `req`.
pub trait BodyEncoder {
    type Output;
    fn encode(
        self,
        body: &impl Serialize,
        req: &Request,
        prepared: &[prepare::View],
    ) -> serde_json::Result<Self::Output>;
}

/// The body in one buffer, allocated once, for the content's size plus an eighth for escapes and
/// room for the JSON around each message: a buffer that grows moves the body each time, holding
/// it twice for a moment, while capacity never written to costs address space, not memory.
/// Content that needs more escaping than that still encodes correctly, with one move.
pub struct Buffer;

impl BodyEncoder for Buffer {
    type Output = Vec<u8>;

    fn encode(
        self,
        body: &impl Serialize,
        req: &Request,
        prepared: &[prepare::View],
    ) -> serde_json::Result<Vec<u8>> {
        const PER_MESSAGE: usize = 256;
        const FRAMING: usize = 64 * 1024;
        let content = prepare::content_len(prepared) + req.system_prompt.len();
        let tools: usize = req
            .tools
            .iter()
            .map(|t| prepare::value_len(&t.parameters))
            .sum();
        let capacity = content + content / 8 + tools + prepared.len() * PER_MESSAGE + FRAMING;
        let mut bytes = Vec::with_capacity(capacity);
        serde_json::to_writer(&mut bytes, body)?;
        Ok(bytes)
    }
}

/// The body serialised into a writer, which is handed back.
pub struct Writer<W>(pub W);

impl<W: Write> BodyEncoder for Writer<W> {
    type Output = W;

    fn encode(
        mut self,
        body: &impl Serialize,
        _req: &Request,
        _prepared: &[prepare::View],
    ) -> serde_json::Result<W> {
        serde_json::to_writer(&mut self.0, body)?;
        self.0.flush().map_err(serde_json::Error::io)?;
        Ok(self.0)
    }
}

/// Counts what is written and keeps none of it.
#[derive(Default)]
pub struct Counter(pub u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends what is written as chunks of [`CHUNK_BYTES`] over a bounded channel, waiting while the
/// receiver is [`CHUNKS_AHEAD`] behind. Runs on a blocking thread. A receiver that is gone (the
/// request failed or was cancelled) ends the writing with an error.
pub struct ChunkSender {
    chunk: Vec<u8>,
    to: mpsc::Sender<io::Result<Bytes>>,
}

impl ChunkSender {
    pub fn new(to: mpsc::Sender<io::Result<Bytes>>) -> Self {
        ChunkSender {
            chunk: Vec::with_capacity(CHUNK_BYTES),
            to,
        }
    }

    fn send_chunk(&mut self) -> io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK_BYTES));
        self.to
            .blocking_send(Ok(Bytes::from(full)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the request was dropped"))
    }
}

impl Write for ChunkSender {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = CHUNK_BYTES - self.chunk.len();
        let taken = buf.len().min(room);
        self.chunk.extend_from_slice(&buf[..taken]);
        if self.chunk.len() == CHUNK_BYTES {
            self.send_chunk()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_chunk()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn chunks_arrive_whole_and_in_order_and_a_dropped_receiver_stops_the_writer() {
        let (tx, mut rx) = mpsc::channel(CHUNKS_AHEAD);
        let data: Vec<u8> = (0..CHUNK_BYTES * 3 + 17).map(|i| (i % 251) as u8).collect();
        let expected = data.clone();
        let writer = std::thread::spawn(move || {
            let mut sender = ChunkSender::new(tx);
            for piece in data.chunks(1000) {
                sender.write_all(piece).unwrap();
            }
            sender.flush().unwrap();
        });
        let mut got = Vec::new();
        while let Some(chunk) = rx.blocking_recv() {
            let chunk = chunk.unwrap();
            assert!(chunk.len() <= CHUNK_BYTES);
            got.extend_from_slice(&chunk);
        }
        writer.join().unwrap();
        assert_eq!(got, expected);

        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let mut sender = ChunkSender::new(tx);
        let err = sender.write_all(&vec![0; CHUNK_BYTES]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn the_counter_counts_what_the_buffer_holds() {
        let body = serde_json::json!({"text": "a \"quoted\"\nline", "n": [1, 2, 3]});
        let mut counter = Counter::default();
        serde_json::to_writer(&mut counter, &body).unwrap();
        assert_eq!(counter.0, serde_json::to_vec(&body).unwrap().len() as u64);
    }
}
