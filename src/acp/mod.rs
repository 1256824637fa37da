//! ACP mode (`--mode acp`): the Agent Client Protocol that editors speak (Zed, JetBrains,
//! Neovim, Emacs), JSON-RPC 2.0 on stdin/stdout through the official `agent-client-protocol`
//! crate. Each `session/new` or `session/load` opens a session through the runtime of sessions,
//! for the cwd the editor names, with a [`sink::AcpSink`] that turns the agent's events into
//! `session/update` notifications; the runs, the permission gate and the session files are the
//! same as RPC mode's.
//!
//! The crate's JSON-RPC layer reads lines from nova's own bounded record reader and writes
//! through the one stdout writer, so an oversized message costs at most the record limit and a
//! client that stops reading pauses the streams that feed it.

mod convert;
mod server;
mod sink;

use crate::agent::Runtime;
use crate::frontend::reader::{MAX_RECORD, Record, RecordReader};
use crate::frontend::{self, Second, Signals, writer};
use agent_client_protocol::{
    Agent as AgentRole, Lines, on_receive_notification, on_receive_request,
};
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
    let server = Arc::new(Server::new(runtime, out.clone()));
    let connection = serve(server.clone(), transport(out.clone()));
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

/// Lines in from stdin through the bounded reader (on a plain thread: stdin has no useful async
/// form), lines out through the stdout writer.
fn transport(
    out: Outbox,
) -> Lines<
    impl futures_util::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures_util::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Record>(16);
    std::thread::spawn(move || {
        let mut reader = RecordReader::new(std::io::stdin().lock());
        while let Some(record) = reader.next_record() {
            if tx.blocking_send(record).is_err() {
                break;
            }
        }
    });
    let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
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
    });
    let outgoing = futures_util::sink::unfold(out, |out, line: String| async move {
        out.ready().await;
        out.push(Json(line));
        Ok::<_, std::io::Error>(out)
    });
    Lines::new(Box::pin(outgoing), incoming)
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
