//! `GET /metrics`: the server's figures in Prometheus' text format, for a scraper. What is a
//! state (sessions live, runs in flight, clients attached) is read from the server when it is
//! scraped; what accumulates (tokens, errors) is counted from every live session's events by a
//! [`Meter`] subscribed to it, so RPC and ACP sessions are counted alike.
//!
//! Built on prometheus-client, the Prometheus project's own Rust client: a registry, atomic
//! counters and gauges and the text encoder, with a few small dependencies and no HTTP server
//! of its own (axum serves the endpoint, behind the same access rules as the others).

use crate::agent::EventSink;
use crate::protocol::{Event, Message, StopReason};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// The `Content-Type` of what [`Metrics::render`] writes.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

const TOKEN_KINDS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];

/// A metric's one label: `kind`.
type Kind = [(&'static str, &'static str); 1];

/// The server's figures.
pub struct Metrics {
    registry: Registry,
    sessions: Gauge,
    runs: Gauge,
    clients: Gauge,
    tokens: Family<Kind, Counter>,
    errors: Family<Kind, Counter>,
}

/// The state figures, as the server sees them when scraped.
pub struct Now {
    pub sessions: usize,
    pub runs: usize,
    pub clients: usize,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("nova");
        let (sessions, runs, clients) = (Gauge::default(), Gauge::default(), Gauge::default());
        let (tokens, errors) = (Family::default(), Family::default());
        registry.register(
            "sessions_live",
            "Sessions open in this server",
            sessions.clone(),
        );
        registry.register("runs_active", "Sessions with a run in flight", runs.clone());
        registry.register(
            "clients_attached",
            "RPC WebSocket clients and ACP connections attached to live sessions",
            clients.clone(),
        );
        registry.register(
            "tokens",
            "Tokens the providers reported for this server's replies, by kind (input, output, \
             cache_read, cache_write)",
            tokens.clone(),
        );
        registry.register(
            "errors",
            "Errors by kind: run (a reply that ended in an error), session (a session file \
             that could not be written)",
            errors.clone(),
        );
        // Every series from the start, at 0, so a scraper sees them before the first count.
        for kind in TOKEN_KINDS {
            drop(tokens.get_or_create(&[("kind", kind)]));
        }
        for kind in ["run", "session"] {
            drop(errors.get_or_create(&[("kind", kind)]));
        }
        Metrics {
            registry,
            sessions,
            runs,
            clients,
            tokens,
            errors,
        }
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Metrics {
    /// The figures in Prometheus' text format, with `now`'s states.
    pub fn render(&self, now: &Now) -> String {
        self.sessions.set(to_i64(now.sessions));
        self.runs.set(to_i64(now.runs));
        self.clients.set(to_i64(now.clients));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_text::encode(&mut text, &self.registry);
        text
    }

    fn count(&self, event: &Event) {
        match event {
            Event::MessageEnd {
                message: Message::Assistant(reply),
            } => {
                let usage = &reply.usage;
                let counts = [
                    usage.input,
                    usage.output,
                    usage.cache_read,
                    usage.cache_write,
                ];
                for (kind, n) in TOKEN_KINDS.into_iter().zip(counts) {
                    self.tokens.get_or_create(&[("kind", kind)]).inc_by(n);
                }
                if reply.stop_reason == StopReason::Error {
                    self.errors.get_or_create(&[("kind", "run")]).inc();
                }
            }
            Event::SessionError { .. } => {
                self.errors.get_or_create(&[("kind", "session")]).inc();
            }
            _ => {}
        }
    }
}

/// Counts one live session's events into the server's [`Metrics`].
pub struct Meter(pub Arc<Metrics>);

impl EventSink for Meter {
    fn emit(&self, event: Event) {
        self.0.count(&event);
    }

    /// Warnings are for the session's other subscriber (its journal or its ACP connection),
    /// which every metered session has: logging them here too would say each twice.
    fn warn(&self, _line: &str) {}
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_states_and_the_counts() {
        let metrics = Arc::new(Metrics::default());
        let meter = Meter(metrics.clone());
        meter.emit(Event::SessionError {
            error: "disk full".into(),
        });
        meter.emit(Event::TurnStart);
        let text = metrics.render(&Now {
            sessions: 3,
            runs: 1,
            clients: 2,
        });
        for line in [
            "nova_sessions_live 3",
            "nova_runs_active 1",
            "nova_clients_attached 2",
            "nova_errors_total{kind=\"session\"} 1",
            "nova_errors_total{kind=\"run\"} 0",
            "nova_tokens_total{kind=\"input\"} 0",
            "# TYPE nova_tokens_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
}
