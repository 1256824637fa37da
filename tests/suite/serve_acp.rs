//! ACP over `nova serve`'s WebSocket (`GET /v1/acp`), driven by the client side of the official
//! `agent-client-protocol` crate over a real socket: the crate's `Lines` transport carries one
//! JSON-RPC message per text frame.

use super::serve::{Served, WAIT, connect, serve};
use crate::support::mock_llm::{MockLlm, Reply};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Agent, Client, Lines};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_tungstenite::client_async;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

/// An ACP client connected to `/v1/acp`, and every `session/update` it received.
struct Editor {
    cx: ConnectionTo<Agent>,
    updates: Arc<Mutex<Vec<acp::SessionNotification>>>,
    stop: tokio::sync::oneshot::Sender<()>,
    ended: tokio::task::JoinHandle<()>,
}

/// The WebSocket upgrade to `/v1/acp` with `token` (if any), as the server answers it.
async fn upgrade(
    served: &Served,
    token: Option<&str>,
) -> Result<tokio_tungstenite::WebSocketStream<Box<dyn super::serve::Io>>, tungstenite::Error> {
    let mut request = "ws://localhost/v1/acp".into_client_request().unwrap();
    if let Some(t) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let io = connect(&served.addr).await;
    client_async(request, io).await.map(|(ws, _)| ws)
}

impl Editor {
    async fn connect(served: &Served) -> Editor {
        let ws = upgrade(served, served.token.as_deref()).await.unwrap();
        let (to_server, from_server) = ws.split();
        let outgoing = to_server
            .with(|line: String| {
                futures_util::future::ready(Ok::<_, tungstenite::Error>(Message::Text(line.into())))
            })
            .sink_map_err(std::io::Error::other);
        let incoming = from_server.filter_map(|message| {
            futures_util::future::ready(match message {
                Ok(Message::Text(text)) => Some(Ok(text.to_string())),
                Ok(_) => None,
                Err(e) => Some(Err(std::io::Error::other(e))),
            })
        });
        let transport = Lines::new(Box::pin(outgoing), Box::pin(incoming));
        let updates: Arc<Mutex<Vec<acp::SessionNotification>>> = Arc::default();
        let seen = updates.clone();
        let (cx_tx, cx_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let ended = tokio::spawn(async move {
            let _ = Client
                .v1()
                .on_receive_notification(
                    async move |n: acp::SessionNotification, _cx| {
                        seen.lock().unwrap().push(n);
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                    let _ = cx_tx.send(cx);
                    let _ = stopped.await;
                    Ok(())
                })
                .await;
        });
        let cx = cx_rx.await.unwrap();
        let init = cx
            .send_request(acp::InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await
            .unwrap();
        assert_eq!(init.protocol_version, ProtocolVersion::V1);
        Editor {
            cx,
            updates,
            stop,
            ended,
        }
    }

    fn text(&self, session: &acp::SessionId) -> String {
        self.updates
            .lock()
            .unwrap()
            .iter()
            .filter(|n| &n.session_id == session)
            .filter_map(|n| match &n.update {
                acp::SessionUpdate::AgentMessageChunk(c) => match &c.content {
                    acp::ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    async fn leave(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(WAIT, self.ended).await;
    }
}

/// The listing's entry for `id`.
async fn listed(served: &Served, id: &str) -> Option<Value> {
    let (status, body) = served.http("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200, "{body}");
    body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
}

/// An editor reaches the server's runtime over ACP on a WebSocket, with the token: it opens a
/// session under `--root` (one outside is refused, naming `--root`), prompts it and is answered
/// with `session/update` notifications and the end of its turn. The session is listed beside
/// the RPC ones, with its editor counted, and is closed (its file kept) when the editor leaves.
/// Without the token the upgrade is refused with 401.
#[tokio::test(flavor = "current_thread")]
async fn an_editor_speaks_acp_over_the_websocket_under_the_same_rules() {
    let mock = MockLlm::start();
    mock.push(Reply::text("hello over the socket").text_chunks(4));
    let served = serve(&mock, Some("acp-token"));

    match upgrade(&served, None).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!("upgraded without the token: {:?}", other.map(|_| ())),
    }
    match upgrade(&served, Some("wrong")).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
        other => panic!("upgraded with a wrong token: {:?}", other.map(|_| ())),
    }

    let editor = Editor::connect(&served).await;
    let outside = tempfile::tempdir().unwrap();
    let refused = editor
        .cx
        .send_request(acp::NewSessionRequest::new(outside.path()))
        .block_task()
        .await
        .expect_err("a session opened outside --root");
    assert!(
        format!("{refused:?}").contains("--root"),
        "the refusal does not say why: {refused:?}"
    );

    let cwd = served.nova.cwd();
    let opened = editor
        .cx
        .send_request(acp::NewSessionRequest::new(&cwd))
        .block_task()
        .await
        .unwrap();
    let id = opened.session_id;
    let answer = tokio::time::timeout(
        WAIT,
        editor
            .cx
            .send_request(acp::PromptRequest::new(id.clone(), vec!["hi".into()]))
            .block_task(),
    )
    .await
    .expect("the prompt was answered")
    .unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    assert_eq!(editor.text(&id), "hello over the socket");
    assert_eq!(mock.chat_requests().len(), 1);

    let entry = listed(&served, &id.0)
        .await
        .expect("the ACP session listed");
    assert_eq!(
        (entry["live"].clone(), entry["clients"].clone()),
        (json!(true), json!(1)),
        "{entry}"
    );

    editor.leave().await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let entry = listed(&served, &id.0).await;
        // Still stored (it has a conversation), no longer live.
        if entry.as_ref().is_some_and(|e| e["live"] == false) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session outlived its editor: {entry:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _) = served.http("GET", "/health", None).await;
    assert_eq!(status, 200);
}

/// A message over the 8 MiB record limit gets the JSON-RPC parse error and the connection goes
/// on, as on stdio.
#[tokio::test(flavor = "current_thread")]
async fn an_oversized_acp_frame_gets_a_parse_error_and_the_connection_goes_on() {
    let mock = MockLlm::start();
    let served = serve(&mock, None);
    let mut ws = upgrade(&served, None).await.unwrap();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":1,"pad":"{}"}}}}"#,
        "x".repeat(9 << 20)
    );
    ws.send(Message::Text(big.into())).await.unwrap();
    let error = next_json(&mut ws).await;
    assert_eq!(error["error"]["code"], -32700, "{error}");
    ws.send(Message::Text(
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": 1}})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let answer = next_json(&mut ws).await;
    assert_eq!(
        (
            answer["id"].clone(),
            answer["result"]["protocolVersion"].clone()
        ),
        (json!(2), json!(1)),
        "{answer}"
    );
}

async fn next_json(
    ws: &mut tokio_tungstenite::WebSocketStream<Box<dyn super::serve::Io>>,
) -> Value {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a message within the wait")
            .expect("the socket open")
            .unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).unwrap();
        }
    }
}
