//! What RPC mode writes to stdout: responses and events, one JSON line each, through the one
//! [writer](crate::frontend::writer).

use crate::agent::port::Reply;
use crate::agent::{EventJson, EventSink};
use crate::frontend::{self, writer};
use crate::protocol::{Event, Response, weigh};
use std::io::Write;
use std::pin::Pin;

/// A line of RPC output.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "the queue is bounded, and most of its items are events"
)]
pub enum Line {
    Response(Response),
    Event(Event),
    /// An event encoded already, the same bytes the extension host gets.
    Json(EventJson),
}

impl writer::Line for Line {
    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Line::Response(r) => Ok(serde_json::to_writer(out, r)?),
            Line::Event(e) => e.encode(out),
            Line::Json(json) => out.write_all(json.as_bytes()),
        }
    }

    fn weight(&self) -> usize {
        match self {
            Line::Response(r) => weigh::json_len(r),
            Line::Event(e) => e.weight(),
            Line::Json(json) => json.len(),
        }
    }

    fn absorb(&mut self, newer: &mut Line) -> bool {
        match (self, newer) {
            (Line::Event(old), Line::Event(new)) => old.absorb(new),
            _ => false,
        }
    }
}

pub type Outbox = frontend::Outbox<Line>;

impl Reply for Outbox {
    fn respond(&self, response: Response) {
        self.push(Line::Response(response));
    }
}

impl EventSink for Outbox {
    fn emit(&self, event: Event) {
        self.push(Line::Event(event));
    }

    /// On stderr, as the startup warnings: a client may show it, a person running nova sees it.
    fn warn(&self, line: &str) {
        frontend::note(line);
    }

    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(frontend::Outbox::ready(self))
    }

    /// Every event but those a newer one may fold into while queued, which stay events.
    fn writes_json(&self, event: &Event) -> bool {
        !frontend::folds(event)
    }

    fn emit_json(&self, _: &Event, json: &EventJson) {
        self.push(Line::Json(json.clone()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;
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
        let (outbox, handle) = writer::spawn::<Line, _>(sink.clone());
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
    fn an_event_given_as_json_is_written_as_the_event_would_be() {
        let sink = Sink::default();
        let (outbox, handle) = writer::spawn::<Line, _>(sink.clone());
        let event = Event::SessionError {
            error: "a \"quoted\" line".into(),
        };
        assert!(outbox.writes_json(&event));
        let json = serde_json::to_string(&event).unwrap();
        outbox.emit_json(&event, &json.into());
        outbox.emit(event);
        outbox.close();
        handle.join().unwrap();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let (first, second) = text.split_once('\n').unwrap();
        assert_eq!(format!("{first}\n"), second);
        // A snapshot stays an event, which a newer one may replace while the queue is full.
        assert!(!outbox.writes_json(&Event::QueueUpdate {
            steering: Vec::new(),
            follow_up: Vec::new(),
            pending_message_count: 0,
        }));
    }
}
