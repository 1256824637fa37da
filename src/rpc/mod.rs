//! The RPC mode: stdin records → commands → the agent; responses and events → one stdout writer.

pub mod dispatch;
pub mod images;
pub mod parse;
pub mod reader;
mod salvage;
pub mod writer;

use crate::agent::Agent;
use reader::{Record, RecordReader};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use writer::Outbox;

/// How long shutdown waits for an aborted run to emit its final events.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves commands from stdin until it closes or a SIGTERM/SIGINT arrives, then aborts any run
/// and returns once its final events are queued for the writer.
pub async fn serve(agent: Agent, out: Outbox) -> std::io::Result<()> {
    let (tx, mut records) = tokio::sync::mpsc::channel::<Record>(16);
    // Blocking reads on a plain thread: the reader's bounded buffer is what keeps a huge record
    // from ever being held in memory, and stdin has no useful async form.
    std::thread::spawn(move || {
        let mut reader = RecordReader::new(std::io::stdin().lock());
        while let Some(record) = reader.next_record() {
            if tx.blocking_send(record).is_err() {
                break;
            }
        }
    });
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            // A client that sends commands but reads nothing is not served further until it
            // reads: each command's response and events would only pile up.
            record = async { out.ready().await; records.recv().await } => match record {
                Some(Record::Line(line)) => dispatch::dispatch(&agent, &out, &line).await,
                Some(Record::Oversized { head }) => out.respond(dispatch::oversized_response(&head)),
                None => break,
            },
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, agent.abort()).await;
    Ok(())
}
