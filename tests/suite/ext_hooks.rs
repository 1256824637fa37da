//! The hooks that shape a run (`before_agent_start`, `context`), extensions' custom messages
//! (`pi.sendMessage`) and `ctx.getSystemPrompt()`, through the nova binary against the mock
//! LLM: what the model receives, what clients are told and what the session file keeps.

use super::cli::system_message;
use super::extensions::{LOAD, example, loaded, pi_modules};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// The text of every message of a chat request, in order, as `role: text`.
fn sent(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            format!("{}: {text}", m["role"].as_str().unwrap_or_default())
        })
        .collect()
}

/// Pi's `pirate.ts` changes the system prompt of the runs after `/pirate`, and only those;
/// Pi's `system-prompt-header.ts` reads the prompt the run has with `ctx.getSystemPrompt()`.
#[test]
fn pis_pirate_example_changes_the_system_prompt_the_model_gets() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    for text in ["plain", "arrr", "plain again"] {
        mock.push(Reply::text(text));
    }
    let builder = Nova::builder().ollama(&mock).args([
        "-e",
        &example(&modules, "pirate.ts"),
        "-e",
        &example(&modules, "system-prompt-header.ts"),
    ]);
    let mut nova = loaded(builder, &modules);
    nova.run_prompt("hello");
    nova.send(&json!({"id": "p", "type": "prompt", "message": "/pirate"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(notify["message"], "Arrr! Pirate mode enabled!");
    nova.wait_for(|v| v["id"] == "p", WAIT);
    nova.run_prompt("hello");
    nova.send(&json!({"id": "q", "type": "prompt", "message": "/pirate"}));
    nova.wait_for(|v| v["id"] == "q", WAIT);
    nova.run_prompt("hello");

    let requests = mock.chat_requests();
    let prompts: Vec<String> = requests.iter().map(system_message).collect();
    assert!(!prompts[0].contains("PIRATE MODE"), "{}", prompts[0]);
    assert!(
        prompts[1].starts_with(&prompts[0]) && prompts[1].contains("You are now in PIRATE MODE"),
        "{}",
        prompts[1]
    );
    assert_eq!(prompts[2], prompts[0], "the change held for one run only");

    // The header's status shows the prompt of the run it starts: the pirate run's is longer.
    // agent_start reaches the extension while the run goes on, so its status may come late.
    let deadline = std::time::Instant::now() + WAIT;
    let statuses = loop {
        let statuses: Vec<Value> = nova
            .log()
            .iter()
            .filter(|l| l.value["method"] == "setStatus")
            .map(|l| l.value["statusText"].clone())
            .collect();
        if statuses.len() >= 3 || std::time::Instant::now() > deadline {
            break statuses;
        }
        nova.drain_pending();
        std::thread::sleep(Duration::from_millis(50));
    };
    let chars = |p: &String| json!(format!("System: {} chars", p.encode_utf16().count()));
    assert_eq!(statuses, prompts.iter().map(chars).collect::<Vec<_>>());
    mock.assert_no_violations();
}

/// Pi's `claude-rules.ts` lists the project's `.claude/rules/` in the system prompt.
#[test]
fn pis_claude_rules_example_lists_the_rules_in_the_system_prompt() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("noted"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file(".claude/rules/testing.md", "Write tests first.")
        .file(".claude/rules/api/design.md", "Keep it small.")
        .args(["-e", &example(&modules, "claude-rules.ts")]);
    let mut nova = loaded(builder, &modules);
    nova.run_prompt("hello");
    let notify = nova
        .log()
        .iter()
        .find(|l| l.value["method"] == "notify")
        .map(|l| l.value.clone())
        .expect("session_start's notice");
    assert_eq!(notify["message"], "Found 2 rule(s) in .claude/rules/");
    let prompt = system_message(&mock.chat_requests()[0]);
    assert!(prompt.contains("## Project Rules"), "{prompt}");
    assert!(prompt.contains("- .claude/rules/testing.md"), "{prompt}");
    assert!(prompt.contains("- .claude/rules/api/design.md"), "{prompt}");
    mock.assert_no_violations();
}

const MESSAGES: &str = r#"
import { Type } from "typebox";
export default function (pi) {
  // Idle, without a turn: recorded and announced only.
  pi.registerCommand("note", {
    handler: async (args) => pi.sendMessage({ customType: "note", content: args, display: true, details: { n: 1 } }),
  });
  // Idle, with a turn: the message starts a run.
  pi.registerCommand("poke", {
    handler: async (args) =>
      pi.sendMessage({ customType: "poke", content: [{ type: "text", text: args }], display: false }, { triggerTurn: true }),
  });
  pi.registerCommand("later", {
    handler: async (args) => pi.sendMessage({ customType: "later", content: args }, { deliverAs: "nextTurn" }),
  });
  // Mid-run: steered into the next call, or held until the turn ends.
  pi.registerTool({
    name: "nudge", label: "Nudge", description: "Sends messages while the run streams",
    parameters: Type.Object({}),
    async execute() {
      pi.sendMessage({ customType: "steered", content: "steered in" });
      pi.sendMessage({ customType: "held", content: "held to the turn's end" }, { triggerTurn: false });
      await new Promise((r) => setTimeout(r, 200));
      return { content: [{ type: "text", text: "nudged" }], details: {} };
    },
  });
  pi.on("before_agent_start", (event, ctx) => ({
    message: { customType: "started", content: `started by ${event.messageType}`, display: false },
  }));
  pi.registerCommand("prompt", {
    handler: async (_args, ctx) => ctx.ui.notify(`prompt=${ctx.getSystemPrompt().length}`, "info"),
  });
}
"#;

/// `pi.sendMessage` in each of Pi's delivery cases, and a `before_agent_start` message: the
/// model gets custom messages as the user's, clients get `message_start`/`message_end` with
/// role `custom`, the session file `custom_message` entries, and `get_messages` them back.
#[test]
fn custom_messages_are_delivered_recorded_and_sent_as_in_pi() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("poked"));
    mock.push(Reply::new().tool_call("c1", "nudge", json!({})));
    mock.push(Reply::text("nudged"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("messages.js", MESSAGES)
        .args(["-e", "messages.js"]);
    let mut nova = loaded(builder, &modules);

    nova.send(&json!({"id": "n", "type": "prompt", "message": "/note a note"}));
    let start = nova.wait_for(|v| v["type"] == "message_start", LOAD);
    let note = json!({
        "role": "custom", "customType": "note", "content": "a note", "display": true,
        "details": {"n": 1}, "timestamp": start["message"]["timestamp"],
    });
    assert_eq!(start["message"], note, "{start}");
    let end = nova.wait_for(|v| v["type"] == "message_end", WAIT);
    assert_eq!(end["message"], note);
    nova.wait_for(|v| v["id"] == "n", WAIT);
    assert!(mock.chat_requests().is_empty(), "a note starts no run");

    nova.send(&json!({"id": "l", "type": "prompt", "message": "/later for the next prompt"}));
    nova.wait_for(|v| v["id"] == "l", WAIT);
    nova.send(&json!({"id": "k", "type": "prompt", "message": "/poke wake up"}));
    let events = nova.events_until_timeout("agent_settled", WAIT);
    let started: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "message_start")
        .map(|e| json!([e["message"]["role"], e["message"]["customType"]]))
        .collect();
    assert_eq!(
        started,
        vec![
            json!(["custom", "poke"]),
            json!(["custom", "later"]),
            json!(["custom", "started"]),
            json!(["assistant", null]),
        ]
    );
    let first = &mock.chat_requests()[0];
    assert_eq!(
        sent(&first.body)[1..],
        [
            "user: a note",
            "user: wake up",
            "user: for the next prompt",
            "user: started by custom",
        ],
        "{}",
        first.body
    );

    // The tool sends both while the run streams: the steered one goes into the next call, the
    // held one is recorded when the turn ends, after the tool's result.
    let events = nova.run_prompt("nudge");
    let order: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "message_end" || e["type"] == "turn_end")
        .map(|e| match e["type"].as_str() {
            Some("turn_end") => "turn_end".to_owned(),
            _ => format!(
                "{}{}",
                e["message"]["role"].as_str().unwrap_or_default(),
                e["message"]["customType"]
                    .as_str()
                    .map(|t| format!(":{t}"))
                    .unwrap_or_default()
            ),
        })
        .collect();
    assert_eq!(
        order,
        [
            "user",
            "custom:started",
            "assistant",
            "toolResult",
            "turn_end",
            "custom:held",
            "custom:steered",
            "assistant",
            "turn_end",
        ]
    );
    let last = mock.chat_requests().pop().unwrap();
    let tail = sent(&last.body);
    assert_eq!(
        tail[tail.len() - 3..],
        [
            "tool: nudged",
            "user: held to the turn's end",
            "user: steered in"
        ],
        "{}",
        last.body
    );

    let messages = nova.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["customType"]
                .as_str()
                .unwrap_or(m["role"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        roles,
        [
            "note",
            "poke",
            "later",
            "started",
            "assistant",
            "user",
            "started",
            "assistant",
            "toolResult",
            "held",
            "steered",
            "assistant"
        ]
    );
    assert_eq!(messages[0], note);

    let state = nova.request_ok(json!({"type": "get_state"}));
    let file = std::fs::read_to_string(state["sessionFile"].as_str().unwrap()).unwrap();
    let entries: Vec<Value> = file
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| e["type"] == "custom_message")
        .collect();
    assert_eq!(entries.len(), 7, "{file}");
    let keys: Vec<&str> = entries[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "type",
            "customType",
            "content",
            "display",
            "details",
            "id",
            "parentId",
            "timestamp"
        ]
    );
    assert_eq!(entries[0]["content"], "a note");
    assert_eq!(
        entries[1]["content"],
        json!([{"type": "text", "text": "wake up"}])
    );
    assert_eq!(entries[1]["display"], false);

    // The extension reads the session's real system prompt.
    nova.send(&json!({"id": "s", "type": "prompt", "message": "/prompt"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    let prompt = system_message(&mock.chat_requests()[0]);
    assert_eq!(
        notify["message"],
        format!("prompt={}", prompt.encode_utf16().count())
    );
    mock.assert_no_violations();

    // A resumed session has them back, in the same place.
    drop(nova);
    let mut resumed = Nova::builder()
        .ollama(&mock)
        .file("resumed.jsonl", &file)
        .args(["--session", "resumed.jsonl"])
        .spawn();
    let again = resumed.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(again[0], note);
    assert_eq!(
        again.as_array().unwrap().len(),
        messages.as_array().unwrap().len()
    );
}

const CONTEXT: &str = r#"
export default function (pi) {
  pi.on("context", (event) => ({
    messages: event.messages.filter((m) => !(m.role === "user" && JSON.stringify(m.content).includes("secret"))),
  }));
}
"#;

/// A `context` hook changes what one call sends, not what the session keeps.
#[test]
fn a_context_hook_changes_what_the_model_gets_not_the_conversation() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("first"));
    mock.push(Reply::text("second"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("context.js", CONTEXT)
        .args(["-e", "context.js"]);
    let mut nova = loaded(builder, &modules);
    nova.run_prompt("a secret");
    nova.run_prompt("hello");
    let requests = mock.chat_requests();
    assert_eq!(
        sent(&requests[1].body)[1..],
        ["assistant: first", "user: hello"]
    );
    let messages = nova.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(
        messages.as_array().unwrap().len(),
        4,
        "the session keeps all"
    );
    assert!(
        !nova
            .log()
            .iter()
            .any(|l| l.value["type"] == "extension_error"),
        "no hook failed"
    );
}

/// Names a directory of skills and a prompt template of the project's, as a package adds its
/// own (`pi-mcp-adapter` does, with a skill it ships).
const DISCOVER: &str = r#"
import { join } from "node:path";
export default function (pi) {
  pi.on("resources_discover", (event) => ({
    skillPaths: [join(event.cwd, "ext-skills")],
    promptPaths: ["ext-prompts/triage.md"],
  }));
}
"#;

#[test]
fn skills_and_templates_a_resources_discover_handler_names_join_the_session() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("triaged"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file(
            "ext-skills/deploy/SKILL.md",
            "---\nname: deploy\ndescription: Ship the build\n---\nRun the deploy.\n",
        )
        .file(
            "ext-prompts/triage.md",
            "---\ndescription: Sort a report\n---\nTriage $1 now.\n",
        )
        .file("discover.ts", DISCOVER)
        .args(["-e", "discover.ts"]);
    let mut nova = loaded(builder, &modules);
    let listed = nova.request_ok(json!({"type": "get_commands"}))["commands"].clone();
    let named = |name: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {listed}"))
    };
    assert_eq!(named("skill:deploy")["source"], "skill");
    assert_eq!(named("triage")["source"], "prompt");
    nova.run_prompt("/triage bug-7");
    let request = &mock.chat_requests()[0];
    assert!(
        request.body.to_string().contains("Triage bug-7 now."),
        "{}",
        request.body
    );
    let prompt = system_message(request);
    assert!(prompt.contains("deploy"), "{prompt}");
    mock.assert_no_violations();
}

/// Redacts the reply's text; answers a user message with one of another role, which Pi
/// refuses.
const REDACT: &str = r#"
export default function (pi) {
  pi.on("message_end", (event) => {
    const m = event.message;
    if (m.role === "assistant") {
      const content = m.content.map((c) => (c.type === "text" ? { ...c, text: c.text.replace("hunter2", "[redacted]") } : c));
      return { message: { ...m, content } };
    }
    if (m.role === "user") return { message: { ...m, role: "assistant" } };
  });
}
"#;

#[test]
fn a_message_end_hook_replaces_the_message_before_it_is_stored_and_announced() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("the password is hunter2"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("redact.ts", REDACT)
        .args(["-e", "redact.ts"]);
    let mut nova = loaded(builder, &modules);
    let events = nova.run_prompt("what is it?");
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message_end")
        .collect();
    assert_eq!(ended[0]["message"]["role"], "user", "{ended:?}");
    let reply = &ended[1]["message"];
    assert_eq!(reply["content"][0]["text"], "the password is [redacted]");
    // The user message's start still came before its end, and the wrong role was refused.
    let at = |kind: &str| events.iter().position(|e| e["type"] == kind).unwrap();
    assert!(at("message_start") < at("message_end"));
    let refused = events
        .iter()
        .find(|e| e["type"] == "extension_error")
        .expect("the refused replacement");
    assert_eq!(refused["event"], "message_end");
    // Stored as replaced.
    let messages = nova.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(
        messages[1]["content"][0]["text"],
        "the password is [redacted]"
    );
    assert!(!messages.to_string().contains("hunter2"));
    mock.assert_no_violations();
}

/// Counts the `message_end`s its handler gets, by role and custom type.
const ENDS: &str = r#"
export default function (pi) {
  const ends = {};
  pi.on("message_end", (event) => {
    const key = event.message.customType ?? event.message.role;
    ends[key] = (ends[key] ?? 0) + 1;
  });
  pi.registerCommand("poke", {
    handler: async (args) => pi.sendMessage({ customType: "poke", content: args }, { triggerTurn: true }),
  });
  pi.registerCommand("ends", { handler: async (_args, ctx) => ctx.ui.notify(JSON.stringify(ends), "info") });
}
"#;

/// A custom message a run delivers reaches `message_end` handlers once, as an event (it is
/// stored as it is delivered); the run's reply once, as a hook.
#[test]
fn a_custom_message_a_run_delivers_ends_once_for_the_handlers() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("poked"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("ends.js", ENDS)
        .args(["-e", "ends.js"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "k", "type": "prompt", "message": "/poke wake up"}));
    nova.wait_for(|v| v["type"] == "agent_settled", WAIT);
    nova.send(&json!({"id": "e", "type": "prompt", "message": "/ends"}));
    let told = nova.wait_for(|v| v["method"] == "notify", WAIT);
    let ends: Value = serde_json::from_str(told["message"].as_str().unwrap()).unwrap();
    assert_eq!(ends, json!({"poke": 1, "assistant": 1}));
}
