//! `nova attach` when its connection drops: a loopback TCP proxy between it and `nova serve`
//! is cut mid-stream, and the bridge reattaches with the last `seq` it wrote, so the program on
//! its stdout sees every record once, in order; when the server cannot be reached again it
//! gives up after a few tries, says why, and exits 1.

use super::serve::{Addr, WAIT, connect, serve};
use crate::support::mock_llm::{Gate, MockLlm, Reply};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A loopback TCP proxy to `upstream` whose connections can all be cut at once.
struct Proxy {
    addr: String,
    cut: watch::Sender<u32>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (cut, _) = watch::channel(0u32);
        let cuts = cut.clone();
        let accepting = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                let mut cut = cuts.subscribe();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        // Both sockets are dropped: the bridge sees its connection break.
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            cut,
            accepting,
        }
    }

    /// Breaks every connection through the proxy.
    fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }
}

/// The next line the bridge wrote on stdout.
async fn next(stdout: &mut mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(WAIT, stdout.recv())
        .await
        .expect("a record within the wait")
        .expect("attach running")
}

#[tokio::test(flavor = "current_thread")]
async fn attach_reattaches_after_a_dropped_connection_without_losing_or_repeating_a_record() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(
        Reply::many_chunks(200, "w ")
            .gate_after(50, &gate)
            .delay_per_frame(Duration::from_millis(1)),
    );
    let served = serve(&mock, Some("attach-token"));
    let Addr::Tcp(upstream) = served.addr.clone() else {
        unreachable!()
    };
    let id = served.open(&served.nova.cwd()).await;
    // The upgrade says which number a stream without `since` starts after, so a bridge cut
    // before its first record still asks for exactly what followed.
    let mut request = format!("ws://localhost/v1/sessions/{id}/rpc")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", "Bearer attach-token".parse().unwrap());
    let (ws, response) = tokio_tungstenite::client_async(request, connect(&served.addr).await)
        .await
        .unwrap();
    assert_eq!(response.headers()["nova-since"], "0");
    drop(ws);
    let proxy = Proxy::start(upstream).await;

    let mut attach = tokio::process::Command::new(env!("CARGO_BIN_EXE_nova"))
        .args([
            "attach",
            &format!("http://{}", proxy.addr),
            "--session",
            &id,
        ])
        .env("NOVA_SERVE_TOKEN", "attach-token")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = attach.stdin.take().unwrap();
    let (lines, mut stdout) = mpsc::unbounded_channel::<Value>();
    let mut reader = BufReader::new(attach.stdout.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = reader.next_line().await {
            let _ = lines.send(serde_json::from_str(&line).unwrap());
        }
    });
    let mut stderr = attach.stderr.take().unwrap();

    stdin
        .write_all(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"stream\"}\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let record = next(&mut stdout).await;
        let delta = record["assistantMessageEvent"]["type"] == "text_delta";
        seen.push(record);
        if delta {
            break;
        }
    }
    let gate_reached = gate.clone();
    tokio::task::spawn_blocking(move || gate_reached.wait_reached(WAIT))
        .await
        .unwrap();
    // Cut while the reply is held at its gate, then let it go on: the rest streams while the
    // bridge is away.
    proxy.cut();
    gate.open();
    loop {
        let record = next(&mut stdout).await;
        let settled = record["type"] == "agent_settled";
        seen.push(record);
        if settled {
            break;
        }
    }
    // The bridge's client is the only one with responses, so every number is its: one
    // unbroken run, nothing lost, nothing twice, and no reload marker.
    assert!(seen.iter().all(|r| r["type"] != "replay_gap"), "{seen:?}");
    let numbers: Vec<u64> = seen.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    assert_eq!(seen.iter().filter(|r| r["id"] == "p").count(), 1);
    let deltas = seen
        .iter()
        .filter(|r| r["assistantMessageEvent"]["type"] == "text_delta")
        .count();
    assert_eq!(deltas, 200);
    assert_eq!(mock.chat_requests().len(), 1);

    // After the drop, commands still go through.
    stdin
        .write_all(b"{\"id\":\"s\",\"type\":\"get_state\"}\n")
        .await
        .unwrap();
    assert_eq!(next(&mut stdout).await["id"], "s");

    // The server out of reach for good: a few tries, then a clear error and exit 1.
    proxy.accepting.abort();
    proxy.cut();
    let status = tokio::time::timeout(Duration::from_secs(30), attach.wait())
        .await
        .expect("attach gives up within the retries")
        .unwrap();
    assert_eq!(status.code(), Some(1), "{status:?}");
    let mut said = String::new();
    stderr.read_to_string(&mut said).await.unwrap();
    assert!(said.contains("reattaching to session"), "{said}");
    assert!(said.contains("could not reattach after 6 tries"), "{said}");
}
