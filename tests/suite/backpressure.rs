//! A client that stops reading stdout: nova holds back the reply it streams (so its memory stays
//! bounded) without freezing, and everything arrives, in order, once the client reads again.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{peak_rss_kib, spawn_raw};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

// 60 MB of deltas: far more than the queue may hold, and more than twice the growth allowed
// below, so a stream that did not pause would fail the memory check.
const CHUNKS: usize = 30_000;

#[test]
fn a_client_that_stops_reading_pauses_the_stream_within_bounded_memory() {
    let mock = MockLlm::start();
    mock.push(Reply::many_chunks(CHUNKS, &"x".repeat(2000)));
    let (mut child, _dirs) = spawn_raw(&mock);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The baseline is taken once nova answers, so its own start-up is not counted.
    writeln!(stdin, "{}", json!({"type": "get_state", "id": "ready"})).unwrap();
    lines.next().unwrap().unwrap();
    let before = peak_rss_kib(child.id());
    writeln!(
        stdin,
        "{}",
        json!({"type": "prompt", "message": "go", "id": "p"})
    )
    .unwrap();
    // Nobody reads: the pipe (64 KiB) and nova's queue fill, and the stream must pause.
    std::thread::sleep(Duration::from_secs(3));
    let grown = peak_rss_kib(child.id()).saturating_sub(before);
    assert!(before > 0);
    assert!(
        grown < 24 * 1024,
        "nova grew by {grown} KiB while its client did not read"
    );

    // The client reads again: the whole reply arrives, in order, and nova answers commands.
    writeln!(stdin, "{}", json!({"type": "get_state", "id": "s"})).unwrap();
    let started = Instant::now();
    let mut deltas = 0;
    let mut state_answered = false;
    let mut settled = false;
    while let Some(Ok(line)) = lines.next() {
        // Only the short lines are parsed: a debug build would spend most of this test
        // decoding 60 MB of deltas.
        if line.starts_with(r#"{"type":"message_update""#) {
            deltas += usize::from(line.contains(r#""type":"text_delta""#));
            continue;
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "response" && v["id"] == "s" {
            state_answered = true;
        }
        if v["type"] == "agent_settled" {
            settled = true;
        }
        if settled && state_answered {
            break;
        }
        // Generous: a debug build on two cores busy with compiles once needed over 120 s here.
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "stream never ended"
        );
    }
    assert!(settled && state_answered);
    assert_eq!(deltas, CHUNKS);
    drop(stdin);
    let _ = child.wait();
}
