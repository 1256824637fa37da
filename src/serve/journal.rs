//! A served session's stream, numbered. Every record the session sends its clients — its
//! events, and each command's response — gets the next sequence number (`seq`, from 1) and
//! stays in a ring of the last [`CAPACITY`] records, so a client that reconnects with the last
//! number it saw receives exactly what it missed, then the live stream, with nothing lost at the
//! seam (both are reads of this one ring). A response is for the client that sent the command
//! (its key), an event for every client.
//!
//! The ring is bounded twice, as RPC mode's queue is: by count ([`CAPACITY`]) and by bytes
//! ([`CAPACITY_BYTES`], each record weighed as the writer weighs a line, by
//! [`weigh::json_len`]), because a count alone lets a flood of big records (every `queue_update`
//! lists every queued text) hold hundreds of megabytes once they are encoded. The oldest records
//! go first, and the session remembers which bound dropped the last of them so that a client
//! asking for one can be told why.
//!
//! The ring is also every connection's queue: a connection only holds its place in it, so a
//! client that stops reading costs no memory and holds back no one, the run included. One whose
//! place has left the ring is told so by a [gap marker](gap_marker) and goes on from the oldest
//! record kept; the session itself never waits for a served client.
//! Records are not folded into one another here as the stdio writer folds snapshots: a number
//! must stay one record.

use crate::agent::EventSink;
use crate::frontend::writer::Line as _;
use crate::protocol::{Event, Response, weigh};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Records kept for replay: RPC mode's queue bound ([`crate::frontend::writer::CAPACITY`]).
pub const CAPACITY: usize = crate::frontend::writer::CAPACITY;
/// Bytes kept for replay, by the records' weight: RPC mode's queue bound too
/// ([`crate::frontend::writer::CAPACITY_BYTES`]). The newest record stays even when it alone
/// weighs more.
pub const CAPACITY_BYTES: usize = crate::frontend::writer::CAPACITY_BYTES;

/// Which bound dropped a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Records,
    Bytes,
}

/// Who a response is for: the key a client attaches with (`?client=`), or one made for a
/// connection that gave none.
pub type ClientKey = Arc<str>;

enum Body {
    Event(Event),
    Response { to: ClientKey, response: Response },
}

/// One numbered record.
pub struct Record {
    pub seq: u64,
    body: Body,
    /// About how many bytes the record takes once encoded ([`weigh::json_len`]): what the
    /// byte bound counts.
    pub weight: usize,
    /// The JSON line, encoded once by the first connection that sends it (off the emit, which
    /// runs with the agent's state locked).
    line: OnceLock<Option<String>>,
}

impl Record {
    fn is_for(&self, client: &ClientKey) -> bool {
        match &self.body {
            Body::Event(_) => true,
            Body::Response { to, .. } => to == client,
        }
    }

    /// The record as sent: nova's RPC record with `seq` beside its fields; `None` when it
    /// cannot be encoded (then it is skipped, as the stdio writer skips it).
    pub fn line(&self) -> Option<&str> {
        self.line
            .get_or_init(|| {
                let mut buf = Vec::new();
                let encoded = match &self.body {
                    Body::Event(e) => e.encode(&mut buf).is_ok(),
                    Body::Response { response, .. } => {
                        serde_json::to_writer(&mut buf, response).is_ok()
                    }
                };
                if !encoded || buf.pop() != Some(b'}') {
                    return None;
                }
                if buf.len() > 1 {
                    buf.push(b',');
                }
                buf.extend_from_slice(format!("\"seq\":{}}}", self.seq).as_bytes());
                String::from_utf8(buf).ok()
            })
            .as_deref()
    }
}

/// What a connection reads next.
pub enum Read {
    /// The records after the asked number that are for this client, in order (possibly none
    /// yet), and the number to read after next time.
    Records(Vec<Arc<Record>>, u64),
    /// The records after `after` up to `resumes_after` are no longer kept, dropped by
    /// `bound` (or, with none, `after` is past the newest: it was never this session's): the
    /// client must reload; reading goes on after `resumes_after`.
    Gap {
        after: u64,
        resumes_after: u64,
        bound: Option<Bound>,
    },
}

struct Ring {
    records: VecDeque<Arc<Record>>,
    /// The number the next record gets.
    next: u64,
    /// The weight of the records kept.
    bytes: usize,
    /// Which bound dropped the newest record that is gone (`None` while none is).
    dropped_by: Option<Bound>,
}

/// One served session's numbered records.
pub struct Journal {
    ring: Mutex<Ring>,
    /// The newest number, for connections waiting for more.
    newest: watch::Sender<u64>,
    /// Connections attached now.
    clients: AtomicUsize,
    /// Since when no connection has been attached (`None` while one is).
    unattended_since: Mutex<Option<Instant>>,
    /// Cancelled when the session closes: its connections end.
    closed: CancellationToken,
}

impl Default for Journal {
    fn default() -> Self {
        Journal {
            ring: Mutex::new(Ring {
                records: VecDeque::new(),
                next: 1,
                bytes: 0,
                dropped_by: None,
            }),
            newest: watch::Sender::new(0),
            clients: AtomicUsize::new(0),
            unattended_since: Mutex::new(Some(Instant::now())),
            closed: CancellationToken::new(),
        }
    }
}

impl Journal {
    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, body: Body) {
        // Weighed before the lock is taken (a walk over the record's fields); `seq` adds a
        // little.
        let weight = SEQ_WEIGHT
            + match &body {
                Body::Event(event) => weigh::json_len(event),
                Body::Response { response, .. } => weigh::json_len(response),
            };
        let newest = {
            let mut ring = self.ring();
            let seq = ring.next;
            ring.next += 1;
            ring.bytes += weight;
            ring.records.push_back(Arc::new(Record {
                seq,
                body,
                weight,
                line: OnceLock::new(),
            }));
            loop {
                let bound = if ring.records.len() > CAPACITY {
                    Bound::Records
                } else if ring.bytes > CAPACITY_BYTES && ring.records.len() > 1 {
                    Bound::Bytes
                } else {
                    break;
                };
                if let Some(dropped) = ring.records.pop_front() {
                    ring.bytes -= dropped.weight;
                    ring.dropped_by = Some(bound);
                }
            }
            seq
        };
        self.newest.send_replace(newest);
    }

    /// Keeps `response` for the client that sent its command.
    pub fn respond(&self, to: &ClientKey, response: Response) {
        self.push(Body::Response {
            to: to.clone(),
            response,
        });
    }

    /// The newest record's number (0 before the first).
    pub fn newest(&self) -> u64 {
        *self.newest.borrow()
    }

    /// A watcher of the newest number, for a connection waiting for more.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.newest.subscribe()
    }

    /// The records after number `after` for `client`: at most `max` of them, and no more than
    /// `max_bytes` by weight unless the first alone weighs more.
    pub fn read(&self, after: u64, client: &ClientKey, max: usize, max_bytes: usize) -> Read {
        let ring = self.ring();
        let oldest = ring.records.front().map_or(ring.next, |r| r.seq);
        let newest = ring.next - 1;
        if after > newest || after + 1 < oldest {
            return Read::Gap {
                after,
                resumes_after: oldest - 1,
                bound: if after > newest {
                    None
                } else {
                    ring.dropped_by
                },
            };
        }
        let start = usize::try_from(after + 1 - oldest).unwrap_or(usize::MAX);
        let mut records = Vec::new();
        let mut bytes = 0;
        let mut last = after;
        for record in ring.records.iter().skip(start) {
            if records.len() == max || (!records.is_empty() && bytes + record.weight > max_bytes) {
                break;
            }
            last = record.seq;
            if record.is_for(client) {
                bytes += record.weight;
                records.push(record.clone());
            }
        }
        Read::Records(records, last)
    }

    /// Whether a connection that has sent everything up to number `sent` is as far behind
    /// as the ring reaches: [`CAPACITY`] records, or its place has already left the ring (the
    /// byte bound can drop records sooner than the count does). Which bound it met, if any.
    pub fn lagging(&self, sent: u64) -> Option<Bound> {
        let ring = self.ring();
        let oldest = ring.records.front().map_or(ring.next, |r| r.seq);
        if (ring.next - 1).saturating_sub(sent) >= CAPACITY as u64 {
            Some(Bound::Records)
        } else if sent + 1 < oldest {
            ring.dropped_by
        } else {
            None
        }
    }

    /// Counts a connection for as long as the guard lives.
    pub fn attach(self: &Arc<Self>) -> Attached {
        let mut since = self.unattended();
        self.clients.fetch_add(1, Ordering::Relaxed);
        *since = None;
        Attached(self.clone())
    }

    fn unattended(&self) -> MutexGuard<'_, Option<Instant>> {
        self.unattended_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// How long the session has been without a client (`None` while one is attached).
    pub fn unattended_for(&self) -> Option<Duration> {
        self.unattended().map(|since| since.elapsed())
    }

    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// Ends every connection attached to the session (it is closing).
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Resolves once the session closes.
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }
}

/// A connection attached to a [`Journal`].
pub struct Attached(Arc<Journal>);

impl Drop for Attached {
    fn drop(&mut self) {
        let mut since = self.0.unattended();
        if self.0.clients.fetch_sub(1, Ordering::Relaxed) == 1 {
            *since = Some(Instant::now());
        }
    }
}

/// The session's subscriber: numbers and keeps every event, never waiting.
impl EventSink for Journal {
    fn emit(&self, event: Event) {
        self.push(Body::Event(event));
    }
}

/// What `seq` adds to a record's weight.
const SEQ_WEIGHT: usize = 16;

/// How a bound is named to a client: in the gap marker's `bound` and in error texts.
pub fn describe(bound: Bound) -> (&'static str, String) {
    match bound {
        Bound::Records => ("records", format!("its last {CAPACITY} records")),
        Bound::Bytes => (
            "bytes",
            format!("at most {} MiB of records", CAPACITY_BYTES >> 20),
        ),
    }
}

/// The record that tells a client the stream it asked for has a hole: nova's addition to the
/// RPC events, never numbered itself. `bound` is the one that dropped the records (`"records"`
/// or `"bytes"`), or `null` when the number was never this session's.
pub fn gap_marker(after: u64, resumes_after: u64, bound: Option<Bound>) -> String {
    let (name, why) = match bound.map(describe) {
        Some((name, keeps)) => (
            Some(name),
            format!(
                "the records after {after} up to {resumes_after} are no longer kept (a served \
                 session keeps {keeps})"
            ),
        ),
        None => (
            None,
            format!(
                "this session has not reached record {after} (was the number another \
                 server's?); its records after {resumes_after} follow"
            ),
        ),
    };
    serde_json::json!({
        "type": "replay_gap",
        "after": after,
        "resumesAfter": resumes_after,
        "bound": name,
        "error": format!("{why}; reload the conversation with get_messages"),
    })
    .to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn seqs(read: Read) -> (Vec<u64>, u64) {
        match read {
            Read::Records(records, last) => (records.iter().map(|r| r.seq).collect(), last),
            Read::Gap { .. } => panic!("a gap"),
        }
    }

    #[test]
    fn numbers_events_for_all_and_responses_for_their_sender() {
        let journal = Journal::default();
        let (a, b): (ClientKey, ClientKey) = ("a".into(), "b".into());
        journal.emit(Event::AgentStart);
        journal.respond(&a, Response::ok(Some("1".into()), "get_state", None));
        journal.emit(Event::TurnStart);
        assert_eq!(
            seqs(journal.read(0, &a, 100, usize::MAX)),
            (vec![1, 2, 3], 3)
        );
        assert_eq!(seqs(journal.read(0, &b, 100, usize::MAX)), (vec![1, 3], 3));
        // Another client's response is skipped, not counted against the batch.
        assert_eq!(seqs(journal.read(1, &b, 1, usize::MAX)), (vec![3], 3));
        assert_eq!(seqs(journal.read(3, &b, 100, usize::MAX)), (vec![], 3));
        let Read::Records(records, _) = journal.read(1, &a, 1, usize::MAX) else {
            panic!()
        };
        assert_eq!(
            records[0].line().unwrap(),
            r#"{"id":"1","type":"response","command":"get_state","success":true,"seq":2}"#
        );
        let Read::Records(records, _) = journal.read(0, &a, 1, usize::MAX) else {
            panic!()
        };
        assert_eq!(
            records[0].line().unwrap(),
            r#"{"type":"agent_start","seq":1}"#
        );
    }

    #[test]
    fn a_number_that_left_the_ring_or_never_was_is_a_gap() {
        let journal = Journal::default();
        let a: ClientKey = "a".into();
        for _ in 0..CAPACITY + 10 {
            journal.emit(Event::TurnStart);
        }
        assert_eq!(journal.newest(), (CAPACITY + 10) as u64);
        assert!(matches!(
            journal.read(5, &a, 10, usize::MAX),
            Read::Gap {
                after: 5,
                resumes_after: 10,
                bound: Some(Bound::Records)
            }
        ));
        assert_eq!(journal.lagging(5), Some(Bound::Records));
        assert_eq!(journal.lagging(10), Some(Bound::Records));
        assert_eq!(journal.lagging(11), None);
        assert_eq!(
            seqs(journal.read(10, &a, 2, usize::MAX)),
            (vec![11, 12], 12)
        );
        assert!(matches!(
            journal.read(1_000_000, &a, 10, usize::MAX),
            Read::Gap { bound: None, .. }
        ));
        let marker: serde_json::Value =
            serde_json::from_str(&gap_marker(5, 10, Some(Bound::Records))).unwrap();
        assert_eq!(marker["bound"], "records");
        assert!(marker["error"].as_str().unwrap().contains("4096 records"));
    }

    /// Big records are dropped by weight long before the count bound is reached: the ring
    /// never keeps much more than its bytes' worth, the newest record always stays, and a
    /// number that left it is a gap that says the byte bound dropped it.
    #[test]
    fn big_records_are_dropped_by_the_byte_bound() {
        let journal = Journal::default();
        let a: ClientKey = "a".into();
        let text: Arc<str> = "q".repeat(64 * 1024).into();
        // A queue_update listing n kilobyte-sized texts, as a follow_up flood makes them.
        let update = |n: usize| Event::QueueUpdate {
            steering: Vec::new(),
            follow_up: vec![text.clone(); n],
            pending_message_count: n,
        };
        for n in 1..=200 {
            journal.emit(update(n));
            let ring = journal.ring();
            assert!(ring.records.len() < CAPACITY);
            assert!(
                ring.bytes <= CAPACITY_BYTES || ring.records.len() == 1,
                "{} bytes in {} records",
                ring.bytes,
                ring.records.len()
            );
            assert_eq!(
                ring.bytes,
                ring.records.iter().map(|r| r.weight).sum::<usize>()
            );
        }
        // The newest (about 12.5 MiB alone) stays, with nothing beside it.
        assert_eq!(journal.ring().records.len(), 1);
        assert!(matches!(
            journal.read(0, &a, 10, usize::MAX),
            Read::Gap {
                after: 0,
                resumes_after: 199,
                bound: Some(Bound::Bytes)
            }
        ));
        assert_eq!(journal.lagging(150), Some(Bound::Bytes));
        assert_eq!(journal.lagging(199), None);
        assert_eq!(
            seqs(journal.read(199, &a, 10, usize::MAX)),
            (vec![200], 200)
        );
        let marker: serde_json::Value =
            serde_json::from_str(&gap_marker(0, 199, Some(Bound::Bytes))).unwrap();
        assert_eq!(marker["bound"], "bytes");
        assert!(marker["error"].as_str().unwrap().contains("4 MiB"));

        // Small records after it: the big one goes as soon as they need its room.
        for _ in 0..10 {
            journal.emit(Event::TurnStart);
        }
        assert_eq!(journal.ring().records.len(), 10);
        // A read stops at its byte budget, but always takes one record.
        let (got, last) = seqs(journal.read(200, &a, 100, 1));
        assert_eq!((got.len(), last), (1, 201));
    }
}
