//! The process and its configuration: flags and exit codes, models.json and settings.json, the
//! zero-configuration Ollama start, `set_model`, shutdown on EOF and signals, and what the flags
//! and context files put into the provider request.

use super::providers::{Format, LONG, last_assistant, of_type, provider_entry, text_of};
use crate::support::mock_llm::{Gate, MockLlm, Recorded, Reply};
use crate::support::nova_proc::{Nova, openai_models, wait_or_kill};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a short-lived `nova` run left behind.
struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run `nova <args>` to completion (stdin empty) with a temp agent dir holding `models` (if
/// any), a temp cwd, and `OLLAMA_HOST` on a closed port; panics if it runs longer than 20 s.
fn run_nova(args: &[&str], models: Option<&Value>) -> Finished {
    let dir = tempfile::tempdir().unwrap();
    let (agent, cwd) = (dir.path().join("agent"), dir.path().join("cwd"));
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    if let Some(m) = models {
        std::fs::write(agent.join("models.json"), m.to_string()).unwrap();
    }
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(args)
        .current_dir(&cwd)
        .env("NOVA_AGENT_DIR", &agent)
        .env("HOME", dir.path())
        .env("OLLAMA_HOST", format!("127.0.0.1:{}", closed_port()))
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let status = wait_or_kill(&mut child, LONG, &format!("nova {args:?}"), &err_path);
    Finished {
        code: status.code(),
        stdout: std::fs::read_to_string(&out_path).unwrap(),
        stderr: std::fs::read_to_string(&err_path).unwrap(),
    }
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn one_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one stderr line, got:\n{stderr}");
    lines[0]
}

fn state(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_state"}))
}

/// The system message of a chat request (both formats put it first as `role: system`).
pub(super) fn system_message(req: &Recorded) -> String {
    let first = &req.messages()[0];
    assert_eq!(first["role"], "system", "{}", req.body);
    first["content"].as_str().unwrap().to_string()
}

fn tool_names(req: &Recorded) -> Vec<String> {
    req.body
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// models.json with both mock providers, each serving `ids` (mock-ollama is declared first).
fn two_providers(mock: &MockLlm, ids: &[&str]) -> Value {
    let models: Vec<Value> = ids.iter().map(|id| json!({"id": id})).collect();
    json!({"providers": {
        "mock-ollama": provider_entry(Format::Ollama, &mock.base_url_ollama(), json!(models)),
        "mock-openai": provider_entry(Format::OpenAi, &mock.base_url_openai(), json!(models)),
    }})
}

// ---------------------------------------------------------------------------------------------
// Flags and exit codes
// ---------------------------------------------------------------------------------------------

#[test]
fn no_arguments_is_a_usage_error() {
    let r = run_nova(&[], None);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--mode rpc"), "{}", r.stderr);
    assert!(r.stderr.contains("Usage: nova"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

#[test]
fn unknown_flag_is_one_line_and_exit_2() {
    let r = run_nova(&["--mode", "rpc", "--frobnicate"], None);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(one_line(&r.stderr).contains("--frobnicate"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

#[test]
fn mode_text_without_a_prompt_is_a_usage_error() {
    let r = run_nova(&["--mode", "text"], None);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(one_line(&r.stderr).contains("text"), "{}", r.stderr);
}

#[test]
fn version_and_help_exit_0() {
    let r = run_nova(&["--version"], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains(env!("CARGO_PKG_VERSION")), "{}", r.stdout);
    let r = run_nova(&["--help"], None);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for flag in ["--mode", "--model", "--provider", "--tools", "--no-tools"] {
        assert!(r.stdout.contains(flag), "{flag} missing:\n{}", r.stdout);
    }
}

#[test]
fn unknown_model_on_the_command_line_is_exit_2() {
    let mock = MockLlm::start();
    let models = openai_models(&mock);
    let r = run_nova(&["--mode", "rpc", "--model", "nope"], Some(&models));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(one_line(&r.stderr).contains("nope"), "{}", r.stderr);
    let r = run_nova(
        &[
            "--mode",
            "rpc",
            "--provider",
            "mock-openai",
            "--model",
            "nope",
        ],
        Some(&models),
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(one_line(&r.stderr).contains("nope"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

#[test]
fn model_flags_pick_the_startup_model() {
    let mock = MockLlm::start();
    let forms: [&[&str]; 2] = [
        &["--model", "mock-openai/test-model"],
        &["--provider", "mock-openai", "--model", "test-model"],
    ];
    for args in forms {
        let mut nova = Nova::builder()
            .models_json(two_providers(&mock, &["test-model"]))
            .args(args.iter().copied())
            .spawn();
        let model = &state(&mut nova)["model"];
        assert_eq!(model["id"], "test-model", "{args:?}");
        assert_eq!(model["provider"], "mock-openai", "{args:?}");
        assert_eq!(model["api"], "openai-completions", "{args:?}");
        assert_eq!(model["baseUrl"], mock.base_url_openai(), "{args:?}");
    }
    // Without flags the first declared model wins.
    let mut nova = Nova::builder()
        .models_json(two_providers(&mock, &["test-model"]))
        .spawn();
    assert_eq!(state(&mut nova)["model"]["provider"], "mock-ollama");
}

#[test]
fn tools_flags_shape_the_request() {
    let mock = MockLlm::start();
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &[],
            &["read", "bash", "edit", "write", "grep", "find", "ls"],
        ),
        (&["--no-tools"], &[]),
        (&["--tools", "read"], &["read"]),
    ];
    for (i, (args, expected)) in cases.into_iter().enumerate() {
        mock.push(Reply::text("ok"));
        let mut nova = Nova::builder()
            .openai(&mock)
            .args(args.iter().copied())
            .spawn();
        nova.run_prompt("which tools?");
        let req = &mock.chat_requests()[i];
        let mut names = tool_names(req);
        names.sort();
        let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        expected.sort();
        assert_eq!(names, expected, "{args:?}");
        if args == ["--no-tools"] {
            let tools = req.body.get("tools");
            assert!(tools.is_none() || tools == Some(&json!([])), "{}", req.body);
        }
    }
    let models = openai_models(&mock);
    let r = run_nova(&["--mode", "rpc", "--tools", "read,bogus"], Some(&models));
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(one_line(&r.stderr).contains("bogus"), "{}", r.stderr);
    mock.assert_no_violations();
}

// ---------------------------------------------------------------------------------------------
// models.json and settings.json
// ---------------------------------------------------------------------------------------------

fn invalid_models_json(contents: &str, reason: &str) {
    let mut nova = Nova::builder()
        .agent_file("models.json", contents)
        .env("OLLAMA_HOST", format!("127.0.0.1:{}", closed_port()))
        .spawn();
    let s = state(&mut nova);
    assert_eq!(s["model"], Value::Null);
    assert_eq!(s["isStreaming"], false);
    let stderr = nova.stderr_with(reason);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("models.json"))
        .collect();
    assert_eq!(lines.len(), 1, "reported once:\n{stderr}");
    assert!(lines[0].contains(reason), "{stderr}");
    // Still serving.
    let models = nova.request_ok(json!({"type": "get_available_models"}));
    assert_eq!(models["models"], json!([]));
    let s2 = state(&mut nova);
    assert_eq!(s2["sessionId"], s["sessionId"]);
    assert_eq!(nova.stderr(), stderr, "nothing more on stderr");
}

#[test]
fn models_json_with_bad_json_is_a_warning() {
    invalid_models_json(r#"{"providers": {"x": "#, "EOF");
}

#[test]
fn models_json_with_unknown_api_is_a_warning() {
    invalid_models_json(
        r#"{"providers": {"x": {"baseUrl": "http://127.0.0.1:1", "api": "grpc",
            "apiKey": "k", "models": [{"id": "m"}]}}}"#,
        "grpc",
    );
}

#[test]
fn settings_pick_the_default_model_and_the_project_overrides() {
    let mock = MockLlm::start();
    let ids = ["test-model", "other-model", "third-model"];
    let global = json!({"defaultProvider": "mock-openai", "defaultModel": "other-model"});
    let mut nova = Nova::builder()
        .models_json(two_providers(&mock, &ids))
        .settings(global.clone())
        .spawn();
    let model = &state(&mut nova)["model"];
    assert_eq!(
        (model["provider"].as_str(), model["id"].as_str()),
        (Some("mock-openai"), Some("other-model"))
    );

    mock.push(Reply::text("from the third"));
    let mut nova = Nova::builder()
        .models_json(two_providers(&mock, &ids))
        .settings(global)
        .file(
            ".nova/settings.json",
            json!({"defaultModel": "third-model"}).to_string(),
        )
        .spawn();
    let model = &state(&mut nova)["model"];
    assert_eq!(
        (model["provider"].as_str(), model["id"].as_str()),
        (Some("mock-openai"), Some("third-model"))
    );
    nova.run_prompt("hi");
    let req = &mock.chat_requests()[0];
    assert!(req.path.ends_with("/v1/chat/completions"), "{}", req.path);
    assert_eq!(req.body["model"], "third-model");
    mock.assert_no_violations();
}

#[test]
fn zero_config_uses_the_local_ollama() {
    let mock = MockLlm::start();
    mock.set_models(&["llama3:8b", "qwen3:4b"]);
    mock.set_context_length("llama3:8b", 131_072);
    mock.set_context_length("qwen3:4b", 8192);
    mock.push(Reply::text("hello from llama"));
    let mut nova = Nova::builder()
        .env("OLLAMA_HOST", format!("127.0.0.1:{}", mock.port()))
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let models = list["models"].as_array().unwrap();
    let found: Vec<(&str, &str)> = models
        .iter()
        .map(|m| (m["provider"].as_str().unwrap(), m["id"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [("ollama", "llama3:8b"), ("ollama", "qwen3:4b")]);
    for m in models {
        assert_eq!(m["api"], "ollama");
        assert_eq!(m["baseUrl"], mock.base_url_ollama());
    }
    // The trained context length, capped at 32K by default.
    assert_eq!(models[0]["contextWindow"], 32_768);
    assert_eq!(models[1]["contextWindow"], 8192);
    assert_eq!(state(&mut nova)["model"]["id"], "llama3:8b");

    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "hello from llama");
    let reqs = mock.requests();
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("GET", "/api/tags")
    );
    let chat = mock.chat_requests();
    assert_eq!(chat.len(), 1);
    assert_eq!(chat[0].path, "/api/chat");
    assert_eq!(chat[0].body["model"], "llama3:8b");
    // Ollama loads the model with the whole window, so the prompt is never cut.
    assert_eq!(chat[0].body["options"]["num_ctx"], 32_768);
    assert!(chat[0].body.get("keep_alive").is_none());

    // OLLAMA_HOST as a URL with a trailing slash works the same; settings change the cap and
    // add keep_alive.
    mock.push(Reply::text("again"));
    let mut nova = Nova::builder()
        .env("OLLAMA_HOST", format!("{}/", mock.base_url_ollama()))
        .settings(json!({"ollama": {"maxDiscoveredContext": 16_384, "keepAlive": "1h"}}))
        .spawn();
    let model = &state(&mut nova)["model"];
    assert_eq!(model["id"], "llama3:8b");
    assert_eq!(model["baseUrl"], mock.base_url_ollama());
    nova.run_prompt("hi");
    let chat = &mock.chat_requests()[1];
    assert_eq!(chat.path, "/api/chat");
    assert_eq!(chat.body["options"]["num_ctx"], 16_384);
    assert_eq!(chat.body["keep_alive"], "1h");
    mock.assert_no_violations();
}

#[test]
fn zero_config_without_ollama_starts_without_a_model() {
    let t0 = Instant::now();
    let mut nova = Nova::builder()
        .env("OLLAMA_HOST", format!("127.0.0.1:{}", closed_port()))
        .spawn();
    let s = state(&mut nova);
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(s["model"], Value::Null);
    let r = nova.request(json!({"type": "prompt", "message": "hello?"}));
    assert_eq!(r["success"], false, "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("No model selected"), "{error}");
    // Every other command still works, and nothing was started.
    let s = state(&mut nova);
    assert_eq!(
        (s["isStreaming"].clone(), s["messageCount"].clone()),
        (json!(false), json!(0))
    );
    let msgs = nova.request_ok(json!({"type": "get_messages"}));
    assert_eq!(msgs["messages"], json!([]));
    assert!(
        nova.drain_pending().iter().all(|v| v["type"] == "response"),
        "events after a refused prompt: {:?}",
        nova.log().iter().map(|l| &l.raw).collect::<Vec<_>>()
    );
}

#[test]
fn set_model_switches_or_names_the_unknown_model() {
    let mock = MockLlm::start();
    mock.push(Reply::text("first answer"));
    mock.push(Reply::text("second answer"));
    let mut nova = Nova::builder()
        .models_json(two_providers(&mock, &["test-model", "other-model"]))
        .args(["--model", "mock-ollama/test-model"])
        .spawn();
    nova.run_prompt("first");
    let before = nova.request_ok(json!({"type": "get_messages"}));
    assert_eq!(before["messages"].as_array().unwrap().len(), 2);

    let r = nova.request(
        json!({"type": "set_model", "provider": "mock-openai", "modelId": "no-such-model"}),
    );
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("no-such-model"),
        "{r}"
    );
    assert_eq!(nova.request_ok(json!({"type": "get_messages"})), before);
    assert_eq!(state(&mut nova)["model"]["provider"], "mock-ollama");

    let model = nova.request_ok(
        json!({"type": "set_model", "provider": "mock-openai", "modelId": "other-model"}),
    );
    assert_eq!(model["id"], "other-model");
    assert_eq!(model["provider"], "mock-openai");
    assert_eq!(model["api"], "openai-completions");
    assert_eq!(state(&mut nova)["model"], model);
    assert_eq!(nova.request_ok(json!({"type": "get_messages"})), before);

    // The next turn goes to the new model with the conversation so far.
    nova.run_prompt("second");
    let chat = mock.chat_requests();
    assert_eq!(chat[0].path, "/api/chat");
    assert_eq!(chat[1].path, "/v1/chat/completions");
    assert_eq!(chat[1].body["model"], "other-model");
    let body = chat[1].body.to_string();
    assert!(
        body.contains("first answer") && body.contains("second"),
        "{body}"
    );
    mock.assert_no_violations();
}

// ---------------------------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------------------------

#[test]
fn stdin_eof_while_idle_exits_0() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder().ollama(&mock).spawn();
    state(&mut nova);
    nova.close_stdin();
    assert_eq!(nova.wait_exit(LONG).code(), Some(0), "{}", nova.report());
}

/// Start a run whose reply is held at a gate that never opens; returns once the mock is
/// inside the stream.
fn held_run(mock: &MockLlm, gate: &Gate) -> Nova {
    mock.push(
        Reply::text("never finished")
            .text_chunks(4)
            .gate_after(2, gate),
    );
    let mut nova = Nova::builder().openai(mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "take your time"}));
    gate.wait_reached(LONG);
    nova.wait_for(
        |v| v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == "text_delta",
        LONG,
    );
    nova
}

/// The run that was cut short by shutdown still closed properly, then the process exited 0.
fn assert_clean_shutdown(nova: &mut Nova, t0: Instant) {
    let status = nova.wait_exit(LONG);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", nova.report());
    let rest = nova.events_until("agent_settled");
    assert!(!of_type(&rest, "agent_end").is_empty(), "{rest:?}");
    let m = last_assistant(&rest);
    assert_eq!(m["stopReason"], "aborted", "{m}");
}

#[test]
fn stdin_eof_mid_run_ends_the_run_and_exits_0() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    let mut nova = held_run(&mock, &gate);
    let t0 = Instant::now();
    nova.close_stdin();
    assert_clean_shutdown(&mut nova, t0);
    assert!(!gate.is_open());
}

fn signal_mid_run(signal: &str) {
    let mock = MockLlm::start();
    let gate = Gate::new();
    let mut nova = held_run(&mock, &gate);
    let t0 = Instant::now();
    let killed = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(nova.pid().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    assert_clean_shutdown(&mut nova, t0);
}

#[test]
fn sigterm_mid_run_exits_0() {
    signal_mid_run("TERM");
}

#[test]
fn sigint_mid_run_exits_0() {
    signal_mid_run("INT");
}

// ---------------------------------------------------------------------------------------------
// The system prompt
// ---------------------------------------------------------------------------------------------

#[test]
fn prompt_flags_and_agents_md_reach_the_system_message() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let mut nova = Nova::builder()
        .ollama(&mock)
        .args([
            "--system-prompt",
            "You are TestBot, replacing the default.",
            "--append-system-prompt",
            "Always answer in haiku.",
        ])
        .file(
            "AGENTS.md",
            "Project rule: run cargo fmt before committing.",
        )
        .spawn();
    nova.run_prompt("hi");
    let system = system_message(&mock.chat_requests()[0]);
    assert!(
        system.starts_with("You are TestBot, replacing the default."),
        "{system}"
    );
    assert!(!system.contains("You are nova"), "{system}");
    let (custom, append, agents) = (
        system.find("TestBot").unwrap(),
        system.find("Always answer in haiku.").unwrap(),
        system
            .find("Project rule: run cargo fmt before committing.")
            .unwrap_or_else(|| panic!("AGENTS.md missing:\n{system}")),
    );
    assert!(custom < append && append < agents, "{system}");

    // Without the flags: nova's own prompt, still with AGENTS.md.
    mock.push(Reply::text("ok"));
    let mut nova = Nova::builder()
        .openai(&mock)
        .file("AGENTS.md", "Project rule: tabs are forbidden.")
        .spawn();
    nova.run_prompt("hi");
    let system = system_message(&mock.chat_requests()[1]);
    assert!(
        system.contains("Project rule: tabs are forbidden."),
        "{system}"
    );
    assert!(!system.contains("TestBot"), "{system}");
    mock.assert_no_violations();
}

#[test]
fn prompt_flags_read_files() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let builder = Nova::builder()
        .openai(&mock)
        .file("prompts/system.md", "System prompt from a file.\n")
        .file("prompts/append.md", "Appended from a file.\n");
    let dir = builder.cwd().join("prompts");
    let (sys, app) = (
        path_str(&dir.join("system.md")),
        path_str(&dir.join("append.md")),
    );
    let mut nova = builder
        .args(["--system-prompt", &sys, "--append-system-prompt", &app])
        .spawn();
    nova.run_prompt("hi");
    let system = system_message(&mock.chat_requests()[0]);
    assert!(system.starts_with("System prompt from a file."), "{system}");
    assert!(system.contains("Appended from a file."), "{system}");
    assert!(
        !system.contains("prompts/"),
        "the path itself leaked: {system}"
    );
    mock.assert_no_violations();
}

fn path_str(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn stdin_eof_during_a_tool_kills_it_and_exits_0() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "call_1",
        "bash",
        json!({"command": "sleep 300 & echo $! > sleep.pid; wait"}),
    ));
    let mut nova = Nova::builder().openai(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "sleep"}));
    nova.wait_for_type("tool_execution_start", LONG);
    let pid_file = nova.cwd().join("sleep.pid");
    let pid = wait_until(|| {
        std::fs::read_to_string(&pid_file)
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    let proc_dir = Path::new("/proc").join(pid.trim());
    assert!(proc_dir.exists());
    let t0 = Instant::now();
    nova.close_stdin();
    assert_clean_shutdown_after_tool(&mut nova, t0);
    wait_until(|| (!proc_dir.exists() || is_zombie(&proc_dir)).then_some(()));
}

fn assert_clean_shutdown_after_tool(nova: &mut Nova, t0: Instant) {
    let status = nova.wait_exit(LONG);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", nova.report());
    let rest = nova.events_until("agent_settled");
    let end = of_type(&rest, "tool_execution_end");
    assert_eq!(end.len(), 1, "{rest:?}");
    assert_eq!(end[0]["isError"], true, "{}", end[0]);
}

fn is_zombie(proc_dir: &Path) -> bool {
    std::fs::read_to_string(proc_dir.join("stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

/// Poll `f` every 10 ms until it yields a value; panics after [`LONG`].
fn wait_until<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "condition not met within {LONG:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn image_tools_follow_the_model() {
    let mock = MockLlm::start();
    let mut models = openai_models(&mock);
    let vision = json!({"id": "vision-model", "input": ["text", "image"]});
    models["providers"]["mock-openai"]["models"]
        .as_array_mut()
        .unwrap()
        .push(vision);
    let mut nova = Nova::builder().models_json(models).spawn();
    mock.push(Reply::text("text only"));
    nova.run_prompt("tools?");
    nova.request_ok(
        json!({"type": "set_model", "provider": "mock-openai", "modelId": "vision-model"}),
    );
    mock.push(Reply::text("with eyes"));
    nova.run_prompt("tools now?");
    let requests = mock.chat_requests();
    let names = |i: usize| tool_names(&requests[i]);
    assert!(
        !names(0).contains(&"view_image".to_owned()),
        "{:?}",
        names(0)
    );
    for tool in ["view_image", "zoom", "grep"] {
        assert!(
            names(1).contains(&tool.to_owned()),
            "{tool} missing: {:?}",
            names(1)
        );
    }
    let system = requests[1].messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("- zoom:"), "{system}");
}
