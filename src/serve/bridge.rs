//! `nova attach`: stdin and stdout bridged to a served session's RPC WebSocket, so a program
//! that spawns `pi --mode rpc` (Pi's own `RpcClient`) drives a session inside `nova serve` by
//! spawning `nova attach …` instead. Records go through unchanged, one line per frame (those
//! nova sends keep their `seq`, which Pi's clients ignore); stdin is read by the same bounded
//! record reader as RPC mode's and stdout written by the one writer.

use super::auth::TOKEN_VAR;
use crate::config::AttachArgs;
use crate::frontend::reader::{Record, RecordReader};
use crate::frontend::{self, writer};
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::process::ExitCode;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A line as the server sent it.
struct Raw(String);

impl writer::Line for Raw {
    fn encode(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(self.0.as_bytes())
    }

    fn weight(&self) -> usize {
        self.0.len()
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Where the server listens.
enum Target {
    Unix(String),
    Tcp(String),
}

impl Target {
    fn parse(target: &str) -> Target {
        match target.strip_prefix("http://") {
            Some(at) => Target::Tcp(at.trim_end_matches('/').to_owned()),
            None => Target::Unix(target.to_owned()),
        }
    }

    async fn connect(&self) -> Result<Box<dyn Io>, String> {
        match self {
            Target::Unix(path) => tokio::net::UnixStream::connect(path)
                .await
                .map(|s| Box::new(s) as Box<dyn Io>)
                .map_err(|e| format!("cannot connect to {path}: {e}")),
            Target::Tcp(at) => tokio::net::TcpStream::connect(at)
                .await
                .map(|s| Box::new(s) as Box<dyn Io>)
                .map_err(|e| format!("cannot connect to {at}: {e}")),
        }
    }

    /// The bearer token a TCP server needs.
    fn authorization(&self) -> Option<String> {
        match self {
            Target::Unix(_) => None,
            Target::Tcp(_) => std::env::var(TOKEN_VAR)
                .ok()
                .filter(|t| !t.is_empty())
                .map(|t| format!("Bearer {t}")),
        }
    }
}

/// Attaches to the session `args` names (opening it first with `--new`) and bridges until
/// stdin closes or the server ends the connection.
pub async fn run(args: AttachArgs) -> ExitCode {
    match bridge(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => frontend::fatal(&e),
    }
}

async fn bridge(args: AttachArgs) -> Result<(), String> {
    let target = Target::parse(&args.target);
    let id = match args.session {
        Some(id) => id,
        None => open(&target, &args).await?,
    };
    let mut request = format!("ws://localhost/v1/sessions/{id}/rpc")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    if let Some(auth) = target.authorization()
        && let Ok(value) = auth.parse()
    {
        request.headers_mut().insert("authorization", value);
    }
    let io = target.connect().await?;
    let (ws, _) = tokio_tungstenite::client_async(request, io)
        .await
        .map_err(|e| format!("cannot attach to session {id}: {e}"))?;
    let (mut to_server, mut from_server) = ws.split();

    let (records, mut stdin) = tokio::sync::mpsc::channel::<Record>(16);
    // stdin has no useful async form: a plain thread reads it, as in RPC mode.
    std::thread::spawn(move || {
        let mut reader = RecordReader::new(std::io::stdin().lock());
        while let Some(record) = reader.next_record() {
            if records.blocking_send(record).is_err() {
                break;
            }
        }
    });
    let (out, writer) = writer::spawn::<Raw, _>(std::io::stdout());
    let upstream = async {
        while let Some(record) = stdin.recv().await {
            let text = match record {
                Record::Line(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                // The server answers a record it cannot parse with an error naming it.
                Record::Oversized { .. } => "oversized".to_owned(),
            };
            if to_server.send(Message::Text(text.into())).await.is_err() {
                return;
            }
        }
        let _ = to_server.send(Message::Close(None)).await;
    };
    let downstream = async {
        while let Some(Ok(message)) = from_server.next().await {
            match message {
                Message::Text(text) => {
                    out.ready().await;
                    out.push(Raw(text.to_string()));
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
    frontend::close_writer(&out, writer).await;
    Ok(())
}

/// `POST /v1/sessions` through hyper's client; the new session's id.
async fn open(target: &Target, args: &AttachArgs) -> Result<String, String> {
    let mut body = serde_json::json!({ "cwd": args.cwd });
    if let Some(model) = &args.model {
        body["model"] = serde_json::json!(model);
    }
    let io = target.connect().await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("cannot reach the server: {e}"))?;
    tokio::spawn(connection);
    let mut request = hyper::Request::post("/v1/sessions")
        .header("host", "localhost")
        .header("content-type", "application/json");
    if let Some(auth) = target.authorization() {
        request = request.header("authorization", auth);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("opening a session: {e}"))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("opening a session: {e}"))?
        .to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    match answer["id"].as_str() {
        Some(id) if status.is_success() => Ok(id.to_owned()),
        _ => Err(format!(
            "the server refused to open a session ({status}): {}",
            answer["error"].as_str().unwrap_or("no reason given")
        )),
    }
}
