//! `nova attach`: stdin and stdout bridged to a served session's RPC WebSocket, so a program
//! that spawns `pi --mode rpc` (Pi's own `RpcClient`) drives a session inside `nova serve` by
//! spawning `nova attach …` instead. Records go through unchanged, one line per frame (those
//! nova sends keep their `seq`, which Pi's clients ignore); stdin is read by the same bounded
//! record reader as RPC mode's and stdout written by the one writer.
//!
//! When the connection drops (not closed by the server: broken), the bridge reattaches with
//! the last `seq` it wrote and the same client key, so the program on its stdin and stdout
//! gets exactly the records and responses it missed, once; it tries [`RETRIES`] times with a
//! growing wait, then says why on stderr and exits 1.

use super::auth::TOKEN_VAR;
use super::routes::SINCE_HEADER;
use crate::config::AttachArgs;
use crate::frontend::reader::{Record, RecordReader};
use crate::frontend::{self, writer};
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::process::ExitCode;
use std::time::Duration;
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

/// How many times in a row the bridge tries to reattach after the connection dropped.
const RETRIES: u32 = 6;
/// The wait before the first retry; it doubles after each, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Attaches to the session `args` names (opening it first with `--new`) and bridges until
/// stdin closes or the server ends the connection.
pub async fn run(args: AttachArgs) -> ExitCode {
    match bridge(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => frontend::fatal(&e),
    }
}

/// How one connection ended.
enum Ended {
    /// stdin closed, or the server closed the socket (the session closed, or the server is
    /// stopping): the bridge is done.
    Done,
    /// The connection broke without a close: the bridge reattaches.
    Dropped(String),
}

/// Where the bridge is in the session's stream, across connections.
#[derive(Default)]
struct Place {
    /// The last `seq` written to stdout (before the first, the number the server said the
    /// stream starts after): a reconnection asks for what follows it.
    seen: Option<u64>,
    /// A line whose frame could not be written (the connection had broken): it was never
    /// delivered, so it is sent first on the next connection.
    unsent: Option<String>,
}

async fn bridge(args: AttachArgs) -> Result<(), String> {
    let target = Target::parse(&args.target);
    let id = match args.session {
        Some(id) => id,
        None => open(&target, &args).await?,
    };
    // The same key on every connection, so the responses missed while reattaching are
    // replayed too.
    let client = uuid::Uuid::new_v4().to_string();

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
    let (mut ws, since) = connect(&target, &id, &client, None).await?;
    let mut place = Place {
        seen: since,
        unsent: None,
    };
    let outcome = loop {
        let why = match relay(ws, &mut stdin, &out, &mut place).await {
            Ended::Done => break Ok(()),
            Ended::Dropped(why) => why,
        };
        match reattach(&target, &id, &client, &place, &why).await {
            Ok((again, _)) => ws = again,
            Err(e) => break Err(e),
        }
    };
    frontend::close_writer(&out, writer).await;
    outcome
}

type Socket = tokio_tungstenite::WebSocketStream<Box<dyn Io>>;

/// Opens the session's RPC WebSocket, asking for the records after `since` (the live stream
/// without it); with the number the server says the stream starts after.
async fn connect(
    target: &Target,
    id: &str,
    client: &str,
    since: Option<u64>,
) -> Result<(Socket, Option<u64>), Attempt> {
    let since = since.map(|n| format!("&since={n}")).unwrap_or_default();
    let mut request = format!("ws://localhost/v1/sessions/{id}/rpc?client={client}{since}")
        .into_client_request()
        .map_err(|e| Attempt::Final(e.to_string()))?;
    if let Some(auth) = target.authorization()
        && let Ok(value) = auth.parse()
    {
        request.headers_mut().insert("authorization", value);
    }
    let io = target.connect().await.map_err(Attempt::Again)?;
    match tokio_tungstenite::client_async(request, io).await {
        Ok((ws, response)) => {
            let starts_after = response
                .headers()
                .get(SINCE_HEADER)
                .and_then(|v| v.to_str().ok()?.parse().ok());
            Ok((ws, starts_after))
        }
        // The server answered and refused (the session is not live, the token is wrong):
        // asking again would get the same answer.
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(Attempt::Final(format!(
            "cannot attach to session {id}: the server answered {}{}",
            response.status(),
            response
                .body()
                .as_deref()
                .map(|b| format!(": {}", String::from_utf8_lossy(b)))
                .unwrap_or_default()
        ))),
        Err(e) => Err(Attempt::Again(format!(
            "cannot attach to session {id}: {e}"
        ))),
    }
}

/// Why connecting failed: worth another try, or not.
enum Attempt {
    Again(String),
    Final(String),
}

impl From<Attempt> for String {
    fn from(attempt: Attempt) -> String {
        match attempt {
            Attempt::Again(e) | Attempt::Final(e) => e,
        }
    }
}

/// Connects again after the connection dropped, resuming after the last record seen, with
/// [`RETRIES`] tries and a growing wait between them.
async fn reattach(
    target: &Target,
    id: &str,
    client: &str,
    place: &Place,
    why: &str,
) -> Result<(Socket, Option<u64>), String> {
    let from = place.seen.map_or_else(
        || "the live stream".to_owned(),
        |n| format!("after seq {n}"),
    );
    frontend::note(&format!(
        "the connection to the server dropped ({why}); reattaching to session {id} {from}"
    ));
    let mut wait = FIRST_BACKOFF;
    let mut last = String::new();
    for _ in 0..RETRIES {
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_BACKOFF);
        match connect(target, id, client, place.seen).await {
            Ok(connected) => return Ok(connected),
            Err(Attempt::Final(e)) => return Err(e),
            Err(Attempt::Again(e)) => last = e,
        }
    }
    Err(format!(
        "lost the connection to session {id} and could not reattach after {RETRIES} tries: \
         {last}"
    ))
}

/// The `seq` the server put at the end of a record (`…,"seq":N}`); `None` for a record
/// without one (the gap marker).
fn seq_of(record: &str) -> Option<u64> {
    let digits = record.strip_suffix('}')?;
    let at = digits.rfind("\"seq\":")?;
    digits[at + 6..].parse().ok()
}

/// Bridges stdin and stdout over one connection until it ends.
async fn relay(
    ws: Socket,
    stdin: &mut tokio::sync::mpsc::Receiver<Record>,
    out: &writer::Outbox<Raw>,
    place: &mut Place,
) -> Ended {
    let (mut to_server, mut from_server) = ws.split();
    if let Some(text) = place.unsent.take()
        && let Err(e) = to_server.send(Message::Text(text.clone().into())).await
    {
        place.unsent = Some(text);
        return Ended::Dropped(e.to_string());
    }
    loop {
        tokio::select! {
            record = stdin.recv() => {
                let Some(record) = record else {
                    let _ = to_server.send(Message::Close(None)).await;
                    return Ended::Done;
                };
                let text = match record {
                    Record::Line(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    // The server answers a record it cannot parse with an error naming it.
                    Record::Oversized { .. } => "oversized".to_owned(),
                };
                if let Err(e) = to_server.send(Message::Text(text.clone().into())).await {
                    place.unsent = Some(text);
                    return Ended::Dropped(e.to_string());
                }
            }
            message = from_server.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    if let Some(seq) = seq_of(&text) {
                        place.seen = Some(seq);
                    }
                    out.ready().await;
                    out.push(Raw(text.to_string()));
                }
                Some(Ok(Message::Close(_))) => return Ended::Done,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Ended::Dropped(e.to_string()),
                None => return Ended::Dropped("the connection ended".to_owned()),
            },
        }
    }
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
