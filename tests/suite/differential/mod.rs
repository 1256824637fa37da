//! The differential test: the same scripted scenarios run through Pi 1.6 and through nova,
//! against one mock LLM (OpenAI-compatible chat completions); both transcripts are normalised
//! and compared key by key. What may differ is listed, each with its reason, in
//! `tests/pi-differences.txt`; anything else, or a listed difference that no longer occurs,
//! fails. `NOVA_DIFF_OUT=<dir>` keeps the normalised transcripts for reading.

mod compare;
mod dropin;
mod extensions;
mod flags;
mod normalize;
pub mod rpc;

use crate::support::mock_llm::{MockLlm, Reply};
use rpc::{Rpc, Side};
use serde_json::{Value, json};
use std::path::Path;

fn is_response(id: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| v["type"] == "response" && v["id"] == id
}

fn is_event(ty: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| v["type"] == ty
}

fn is_text_delta(v: &Value) -> bool {
    v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == "text_delta"
}

/// Sends `command` (its `id` is its type) and records up to its response.
fn ask(rpc: &mut Rpc, command: Value) {
    let ty = command["type"].as_str().unwrap().to_owned();
    let mut command = command;
    command["id"] = ty.clone().into();
    rpc.send(&command);
    rpc.until(&format!("the {ty} response"), is_response(&ty));
}

/// Asks `get_state` last, ends the run and gives the state it answered (`null` if none).
fn final_state(mut rpc: Rpc) -> Value {
    ask(&mut rpc, json!({"type": "get_state"}));
    rpc.stop()
        .iter()
        .rev()
        .find(|l| l["type"] == "response" && l["command"] == "get_state")
        .map(|l| l["data"].clone())
        .unwrap_or(Value::Null)
}

/// A prompt and its whole run, then what a client reads afterwards.
fn prompt(rpc: &mut Rpc, text: &str) {
    rpc.send(&json!({"id": "p", "type": "prompt", "message": text}));
    rpc.until("agent_end", is_event("agent_end"));
    // Pi's `agent_settled` follows `agent_end`; a request answered after it orders them.
    ask(rpc, json!({"type": "get_state"}));
}

fn run_text(rpc: &mut Rpc) {
    prompt(rpc, "hello");
    ask(rpc, json!({"type": "get_messages"}));
    ask(rpc, json!({"type": "get_last_assistant_text"}));
    ask(rpc, json!({"type": "get_session_stats"}));
}

fn run_tools(rpc: &mut Rpc) {
    prompt(rpc, "look around");
    ask(rpc, json!({"type": "get_messages"}));
}

fn run_commands(rpc: &mut Rpc) {
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "get_available_models"}));
    ask(rpc, json!({"type": "set_thinking_level", "level": "off"}));
    ask(rpc, json!({"type": "set_session_name", "name": "the name"}));
    ask(rpc, json!({"type": "get_fork_messages"}));
    ask(rpc, json!({"type": "get_last_assistant_text"}));
    ask(rpc, json!({"type": "set_steering_mode", "mode": "all"}));
    ask(rpc, json!({"type": "set_follow_up_mode", "mode": "all"}));
    ask(
        rpc,
        json!({"type": "set_auto_compaction", "enabled": false}),
    );
    ask(rpc, json!({"type": "set_auto_retry", "enabled": false}));
    ask(rpc, json!({"type": "abort"}));
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "new_session"}));
    ask(rpc, json!({"type": "no_such_command"}));
    ask(rpc, json!({"type": "prompt"}));
}

fn run_bash(rpc: &mut Rpc) {
    ask(
        rpc,
        json!({"type": "bash", "command": "echo from the user"}),
    );
    ask(rpc, json!({"type": "bash", "command": "exit 3"}));
    ask(rpc, json!({"type": "get_messages"}));
}

/// A conversation too short to compact: the refusal, as both word it.
fn run_compact(rpc: &mut Rpc) {
    prompt(rpc, "hello");
    ask(rpc, json!({"type": "compact"}));
    ask(rpc, json!({"type": "get_messages"}));
    ask(rpc, json!({"type": "get_state"}));
}

/// A conversation long enough to compact (see [`settings_of`]). With `keepRecentTokens` 1 the
/// cut falls inside the last turn, so the turns before it and the start of that turn are
/// summarised apart; `tokensBefore` is the last reply's reported usage. `compact_retry` cuts at
/// the second question and its summary request first fails with a 503.
fn run_compact_split(rpc: &mut Rpc) {
    prompt(rpc, "first question");
    prompt(rpc, "second question");
    ask(rpc, json!({"type": "compact"}));
    ask(rpc, json!({"type": "get_messages"}));
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "get_session_stats"}));
}

/// A reply that fails with a 503 and is retried: the run ends with the second attempt.
fn run_retry(rpc: &mut Rpc) {
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "hello"}));
    rpc.until("agent_settled", is_event("agent_settled"));
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "get_messages"}));
}

/// A follow-up sent while the reply streams runs as the next turn of the same run.
fn run_follow_up(rpc: &mut Rpc) {
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "first"}));
    rpc.until("the first text delta", is_text_delta);
    ask(rpc, json!({"type": "follow_up", "message": "and then"}));
    rpc.until("agent_end", is_event("agent_end"));
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "get_messages"}));
}

/// An abort while the reply stalls mid-stream.
fn run_abort(rpc: &mut Rpc) {
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    rpc.until("the first text delta", is_text_delta);
    rpc.send(&json!({"id": "abort", "type": "abort"}));
    rpc.until("agent_end", is_event("agent_end"));
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "get_messages"}));
}

fn run_image(rpc: &mut Rpc) {
    rpc.send(
        &json!({"id": "p", "type": "prompt", "message": "what is this?",
        "images": [{"type": "image", "data": TINY_PNG, "mimeType": "image/png"}]}),
    );
    rpc.until("agent_end", is_event("agent_end"));
    ask(rpc, json!({"type": "get_messages"}));
}

/// A 1×1 PNG.
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

struct Run {
    transcript: Vec<Value>,
    paths: Vec<(String, &'static str)>,
}

/// Which wire format the mock speaks to both.
#[derive(Clone, Copy)]
enum Wire {
    OpenAi,
    Anthropic,
}

/// The settings a scenario needs beyond every scenario's.
fn settings_of(scenario: &str) -> Value {
    match scenario {
        "compact_split" => json!({"compaction": {"keepRecentTokens": 1}}),
        // The cut falls on the second question: one summary request, so one order of replies.
        "compact_retry" => json!({"compaction": {"keepRecentTokens": 5}}),
        _ => json!({}),
    }
}

fn both(
    pi_dir: &Path,
    name: &str,
    wire: Wire,
    replies: &[Reply],
    scenario: fn(&mut Rpc),
) -> [Run; 2] {
    [Side::Pi, Side::Nova].map(|side| {
        // One mock each, so both see the same reply ids.
        let mock = MockLlm::start();
        for reply in replies {
            mock.push(reply.clone());
        }
        let agent = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let (base_url, api) = match wire {
            Wire::OpenAi => (mock.base_url_openai(), "openai-completions"),
            Wire::Anthropic => (mock.base_url_anthropic(), "anthropic-messages"),
        };
        let models = json!({"providers": {"mock": {
            "baseUrl": base_url, "api": api, "apiKey": "mock-key",
            "models": [{"id": "test-model", "name": "Test model", "contextWindow": 128000,
                        "maxTokens": 4096, "input": ["text"], "reasoning": false}]}}});
        std::fs::write(agent.path().join("models.json"), models.to_string()).unwrap();
        // Retries after a short wait, so the retry scenario takes no seconds.
        let mut settings = json!({"retry": {"baseDelayMs": 20}});
        if let (Some(all), Some(own)) = (settings.as_object_mut(), settings_of(name).as_object()) {
            all.extend(own.clone());
        }
        std::fs::write(agent.path().join("settings.json"), settings.to_string()).unwrap();
        std::fs::write(cwd.path().join("notes.txt"), "line one\nline two\n").unwrap();
        let mut rpc = Rpc::start(
            side,
            pi_dir,
            agent.path(),
            cwd.path(),
            &["--provider", "mock", "--model", "test-model"],
        );
        scenario(&mut rpc);
        let paths = vec![
            (agent.path().display().to_string(), "agent"),
            (cwd.path().display().to_string(), "cwd"),
            (nova::session::paths::cwd_slug(cwd.path()), "cwd-slug"),
            (pi_dir.display().to_string(), "pi"),
            (format!("127.0.0.1:{}", mock.port()), "mock"),
        ];
        Run {
            transcript: rpc.stop(),
            paths,
        }
    })
}

/// The deliberate differences (`tests/pi-differences.txt`): one per line, `kind where [path]
/// — reason`, `*` matching anything; those of the command-line comparison ([`flags`]) start
/// with `flags `.
struct Allowed {
    /// The pattern, its text, and whether a run without it means the entry is stale.
    entries: Vec<(nova::glob::Glob, String, bool)>,
}

impl Allowed {
    /// The entries of the command-line comparison (`flags`), or the others.
    fn load(flags: bool) -> Allowed {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pi-differences.txt");
        let text = std::fs::read_to_string(&path).unwrap();
        let entries = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|line| {
                let (what, reason) = line
                    .split_once(" — ")
                    .unwrap_or_else(|| panic!("{}: no reason given: {line}", path.display()));
                assert!(!reason.trim().is_empty(), "no reason given: {line}");
                let what = what.split_whitespace().collect::<Vec<_>>().join(" ");
                if what.starts_with("flags ") != flags {
                    return None;
                }
                // A difference that depends on Pi's timing need not occur in every run.
                let (what, always) = match what.strip_prefix("sometimes ") {
                    Some(rest) => (rest.to_owned(), false),
                    None => (what, true),
                };
                // A permission pattern's rules: `*` spans anything, and the `[]` the paths
                // are full of is text.
                let glob =
                    nova::glob::Glob::command(&what).unwrap_or_else(|e| panic!("{line}: {e}"));
                Some((glob, what, always))
            })
            .collect();
        Allowed { entries }
    }

    /// The differences found that no entry lists, and which entries were needed.
    fn explain(&self, found: &compare::Differences) -> (Vec<String>, Vec<bool>) {
        let mut used = vec![false; self.entries.len()];
        let mut unexplained = Vec::new();
        for (key, (count, example)) in &found.0 {
            match self.entries.iter().position(|(g, _, _)| g.is_match(key)) {
                Some(i) => used[i] = true,
                None => unexplained.push(format!("{key}  ({count}×; {example})")),
            }
        }
        (unexplained, used)
    }

    /// The differences found that no entry lists, for scenarios that need only some entries.
    fn unexplained(&self, found: &compare::Differences) -> Vec<String> {
        self.explain(found).0
    }

    /// Fails unless every difference found is listed and every entry that must occur did.
    fn check(&self, found: &compare::Differences) {
        let (unexplained, used) = self.explain(found);
        let stale: Vec<&str> = self
            .entries
            .iter()
            .zip(&used)
            .filter(|((_, _, always), used)| *always && !**used)
            .map(|((_, what, _), _)| what.as_str())
            .collect();
        assert!(
            unexplained.is_empty() && stale.is_empty(),
            "differences from Pi 1.6 that tests/pi-differences.txt does not explain:\n{}\n\n\
             entries there that no scenario needs any more:\n{}",
            unexplained.join("\n"),
            stale.join("\n")
        );
    }
}

type Scenario = (&'static str, Wire, Vec<Reply>, fn(&mut Rpc));

fn scenarios() -> Vec<Scenario> {
    let tool_calls = || {
        Reply::new()
            .and_text("Let me look.")
            .tool_call("call_a", "bash", json!({"command": "echo hi"}))
            .tool_call("call_b", "read", json!({"path": "notes.txt"}))
            .tool_call("call_c", "read", json!({"path": "missing.txt"}))
    };
    let thinking = || {
        Reply::text("Hi!")
            .thinking("The user wants a greeting.")
            .thinking_chunks(2)
            .text_chunks(2)
    };
    vec![
        (
            "text",
            Wire::OpenAi,
            vec![Reply::text("hi there").text_chunks(3).usage(12, 5)],
            run_text,
        ),
        (
            "tools",
            Wire::OpenAi,
            vec![tool_calls().finish("tool_calls"), Reply::text("All done.")],
            run_tools,
        ),
        ("thinking", Wire::OpenAi, vec![thinking()], run_text),
        (
            "anthropic_text",
            Wire::Anthropic,
            vec![Reply::text("hi there").text_chunks(3).usage(12, 5)],
            run_text,
        ),
        (
            "anthropic_tools",
            Wire::Anthropic,
            vec![tool_calls(), Reply::text("All done.")],
            run_tools,
        ),
        (
            "anthropic_thinking",
            Wire::Anthropic,
            vec![thinking()],
            run_text,
        ),
        (
            "compact",
            Wire::OpenAi,
            vec![Reply::text("hi there").usage(12, 5)],
            run_compact,
        ),
        (
            "compact_split",
            Wire::OpenAi,
            vec![
                Reply::text("first answer").usage(100, 10),
                Reply::text("second answer").usage(200, 20),
                // The two summaries, alike: nova asks for them side by side.
                Reply::text("The summary.").usage(50, 5),
                Reply::text("The summary.").usage(50, 5),
            ],
            run_compact_split,
        ),
        (
            "compact_retry",
            Wire::OpenAi,
            vec![
                Reply::text("first answer").usage(100, 10),
                Reply::text("second answer").usage(200, 20),
                Reply::http_error(503, r#"{"error":{"message":"overloaded"}}"#),
                Reply::text("The summary.").usage(50, 5),
            ],
            run_compact_split,
        ),
        (
            "retry",
            Wire::OpenAi,
            vec![
                Reply::http_error(503, r#"{"error":{"message":"overloaded"}}"#),
                Reply::text("recovered"),
            ],
            run_retry,
        ),
        (
            "follow_up",
            Wire::OpenAi,
            vec![
                Reply::text("one two three")
                    .text_chunks(3)
                    .delay_per_frame(std::time::Duration::from_millis(150)),
                Reply::text("second"),
            ],
            run_follow_up,
        ),
        (
            "abort",
            Wire::OpenAi,
            vec![Reply::text("a partial reply").text_chunks(4).stall_after(2)],
            run_abort,
        ),
        (
            "image",
            Wire::OpenAi,
            vec![Reply::text("a pixel")],
            run_image,
        ),
        ("commands", Wire::OpenAi, Vec::new(), run_commands),
        ("bash", Wire::OpenAi, Vec::new(), run_bash),
    ]
}

#[test]
#[allow(clippy::print_stderr)]
fn nova_answers_as_pi_does() {
    let Some(pi_dir) = std::env::var_os("NOVA_PI_DIR") else {
        eprintln!("skipped: NOVA_PI_DIR is not set (scripts/test.sh sets it)");
        return;
    };
    let out = std::env::var_os("NOVA_DIFF_OUT").map(std::path::PathBuf::from);
    let mut found = compare::Differences::default();
    for (name, wire, replies, scenario) in scenarios() {
        let runs = both(Path::new(&pi_dir), name, wire, &replies, scenario);
        let [pi, nova] = runs.map(|run| {
            let paths: Vec<(&str, &str)> =
                run.paths.iter().map(|(p, n)| (p.as_str(), *n)).collect();
            let mut normalizer = normalize::Normalizer::new(&paths);
            let lines: Vec<Value> = run.transcript.iter().map(|v| normalizer.value(v)).collect();
            lines
        });
        if let Some(out) = &out {
            std::fs::create_dir_all(out).unwrap();
            for (side, t) in [("pi", &pi), ("nova", &nova)] {
                let text: Vec<String> = t.iter().map(Value::to_string).collect();
                std::fs::write(out.join(format!("{name}.{side}.jsonl")), text.join("\n")).unwrap();
            }
        }
        compare::transcripts(name, &pi, &nova, &mut found);
    }
    if let Some(out) = &out {
        let all: Vec<String> = found
            .0
            .iter()
            .map(|(key, (count, example))| format!("{key}  ({count}×; {example})"))
            .collect();
        std::fs::write(out.join("differences.txt"), all.join("\n")).unwrap();
    }
    Allowed::load(false).check(&found);
}
