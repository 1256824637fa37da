//! Where the agent's events go. The agent defines this seam and front ends plug into it (the
//! RPC writer, a one-shot printer, a test's in-memory list), so nothing in the core knows how
//! events reach a client. A started session's sink is a [`Fanout`]: any number of
//! subscribers (front-end connections, the extension host) come and go while it runs.

use crate::protocol::Event;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

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

    /// Whether the sink writes `event` out as its JSON, unchanged (stdout, the extension
    /// host): when two subscribers or more do, the [`Fanout`] encodes it once for them all and
    /// hands them the encoding ([`emit_json`](EventSink::emit_json)) instead of the event.
    fn writes_json(&self, event: &Event) -> bool {
        let _ = event;
        false
    }

    /// `event` with its JSON, for a sink whose [`writes_json`](EventSink::writes_json) said so.
    fn emit_json(&self, event: &Event, json: &EventJson) {
        let _ = json;
        self.emit(event.clone());
    }

    /// Whether the sink only looks at an event (to encode it, or to see whether it wants it)
    /// and keeps none: the [`Fanout`] then lends it each event ([`emit_ref`](EventSink::emit_ref))
    /// and hands the event itself to a subscriber that keeps it.
    fn borrows(&self) -> bool {
        false
    }

    /// `event`, lent, for a sink whose [`borrows`](EventSink::borrows) said so.
    fn emit_ref(&self, event: &Event) {
        self.emit(event.clone());
    }
}

/// An event's JSON (`serde_json`'s encoding of the [`Event`]), shared by the subscribers that
/// write it out as it is.
pub type EventJson = Arc<str>;

/// A shared sink, as the agent holds it.
pub type Sink = Arc<dyn EventSink>;

/// One session's subscribers. Each subscriber keeps its own bounded queue (its `emit` only
/// queues), so a slow one holds back no other; the session waits only for subscribers whose
/// `ready` says so. A stdio front end's writer does (it is the session's one client, and a
/// client that stops reading must pause the stream it cannot take), a served connection does
/// not (it falls behind on its own and catches up from the session's replay buffer). An event
/// that several subscribers write out as JSON is encoded once for them all
/// ([`EventSink::writes_json`]).
#[derive(Default)]
pub struct Fanout {
    subscribers: Mutex<Vec<(u64, Sink)>>,
    next_id: AtomicU64,
}

impl Fanout {
    fn subscribers(&self) -> MutexGuard<'_, Vec<(u64, Sink)>> {
        self.subscribers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `sink`; it receives every event emitted from now on, until the subscription drops.
    pub fn subscribe(self: &Arc<Self>, sink: Sink) -> Subscription {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.subscribers().push((id, sink));
        Subscription {
            fanout: Arc::downgrade(self),
            id,
        }
    }

    /// How many subscribers there are now.
    pub fn count(&self) -> usize {
        self.subscribers().len()
    }
}

impl EventSink for Fanout {
    fn emit(&self, event: Event) {
        let subscribers = self.subscribers();
        // A streamed token with extensions that handle it goes both to stdout and to the
        // host: one encoding serves both.
        let writers = subscribers
            .iter()
            .filter(|(_, sink)| sink.writes_json(&event))
            .count();
        let json = (writers > 1)
            .then(|| serde_json::to_string(&event).ok())
            .flatten()
            .map(EventJson::from);
        // Those that keep events take copies, the last of them the event itself: with one
        // subscriber (every stdio session), or one beside the extension host, which only
        // borrows, nothing is copied.
        let mut keeper: Option<&Sink> = None;
        for (_, sink) in subscribers.iter() {
            if let Some(json) = &json
                && sink.writes_json(&event)
            {
                sink.emit_json(&event, json);
            } else if sink.borrows() {
                sink.emit_ref(&event);
            } else if let Some(earlier) = keeper.replace(sink) {
                earlier.emit(event.clone());
            }
        }
        if let Some(keeper) = keeper {
            keeper.emit(event);
        }
    }

    /// Every subscriber decides where a warning goes; with none, it is logged.
    fn warn(&self, line: &str) {
        let subscribers = self.subscribers();
        if subscribers.is_empty() {
            tracing::warn!("{line}");
        }
        for (_, sink) in subscribers.iter() {
            sink.warn(line);
        }
    }

    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let subscribers: Vec<Sink> = self.subscribers().iter().map(|(_, s)| s.clone()).collect();
        Box::pin(async move {
            for sink in subscribers {
                sink.ready().await;
            }
        })
    }
}

/// A subscriber's place in a [`Fanout`]; dropping it unsubscribes.
pub struct Subscription {
    fanout: Weak<Fanout>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(fanout) = self.fanout.upgrade() {
            fanout.subscribers().retain(|(id, _)| *id != self.id);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Event>>);
    impl EventSink for Recorder {
        fn emit(&self, event: Event) {
            self.0.lock().unwrap().push(event);
        }
    }

    /// A subscriber that never has room, like a stdio client that stopped reading.
    struct Full;
    impl EventSink for Full {
        fn emit(&self, _: Event) {}
        fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn every_subscriber_gets_every_event_until_it_leaves() {
        let fanout = Arc::new(Fanout::default());
        let (a, b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        let _first = fanout.subscribe(a.clone());
        fanout.emit(Event::AgentStart);
        let second = fanout.subscribe(b.clone());
        fanout.emit(Event::TurnStart);
        assert_eq!(fanout.count(), 2);
        drop(second);
        fanout.emit(Event::AgentStart);
        assert_eq!(fanout.count(), 1);
        assert_eq!(a.0.lock().unwrap().len(), 3);
        assert_eq!(*b.0.lock().unwrap(), vec![Event::TurnStart]);
        // Subscribers that never wait leave the session free to stream.
        fanout.ready().await;
    }

    /// Looks at the events it is lent and keeps only their names, as the extension host
    /// encodes what it is lent.
    #[derive(Default)]
    struct Borrower(Mutex<Vec<&'static str>>);
    impl EventSink for Borrower {
        fn emit(&self, _: Event) {
            panic!("a borrowing subscriber is lent its events");
        }
        fn borrows(&self) -> bool {
            true
        }
        fn emit_ref(&self, event: &Event) {
            self.0.lock().unwrap().push(event.into());
        }
    }

    #[test]
    fn a_subscriber_that_borrows_is_lent_every_event_and_the_others_get_them() {
        let fanout = Arc::new(Fanout::default());
        let (a, b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        let borrower = Arc::new(Borrower::default());
        let _subscriptions = [
            fanout.subscribe(a.clone()),
            fanout.subscribe(b.clone()),
            fanout.subscribe(borrower.clone()),
        ];
        fanout.emit(Event::AgentStart);
        fanout.emit(Event::TurnStart);
        let both = vec![Event::AgentStart, Event::TurnStart];
        assert_eq!(*a.0.lock().unwrap(), both);
        assert_eq!(*b.0.lock().unwrap(), both);
        assert_eq!(*borrower.0.lock().unwrap(), ["agent_start", "turn_start"]);
    }

    /// Takes the JSON of the events it is given, as stdout and the extension host do.
    #[derive(Default)]
    struct Writer(Mutex<Vec<EventJson>>);
    impl EventSink for Writer {
        fn emit(&self, event: Event) {
            let json = serde_json::to_string(&event).unwrap();
            self.0.lock().unwrap().push(json.into());
        }
        fn writes_json(&self, event: &Event) -> bool {
            !matches!(event, Event::TurnStart)
        }
        fn emit_json(&self, _: &Event, json: &EventJson) {
            self.0.lock().unwrap().push(json.clone());
        }
    }

    #[test]
    fn subscribers_that_write_an_event_as_json_share_one_encoding() {
        let fanout = Arc::new(Fanout::default());
        let (a, b) = (Arc::new(Writer::default()), Arc::new(Writer::default()));
        let plain = Arc::new(Recorder::default());
        let _subscriptions = [
            fanout.subscribe(a.clone()),
            fanout.subscribe(plain.clone()),
            fanout.subscribe(b.clone()),
        ];
        let settled = Event::AgentSettled { aborted: false };
        fanout.emit(settled.clone());
        fanout.emit(Event::TurnStart);
        let (a, b) = (a.0.lock().unwrap(), b.0.lock().unwrap());
        assert_eq!(a.len(), 2);
        assert!(Arc::ptr_eq(&a[0], &b[0]));
        assert_eq!(&*a[0], serde_json::to_string(&settled).unwrap());
        // An event one of them does not write as is reaches each as before.
        assert!(!Arc::ptr_eq(&a[1], &b[1]));
        assert_eq!(a[1], b[1]);
        assert_eq!(*plain.0.lock().unwrap(), vec![settled, Event::TurnStart]);
    }

    #[tokio::test]
    async fn ready_waits_only_for_a_subscriber_that_asks_to_be_waited_for() {
        let fanout = Arc::new(Fanout::default());
        let _recorder = fanout.subscribe(Arc::new(Recorder::default()));
        let full = fanout.subscribe(Arc::new(Full));
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), fanout.ready()).await;
        assert!(waited.is_err());
        drop(full);
        fanout.ready().await;
    }
}
