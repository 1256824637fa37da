//! The registrations nova keeps from an extensions' load (src/exthost/record.rs): a later
//! start lists the commands before the host has loaded again, and only while nothing the load
//! read has changed: a file it listed, a variable it read.

use super::extensions::{LOAD, commands, pi_modules, with_pi};
use crate::support::nova_proc::{Nova, ollama_models};
use serde_json::json;
use std::path::Path;

/// One command per prompt file, one more named by a variable; the load takes a second and a
/// half, and leaves a marker when it is done.
const PROMPTS: &str = r#"
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
export default function (pi) {
  for (const file of readdirSync(join(process.cwd(), "prompts")).sort()) {
    const name = file.replace(/\.md$/, "");
    pi.registerCommand(name, {
      description: "a prompt file",
      handler: async (_args, ctx) => { ctx.ui.notify(`ran ${name}`, "info"); },
    });
  }
  if (!process.env.NOVA_RECORD_TOKEN) throw new Error("no token");
  const extra = process.env.NOVA_RECORD_EXTRA;
  if (extra) pi.registerCommand(extra, { description: "named by a variable", handler: async () => {} });
  const until = Date.now() + 1500;
  while (Date.now() < until) {}
  writeFileSync(join(process.env.NOVA_TEST_MARKERS, `loaded-${process.pid}`), "");
}
"#;

fn names(nova: &mut Nova) -> Vec<String> {
    commands(nova)
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// How many loads have begun, by the marker each writes into `markers`.
fn loads(markers: &Path) -> usize {
    std::fs::read_dir(markers)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("loaded-"))
        .count()
}

#[test]
fn commands_come_from_the_last_load_until_what_it_read_changes() {
    let Some(modules) = pi_modules() else { return };
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let markers = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("prompts")).unwrap();
    std::fs::write(cwd.path().join("prompts/review.md"), "Review.").unwrap();
    std::fs::write(cwd.path().join("prompts.ts"), PROMPTS).unwrap();
    let mock = crate::support::mock_llm::MockLlm::start();
    let spawn = |extra: Option<&str>| {
        let mut builder = Nova::builder()
            .dirs(agent.path(), cwd.path())
            .models_json(ollama_models(&mock))
            .args(["--provider", "mock-ollama", "--model", "test-model"])
            .args(["-e", "prompts.ts"])
            .env("NOVA_RECORD_TOKEN", "tok-1234567")
            .env("NOVA_TEST_MARKERS", markers.path().display().to_string());
        if let Some(extra) = extra {
            builder = builder.env("NOVA_RECORD_EXTRA", extra);
        }
        with_pi(builder, &modules).spawn()
    };

    // The first start loads, then answers.
    let mut first = spawn(None);
    assert_eq!(names(&mut first), ["review"]);
    assert_eq!(loads(markers.path()), 1);
    drop(first);

    // The second answers from the record while its host is still loading, and a command run
    // meanwhile waits for the load.
    let mut second = spawn(None);
    assert_eq!(names(&mut second), ["review"]);
    assert_eq!(loads(markers.path()), 1, "the list waited for the load");
    second.send(&json!({"id": "p", "type": "prompt", "message": "/review"}));
    let ran = second.wait_for(|v| v["method"] == "notify", LOAD);
    assert_eq!(ran["message"], "ran review");
    assert_eq!(loads(markers.path()), 2);
    drop(second);

    // A prompt file more: the directory the load listed changed, so the record is not used.
    std::fs::write(cwd.path().join("prompts/test.md"), "Test.").unwrap();
    let mut third = spawn(None);
    assert_eq!(names(&mut third), ["review", "test"]);
    drop(third);

    // A variable the load read has another value.
    let mut fourth = spawn(Some("deploy-sekrit"));
    assert_eq!(names(&mut fourth), ["review", "test", "deploy-sekrit"]);
    drop(fourth);
    // Variables are kept by name, their values only as digests.
    let records = agent.path().join("exthost/records");
    let texts: Vec<String> = std::fs::read_dir(&records)
        .unwrap()
        .flatten()
        .map(|r| std::fs::read_to_string(r.path()).unwrap())
        .collect();
    assert!(texts.iter().any(|t| t.contains("NOVA_RECORD_TOKEN")));
    assert!(texts.iter().all(|t| !t.contains("tok-1234567")));
}

/// A user extension that counts its loads; with `vote`, it also votes on the project's trust.
fn counted(vote: Option<&str>) -> String {
    let vote = vote.map_or(String::new(), |v| {
        format!("pi.on(\"project_trust\", () => ({{ trusted: \"{v}\" }}));")
    });
    format!(
        r#"import {{ writeFileSync }} from "node:fs";
import {{ join }} from "node:path";
export default function (pi) {{
  writeFileSync(join(process.env.NOVA_TEST_MARKERS, `loaded-${{process.pid}}`), "");
  pi.registerCommand("counted", {{ handler: async (_args, ctx) => ctx.ui.notify("counted", "info") }});
  {vote}
}}
"#
    )
}

#[test]
fn a_trust_vote_nobody_handles_is_skipped_until_the_extensions_change() {
    let Some(modules) = pi_modules() else { return };
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let markers = tempfile::tempdir().unwrap();
    // The project has an extension of its own, which trust governs.
    std::fs::create_dir_all(cwd.path().join(".nova/extensions")).unwrap();
    std::fs::write(
        cwd.path().join(".nova/extensions/project.ts"),
        r#"export default function (pi) { pi.registerCommand("project-cmd", { handler: async () => {} }); }"#,
    )
    .unwrap();
    std::fs::create_dir_all(agent.path().join("extensions")).unwrap();
    let user = agent.path().join("extensions/counted.ts");
    std::fs::write(&user, counted(None)).unwrap();
    let spawn = || {
        let builder = Nova::builder()
            .dirs(agent.path(), cwd.path())
            .env("NOVA_TEST_MARKERS", markers.path().display().to_string());
        with_pi(builder, &modules).spawn()
    };

    // First: a load to vote (nobody handles the event) and the session's.
    let mut first = spawn();
    assert_eq!(names(&mut first), ["counted"]);
    assert_eq!(loads(markers.path()), 2);
    drop(first);

    // Then only the session's (its commands from the record; the command waits for the load).
    let mut second = spawn();
    assert_eq!(names(&mut second), ["counted"]);
    second.send(&json!({"id": "c", "type": "prompt", "message": "/counted"}));
    second.wait_for(|v| v["method"] == "notify", LOAD);
    assert_eq!(loads(markers.path()), 3, "the vote was skipped");
    drop(second);

    // Once the extension votes, it is asked again, and its yes loads the project's.
    std::fs::write(&user, counted(Some("yes"))).unwrap();
    let mut third = spawn();
    let mut listed = names(&mut third);
    listed.sort();
    assert_eq!(listed, ["counted", "project-cmd"]);
}
