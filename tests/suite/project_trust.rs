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

/// Issue 30 item 12: a context file another user can have written — in a directory others can
/// write (not sticky, or sticky but the file is not the user's), or owned by another non-root
/// user — stays out of the system prompt, and one stderr line names each one skipped.
#[test]
fn context_files_other_users_can_change_are_skipped_and_named() {
    use std::os::unix::fs::PermissionsExt;
    let base = tempfile::tempdir().unwrap();
    let base_path = std::fs::canonicalize(base.path()).unwrap();
    let open = base_path.join("open");
    let sticky = open.join("sticky");
    let theirs = sticky.join("theirs");
    let work = theirs.join("work");
    std::fs::create_dir_all(&work).unwrap();
    for (dir, mode, text) in [
        (&open, 0o777, "RULES FROM A WORLD-WRITABLE DIR"),
        (&sticky, 0o1777, "RULES OF MINE IN A STICKY DIR"),
        (&theirs, 0o755, "RULES FROM ANOTHER USER"),
        (&work, 0o755, "RULES OF MY PROJECT"),
    ] {
        std::fs::write(dir.join("AGENTS.md"), text).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Another user's file needs root to make; without it that case is left out.
    let chowned = std::os::unix::fs::chown(theirs.join("AGENTS.md"), Some(65534), Some(65534));
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let mut nova = Nova::builder()
        .dirs(base_path.join("agent"), &work)
        .ollama(&mock)
        .spawn();
    nova.run_prompt("hi");
    let system = super::cli::system_message(&mock.chat_requests()[0]);
    assert!(system.contains("RULES OF MY PROJECT"), "{system}");
    assert!(system.contains("RULES OF MINE IN A STICKY DIR"), "{system}");
    assert!(!system.contains("WORLD-WRITABLE"), "{system}");
    let stderr = nova.stderr_with("skipped context files");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("skipped context files"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let open_file = open.join("AGENTS.md");
    assert!(lines[0].contains(open_file.to_str().unwrap()), "{stderr}");
    if chowned.is_ok() {
        assert!(!system.contains("ANOTHER USER"), "{system}");
        let their_file = theirs.join("AGENTS.md");
        assert!(lines[0].contains(their_file.to_str().unwrap()), "{stderr}");
    }
    for dir in [&open, &sticky] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
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

/// A repository that keeps Pi's project dir: its system prompt, skills and templates count
/// once the project is trusted, as `.nova/`'s do, and nova's own file wins where both exist.
#[test]
fn pis_project_dir_is_read_under_the_same_trust() {
    let mock = MockLlm::start();
    let project = || {
        Nova::builder()
            .openai(&mock)
            .file(".pi/SYSTEM.md", "PI SYSTEM PROMPT")
            .file(".pi/APPEND_SYSTEM.md", "PI APPENDIX")
            .file(".nova/APPEND_SYSTEM.md", "NOVA APPENDIX")
            .file(
                ".pi/skills/pi-skill/SKILL.md",
                "---\nname: pi-skill\ndescription: PI SKILL\n---\nbody\n",
            )
            .file(
                ".pi/prompts/fix.md",
                "---\ndescription: PI TEMPLATE\n---\nFix it",
            )
    };
    let (system, rest, _) = system_prompt_and_commands(project().args(["-a"]).spawn(), &mock);
    assert!(system.contains("PI SYSTEM PROMPT"), "{system}");
    assert!(
        system.contains("NOVA APPENDIX") && !system.contains("PI APPENDIX"),
        "{system}"
    );
    assert!(
        rest.contains("PI TEMPLATE") && rest.contains("PI SKILL"),
        "{rest}"
    );
    let (system, rest, stderr) = system_prompt_and_commands(project().spawn(), &mock);
    assert!(!system.contains("PI SYSTEM PROMPT"), "{system}");
    assert!(
        !rest.contains("PI TEMPLATE") && !rest.contains("PI SKILL"),
        "{rest}"
    );
    assert!(stderr.contains(".pi/SYSTEM.md"), "{stderr}");
}
