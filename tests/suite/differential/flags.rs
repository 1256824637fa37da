//! Pi 1.6's command lines as embedding programs spawn them, run through Pi and through nova with
//! one prompt each: the first request each sends to the mock LLM (the model, the thinking level,
//! the tools, which parts the system prompt holds and in what order) and the session they
//! report (`get_state`) must agree, or the difference be listed in `tests/pi-differences.txt`
//! as `flags <command line> <aspect> — reason`. The two system prompts are worded apart (nova's
//! is its own text), so they are compared by what they hold: markers planted in the project's
//! context file, its `.pi/APPEND_SYSTEM.md`, a skill and the appended texts, and the tools they
//! list.

use super::compare::Differences;
use super::rpc::{Rpc, Side};
use super::{Allowed, final_state, is_event};
use crate::support::mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

const SESSION_ID: &str = "0197a000-0000-7000-8000-000000000001";

/// What the system prompt may hold, each found by a text only it contains.
const MARKERS: [(&str, &str); 5] = [
    ("context-file", "PROJECT-CONTEXT-MARKER"),
    ("project-append", "PROJECT-APPEND-MARKER"),
    ("skill", "AGENT-SKILL-MARKER"),
    ("append-1", "APPEND-ONE"),
    ("append-2", "APPEND-TWO"),
];

const BUILTIN_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

const MODEL: [&str; 4] = ["--provider", "mock", "--model", "test-model"];

/// The command lines compared, each named by its flags.
fn command_lines() -> Vec<(&'static str, Vec<&'static str>)> {
    let with_model = |flags: &[&'static str]| [&MODEL[..], flags].concat();
    vec![
        ("(none)", with_model(&[])),
        (
            "--no-extensions --no-skills --offline --approve",
            with_model(&["--no-extensions", "--no-skills", "--offline", "--approve"]),
        ),
        ("-nc", with_model(&["-nc"])),
        ("-nbt", with_model(&["-nbt"])),
        ("-xt bash", with_model(&["-xt", "bash"])),
        (
            "--model mock/test-model:high",
            vec!["--model", "mock/test-model:high"],
        ),
        (
            "--append-system-prompt ×2",
            with_model(&[
                "--append-system-prompt",
                "APPEND-ONE",
                "--append-system-prompt",
                "APPEND-TWO",
            ]),
        ),
        ("--session-id", with_model(&["--session-id", SESSION_ID])),
        ("--name", with_model(&["--name", "the name"])),
    ]
}

/// One side's run of one command line: its aspects, by name.
fn observe(side: Side, pi_dir: &Path, args: &[&str]) -> BTreeMap<&'static str, Value> {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": mock.base_url_openai(), "api": "openai-completions", "apiKey": "mock-key",
        "models": [{"id": "test-model", "name": "Test model", "contextWindow": 128000,
                    "maxTokens": 4096, "input": ["text"], "reasoning": true}]}}});
    let write = |path: &Path, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(&agent.path().join("models.json"), &models.to_string());
    write(
        &agent.path().join("skills/marked/SKILL.md"),
        "---\nname: marked\ndescription: AGENT-SKILL-MARKER\n---\nbody\n",
    );
    write(&cwd.path().join("AGENTS.md"), "PROJECT-CONTEXT-MARKER\n");
    write(
        &cwd.path().join(".pi/APPEND_SYSTEM.md"),
        "PROJECT-APPEND-MARKER\n",
    );
    let mut rpc = Rpc::start(side, pi_dir, agent.path(), cwd.path(), args);
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
    rpc.until("agent_end", is_event("agent_end"));
    let state = final_state(rpc);
    let requests = mock.chat_requests();
    let body = &requests
        .first()
        .unwrap_or_else(|| panic!("{side:?} {args:?} sent no request"))
        .body;

    let system = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut held: Vec<(usize, &str)> = MARKERS
        .iter()
        .filter_map(|(name, text)| system.find(text).map(|at| (at, *name)))
        .collect();
    held.sort();
    let listed: Vec<&str> = BUILTIN_TOOLS
        .into_iter()
        .filter(|t| system.lines().any(|l| l.starts_with(&format!("- {t}:"))))
        .collect();
    let mut tools: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    tools.sort_unstable();
    let session_id = match state["sessionId"].as_str() {
        Some(SESSION_ID) => "the one given",
        Some(_) => "a new one",
        None => "none",
    };
    BTreeMap::from([
        ("model", body["model"].clone()),
        ("thinking", body["reasoning_effort"].clone()),
        ("tools", json!(tools)),
        (
            "system",
            json!(held.iter().map(|(_, name)| *name).collect::<Vec<_>>()),
        ),
        ("system tools", json!(listed)),
        ("state.thinkingLevel", state["thinkingLevel"].clone()),
        ("state.model", state["model"]["id"].clone()),
        ("state.sessionId", json!(session_id)),
        ("state.sessionName", state["sessionName"].clone()),
    ])
}

#[test]
#[allow(clippy::print_stderr)]
fn pis_command_lines_reach_the_model_alike() {
    let Some(pi_dir) = std::env::var_os("NOVA_PI_DIR") else {
        eprintln!("skipped: NOVA_PI_DIR is not set (scripts/test.sh sets it)");
        return;
    };
    let pi_dir = Path::new(&pi_dir);
    let mut found = Differences::default();
    for (name, args) in command_lines() {
        // Both sides at once: the run stays short.
        let (pi, nova) = std::thread::scope(|s| {
            let pi = s.spawn(|| observe(Side::Pi, pi_dir, &args));
            let nova = observe(Side::Nova, pi_dir, &args);
            (pi.join().unwrap(), nova)
        });
        for (aspect, theirs) in &pi {
            let ours = &nova[aspect];
            if ours == theirs {
                continue;
            }
            let key = match (theirs.as_array(), ours.as_array()) {
                // A list differs by what it adds and lacks, so that an allowed addition does
                // not hide a missing entry.
                (Some(theirs), Some(ours)) => {
                    let added: Vec<String> = ours
                        .iter()
                        .filter(|v| !theirs.contains(v))
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect();
                    let lacked: Vec<String> = theirs
                        .iter()
                        .filter(|v| !ours.contains(v))
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect();
                    let mut change = Vec::new();
                    if !added.is_empty() {
                        change.push(format!("+{}", sorted(added).join(",")));
                    }
                    if !lacked.is_empty() {
                        change.push(format!("-{}", sorted(lacked).join(",")));
                    }
                    if change.is_empty() {
                        change.push("order".to_owned());
                    }
                    format!("flags {name} {aspect} {}", change.join(" "))
                }
                _ => format!("flags {name} {aspect}"),
            };
            found
                .0
                .insert(key, (1, format!("Pi {theirs}, nova {ours}")));
        }
    }
    Allowed::load(true).check(&found);
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}
