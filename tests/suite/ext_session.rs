//! What extensions read of the session and hear of its changes: `ctx.sessionManager` answers
//! from nova's real session (entries, branch, tree, labels, header), kept current during a run,
//! and `model_select`, `thinking_level_select`, `session_info_changed` and `user_bash` reach
//! their handlers with Pi's semantics.

use super::extensions::{example, loaded, pi_modules};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{Nova, ollama_models};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// The label of the tree node whose entry is `id`, found without recursion.
fn label_in_tree(tree: &Value, id: &str) -> Option<Value> {
    let mut pending: Vec<&Value> = tree["tree"].as_array()?.iter().collect();
    while let Some(node) = pending.pop() {
        if node["entry"]["id"] == id {
            return node.get("label").cloned();
        }
        pending.extend(node["children"].as_array().into_iter().flatten());
    }
    None
}

/// Pi's `bookmark.ts`, unchanged: it finds the last assistant message in `getEntries()`,
/// labels it, and `/unbookmark` finds the label again with `getLabel`.
#[test]
fn pis_bookmark_example_labels_the_last_assistant_message() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    let builder = Nova::builder()
        .ollama(&mock)
        .args(["-e", &example(&modules, "bookmark.ts")]);
    let mut nova = loaded(builder, &modules);
    nova.run_prompt("one");
    nova.run_prompt("two");

    nova.send(&json!({"id": "b", "type": "prompt", "message": "/bookmark here"}));
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(notify["message"], "Bookmarked as: here", "{notify}");
    nova.wait_for(|v| v["id"] == "b", WAIT);

    let entries = nova.request_ok(json!({"type": "get_entries"}))["entries"].clone();
    let last_assistant = entries
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .expect("an assistant entry")
        .clone();
    let id = last_assistant["id"].as_str().unwrap();
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    assert_eq!(label_in_tree(&tree, id), Some(json!("here")), "{tree}");

    nova.send(&json!({"id": "u", "type": "prompt", "message": "/unbookmark"}));
    let notify = nova.wait_for(
        |v| v["method"] == "notify" && v["message"] != "Bookmarked as: here",
        WAIT,
    );
    assert_eq!(notify["message"], "Removed bookmark: here", "{notify}");
    nova.wait_for(|v| v["id"] == "u", WAIT);
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    assert_eq!(label_in_tree(&tree, id), None, "{tree}");
    mock.assert_no_violations();
}

const READER: &str = r#"
import { Type } from "typebox";
const shape = (sm) => ({
  entries: sm.getEntries().map((e) => e.type === "message" ? `${e.type}:${e.message.role}` : e.type),
  branch: sm.getBranch().map((e) => e.id),
  leaf: sm.getLeafId(),
  leafType: sm.getLeafEntry()?.type,
  header: sm.getHeader(),
  cwd: sm.getCwd(),
  id: sm.getSessionId(),
  roots: sm.getTree().length,
  context: sm.buildSessionContext().messages.length,
});
export default function (pi) {
  // Mid-run: the tool runs after the assistant message that calls it, which the mirror has.
  pi.registerTool({
    name: "peek", label: "Peek", description: "Reads the session",
    parameters: Type.Object({}),
    async execute(_id, _params, _signal, _update, ctx) {
      return { content: [{ type: "text", text: JSON.stringify(shape(ctx.sessionManager)) }], details: {} };
    },
  });
  pi.on("turn_end", (event, ctx) => {
    ctx.ui.notify(`turn_end:${JSON.stringify(shape(ctx.sessionManager).entries)}`, "info");
  });
  pi.registerCommand("entries", {
    handler: async (_args, ctx) => ctx.ui.notify(`entries:${JSON.stringify(shape(ctx.sessionManager))}`, "info"),
  });
  pi.registerCommand("note", {
    handler: async (args, ctx) => {
      pi.appendEntry("note", { text: args });
    },
  });
}
"#;

/// An extension reads nova's session through `ctx.sessionManager`: in a tool mid-run, in a
/// `turn_end` handler and in a command after the run, each seeing what `get_entries` gives.
#[test]
fn an_extension_reads_the_sessions_entries_during_and_after_a_run() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "peek", json!({})));
    mock.push(Reply::text("done"));
    let builder = Nova::builder()
        .ollama(&mock)
        .file("reader.js", READER)
        .args(["-e", "reader.js"]);
    let mut nova = loaded(builder, &modules);
    let events = nova.run_prompt("look");

    let result = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the tool ran");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    let mid: Value = serde_json::from_str(text).unwrap();
    let seen = mid["entries"].as_array().unwrap();
    assert_eq!(
        seen[seen.len() - 2..],
        [json!("message:user"), json!("message:assistant")],
        "the calling message, not yet its result: {mid}"
    );
    assert_eq!(mid["leafType"], "message");
    assert_eq!(mid["roots"], 1);

    // Each turn's handler found its messages (the first may find the next turn's reply too: the
    // mirror is read when the handler's turn has ended, and the run goes on meanwhile).
    let turns = notices(&mut nova, "turn_end:", 2);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(
        turns[0].contains(r#""message:user","message:assistant","message:toolResult""#),
        "{turns:?}"
    );
    assert!(
        turns[1].ends_with(r#""message:toolResult","message:assistant"]"#),
        "{turns:?}"
    );

    nova.request_ok(json!({"type": "set_session_name", "name": "read me"}));
    nova.send(&json!({"id": "n", "type": "prompt", "message": "/note kept"}));
    nova.wait_for(|v| v["id"] == "n", WAIT);
    // appendEntry returns before nova has the entry, as Pi's returns before it is on disk.
    let deadline = std::time::Instant::now() + WAIT;
    let data = loop {
        let data = nova.request_ok(json!({"type": "get_entries"}));
        if data["entries"].as_array().unwrap().last().unwrap()["type"] == "custom"
            || std::time::Instant::now() > deadline
        {
            break data;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let state = nova.request_ok(json!({"type": "get_state"}));
    // The mirror has it once nova answered the extension's request.
    let deadline = std::time::Instant::now() + WAIT;
    let after = loop {
        nova.send(&json!({"id": "e", "type": "prompt", "message": "/entries"}));
        let notify = nova.wait_for(
            |v| {
                v["method"] == "notify"
                    && v["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("entries:"))
            },
            WAIT,
        );
        nova.wait_for(|v| v["id"] == "e", WAIT);
        let after: Value =
            serde_json::from_str(&notify["message"].as_str().unwrap()["entries:".len()..]).unwrap();
        if after["entries"].as_array().unwrap().len() == data["entries"].as_array().unwrap().len()
            || std::time::Instant::now() > deadline
        {
            break after;
        }
    };
    let expected: Vec<String> = data["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "message" => format!("message:{}", e["message"]["role"].as_str().unwrap()),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(after["entries"], json!(expected));
    assert_eq!(expected.last().map(String::as_str), Some("custom"));
    assert!(
        expected.contains(&"session_info".to_owned()),
        "{expected:?}"
    );
    assert_eq!(after["leaf"], data["leafId"]);
    assert_eq!(after["branch"].as_array().unwrap().len(), expected.len());
    assert_eq!(after["id"], state["sessionId"]);
    assert_eq!(after["header"]["type"], "session");
    assert_eq!(after["header"]["id"], state["sessionId"]);
    assert_eq!(
        after["context"], 4,
        "user, assistant, tool result, assistant"
    );
    assert!(
        !nova
            .log()
            .iter()
            .any(|l| l.value["type"] == "extension_error"),
        "no handler failed"
    );
    mock.assert_no_violations();
}

const WATCHER: &str = r#"
export default function (pi) {
  const name = (m) => (m ? `${m.provider}/${m.id}` : "none");
  pi.on("model_select", (event, ctx) => {
    ctx.ui.notify(`model_select:${event.source}:${name(event.previousModel)}->${name(event.model)}:${name(ctx.model)}`, "info");
  });
  pi.on("thinking_level_select", (event, ctx) => {
    ctx.ui.notify(`thinking_level_select:${event.previousLevel}->${event.level}:${pi.getThinkingLevel()}`, "info");
  });
  pi.on("session_info_changed", (event, ctx) => {
    ctx.ui.notify(`session_info_changed:${event.name}:${ctx.sessionManager.getSessionName()}`, "info");
  });
  pi.on("user_bash", (event) => {
    if (event.command.startsWith("remote ")) {
      return { result: { output: `ran ${event.command} elsewhere in ${event.cwd}`, exitCode: 3, cancelled: false, truncated: false } };
    }
    if (event.command === "fail") throw new Error("no such host");
  });
}
"#;

fn notices(nova: &mut Nova, prefix: &str, count: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        nova.drain_pending();
        let found: Vec<String> = nova
            .log()
            .iter()
            .filter_map(|l| l.value["message"].as_str())
            .filter(|m| m.starts_with(prefix))
            .map(str::to_owned)
            .collect();
        if found.len() >= count || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A client's `set_model` and `cycle_model` reach `model_select` (after the level's
/// `thinking_level_select`), `set_session_name` reaches `session_info_changed`, each handler
/// seeing the state as it now is.
#[test]
fn model_thinking_and_name_changes_reach_their_handlers() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let mut models = ollama_models(&mock);
    models["providers"]["mock-ollama"]["models"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "id": "thinker", "name": "thinker", "api": "ollama", "reasoning": true,
            "input": ["text"], "contextWindow": 128000, "maxTokens": 4096,
        }));
    let builder = Nova::builder()
        .ollama(&mock)
        .models_json(models)
        .file("watcher.js", WATCHER)
        .args(["-e", "watcher.js"]);
    let mut nova = loaded(builder, &modules);

    // One change at a time: each handler reads the state its own change left.
    nova.request_ok(json!({"type": "set_model", "provider": "mock-ollama", "modelId": "thinker"}));
    notices(&mut nova, "model_select:", 1);
    nova.request_ok(json!({"type": "set_thinking_level", "level": "high"}));
    notices(&mut nova, "thinking_level_select:", 1);
    nova.request_ok(json!({"type": "cycle_model"}));
    notices(&mut nova, "model_select:", 2);
    // The same model again is no selection, as in Pi.
    nova.request_ok(
        json!({"type": "set_model", "provider": "mock-ollama", "modelId": "test-model"}),
    );
    nova.request_ok(json!({"type": "set_session_name", "name": "watched"}));
    let names = notices(&mut nova, "session_info_changed:", 1);
    assert_eq!(names, ["session_info_changed:watched:watched"]);

    let models = notices(&mut nova, "model_select:", 2);
    assert_eq!(
        models,
        [
            "model_select:set:mock-ollama/test-model->mock-ollama/thinker:mock-ollama/thinker",
            "model_select:cycle:mock-ollama/thinker->mock-ollama/test-model:mock-ollama/test-model",
        ]
    );
    let levels = notices(&mut nova, "thinking_level_select:", 2);
    assert_eq!(
        levels,
        [
            "thinking_level_select:off->high:high",
            "thinking_level_select:high->off:off",
        ]
    );
    // In Pi's order: the level's event before the model's.
    let order: Vec<&str> = nova
        .log()
        .iter()
        .filter_map(|l| l.value["message"].as_str())
        .filter_map(|m| m.split(':').next())
        .collect();
    assert_eq!(
        order,
        [
            "model_select",
            "thinking_level_select",
            "thinking_level_select",
            "model_select",
            "session_info_changed",
        ]
    );
}

/// A `user_bash` hook answers for a client's `bash` command with its own result, which is
/// recorded as the command's; a hook that throws fails the command; the others run in nova's
/// shell, and a command the permission rules deny is refused before any hook sees it.
#[test]
fn a_user_bash_hook_answers_for_a_command() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let builder = Nova::builder()
        .ollama(&mock)
        .settings(json!({"permissions": {"bash": {"deny": ["rm *"]}}}))
        .file("watcher.js", WATCHER)
        .args(["-e", "watcher.js"]);
    let mut nova = loaded(builder, &modules);
    let cwd = nova.cwd();

    let remote = nova.request_ok(json!({"type": "bash", "command": "remote ls"}));
    assert_eq!(
        remote,
        json!({
            "output": format!("ran remote ls elsewhere in {}", cwd.display()),
            "exitCode": 3, "cancelled": false, "truncated": false,
        })
    );
    let local = nova.request_ok(json!({"type": "bash", "command": "echo local"}));
    assert_eq!(local["output"], "local\n");
    let failed = nova.request(json!({"type": "bash", "command": "fail"}));
    assert_eq!(failed["success"], false, "{failed}");
    assert!(
        failed["error"].as_str().unwrap().contains("no such host"),
        "{failed}"
    );
    let denied = nova.request(json!({"type": "bash", "command": "rm -rf remote"}));
    assert_eq!(denied["success"], false, "{denied}");

    let messages = nova.request_ok(json!({"type": "get_messages"}))["messages"].clone();
    let ran: Vec<(Value, Value)> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "bashExecution")
        .map(|m| (m["command"].clone(), m["exitCode"].clone()))
        .collect();
    assert_eq!(
        ran,
        [
            (json!("remote ls"), json!(3)),
            (json!("echo local"), json!(0))
        ]
    );
}

/// Registers a command once the session has started, and another from a command.
const LATE: &str = r#"
export default function (pi) {
  pi.on("session_start", async () => {
    pi.registerCommand("late", { handler: async (_a, ctx) => ctx.ui.notify("late ran", "info") });
  });
  pi.registerCommand("more", {
    handler: async () => {
      pi.registerCommand("later", { handler: async (_a, ctx) => ctx.ui.notify("later ran", "info") });
    },
  });
}
"#;

/// The commands `get_commands` lists, once `name` is among them (a command registered after
/// loading reaches nova a moment later).
fn listed_with(nova: &mut Nova, name: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let listed: Vec<String> = nova.request_ok(json!({"type": "get_commands"}))["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect();
        if listed.iter().any(|n| n == name) || std::time::Instant::now() > deadline {
            return listed;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn commands_registered_after_loading_are_listed_and_run() {
    let Some(modules) = pi_modules() else { return };
    let builder = Nova::builder()
        .file("late.ts", LATE)
        .args(["-e", "late.ts"]);
    let mut nova = loaded(builder, &modules);
    assert!(listed_with(&mut nova, "late").contains(&"late".to_owned()));
    nova.request_ok(json!({"type": "prompt", "message": "/late"}));
    let ran = nova.wait_for(|v| v["method"] == "notify", WAIT);
    assert_eq!(ran["message"], "late ran");

    nova.request_ok(json!({"type": "prompt", "message": "/more"}));
    assert!(listed_with(&mut nova, "later").contains(&"later".to_owned()));
    nova.request_ok(json!({"type": "prompt", "message": "/later"}));
    let ran = nova.wait_for(
        |v| v["method"] == "notify" && v["message"] == "later ran",
        WAIT,
    );
    assert_eq!(ran["message"], "later ran");
}
