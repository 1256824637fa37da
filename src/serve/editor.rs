//! ACP over a WebSocket (`GET /v1/acp`), for editors that reach nova remotely: one JSON-RPC
//! message per text frame, handed to the ACP front end's own connection ([`crate::acp`], the
//! official crate's JSON-RPC layer; the WebSocket is only its transport). Each connection is
//! one more client of the server's runtime: its sessions are in the live table beside the RPC
//! ones (listed, counted, closed at shutdown), opened only under `--root`, and closed, their
//! files kept, when the connection ends.

use super::{Server, frame};
use crate::frontend::reader::MAX_RECORD;
use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Messages on their way to the socket: the ACP writer's queue holds the rest, and a client
/// that stops reading makes that queue, and then the streams feeding it, wait.
const FRAMES_IN_FLIGHT: usize = 16;

impl crate::acp::Host for Server {
    fn admit(&self, cwd: &Path) -> Result<PathBuf, String> {
        if self.draining() {
            return Err("nova serve is shutting down: open the session on another server".into());
        }
        self.allowed_cwd(cwd).map_err(|refusal| refusal.1)
    }

    fn lists(&self, cwd: &Path) -> bool {
        self.under_roots(cwd)
    }

    fn opened(&self, id: &str) {
        *self.editors().entry(id.to_owned()).or_default() += 1;
        if let Some(live) = self.runtime.live().find(id) {
            self.meter(&live);
        }
    }

    fn closed(&self, id: &str) {
        let mut editors = self.editors();
        if let Some(count) = editors.get_mut(id) {
            *count -= 1;
            if *count == 0 {
                editors.remove(id);
                self.unmeter(id);
            }
        }
        drop(editors);
        // RPC clients attached to the session (through its id) are ended with it.
        if let Some(served) = self.journals().remove(id) {
            served.journal.close();
        }
    }
}

/// Serves one ACP client until it leaves or the server stops.
pub async fn serve(server: Arc<Server>, socket: WebSocket) {
    let (mut sender, receiver) = socket.split();
    let (frames, mut outgoing) = tokio::sync::mpsc::channel::<String>(FRAMES_IN_FLIGHT);
    let stopped = server.stopped.clone().cancelled_owned();
    // Set when reading ends on a frame past the ceiling: the close frame that says so.
    let refused = Arc::new(OnceLock::new());
    let incoming = futures_util::stream::unfold(
        (receiver, refused.clone()),
        |(mut receiver, refused)| async move {
            loop {
                let text = match receiver.next().await? {
                    // Not JSON, so the client gets the protocol's parse error for them.
                    Ok(Message::Text(text)) if text.len() > MAX_RECORD => "oversized".to_owned(),
                    Ok(Message::Binary(_)) => "a binary frame".to_owned(),
                    Ok(Message::Text(text)) => text.as_str().to_owned(),
                    // Pings are answered by the library.
                    Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                    Ok(Message::Close(_)) => return None,
                    Err(e) => {
                        if let Some(close) = frame::refusal(e) {
                            let _ = refused.set(close);
                        }
                        return None;
                    }
                };
                if !text.trim().is_empty() {
                    return Some((text, (receiver, refused)));
                }
            }
        },
    )
    .take_until(stopped);
    let forward = async move {
        while let Some(line) = outgoing.recv().await {
            if sender.send(Message::Text(line.into())).await.is_err() {
                return;
            }
        }
        let close = refused.get().cloned().unwrap_or(Message::Close(None));
        let _ = sender.send(close).await;
    };
    let host: Arc<dyn crate::acp::Host> = server.clone();
    let runtime = server.runtime.clone();
    tokio::join!(
        crate::acp::serve_remote(runtime, host, incoming, frames),
        forward
    );
}
