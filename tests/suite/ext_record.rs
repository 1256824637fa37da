//! The registrations nova keeps from an extensions' load (src/exthost/record.rs): a later
//! start lists the commands before the host has loaded again, and only while nothing the load
//! read has changed: a file it listed, a variable it read.

use super::extensions::{LOAD, commands, pi_modules, with_pi};
use crate::support::nova_proc::{Nova, ollama_models};
use serde_json::json;
use std::path::Path;

/// One command per prompt file, one more named by a variable; the load takes a second and a
/// half, and says when it is done.
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
  writeFileSync(join(process.cwd(), `loaded-${process.pid}`), "");
}
"#;

fn names(nova: &mut Nova) -> Vec<String> {
    commands(nova)
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

fn loads(cwd: &Path) -> usize {
    std::fs::read_dir(cwd)
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
            .env("NOVA_RECORD_TOKEN", "tok-1234567");
        if let Some(extra) = extra {
            builder = builder.env("NOVA_RECORD_EXTRA", extra);
        }
        with_pi(builder, &modules).spawn()
    };

    // The first start loads, then answers.
    let mut first = spawn(None);
    assert_eq!(names(&mut first), ["review"]);
    assert_eq!(loads(cwd.path()), 1);
    drop(first);

    // The second answers from the record while its host is still loading, and a command run
    // meanwhile waits for the load.
    let mut second = spawn(None);
    assert_eq!(names(&mut second), ["review"]);
    assert_eq!(loads(cwd.path()), 1, "the list waited for the load");
    second.send(&json!({"id": "p", "type": "prompt", "message": "/review"}));
    let ran = second.wait_for(|v| v["method"] == "notify", LOAD);
    assert_eq!(ran["message"], "ran review");
    assert_eq!(loads(cwd.path()), 2);
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
