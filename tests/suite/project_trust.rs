//! What an untrusted project may still do (issue 16, class 11): its retry settings only
//! tighten the user's, every numeric setting is bounded, and its `SYSTEM.md`,
//! `APPEND_SYSTEM.md`, skills and prompt templates reach the model only once it is trusted, and
//! trust is decided as Pi 1.6 decides it (flags, trust.json, defaultProjectTrust).

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{Nova, NovaBuilder};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

/// Sends one prompt to a provider that fails every request, and waits for the last retry.
fn failing_prompt(builder: NovaBuilder, mock: &MockLlm) -> (usize, String) {
    let mut nova = builder.spawn();
    nova.request_ok(json!({"type": "prompt", "message": "hi"}));
    nova.wait_for(|e| e["type"] == "agent_end" && e["willRetry"] != true, LONG);
    (mock.chat_requests().len(), nova.stderr())
}

fn retrying(mock: &MockLlm) -> NovaBuilder {
    Nova::builder()
        .openai(mock)
        .settings(json!({"retry": {"baseDelayMs": 5}}))
        .file(
            ".nova/settings.json",
            json!({"retry": {"maxRetries": 1_000_000_000u32, "baseDelayMs": 0}}).to_string(),
        )
}

#[test]
fn an_untrusted_project_cannot_raise_retries() {
    let mock = MockLlm::start();
    let (requests, stderr) = failing_prompt(retrying(&mock), &mock);
    // The user's (default) three retries, not the project's billion.
    assert_eq!(requests, 4, "{stderr}");
    assert!(
        stderr.contains("may only tighten retry")
            && stderr.contains("a higher \"maxRetries\"")
            && stderr.contains("a shorter \"baseDelayMs\""),
        "{stderr}"
    );
}

#[test]
fn even_a_trusted_project_gets_at_most_ten_retries() {
    let mock = MockLlm::start();
    let (requests, stderr) = failing_prompt(retrying(&mock).args(["--trust-project"]), &mock);
    assert_eq!(requests, 11, "{stderr}");
    assert!(stderr.contains("at most 10 retries are made"), "{stderr}");
}

#[test]
fn an_untrusted_project_may_tighten_retries() {
    let mock = MockLlm::start();
    let builder = Nova::builder()
        .openai(&mock)
        .settings(json!({"retry": {"baseDelayMs": 5}}))
        .file(".nova/settings.json", r#"{"retry": {"maxRetries": 1}}"#);
    let (requests, stderr) = failing_prompt(builder, &mock);
    assert_eq!(requests, 2, "{stderr}");
    assert!(!stderr.contains("tighten"), "{stderr}");
}

#[test]
fn out_of_range_durations_are_bounded_not_fatal() {
    let mock = MockLlm::start();
    mock.push(Reply::text("fine"));
    let mut nova = Nova::builder()
        .openai(&mock)
        .settings(json!({
            "streamIdleTimeoutSeconds": 1e300,
            "mcpStartupWaitSeconds": 1e30,
            "compaction": {"reserveTokens": u64::MAX},
        }))
        .spawn();
    let events = nova.run_prompt("hi");
    assert!(events.iter().any(|e| e["type"] == "agent_end"));
    let stderr = nova.stderr();
    for key in [
        "streamIdleTimeoutSeconds",
        "mcpStartupWaitSeconds",
        "compaction.reserveTokens",
    ] {
        assert!(stderr.contains(&format!("\"{key}\" is")), "{key}: {stderr}");
    }
}

/// A project with its own system prompt, addition to it, skill and template.
fn project_with_prompts(mock: &MockLlm) -> NovaBuilder {
    Nova::builder()
        .openai(mock)
        .file(".nova/SYSTEM.md", "PROJECT SYSTEM PROMPT")
        .file(".nova/APPEND_SYSTEM.md", "PROJECT APPENDIX")
        .file(
            ".nova/skills/evil/SKILL.md",
            "---\nname: evil\ndescription: PROJECT SKILL\n---\nbody\n",
        )
        .file(
            ".agents/skills/near/SKILL.md",
            "---\nname: near\ndescription: NEAR SKILL\n---\nbody\n",
        )
        .file(
            ".nova/prompts/fix.md",
            "---\ndescription: PROJECT TEMPLATE\n---\nFix it",
        )
}

fn system_prompt_and_commands(mut nova: Nova, mock: &MockLlm) -> (String, String, String) {
    mock.push(Reply::text("ok"));
    nova.run_prompt("/fix");
    let request = mock.chat_requests().pop().unwrap();
    let system = request.messages()[0]["content"].to_string();
    let user = request.messages().last().unwrap()["content"].to_string();
    let commands = nova.request_ok(json!({"type": "get_commands"})).to_string();
    (system, format!("{user}{commands}"), nova.stderr())
}

#[test]
fn an_untrusted_project_s_prompts_skills_and_templates_are_not_loaded() {
    let mock = MockLlm::start();
    let (system, rest, stderr) =
        system_prompt_and_commands(project_with_prompts(&mock).spawn(), &mock);
    for text in [
        "PROJECT SYSTEM PROMPT",
        "PROJECT APPENDIX",
        "PROJECT SKILL",
        "NEAR SKILL",
    ] {
        assert!(!system.contains(text), "{text} reached the model: {system}");
    }
    assert!(system.contains("You are nova"), "{system}");
    assert!(
        !rest.contains("PROJECT TEMPLATE") && !rest.contains("Fix it"),
        "{rest}"
    );
    assert!(
        stderr.contains("SYSTEM.md")
            && stderr.contains("skills and prompt templates are not loaded"),
        "{stderr}"
    );
}

#[test]
fn a_trusted_project_s_prompts_skills_and_templates_are_loaded() {
    let mock = MockLlm::start();
    let nova = project_with_prompts(&mock)
        .args(["--trust-project"])
        .spawn();
    let (system, rest, stderr) = system_prompt_and_commands(nova, &mock);
    assert!(system.contains("PROJECT SYSTEM PROMPT"), "{system}");
    assert!(system.contains("PROJECT APPENDIX"), "{system}");
    assert!(
        rest.contains("PROJECT TEMPLATE") && rest.contains("Fix it"),
        "{rest}"
    );
    assert!(!stderr.contains("not trusted"), "{stderr}");
}

#[test]
fn a_fifo_where_a_context_or_settings_file_belongs_does_not_hang_startup() {
    let builder = Nova::builder();
    let cwd = builder.cwd().to_path_buf();
    std::fs::create_dir_all(cwd.join(".nova")).unwrap();
    for fifo in ["AGENTS.md", ".nova/settings.json", ".mcp.json"] {
        let made = std::process::Command::new("mkfifo")
            .arg(cwd.join(fifo))
            .status()
            .unwrap();
        assert!(made.success());
    }
    // Nobody ever writes the FIFOs: reading one would wait for ever.
    let mut nova = builder.spawn();
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert!(state["sessionId"].is_string(), "{state}");
    let stderr = nova.stderr_with("settings.json");
    assert!(stderr.contains("not a regular file (a FIFO)"), "{stderr}");
}

/// Whether the project's own system prompt reached the model.
fn loads_project_files(builder: NovaBuilder, mock: &MockLlm) -> bool {
    let (system, _, _) = system_prompt_and_commands(builder.spawn(), mock);
    system.contains("PROJECT SYSTEM PROMPT")
}

/// Pi's order: the flag, then the saved decisions in trust.json (the closest directory wins),
/// then the user's defaultProjectTrust; a project never decides for itself.
#[test]
fn trust_is_decided_as_pi_decides_it() {
    let mock = MockLlm::start();
    let project = || project_with_prompts(&mock);
    let saved = |builder: NovaBuilder, decisions: &[(&std::path::Path, bool)]| {
        let map: serde_json::Map<String, serde_json::Value> = decisions
            .iter()
            .map(|(dir, d)| {
                (
                    dir.canonicalize().unwrap().display().to_string(),
                    (*d).into(),
                )
            })
            .collect();
        builder.agent_file("trust.json", serde_json::Value::Object(map).to_string())
    };

    assert!(
        !loads_project_files(project(), &mock),
        "untrusted by default"
    );
    assert!(loads_project_files(project().args(["-a"]), &mock));
    assert!(loads_project_files(project().args(["--approve"]), &mock));

    let b = project();
    let parent = b.cwd().parent().unwrap().to_path_buf();
    assert!(
        loads_project_files(saved(b, &[(&parent, true)]), &mock),
        "a parent's decision"
    );
    let b = project();
    let (cwd, parent) = (
        b.cwd().to_path_buf(),
        b.cwd().parent().unwrap().to_path_buf(),
    );
    assert!(
        !loads_project_files(saved(b, &[(&parent, true), (&cwd, false)]), &mock),
        "the closest decision wins"
    );
    let b = project().args(["-na"]);
    let cwd = b.cwd().to_path_buf();
    assert!(
        !loads_project_files(saved(b, &[(&cwd, true)]), &mock),
        "--no-approve over a saved decision"
    );

    let always = json!({"defaultProjectTrust": "always"});
    assert!(loads_project_files(
        project().settings(always.clone()),
        &mock
    ));
    assert!(!loads_project_files(
        project().settings(json!({"defaultProjectTrust": "ask"})),
        &mock
    ));
    assert!(
        !loads_project_files(
            project().file(".nova/settings.json", always.to_string()),
            &mock
        ),
        "a project's own defaultProjectTrust is not read"
    );
    assert!(
        !loads_project_files(
            project().file(
                ".nova/settings.json",
                json!({"trustedProjects": ["."]}).to_string()
            ),
            &mock
        ),
        "nor its own trustedProjects"
    );
}
