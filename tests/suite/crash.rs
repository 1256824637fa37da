//! The crash-safety promise: a client that saw `message_end` can rely on that message surviving
//! `kill -9` a moment later. Nova is killed with SIGKILL at random moments during runs (a long
//! streamed reply, a reply with a `bash` tool call, a run with a steer and a follow-up queued
//! mid-stream), restarted on the same session each time, and every message whose `message_end`
//! the client had received must come back from `get_messages`, equal and in order. A seeded
//! xorshift picks the scenarios and moments: `NOVA_CRASH_SEED=<seed>` replays a failure.

use super::sessions::Dirs;
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova};
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime};

const KILLS: usize = 100;

/// xorshift64: tiny, seeded, good enough to spread kill moments.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform enough in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn seed() -> u64 {
    match std::env::var("NOVA_CRASH_SEED") {
        Ok(s) => s.trim().parse().expect("NOVA_CRASH_SEED is a u64"),
        Err(_) => SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    }
}

fn spawn(dirs: &Dirs, mock: &MockLlm, session: &str) -> Nova {
    Nova::builder()
        .dirs(dirs.agent(), dirs.cwd())
        .openai(mock)
        .args(["--session", session])
        .spawn()
}

fn messages(nova: &mut Nova) -> Vec<Value> {
    nova.request_ok(json!({"type": "get_messages"}))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// Every message in `seen` is in `restored`, equal, in the same order.
fn assert_survived(seen: &[Value], restored: &[Value], context: &str) {
    let mut at = 0;
    for (k, m) in seen.iter().enumerate() {
        match restored[at..].iter().position(|r| r == m) {
            Some(p) => at += p + 1,
            None => panic!(
                "{context}: message #{k} whose message_end the client saw is missing, changed or \
                 out of order after the restart:\n  {m}\nrestored ({} messages):\n  {}",
                restored.len(),
                restored
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Scenario {
    /// One reply streamed in many chunks.
    Stream,
    /// A reply with a `bash` call, its result, then a streamed answer.
    Tool,
    /// A slow stream with a steer and a follow-up sent at random points into it.
    Queued,
}

#[test]
// The seed and the figures go to the captured stderr, which the harness shows on failure.
#[allow(clippy::print_stderr)]
fn messages_seen_by_the_client_survive_sigkill_at_random_moments() {
    let seed = seed();
    // Shown by the harness when the test fails.
    eprintln!("crash test seed: {seed} (replay with NOVA_CRASH_SEED={seed})");
    let mut rng = XorShift::new(seed);
    let started = Instant::now();
    let dirs = Dirs::new();

    // The session: one plain exchange makes the file.
    let mock = MockLlm::start();
    mock.push(Reply::text("ready"));
    let mut nova = Nova::builder()
        .dirs(dirs.agent(), dirs.cwd())
        .openai(&mock)
        .spawn();
    nova.run_prompt("start");
    let id = nova.request_ok(json!({"type": "get_state"}))["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut seen: Vec<Value> = messages(&mut nova);
    nova.close_stdin();
    nova.wait_exit(EVENT_TIMEOUT);
    drop(nova);

    let mut violations = Vec::new();
    let mut warned = 0;
    let mut killed_mid_run = 0;
    for i in 0..KILLS {
        let context = format!("seed {seed}, kill {i}");
        // A fresh mock per process: a request the killed process left in flight cannot eat a
        // reply meant for the next one.
        let mock = MockLlm::start();
        let mut nova = spawn(&dirs, &mock, &id);
        assert_survived(&seen, &messages(&mut nova), &context);
        if nova.stderr().contains("malformed") {
            warned += 1;
        }

        let scenario = match rng.below(3) {
            0 => Scenario::Stream,
            1 => Scenario::Tool,
            _ => Scenario::Queued,
        };
        let (mut steer_at, mut follow_at) = (u64::MAX, u64::MAX);
        let events = match scenario {
            Scenario::Stream => {
                mock.push(Reply::many_chunks(150, "ab "));
                165
            }
            Scenario::Tool => {
                mock.push(Reply::text("running it").text_chunks(4).tool_call(
                    format!("call_{i}"),
                    "bash",
                    json!({"command": format!("echo out-{i}")}),
                ));
                mock.push(Reply::many_chunks(20, "z "));
                50
            }
            Scenario::Queued => {
                mock.push(Reply::many_chunks(40, "q ").delay_per_frame(Duration::from_millis(1)));
                mock.push(Reply::text("after the steer").text_chunks(5));
                mock.push(Reply::text("after the follow-up").text_chunks(5));
                steer_at = 2 + rng.below(30);
                follow_at = 2 + rng.below(40);
                85
            }
        };
        // Slightly past the end sometimes: then the run is killed once it has settled.
        let kill_at = rng.below(events + 5);
        nova.send(&json!({"type": "prompt", "message": format!("prompt {i} ({scenario:?})")}));
        let mut received = 0u64;
        loop {
            if received == kill_at {
                killed_mid_run += 1;
                break;
            }
            let ev = nova.next_event(EVENT_TIMEOUT);
            received += 1;
            if received == steer_at {
                nova.send(&json!({"type": "steer", "message": format!("steer {i}")}));
            }
            if received == follow_at {
                nova.send(&json!({"type": "follow_up", "message": format!("follow-up {i}")}));
            }
            if ev["type"] == "message_end" {
                seen.push(ev["message"].clone());
            }
            if ev["type"] == "agent_settled" {
                break;
            }
        }
        // Pacing only: vary where inside nova's work the kill lands.
        let pause = rng.below(4);
        if pause > 0 {
            std::thread::sleep(Duration::from_micros(pause * 300));
        }
        nova.kill();
        violations.extend(
            mock.violations()
                .into_iter()
                .map(|v| format!("kill {i}: {v}")),
        );
    }

    // After the last kill: everything seen is back and the session goes on.
    let mock = MockLlm::start();
    mock.push(Reply::text("final answer").text_chunks(3));
    let mut nova = spawn(&dirs, &mock, &id);
    let context = format!("seed {seed}, after the last kill");
    assert_survived(&seen, &messages(&mut nova), &context);
    nova.run_prompt("final prompt");
    let after = messages(&mut nova);
    let n = after.len();
    assert_eq!(
        after[n - 2]["content"][0]["text"],
        "final prompt",
        "{context}"
    );
    assert_eq!(
        after[n - 1]["content"][0]["text"],
        "final answer",
        "{context}"
    );
    let request = mock.chat_requests().pop().unwrap();
    assert!(
        request.messages().len() > seen.len() / 2,
        "{context}: the history reaches the provider"
    );
    nova.close_stdin();
    assert_eq!(nova.wait_exit(EVENT_TIMEOUT).code(), Some(0));
    drop(nova);
    violations.extend(mock.violations());

    let mut nova = spawn(&dirs, &mock, &id);
    assert_eq!(messages(&mut nova), after, "{context}: persisted");
    drop(nova);

    assert!(
        violations.is_empty(),
        "seed {seed}: provider requests broke conversation rules:\n  {}",
        violations.join("\n  ")
    );
    let count = |pred: &dyn Fn(&Value) -> bool| seen.iter().filter(|m| pred(m)).count();
    let queued = count(&|m| {
        m["role"] == "user"
            && m["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("steer") || t.starts_with("follow-up"))
    });
    let results = count(&|m| m["role"] == "toolResult");
    eprintln!(
        "crash test: {KILLS} kills ({killed_mid_run} mid-run), {} messages seen ({queued} steered \
         or followed-up user messages, {results} tool results), {warned} restart(s) warned \
         about malformed lines, {:.1?}",
        seen.len(),
        started.elapsed()
    );
}
