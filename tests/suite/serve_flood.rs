//! A served session under a flood of big records (issues 31 and 34): every `queue_update` lists
//! every queued text, so a few hundred follow-ups make records of megabytes. The session's
//! replay buffer is bounded by bytes as well as by count, so such a flood neither holds the
//! server's memory nor leaves a silent hole: a client whose records the byte bound dropped is
//! told so.

use super::serve::{WAIT, serve};
use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::peak_rss_kib;
use futures_util::StreamExt;
use serde_json::json;
use std::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// The byte bound of a session's replay buffer (docs/server.md): RPC mode's queue bound.
const KEPT_BYTES: usize = 4 << 20;

/// Forty 64 KiB follow-ups make queue snapshots of up to 2.5 MiB each, about 50 MiB in all,
/// far below the 4,096-record count: only the byte bound can drop them. A client asking for a
/// number it dropped gets the reload marker naming the byte bound, then the oldest record
/// kept; the stream goes on.
#[tokio::test(flavor = "current_thread")]
async fn a_seq_the_byte_bound_dropped_gets_the_marker_naming_it() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::many_chunks(10, "x").gate_after(2, &gate));
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut client = served.attach(&id, "?client=me").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "go"}))
        .await;
    let early = loop {
        let record = client.next().await;
        if record["id"] == "p" {
            break record["seq"].as_u64().unwrap();
        }
    };
    gate.wait_reached(WAIT);

    let text = "q".repeat(64 * 1024);
    let mut biggest = 0;
    for i in 0..40 {
        client
            .send(json!({"id": format!("f{i}"), "type": "follow_up", "message": text}))
            .await;
        // Read up to its response, so this client keeps up.
        loop {
            let record = client.next().await;
            if record["type"] == "queue_update" {
                biggest = biggest.max(record.to_string().len());
            }
            if record["id"] == format!("f{i}") {
                assert_eq!(record["success"], true, "{record}");
                break;
            }
            assert_ne!(
                record["type"], "replay_gap",
                "a client that keeps up: {record}"
            );
        }
    }
    assert!(biggest > KEPT_BYTES / 2, "{biggest}");

    let mut late = served
        .attach(&id, &format!("?client=me&since={early}"))
        .await;
    let marker = late.next().await;
    assert_eq!(marker["type"], "replay_gap", "{marker}");
    assert_eq!(marker["bound"], "bytes", "{marker}");
    assert_eq!(marker["after"], early);
    let resumes_after = marker["resumesAfter"].as_u64().unwrap();
    assert!(resumes_after > early + 10, "{marker}");
    let error = marker["error"].as_str().unwrap();
    assert!(
        error.contains("4 MiB") && error.contains("get_messages"),
        "{error}"
    );
    assert!(marker.get("seq").is_none(), "{marker}");
    let next = late.next().await;
    assert_eq!(next["seq"], resumes_after + 1, "{next}");

    client.send(json!({"id": "c", "type": "clear_queue"})).await;
    gate.open();
    late.until("agent_settled").await;
    assert_eq!(mock.chat_requests().len(), 1);
}

/// A hundred 16 KiB follow-ups while a reply streams, each sent once the previous one is
/// answered, by a client that reads everything: the snapshots come to about 80 MiB, every one
/// encoded for the client, and the served process grows by a small, fixed amount from where it
/// stood after the first answer, because the buffer every client reads from keeps 4 MiB of
/// them at most (a count alone would keep them all). A client that sends them without waiting
/// and falls behind is refused instead (the connection is overloaded), which bounds the flood
/// sooner still.
#[tokio::test(flavor = "current_thread")]
#[allow(clippy::print_stderr, reason = "the figure, shown with --nocapture")]
async fn a_flood_of_big_follow_ups_holds_the_server_to_bounded_memory() {
    const FLOOD: usize = 100;
    /// The growth allowed a debug build: the 4 MiB kept, a batch in flight, the biggest
    /// snapshot encoded (about 1.6 MiB) and the allocator's slack.
    const GROWTH_BOUND_MIB: u64 = 32;
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::many_chunks(10, "x").gate_after(2, &gate));
    let served = serve(&mock, None);
    let pid = served.nova.pid();
    let id = served.open(&served.nova.cwd()).await;
    let mut client = served.attach(&id, "").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "go"}))
        .await;
    while client.next().await["id"] != "p" {}
    gate.wait_reached(WAIT);
    let baseline = peak_rss_kib(pid);

    let started = Instant::now();
    let text = "q".repeat(16 * 1024);
    let mut read = 0;
    for i in 0..FLOOD {
        let id = format!("f{i}");
        client
            .send(json!({"id": id, "type": "follow_up", "message": text}))
            .await;
        loop {
            let message = tokio::time::timeout(WAIT, client.ws.next())
                .await
                .expect("a record within the wait")
                .expect("the socket open")
                .unwrap();
            let Message::Text(record) = message else {
                continue;
            };
            read += record.len();
            assert!(
                !record.starts_with("{\"type\":\"replay_gap\""),
                "a client that keeps up"
            );
            if record.starts_with(&format!("{{\"id\":\"{id}\"")) {
                assert!(record.contains("\"success\":true"), "{record}");
                break;
            }
        }
    }
    let growth = peak_rss_kib(pid).saturating_sub(baseline) / 1024;
    eprintln!(
        "{FLOOD} follow-ups of 16 KiB: {} MiB of records read in {:.1} s; the server grew by \
         {growth} MiB from {} MiB",
        read >> 20,
        started.elapsed().as_secs_f64(),
        baseline / 1024
    );
    assert!(read > 64 << 20, "{read} bytes read");
    assert!(
        growth < GROWTH_BOUND_MIB,
        "the server grew by {growth} MiB under the flood"
    );

    client.send(json!({"id": "c", "type": "clear_queue"})).await;
    gate.open();
    client.until("agent_settled").await;
    let (status, _) = served.http("GET", "/health", None).await;
    assert_eq!(status, 200);
}

/// A client that sends big follow-ups without reading falls behind by bytes long before it is
/// 4,096 records behind: once its place has left the buffer, its commands are refused at once
/// as overloaded, naming the byte bound, and when it reads again it is told of the gap and
/// gets the newest answers.
#[tokio::test(flavor = "current_thread")]
async fn a_client_that_floods_without_reading_is_refused_by_the_byte_bound() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::many_chunks(10, "x").gate_after(2, &gate));
    let served = serve(&mock, None);
    let id = served.open(&served.nova.cwd()).await;
    let mut client = served.attach(&id, "?client=me").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "go"}))
        .await;
    while client.next().await["id"] != "p" {}
    gate.wait_reached(WAIT);

    let text = "q".repeat(64 * 1024);
    for i in 0..60 {
        client
            .send(json!({"id": format!("f{i}"), "type": "follow_up", "message": text}))
            .await;
    }
    client.send(json!({"id": "s", "type": "get_state"})).await;
    let (mut gaps, mut overloaded) = (0, Vec::new());
    loop {
        let record = client.next().await;
        if record["type"] == "replay_gap" {
            gaps += 1;
            assert_eq!(record["bound"], "bytes", "{record}");
        } else if record["success"] == false {
            let error = record["error"].as_str().unwrap().to_owned();
            assert!(
                error.contains("overloaded") && error.contains("4 MiB"),
                "{error}"
            );
            overloaded.push(record["id"].clone());
        }
        if record["id"] == "s" {
            break;
        }
    }
    assert!(gaps > 0, "no gap marker");
    assert!(!overloaded.is_empty(), "no command refused as overloaded");

    client.send(json!({"id": "c", "type": "clear_queue"})).await;
    gate.open();
    client.until("agent_settled").await;
}
