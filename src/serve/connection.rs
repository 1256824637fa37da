//! One WebSocket client attached to a served session: it speaks nova's RPC, one record per
//! text frame. Commands are read and run in order through the session port, as on stdin; what
//! the client receives is the session's [journal](super::journal) read from its place, so the
//! client falls behind on its own and the session never waits for it. A command that arrives
//! while the client is as far behind as the journal reaches (its count or its bytes) is not
//! run: its response says the connection is overloaded and the command may be retried, and
//! reading goes on.

use super::frame;
use super::journal::{ClientKey, Journal, Read, describe, gap_marker};
use crate::agent::Live;
use crate::agent::port::{self, Reply};
use crate::frontend::parse::{Parsed, parse_record};
use crate::frontend::writer::BATCH_BYTES;
use crate::protocol::Response;
use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Records sent per batch before the socket is flushed (and at most [`BATCH_BYTES`] of them,
/// the stdio writer's batch, so a burst of big records is not copied out all at once).
const BATCH: usize = 256;

/// Responses go into the session's journal, addressed to the client that sent the command.
#[derive(Clone)]
struct ToJournal {
    journal: Arc<Journal>,
    client: ClientKey,
}

impl Reply for ToJournal {
    fn respond(&self, response: Response) {
        self.journal.respond(&self.client, response);
    }
}

/// Serves `socket` until the client leaves or the session closes; the client receives the
/// records after number `since`, then the live stream.
pub async fn serve(
    socket: WebSocket,
    live: Arc<Live>,
    journal: Arc<Journal>,
    client: ClientKey,
    since: u64,
) {
    let _attached = journal.attach();
    let (mut sender, mut receiver) = socket.split();
    let sent = AtomicU64::new(since);
    let reply = ToJournal {
        journal: journal.clone(),
        client: client.clone(),
    };
    let reader = async {
        loop {
            let message = match receiver.next().await {
                Some(Ok(message)) => message,
                Some(Err(e)) => return frame::refusal(e),
                None => return None,
            };
            let text = match message {
                Message::Text(text) => text,
                Message::Binary(_) => {
                    reply.respond(Response::error(
                        None,
                        "parse",
                        "a binary frame is not a record: send each command as one text frame",
                    ));
                    continue;
                }
                Message::Close(_) => return None,
                // Pings are answered by the library.
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            if let Some(refused) = frame::oversized(&text) {
                reply.respond(refused);
                continue;
            }
            match parse_record(text.as_bytes()) {
                Parsed::Blank => {}
                Parsed::Error(response) => reply.respond(response),
                Parsed::Command { id, name, command } => {
                    let place = sent.load(Ordering::Relaxed);
                    if let Some(bound) = journal.lagging(place) {
                        let behind = journal.newest().saturating_sub(place);
                        reply.respond(Response::error(
                            id,
                            name,
                            format!(
                                "overloaded: this connection is {behind} records behind, past \
                                 what the session keeps ({}); the command was not run and may \
                                 be retried once it has caught up",
                                describe(bound).1
                            ),
                        ));
                        continue;
                    }
                    port::execute(live.agent(), &reply, id, name, command).await;
                }
            }
        }
    };
    let writer = async {
        let mut newest = journal.watch();
        loop {
            newest.borrow_and_update();
            let after = sent.load(Ordering::Relaxed);
            let (lines, last) = match journal.read(after, &client, BATCH, BATCH_BYTES) {
                Read::Gap {
                    after,
                    resumes_after,
                    bound,
                } => (vec![gap_marker(after, resumes_after, bound)], resumes_after),
                Read::Records(records, last) => (
                    records
                        .iter()
                        .filter_map(|r| r.line().map(str::to_owned))
                        .collect(),
                    last,
                ),
            };
            let caught_up = last == after;
            for line in lines {
                if sender.feed(Message::Text(line.into())).await.is_err() {
                    return;
                }
            }
            if sender.flush().await.is_err() {
                return;
            }
            sent.store(last, Ordering::Relaxed);
            if caught_up {
                tokio::select! {
                    changed = newest.changed() => if changed.is_err() { return },
                    () = journal.closed() => {
                        let _ = sender.send(Message::Close(None)).await;
                        return;
                    }
                }
            }
        }
    };
    let refusal = tokio::select! {
        refusal = reader => refusal,
        () = writer => None,
    };
    if let Some(close) = refusal {
        let _ = sender.send(close).await;
    }
}
