//! Pi 1.6's command line, as an embedding program or a person switching from Pi types it:
//! every option parses with Pi's meaning (its short forms too), the UI-only ones are accepted
//! and ignored, `-e` is refused with a reason, and each option with an effect is shown doing it.

use super::cli::system_message;
use super::providers::LONG;
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{Nova, openai_models, wait_or_kill};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A temp agent dir and cwd for runs that exit by themselves.
struct Dirs {
    _root: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
}

struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Dirs {
    fn new(models: Option<&Value>) -> Dirs {
        let root = tempfile::tempdir().unwrap();
        let (agent, cwd) = (root.path().join("agent"), root.path().join("cwd"));
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        if let Some(m) = models {
            std::fs::write(agent.join("models.json"), m.to_string()).unwrap();
        }
        Dirs {
            _root: root,
            agent,
            cwd,
        }
    }

    fn run(&self, args: &[&str]) -> Finished {
        let root = self.agent.parent().unwrap();
        let (out, err) = (root.join("stdout"), root.join("stderr"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_nova"))
            .args(args)
            .current_dir(&self.cwd)
            .env("NOVA_AGENT_DIR", &self.agent)
            .env("HOME", root)
            .env("OLLAMA_HOST", "127.0.0.1:9")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let status = wait_or_kill(&mut child, LONG, &format!("nova {args:?}"), &err);
        Finished {
            code: status.code(),
            stdout: std::fs::read_to_string(&out).unwrap(),
            stderr: std::fs::read_to_string(&err).unwrap(),
        }
    }
}

/// A models.json whose mock model reasons (so a thinking level sticks) and takes images.
fn reasoning_models(mock: &MockLlm) -> Value {
    let mut models = openai_models(mock);
    let model = &mut models["providers"]["mock-openai"]["models"][0];
    model["reasoning"] = json!(true);
    models
}

fn state(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_state"}))
}

fn tool_names(mock: &MockLlm) -> Vec<String> {
    let req = mock.chat_requests().pop().unwrap();
    let mut names: Vec<String> = req
        .body
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every Pi 1.6 option (and short form) that takes effect at startup, each on its own: nova
/// starts and answers, rather than exiting 2 on an unknown argument.
#[test]
fn every_pi_option_parses() {
    let mock = MockLlm::start();
    let forms: &[&[&str]] = &[
        &["--approve"],
        &["-a"],
        &["--trust-project"],
        &["--no-approve"],
        &["-na"],
        &["--no-extensions"],
        &["-ne"],
        &["--skill", "missing-skill-dir"],
        &["--no-skills"],
        &["-ns"],
        &["--prompt-template", "missing-template.md"],
        &["--no-prompt-templates"],
        &["-np"],
        &["--no-context-files"],
        &["-nc"],
        &["--no-builtin-tools"],
        &["-nbt"],
        &["--exclude-tools", "bash"],
        &["-xt", "bash,write"],
        &["--tools", "read"],
        &["-t", "read,grep"],
        &["--no-tools"],
        &["-nt"],
        &["--session-id", "run-42"],
        &["--name", "Refactor auth"],
        &["-n", "Refactor auth"],
        &["--offline"],
        &["--no-mcp"],
        &["--theme", "dark.json"],
        &["--use-theme", "dark/light"],
        &["--no-themes"],
        &["--tui-mode", "regular"],
        &["--resume"],
        &["-r"],
        &["--continue"],
        &["-c"],
        &["--verbose"],
        &["--append-system-prompt", "a", "--append-system-prompt", "b"],
        &["--models", "test-model"],
        &["--thinking", "high"],
        &["--session-dir", "sessions"],
        &["--no-session"],
        &["--system-prompt", "be brief"],
        &["--api-key", "k"],
        &["--model", "mock-openai/test-model:high"],
        &[
            "--no-extensions",
            "--no-skills",
            "--offline",
            "--approve",
            "-nc",
            "-np",
        ],
    ];
    for form in forms {
        let mut nova = Nova::builder()
            .models_json(reasoning_models(&mock))
            .args(form.iter().copied())
            .spawn();
        let s = state(&mut nova);
        assert!(s["sessionId"].is_string(), "{form:?}: {s}");
        assert!(
            !nova.stderr().contains("unexpected argument"),
            "{form:?}: {}",
            nova.stderr()
        );
    }
}

#[test]
fn a_missing_extension_is_refused_naming_it() {
    let dirs = Dirs::new(None);
    for args in [
        &["-e", "./review.ts", "-p", "hi"][..],
        &["--extension", "builtin:mcp", "--mode", "rpc"],
    ] {
        let r = dirs.run(args);
        assert_eq!(r.code, Some(2), "{}", r.stderr);
        assert!(
            r.stderr.contains("no extension file or directory")
                && r.stderr.contains(&format!("-e {}", args[1])),
            "{}",
            r.stderr
        );
        assert!(!r.stderr.contains("unexpected argument"), "{}", r.stderr);
    }
}

#[test]
fn short_v_prints_the_version_and_help_names_the_ignored_flags() {
    let dirs = Dirs::new(None);
    for flag in ["-v", "--version", "-V"] {
        let r = dirs.run(&[flag]);
        assert_eq!(r.code, Some(0), "{flag}: {}", r.stderr);
        assert!(r.stdout.contains(env!("CARGO_PKG_VERSION")), "{}", r.stdout);
    }
    let r = dirs.run(&["--help"]);
    assert_eq!(r.code, Some(0));
    for needle in [
        "--approve",
        "--no-approve",
        "--session-id",
        "--fork",
        "--exclude-tools",
        "--list-models",
        "--export",
        "ignored (nova has no terminal UI)",
        "--tui-mode",
        "nova auth",
        "not the other folders an editor opens",
    ] {
        assert!(r.stdout.contains(needle), "{needle} missing:\n{}", r.stdout);
    }
}

#[test]
fn mode_text_is_print_mode() {
    let mock = MockLlm::start();
    let dirs = Dirs::new(Some(&openai_models(&mock)));
    mock.push(Reply::text("the answer"));
    let r = dirs.run(&["--mode", "text", "question"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "the answer");
    let r = dirs.run(&["--mode", "text"]);
    assert_eq!(r.code, Some(2), "nothing to run: {}", r.stderr);
}

#[test]
fn list_models_prints_pis_table_and_filters_by_search() {
    let mock = MockLlm::start();
    let mut models = openai_models(&mock);
    let mut second = models["providers"]["mock-openai"]["models"][0].clone();
    second["id"] = json!("other-model");
    second["contextWindow"] = json!(1_000_000);
    second["reasoning"] = json!(true);
    second["input"] = json!(["text", "image"]);
    models["providers"]["mock-openai"]["models"]
        .as_array_mut()
        .unwrap()
        .push(second);
    let dirs = Dirs::new(Some(&models));
    let r = dirs.run(&["--list-models"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<Vec<&str>> = r
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [
            vec![
                "provider", "model", "context", "max-out", "thinking", "images"
            ],
            vec!["mock-openai", "other-model", "1M", "4.1K", "yes", "yes"],
            vec!["mock-openai", "test-model", "128K", "4.1K", "no", "no"],
        ],
        "{}",
        r.stdout
    );
    let r = dirs.run(&["--list-models", "tst"]);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    assert!(r.stdout.contains("test-model"), "{}", r.stdout);
    let r = dirs.run(&["--list-models", "sonnet"]);
    assert_eq!(r.stdout.trim(), "No models matching \"sonnet\"");
}

/// A session stored by one run, for the session flags to find.
fn stored_session(mock: &MockLlm, dirs: &Dirs) -> (String, PathBuf) {
    mock.push(Reply::text("stored reply"));
    let r = dirs.run(&["-p", "remember this"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let sessions = dirs.agent.join("sessions");
    let dir = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    (header["id"].as_str().unwrap().to_owned(), file)
}

#[test]
fn export_writes_a_session_file_as_a_page() {
    let mock = MockLlm::start();
    let dirs = Dirs::new(Some(&openai_models(&mock)));
    let (_, file) = stored_session(&mock, &dirs);
    let file = file.to_str().unwrap();
    let r = dirs.run(&["--export", file, "out.html"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let out = dirs.cwd.join("out.html");
    assert_eq!(r.stdout.trim(), format!("Exported to: {}", out.display()));
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("stored reply") && page.contains("remember this"));
    let r = dirs.run(&["--export", file]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let written = r.stdout.trim().strip_prefix("Exported to: ").unwrap();
    assert!(
        Path::new(written).is_file() && written.ends_with(".html"),
        "{written}"
    );
    let r = dirs.run(&["--export", "no-such.jsonl"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("no-such.jsonl"), "{}", r.stderr);
}

#[test]
fn session_id_opens_or_creates_that_session() {
    let mock = MockLlm::start();
    let dirs = Dirs::new(Some(&openai_models(&mock)));
    mock.push(Reply::text("first"));
    let r = dirs.run(&["--session-id", "run-42", "-p", "hello"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    mock.push(Reply::text("second"));
    let r = dirs.run(&["--session-id", "run-42", "--mode", "json", "again"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let header: Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(header["id"], "run-42", "{header}");
    let sent = mock.chat_requests().pop().unwrap().body.to_string();
    assert!(
        sent.contains("hello") && sent.contains("first"),
        "resumed: {sent}"
    );
    for bad in ["-lead", "a/b", "trail.", ""] {
        let r = dirs.run(&["--session-id", bad, "-p", "x"]);
        assert_eq!(r.code, Some(2), "{bad:?}: {}", r.stderr);
        assert!(r.stderr.contains("--session-id"), "{}", r.stderr);
    }
    let r = dirs.run(&["--session-id", "x1", "--continue", "-p", "x"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

#[test]
fn fork_copies_a_session_into_a_new_one_and_name_names_it() {
    let mock = MockLlm::start();
    let dirs = Dirs::new(Some(&openai_models(&mock)));
    let (id, file) = stored_session(&mock, &dirs);
    let before = std::fs::read_to_string(&file).unwrap();
    mock.push(Reply::text("forked reply"));
    let r = dirs.run(&[
        "--fork",
        &id[..8],
        "--session-id",
        "the-fork",
        "-n",
        "Forked run",
        "--mode",
        "json",
        "go on",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let header: Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(header["id"], "the-fork");
    assert_eq!(header["parentSession"], file.to_str().unwrap());
    let sent = mock.chat_requests().pop().unwrap().body.to_string();
    assert!(
        sent.contains("remember this"),
        "the copy holds the conversation: {sent}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        before,
        "the original is untouched"
    );
    let forked = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("the-fork"))
        .unwrap();
    let text = std::fs::read_to_string(forked).unwrap();
    assert!(
        text.contains("\"session_info\"") && text.contains("Forked run"),
        "{text}"
    );
    let r = dirs.run(&["--fork", &id, "--no-session", "-p", "x"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let r = dirs.run(&["--name", "  ", "-p", "x"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
}

#[test]
fn resume_without_a_picker_continues_the_newest_session() {
    let mock = MockLlm::start();
    let dirs = Dirs::new(Some(&openai_models(&mock)));
    let (id, _) = stored_session(&mock, &dirs);
    for flag in ["-r", "--resume"] {
        mock.push(Reply::text("more"));
        let r = dirs.run(&[flag, "--mode", "json", "and then?"]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let header: Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
        assert_eq!(header["id"], id.as_str(), "{flag}");
    }
}

#[test]
fn a_thinking_suffix_on_model_sets_the_level_and_thinking_wins_over_it() {
    let mock = MockLlm::start();
    for (args, level) in [
        (&["--model", "mock-openai/test-model:high"][..], "high"),
        (&["--model", "test-model:low"], "low"),
        (
            &[
                "--model",
                "mock-openai/test-model:high",
                "--thinking",
                "minimal",
            ],
            "minimal",
        ),
    ] {
        let mut nova = Nova::builder()
            .models_json(reasoning_models(&mock))
            .args(args.iter().copied())
            .spawn();
        let s = state(&mut nova);
        assert_eq!(s["model"]["id"], "test-model", "{args:?}");
        assert_eq!(s["thinkingLevel"], level, "{args:?}");
    }
    let dirs = Dirs::new(Some(&reasoning_models(&mock)));
    let r = dirs.run(&["--mode", "rpc", "--model", "test-model:loud"]);
    assert_eq!(
        r.code,
        Some(2),
        "not a level, so not a suffix: {}",
        r.stderr
    );
}

#[test]
fn repeated_append_system_prompts_all_reach_the_model() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let mut nova = Nova::builder()
        .openai(&mock)
        .file("extra.md", "FROM A FILE")
        .args(["--append-system-prompt", "FIRST ADDITION"])
        .args(["--append-system-prompt", "extra.md"])
        .spawn();
    nova.run_prompt("hi");
    let system = system_message(&mock.chat_requests()[0]);
    let (first, second) = (
        system.find("FIRST ADDITION").unwrap(),
        system.find("FROM A FILE").unwrap(),
    );
    assert!(first < second, "{system}");
}

#[test]
fn no_context_files_leaves_agents_md_out() {
    let mock = MockLlm::start();
    for (flag, present) in [
        (None, true),
        (Some("--no-context-files"), false),
        (Some("-nc"), false),
    ] {
        mock.push(Reply::text("ok"));
        let mut nova = Nova::builder()
            .openai(&mock)
            .file("AGENTS.md", "PROJECT RULES")
            .args(flag)
            .spawn();
        nova.run_prompt("hi");
        let system = system_message(&mock.chat_requests().pop().unwrap());
        assert_eq!(system.contains("PROJECT RULES"), present, "{flag:?}");
    }
}

fn command_names(nova: &mut Nova) -> Vec<String> {
    let commands = nova.request_ok(json!({"type": "get_commands"}));
    let mut names: Vec<String> = commands["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn no_skills_and_no_prompt_templates_keep_only_what_the_flags_name() {
    let mock = MockLlm::start();
    let skill = |name: &str| format!("---\nname: {name}\ndescription: d\n---\nbody\n");
    let build = |args: &[&str]| {
        Nova::builder()
            .openai(&mock)
            .agent_file("skills/found/SKILL.md", skill("found"))
            .agent_file("prompts/found-template.md", "---\ndescription: d\n---\nx")
            .file("mine/SKILL.md", skill("named"))
            .file("named-template.md", "---\ndescription: d\n---\nx")
            .args(args.iter().copied())
            .spawn()
    };
    let mut nova = build(&[]);
    assert_eq!(command_names(&mut nova), ["found-template", "skill:found"]);
    let mut nova = build(&["-ns", "--skill", "mine", "-np"]);
    assert_eq!(command_names(&mut nova), ["skill:named"]);
    let mut nova = build(&["--no-skills", "--no-prompt-templates"]);
    assert!(command_names(&mut nova).is_empty());
    let mut nova = build(&[
        "--no-prompt-templates",
        "--prompt-template",
        "named-template.md",
    ]);
    assert_eq!(command_names(&mut nova), ["named-template", "skill:found"]);
}

#[test]
fn tool_flags_select_as_pi_selects() {
    let mock = MockLlm::start();
    let all = ["bash", "edit", "find", "grep", "ls", "read", "write"];
    let cases: Vec<(&[&str], Vec<&str>)> = vec![
        (&["-t", "read,*rep"], vec!["grep", "read"]),
        (
            &["--tools", "-write,-edit"],
            vec!["bash", "find", "grep", "ls", "read"],
        ),
        (
            &["--exclude-tools", "b*,ls"],
            vec!["edit", "find", "grep", "read", "write"],
        ),
        (
            &["-xt", "write"],
            vec!["bash", "edit", "find", "grep", "ls", "read"],
        ),
        (&["--no-builtin-tools"], vec![]),
        (&["-nbt"], vec![]),
        (&["-nt", "--tools", "read"], vec!["read"]),
        (&["-nt"], vec![]),
        (&[], all.to_vec()),
    ];
    for (args, expected) in cases {
        mock.push(Reply::text("ok"));
        let mut nova = Nova::builder()
            .openai(&mock)
            .args(args.iter().copied())
            .spawn();
        nova.run_prompt("which tools?");
        assert_eq!(tool_names(&mock), expected, "{args:?}");
    }
    let dirs = Dirs::new(Some(&openai_models(&mock)));
    let r = dirs.run(&["--mode", "rpc", "--tools", "read,+bash"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("cannot be mixed"), "{}", r.stderr);
}

#[test]
fn no_mcp_starts_no_server() {
    let mock = MockLlm::start();
    let mcp = json!({"mcpServers": {"broken": {"command": "/nonexistent/mcp-server"}}});
    for (flag, starts) in [(None, true), (Some("--no-mcp"), false)] {
        let mut nova = Nova::builder()
            .openai(&mock)
            .agent_file("mcp.json", mcp.to_string())
            .args(flag)
            .spawn();
        state(&mut nova);
        mock.push(Reply::text("ok"));
        nova.run_prompt("hi");
        let stderr = nova.stderr();
        assert_eq!(stderr.contains("broken"), starts, "{flag:?}: {stderr}");
    }
}
