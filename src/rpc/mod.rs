//! The RPC mode, framing only: stdin records → typed commands → the session port
//! ([`crate::agent::port`]); responses and events → one stdout writer.

mod outbox;
pub use crate::frontend::{parse, reader};

pub use outbox::{Line, Outbox};

use crate::agent::port::{self, Reply as _};
use crate::agent::{Agent, Runtime};
use crate::frontend::{self, Second, Signals};
use parse::Parsed;
use reader::{Record, RecordReader};
use std::process::ExitCode;
use std::sync::Arc;

/// Opens the session the command line describes and serves it on stdin and stdout until stdin
/// closes or a signal arrives.
pub async fn run(runtime: Runtime) -> ExitCode {
    let prepared = match frontend::open_cli_session(&runtime, crate::exthost::Mode::Rpc).await {
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
    let extensions = frontend::extension_spec(&prepared, crate::exthost::Mode::Rpc);
    let (live, subscription) = runtime.live().open(prepared, Arc::new(out.clone()));
    let host = match extensions {
        Some(spec) => match frontend::start_extensions(spec, &live).await {
            Ok(host) => Some(host),
            Err(code) => {
                runtime.live().close_all().await;
                drop(subscription);
                frontend::close_writer(&out, writer).await;
                return code;
            }
        },
        None => None,
    };
    serve(live.agent().clone(), out.clone(), signals).await;
    // The extensions hear of the end (session_shutdown) before their host stops.
    runtime.live().close_all().await;
    drop(host);
    drop(subscription);
    frontend::close_writer(&out, writer).await;
    ExitCode::SUCCESS
}

/// Serves commands from stdin until it closes or a SIGTERM/SIGINT arrives; closing the live
/// session then aborts any run and waits (a bounded time) for its final events.
async fn serve(agent: Agent, out: Outbox, mut signals: Signals) {
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
                Some(Record::Line(line)) => match parse::parse_record(&line) {
                    Parsed::Blank => {}
                    Parsed::Error(response) => out.respond(response),
                    Parsed::Command { id, name, command } => {
                        port::execute(&agent, &out, id, name, command).await;
                    }
                },
                Some(Record::Oversized { head }) => out.respond(parse::oversized_response(&head)),
                None => break,
            },
            () = signals.recv() => break,
        }
    }
}
