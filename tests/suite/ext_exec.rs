//! An extension's `pi.exec` runs through nova's gate and sandbox, as the model's `bash` calls
//! do: deny rules refuse it, a flagged program asks the client first, writes outside the
//! workspace fail, and the result has Pi's shape (stdout and stderr apart, the exit code).

use super::extensions::{LOAD, loaded, pi_modules};
use super::sandbox::outside;
use crate::support::nova_proc::{Nova, NovaBuilder};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// `/run ["program", "arg"…]` runs the program with `pi.exec` and notifies its result.
const RUNNER: &str = r#"
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.registerCommand("run", {
    handler: async (args, ctx) => {
      const [program, ...rest] = JSON.parse(args);
      const result = await pi.exec(program, rest, { timeout: 20000 });
      ctx.ui.notify(JSON.stringify(result), "info");
    },
  });
}
"#;

fn runner(builder: NovaBuilder) -> Option<Nova> {
    let modules = pi_modules()?;
    let builder = builder.file("runner.ts", RUNNER).args(["-e", "runner.ts"]);
    Some(loaded(builder, &modules))
}

/// Runs `/run argv` and returns what `pi.exec` resolved with.
fn run(nova: &mut Nova, id: &str, argv: Value) -> Value {
    let message = format!("/run {argv}");
    nova.send(&json!({"id": id, "type": "prompt", "message": message}));
    let notify = nova.wait_for(|v| v["method"] == "notify", LOAD);
    nova.wait_for(|v| v["id"] == id, WAIT);
    serde_json::from_str(notify["message"].as_str().unwrap()).unwrap()
}

#[test]
fn exec_runs_without_a_shell_and_answers_as_pi() {
    let Some(mut nova) = runner(Nova::builder()) else {
        return;
    };
    let result = run(
        &mut nova,
        "p1",
        json!([
            "sh",
            "-c",
            "echo out; echo err >&2; echo \"$PI_CODING_AGENT\"; exit 3"
        ]),
    );
    assert_eq!(result["stdout"], "out\ntrue\n", "{result}");
    assert_eq!(result["stderr"], "err\n", "{result}");
    assert_eq!(result["code"], 3);
    assert_eq!(result["killed"], false);
    // Its arguments are words, not shell text.
    let result = run(&mut nova, "p2", json!(["echo", "$HOME; ls"]));
    assert_eq!(result["stdout"], "$HOME; ls\n", "{result}");
    // A program that does not exist is a failed run, not an exception (127, as a shell says).
    let result = run(&mut nova, "p3", json!(["no-such-program-here"]));
    assert_eq!(result["code"], 127, "{result}");
    assert!(
        result["stderr"]
            .as_str()
            .unwrap()
            .contains("no-such-program-here"),
        "{result}"
    );
}

#[test]
fn exec_goes_through_the_gate_and_the_sandbox() {
    let out = outside();
    let target = out.path().join("escaped.txt");
    let settings = json!({"permissions": {"bash": {"deny": ["curl *"]}}});
    let Some(mut nova) = runner(Nova::builder().settings(settings)) else {
        return;
    };
    // A deny rule refuses it without asking, naming the rule.
    let denied = run(&mut nova, "p1", json!(["curl", "http://127.0.0.1:9/"]));
    assert_eq!(denied["code"], 1, "{denied}");
    assert!(
        denied["stderr"].as_str().unwrap().contains("curl *"),
        "{denied}"
    );

    // The sandbox confines its writes to the workspace.
    let escaped = run(
        &mut nova,
        "p2",
        json!(["touch", target.display().to_string()]),
    );
    assert_ne!(escaped["code"], 0, "{escaped}");
    assert!(!target.exists(), "pi.exec wrote outside the workspace");
    let inside = run(&mut nova, "p3", json!(["touch", "made-by-exec.txt"]));
    assert_eq!(inside["code"], 0, "{inside}");
    assert!(nova.cwd().join("made-by-exec.txt").exists());

    // A flagged program asks the client, as the model's call would; a refusal is a failed run.
    nova.send(&json!({"id": "p4", "type": "prompt", "message": "/run [\"rm\", \"-rf\", \"made-by-exec.txt\"]"}));
    let asked = nova.wait_for(|v| v["type"] == "permission_request", WAIT);
    assert_eq!(asked["toolName"], "exec", "{asked}");
    assert!(
        asked["command"]
            .as_str()
            .unwrap()
            .contains("rm -rf made-by-exec.txt"),
        "{asked}"
    );
    nova.request_ok(
        json!({"type": "permission_response", "requestId": asked["requestId"], "approved": false}),
    );
    let notify = nova.wait_for(|v| v["method"] == "notify", WAIT);
    let refused: Value = serde_json::from_str(notify["message"].as_str().unwrap()).unwrap();
    assert_eq!(refused["code"], 1, "{refused}");
    assert!(nova.cwd().join("made-by-exec.txt").exists());
}
