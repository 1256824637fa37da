//! ACP mode (`--mode acp`): the Agent Client Protocol that editors speak (Zed, JetBrains,
//! Neovim, Emacs), JSON-RPC 2.0 on stdin/stdout through the official `agent-client-protocol`
//! crate. Each `session/new` or `session/load` opens a session through the runtime of sessions,
//! for the cwd the editor names, with a [`sink::AcpSink`] that turns the agent's events into
//! `session/update` notifications; the runs, the permission gate and the session files are the
//! same as RPC mode's.
//!
//! A session with Pi extensions gets its own extension host, started before `session/new`
//! (or `load`, `resume`, `fork`) is answered, so that the extensions' commands are in the first
//! `available_commands_update` and a `/name args` prompt runs one (as RPC's `prompt` does).
//! Their dialogs are the editor's questions ([`dialog`]); a `notify` is a line of the agent's
//! message and an `extension_error` a thought (and a line on stderr), the two places an editor
//! shows what is not the model's reply; the status line, widgets and title are dropped.
//!
//! The crate's JSON-RPC layer reads lines from nova's own bounded record reader and writes
//! through the one stdout writer, so an oversized message costs at most the record limit and a
//! client that stops reading pauses the streams that feed it.
//!
//! The same connection also runs over other transports ([`serve_remote`]: `nova serve`'s
//! WebSocket, one message per frame), through the crate's [`Lines`] transport, which takes any
//! stream and sink of messages; there it is one client among others, confined by a [`Host`].

mod convert;
mod dialog;
mod server;
mod sink;

use crate::agent::Runtime;
use crate::frontend::reader::{MAX_RECORD, Record, RecordReader};
use crate::frontend::{self, Second, Signals, writer};
use agent_client_protocol::{
    Agent as AgentRole, Lines, on_receive_notification, on_receive_request,
};
pub use server::Host;
use server::Server;
use std::process::ExitCode;
use std::sync::Arc;

/// One JSON-RPC message as the crate encoded it.
struct Json(String);

impl writer::Line for Json {
    fn encode(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(self.0.as_bytes())
    }

    fn weight(&self) -> usize {
        self.0.len()
    }
}

type Outbox = frontend::Outbox<Json>;

/// Serves ACP on stdin and stdout until stdin closes or a signal arrives.
pub async fn run(runtime: Runtime) -> ExitCode {
    for warning in runtime.warnings() {
        frontend::note(&format!("warning: {warning}"));
    }
    let (out, writer) = frontend::writer::spawn::<Json, _>(std::io::stdout());
    let mut signals = match Signals::install(out.shutdown_flag(), Second::Notifies) {
        Ok(s) => s,
        Err(e) => return frontend::fatal(&format!("cannot install signal handlers: {e}")),
    };
    let server = Arc::new(Server::new(Arc::new(runtime), None, out.clone()));
    let connection = serve(
        server.clone(),
        Lines::new(outgoing(out.clone()), incoming()),
    );
    tokio::select! {
        result = connection => {
            if let Err(e) = result {
                tracing::debug!("the ACP connection ended: {e}");
            }
        }
        () = signals.recv() => {}
    }
    server.shutdown().await;
    frontend::close_writer(&out, writer).await;
    ExitCode::SUCCESS
}

/// One ACP connection of a process that serves other clients too (`nova serve`'s WebSocket):
/// each item of `incoming` is one JSON-RPC message, and each message nova sends is handed to
/// `frames`, until either side ends. The messages go through the same bounded writer as on
/// stdout (on a thread of the connection's own, handing them over one by one), so a client
/// that stops reading pauses the streams that feed it, as on stdio. When the connection ends,
/// the sessions it opened are closed, their files kept for `session/load`.
pub async fn serve_remote(
    runtime: Arc<Runtime>,
    host: Arc<dyn Host>,
    incoming: impl futures_util::Stream<Item = String> + Send + 'static,
    frames: tokio::sync::mpsc::Sender<String>,
) {
    let (out, writer) = frontend::writer::spawn::<Json, _>(Frames {
        to: frames,
        line: Vec::new(),
    });
    let server = Arc::new(Server::new(runtime, Some(host), out.clone()));
    let incoming = futures_util::StreamExt::map(incoming, Ok);
    if let Err(e) = serve(server.clone(), Lines::new(outgoing(out.clone()), incoming)).await {
        tracing::debug!("an ACP connection ended: {e}");
    }
    server.shutdown().await;
    frontend::close_writer(&out, writer).await;
}

/// The writer's output cut back into messages (the writer ends each with a newline, which
/// JSON text never holds unescaped), each handed to the connection's transport.
struct Frames {
    to: tokio::sync::mpsc::Sender<String>,
    line: Vec<u8>,
}

impl std::io::Write for Frames {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            let line = String::from_utf8(std::mem::take(&mut self.line))
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            // Waits while the transport is busy, as a write to a full pipe would; fails once
            // the connection is gone.
            self.to
                .blocking_send(line)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        }
        self.line.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Lines out through `out`, waiting while it is full.
fn outgoing(
    out: Outbox,
) -> impl futures_util::Sink<String, Error = std::io::Error> + Send + 'static {
    Box::pin(futures_util::sink::unfold(
        out,
        |out, line: String| async move {
            out.ready().await;
            out.push(Json(line));
            Ok::<_, std::io::Error>(out)
        },
    ))
}

/// Lines in from stdin through the bounded reader (on a plain thread: stdin has no useful async
/// form).
fn incoming() -> impl futures_util::Stream<Item = std::io::Result<String>> + Send + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel::<Record>(16);
    std::thread::spawn(move || {
        let mut reader = RecordReader::new(std::io::stdin().lock());
        while let Some(record) = reader.next_record() {
            if tx.blocking_send(record).is_err() {
                break;
            }
        }
    });
    futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            let line = match rx.recv().await? {
                Record::Line(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                Record::Line(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                // Not JSON, so the client gets the protocol's parse error for it.
                Record::Oversized { .. } => {
                    frontend::note(&format!(
                        "a message over the {} MiB limit was discarded",
                        MAX_RECORD >> 20
                    ));
                    "oversized".to_owned()
                }
            };
            return Some((Ok(line), rx));
        }
    })
}

async fn serve(
    server: Arc<Server>,
    transport: impl agent_client_protocol::ConnectTo<agent_client_protocol::Agent>,
) -> agent_client_protocol::Result<()> {
    use agent_client_protocol::v1::schema as acp;
    let s = server;
    AgentRole
        .v1()
        .name("nova")
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::InitializeRequest, responder, _cx| {
                    responder.respond(s.initialize(req))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::NewSessionRequest, responder, cx| {
                    s.new_session(req, responder, cx)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::LoadSessionRequest, responder, cx| {
                    s.load_session(req, responder, cx)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::ResumeSessionRequest, responder, cx| {
                    s.resume_session(req, responder, cx)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::ForkSessionRequest, responder, cx| {
                    s.fork_session(req, responder, cx)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::ListSessionsRequest, responder, cx| {
                    s.list_sessions(req, responder, cx)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::CloseSessionRequest, responder, cx| {
                    s.close_session(req, responder, cx)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::PromptRequest, responder, cx| s.prompt(req, responder, cx)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::SetSessionConfigOptionRequest, responder, _cx| {
                    responder.respond_with_result(s.set_config_option(req))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::SetSessionModeRequest, responder, _cx| {
                    responder.respond_with_result(s.set_mode(req))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = s.clone();
                async move |req: acp::AuthenticateRequest, responder, _cx| {
                    responder.respond_with_result(s.authenticate(req))
                }
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            {
                let s = s.clone();
                async move |note: acp::CancelNotification, _cx| {
                    s.cancel(&note.session_id);
                    Ok(())
                }
            },
            on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}
