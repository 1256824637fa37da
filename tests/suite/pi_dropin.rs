//! What a Pi user's setup gets from nova beyond the command line, through the real binary and
//! the mock LLM: the context files Pi finds, the `PI_*` environment of shell commands, where
//! sessions go, the prompt-cache lifetime switch and the project's `.pi/` extensions.

use super::cli::system_message;
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::path::Path;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Each directory gives its first context file by Pi's names and order (`AGENTS.override.md`,
/// `AGENTS.md`, `AGENTS.MD`, `CLAUDE.md`, `CLAUDE.MD`), the agent dir's first and then from the
/// outermost directory in: an override beats the committed file beside it, an upper-case name
/// counts, and a directory named like a context file is passed over for the next name.
#[test]
fn context_files_are_found_by_pis_names_and_order() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let agent = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let sub = project.path().join("sub");
    let cwd = sub.join("deeper");
    write(&agent.path().join("AGENTS.override.md"), "AGENT-OVERRIDE");
    write(&agent.path().join("AGENTS.md"), "AGENT-PLAIN");
    write(&project.path().join("AGENTS.MD"), "PROJECT-UPPER");
    write(&project.path().join("CLAUDE.md"), "PROJECT-CLAUDE");
    write(&sub.join("AGENTS.override.md"), "SUB-OVERRIDE");
    write(&sub.join("AGENTS.md"), "SUB-PLAIN");
    std::fs::create_dir_all(cwd.join("AGENTS.md")).unwrap();
    write(&cwd.join("CLAUDE.MD"), "DEEPER-CLAUDE-UPPER");
    let mut nova = Nova::builder()
        .dirs(agent.path(), &cwd)
        .openai(&mock)
        .spawn();
    nova.run_prompt("hi");
    let system = system_message(&mock.chat_requests()[0]);
    let at = |marker: &str| {
        system
            .find(marker)
            .unwrap_or_else(|| panic!("{marker} missing:\n{system}"))
    };
    let order = [
        "AGENT-OVERRIDE",
        "PROJECT-UPPER",
        "SUB-OVERRIDE",
        "DEEPER-CLAUDE-UPPER",
    ];
    for pair in order.windows(2) {
        assert!(
            at(pair[0]) < at(pair[1]),
            "{pair:?} out of order:\n{system}"
        );
    }
    for shadowed in ["AGENT-PLAIN", "PROJECT-CLAUDE", "SUB-PLAIN"] {
        assert!(!system.contains(shadowed), "{shadowed} was read:\n{system}");
    }
    assert!(
        system.contains(&format!("## {}", sub.join("AGENTS.override.md").display())),
        "{system}"
    );
}

/// The `PI_*` variables a command sees, one `NAME=value` line each (`-` when unset).
const SHOW_ENV: &str = "for v in PI_CODING_AGENT AI_AGENT PI_SESSION_ID PI_SESSION_FILE \
                        PI_PROVIDER PI_MODEL PI_REASONING_LEVEL; do echo \"$v=${!v--}\"; done";

fn env_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The model's `bash` calls and the user's `bash` command see Pi's variables for the session
/// they run for (the id and file `get_state` reports, the model, the thinking level), and one
/// inherited from nova's own environment never leaks through: with `--no-session` there is no
/// session file, whatever nova's parent had set.
#[test]
fn shell_commands_see_the_sessions_pi_variables() {
    for no_session in [false, true] {
        let mock = MockLlm::start();
        mock.push(
            Reply::new()
                .tool_call("call_env", "bash", json!({"command": SHOW_ENV}))
                .finish("tool_calls"),
        );
        mock.push(Reply::text("done"));
        let mut builder = Nova::builder()
            .openai(&mock)
            .args(["--thinking", "high"])
            .env("PI_SESSION_FILE", "/outer/session.jsonl")
            .env("PI_SESSION_ID", "outer-id");
        if no_session {
            builder = builder.args(["--no-session"]);
        }
        let mut nova = builder.spawn();
        let events = nova.run_prompt("show me");
        let tool_text = events
            .iter()
            .find(|e| e["type"] == "tool_execution_end")
            .and_then(|e| e["result"]["content"][0]["text"].as_str())
            .unwrap_or_else(|| panic!("no bash result in {events:?}"))
            .to_owned();
        let state = nova.request_ok(json!({"type": "get_state"}));
        let user = nova.request_ok(json!({"type": "bash", "command": SHOW_ENV}));
        let file = match state["sessionFile"].as_str() {
            Some(file) => file.to_owned(),
            None => "-".to_owned(),
        };
        assert_eq!(file == "-", no_session, "{state}");
        let expected: Vec<(String, String)> = [
            ("PI_CODING_AGENT", "true"),
            ("AI_AGENT", "nova"),
            ("PI_SESSION_ID", state["sessionId"].as_str().unwrap()),
            ("PI_SESSION_FILE", &file),
            ("PI_PROVIDER", "mock-openai"),
            ("PI_MODEL", "test-model"),
            (
                "PI_REASONING_LEVEL",
                state["thinkingLevel"].as_str().unwrap(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(env_lines(&tool_text), expected, "the model's bash");
        let user_text = user["output"].as_str().unwrap_or_default();
        assert_eq!(env_lines(user_text), expected, "the user's bash: {user}");
        assert_ne!(state["sessionId"], Value::from("outer-id"));
    }
}

/// The session file a fresh nova in `cwd` reports, and its stderr.
fn session_file(agent: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let mock = MockLlm::start();
    let mut builder = Nova::builder()
        .dirs(agent, cwd)
        .openai(&mock)
        .args(args.iter().copied());
    for (k, v) in env {
        builder = builder.env(*k, *v);
    }
    let mut nova = builder.spawn();
    let state = nova.request_ok(json!({"type": "get_state"}));
    let file = state["sessionFile"].as_str().unwrap_or_default().to_owned();
    nova.close_stdin();
    nova.wait_exit(std::time::Duration::from_secs(10));
    (file, nova.stderr())
}

/// Where sessions go, in Pi's order: `--session-dir`, then `PI_CODING_AGENT_SESSION_DIR`, then
/// the `sessionDir` setting (relative to the cwd); a project's `sessionDir` counts only when
/// the project is trusted, and an untrusted one's is reported and ignored.
#[test]
fn session_dir_comes_from_the_flag_the_variable_or_the_setting() {
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let (flag_dir, env_dir) = (elsewhere.path().join("flag"), elsewhere.path().join("env"));
    let flag_dir_s = flag_dir.display().to_string();
    let env_dir_s = env_dir.display().to_string();
    let in_dir = |file: &str, dir: &Path| Path::new(file).parent() == Some(dir);

    write(
        &agent.path().join("settings.json"),
        &json!({"sessionDir": "user-sessions"}).to_string(),
    );
    let (file, _) = session_file(agent.path(), cwd.path(), &[], &[]);
    assert!(in_dir(&file, &cwd.path().join("user-sessions")), "{file}");
    let env = [("PI_CODING_AGENT_SESSION_DIR", env_dir_s.as_str())];
    let (file, _) = session_file(agent.path(), cwd.path(), &[], &env);
    assert!(in_dir(&file, &env_dir), "{file}");
    let (file, _) = session_file(
        agent.path(),
        cwd.path(),
        &["--session-dir", &flag_dir_s],
        &env,
    );
    assert!(in_dir(&file, &flag_dir), "{file}");

    // A project's own: ignored until the project is trusted.
    write(
        &cwd.path().join(".pi/settings.json"),
        &json!({"sessionDir": "../project-sessions"}).to_string(),
    );
    let (file, stderr) = session_file(agent.path(), cwd.path(), &[], &[]);
    assert!(in_dir(&file, &cwd.path().join("user-sessions")), "{file}");
    assert!(
        stderr.contains("\"sessionDir\" setting is ignored"),
        "{stderr}"
    );
    let (file, _) = session_file(agent.path(), cwd.path(), &["--approve"], &[]);
    assert!(
        in_dir(&file, &cwd.path().join("../project-sessions")),
        "{file}"
    );
}

/// The first request a prompt sends to `api` on the mock, with `PI_CACHE_RETENTION` as given
/// and the model's `compat` as given; and the session's id.
fn first_request(api: &str, retention: Option<&str>, compat: Value) -> (Value, String) {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let base_url = match api {
        "anthropic-messages" => mock.base_url_anthropic(),
        _ => mock.base_url_openai(),
    };
    let models = json!({"providers": {"mock": {
        "baseUrl": base_url, "api": api, "apiKey": "mock-key",
        "models": [{"id": "test-model", "contextWindow": 128000, "maxTokens": 4096,
                    "compat": compat}]}}});
    let mut builder =
        Nova::builder()
            .models_json(models)
            .args(["--provider", "mock", "--model", "test-model"]);
    if let Some(value) = retention {
        builder = builder.env("PI_CACHE_RETENTION", value);
    }
    let mut nova = builder.spawn();
    nova.run_prompt("hi");
    let state = nova.request_ok(json!({"type": "get_state"}));
    mock.assert_no_violations();
    let body = mock.chat_requests()[0].body.clone();
    (body, state["sessionId"].as_str().unwrap().to_owned())
}

/// Every `cache_control` breakpoint of an Anthropic body.
fn breakpoints(body: &Value) -> Vec<Value> {
    let mut found = Vec::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let Some(c) = map.get("cache_control") {
                    found.push(c.clone());
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// `PI_CACHE_RETENTION=long` asks each API for its long prompt cache as Pi 1.6 does: an hour's
/// `ttl` on Anthropic's breakpoints, `prompt_cache_retention: "24h"` on OpenAI's chat
/// completions (which then also carry the session's `prompt_cache_key`, even off OpenAI's own
/// server) and Responses; a model whose `compat.supportsLongCacheRetention` is false, or any
/// other value of the variable, keeps the default cache.
#[test]
fn pi_cache_retention_long_asks_for_the_long_cache() {
    let none = Value::Null;
    let (body, _) = first_request("anthropic-messages", Some("long"), none.clone());
    let marks = breakpoints(&body);
    assert!(!marks.is_empty(), "{body}");
    for mark in &marks {
        assert_eq!(mark, &json!({"type": "ephemeral", "ttl": "1h"}), "{body}");
    }
    for (retention, compat) in [
        (None, none.clone()),
        (Some("short"), none.clone()),
        (Some("long"), json!({"supportsLongCacheRetention": false})),
    ] {
        let (body, _) = first_request("anthropic-messages", retention, compat);
        for mark in breakpoints(&body) {
            assert_eq!(mark, json!({"type": "ephemeral"}), "{retention:?}: {body}");
        }
    }

    let (body, id) = first_request("openai-completions", Some("long"), none.clone());
    assert_eq!(body["prompt_cache_retention"], "24h", "{body}");
    assert_eq!(body["prompt_cache_key"], json!(id), "{body}");
    for (retention, compat) in [
        (None, none.clone()),
        (Some("long"), json!({"supportsLongCacheRetention": false})),
    ] {
        let (body, _) = first_request("openai-completions", retention, compat);
        assert!(body.get("prompt_cache_retention").is_none(), "{body}");
        assert!(body.get("prompt_cache_key").is_none(), "{body}");
    }

    let (body, id) = first_request("openai-responses", Some("long"), none.clone());
    assert_eq!(body["prompt_cache_retention"], "24h", "{body}");
    assert_eq!(body["prompt_cache_key"], json!(id), "{body}");
    let (body, _) = first_request("openai-responses", None, none);
    assert!(body.get("prompt_cache_retention").is_none(), "{body}");
}

/// `-e npm:…` names a package, not a file: one `nova install` has not put in the agent dir is
/// a usage error saying how to install it, not "no extension file".
#[test]
fn an_extension_package_not_installed_is_named_with_its_install_command() {
    let mut nova = Nova::builder()
        .args(["--no-extensions", "-e", "npm:@example/pi-tools"])
        .spawn();
    let status = nova.wait_exit(std::time::Duration::from_secs(10));
    assert_eq!(status.code(), Some(2));
    let stderr = nova.stderr();
    assert!(
        stderr.contains("-e npm:@example/pi-tools: the package is not installed; `nova install npm:@example/pi-tools` installs it"),
        "{stderr}"
    );
}

/// An installed package given to `-e` brings its skills and prompt templates as well, even with
/// `--no-extensions`, as Pi loads a `-e` package's resources.
#[test]
fn an_installed_extension_package_brings_its_skills_and_templates() {
    let package = "npm/node_modules/@example/pi-helpers";
    let mut nova = Nova::builder()
        .agent_file(
            &format!("{package}/package.json"),
            r#"{"name": "@example/pi-helpers", "pi": {"prompts": ["prompts"], "skills": ["skills"]}}"#,
        )
        .agent_file(
            &format!("{package}/prompts/tidy.md"),
            "---\ndescription: Tidy up\n---\nTidy the code.\n",
        )
        .agent_file(
            &format!("{package}/skills/greet/SKILL.md"),
            "---\nname: greet\ndescription: Say hello\n---\nSay hello.\n",
        )
        .args(["--no-extensions", "-e", "npm:@example/pi-helpers"])
        .spawn();
    let answer = nova.request_ok(json!({"type": "get_commands"}));
    let names: Vec<&str> = answer["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for name in ["tidy", "skill:greet"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
}
