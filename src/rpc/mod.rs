//! The RPC mode: stdin records → commands → the agent; responses and events → one stdout writer.

pub mod dispatch;
pub mod images;
mod outbox;
pub mod parse;
pub use crate::frontend::reader;
mod salvage;

pub use outbox::{Line, Outbox};

use crate::agent::{Agent, Runtime};
use crate::frontend::{self, Second, Signals};
use reader::{Record, RecordReader};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// How long shutdown waits for an aborted run to emit its final events.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Opens the session the command line describes and serves it on stdin and stdout until stdin
/// closes or a signal arrives.
pub async fn run(runtime: Runtime) -> ExitCode {
    let prepared = match frontend::open_cli_session(&runtime) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let (out, writer) = frontend::writer::spawn(std::io::stdout());
    // Signals must also release producers waiting for a client that stopped reading (and a
    // writer that can no longer write): the outbox's flag makes them stop waiting.
    let signals = match Signals::install(out.shutdown_flag(), Second::Notifies) {
        Ok(s) => s,
        Err(e) => return frontend::fatal(&format!("cannot install signal handlers: {e}")),
    };
    let agent = prepared.start(Arc::new(out.clone()));
    serve(agent.clone(), out.clone(), signals).await;
    agent.shutdown().await;
    frontend::close_writer(&out, writer).await;
    ExitCode::SUCCESS
}

/// Serves commands from stdin until it closes or a SIGTERM/SIGINT arrives, then aborts any run
/// and returns once its final events are queued for the writer.
pub async fn serve(agent: Agent, out: Outbox, mut signals: Signals) {
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
    loop {
        tokio::select! {
            // A client that sends commands but reads nothing is not served further until it
            // reads: each command's response and events would only pile up.
            record = async { out.ready().await; records.recv().await } => match record {
                Some(Record::Line(line)) => dispatch::dispatch(&agent, &out, &line).await,
                Some(Record::Oversized { head }) => out.respond(dispatch::oversized_response(&head)),
                None => break,
            },
            () = signals.recv() => break,
        }
    }
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, agent.abort()).await;
}
