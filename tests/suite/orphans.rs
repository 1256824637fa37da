//! No process nova starts outlives it: the commands' keeper kills what a bash command leaves
//! behind when the command ends or is aborted, and everything when nova is killed with SIGKILL,
//! processes that left the command's group (`setsid`, a double fork, `nohup`) included. In
//! sandbox mode `off` and `workspace-write`, for the bash tool, the user's `bash` command and
//! MCP stdio servers.

use crate::support::mcp::mcp_json;
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, NovaBuilder};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long the processes may take to disappear.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// A number found in no other process's argv: `sleep 1000.<marker>…` carries it.
fn marker() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}{:03}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A command whose every way of escaping its group leaves a `sleep` tagged with `marker`.
fn escapes(marker: &str) -> String {
    format!(
        "setsid sleep 1000.{marker}1 & ( (sleep 1000.{marker}2 &) & ); \
         nohup sleep 1000.{marker}3 >/dev/null 2>&1 & sleep 1000.{marker}4 &"
    )
}

/// Live processes whose argv holds `marker` (killed orphans of a keeper-less nova may linger as
/// zombies where the container's init does not reap them: they do not count).
fn holders(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            path.file_name()?.to_str()?.parse::<u32>().ok()?;
            let argv = std::fs::read(path.join("cmdline")).ok()?;
            let argv = String::from_utf8_lossy(&argv).replace('\0', " ");
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            (argv.contains(marker) && !zombie).then_some(argv)
        })
        .collect()
}

fn wait_until(what: &str, marker: &str, done: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let found = holders(marker);
        if done(&found) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {found:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn all_gone(marker: &str) {
    wait_until("these processes outlived their keeper", marker, |found| {
        found.is_empty()
    });
}

fn started(marker: &str, count: usize) {
    wait_until("the processes did not all start", marker, |found| {
        found.len() >= count
    });
}

fn builder(mock: &MockLlm, sandbox: &str) -> NovaBuilder {
    Nova::builder().openai(mock).args(["--sandbox", sandbox])
}

fn bash_call(command: &str) -> Reply {
    Reply::new().tool_call("c1", "bash", json!({"command": command}))
}

fn sigkill(nova: &mut Nova) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(nova.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    nova.kill();
}

fn tool_end(nova: &mut Nova) -> Value {
    nova.wait_for_type("tool_execution_end", EVENT_TIMEOUT)
}

fn sigkill_during_a_tool_call(sandbox: &str) {
    let m = marker();
    let mock = MockLlm::start();
    // The shell itself waits in the foreground, so nova is killed mid-call.
    mock.push(bash_call(&format!(
        "{} echo started; sleep 1000.{m}5",
        escapes(&m)
    )));
    let mut nova = builder(&mock, sandbox).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "start them"}));
    nova.wait_for(
        |v| {
            v["type"] == "tool_execution_update"
                && v["partialResult"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("started"))
        },
        EVENT_TIMEOUT,
    );
    started(&m, 5);
    sigkill(&mut nova);
    all_gone(&m);
}

#[test]
fn sigkill_leaves_nothing_behind_without_sandbox() {
    sigkill_during_a_tool_call("off");
}

#[test]
fn sigkill_leaves_nothing_behind_in_the_workspace_sandbox() {
    sigkill_during_a_tool_call("workspace-write");
}

/// A finished command's background jobs end with it, as in Codex and Claude Code: nothing the
/// model started keeps running unseen after its call returned.
fn background_jobs_end_with_the_command(sandbox: &str) {
    let m = marker();
    let mock = MockLlm::start();
    mock.push(bash_call(&format!("{} echo $?", escapes(&m))));
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock, sandbox).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "start them"}));
    let end = tool_end(&mut nova);
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(end["result"]["content"][0]["text"], "0\n");
    // Killed before the keeper exited, and nova waits for the keeper.
    assert_eq!(holders(&m), Vec::<String>::new());
    nova.wait_for_type("agent_end", EVENT_TIMEOUT);
}

#[test]
fn background_jobs_end_with_the_command_without_sandbox() {
    background_jobs_end_with_the_command("off");
}

#[test]
fn background_jobs_end_with_the_command_in_the_workspace_sandbox() {
    background_jobs_end_with_the_command("workspace-write");
}

fn abort_kills_what_left_the_group(sandbox: &str) {
    let m = marker();
    let mock = MockLlm::start();
    mock.push(bash_call(&format!(
        "trap '' TERM; {} echo started; sleep 1000.{m}5",
        escapes(&m)
    )));
    let mut nova = builder(&mock, sandbox).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "start them"}));
    started(&m, 5);
    nova.request_ok(json!({"type": "abort"}));
    let end = tool_end(&mut nova);
    assert_eq!(end["isError"], true, "{end}");
    all_gone(&m);
}

#[test]
fn abort_kills_what_left_the_group_without_sandbox() {
    abort_kills_what_left_the_group("off");
}

#[test]
fn abort_kills_what_left_the_group_in_the_workspace_sandbox() {
    abort_kills_what_left_the_group("workspace-write");
}

#[test]
fn the_users_bash_command_keeps_nothing_running() {
    let m = marker();
    let mock = MockLlm::start();
    let mut nova = builder(&mock, "workspace-write").spawn();
    let done =
        nova.request_ok(json!({"type": "bash", "command": format!("{} exit 4", escapes(&m))}));
    assert_eq!(done["exitCode"], 4, "{done}");
    assert_eq!(holders(&m), Vec::<String>::new());

    // And while one runs, SIGKILL to nova ends it and its escapees.
    nova.send(&json!({"id": "b2", "type": "bash",
                      "command": format!("{} sleep 1000.{m}5", escapes(&m))}));
    started(&m, 5);
    sigkill(&mut nova);
    all_gone(&m);
}

#[test]
fn an_mcp_server_and_what_it_started_die_with_nova() {
    let m = marker();
    let mock = MockLlm::start();
    // Not an MCP server at all: it only has to be running when nova is killed.
    let server = json!({
        "command": "/bin/bash",
        "args": ["-c", format!("{} exec sleep 1000.{m}5", escapes(&m))],
    });
    let mut nova = builder(&mock, "off")
        .agent_file("mcp.json", mcp_json(json!({ "loner": server })))
        .spawn();
    started(&m, 5);
    sigkill(&mut nova);
    all_gone(&m);
}

/// The keeper is invisible to the command: its exit code or signal comes through, and it starts
/// with no signal blocked (a keeper that blocked them would leave SIGTERM blocked in it).
#[test]
fn the_keeper_passes_the_status_through_and_leaves_signals_alone() {
    for sandbox in ["off", "workspace-write"] {
        let mock = MockLlm::start();
        mock.push(
            Reply::new()
                .tool_call(
                    "mask",
                    "bash",
                    json!({"command": "grep SigBlk /proc/self/status"}),
                )
                .tool_call("code", "bash", json!({"command": "exit 42"}))
                .tool_call("signal", "bash", json!({"command": "kill -SEGV $$"})),
        );
        mock.push(Reply::text("done"));
        let mut nova = builder(&mock, sandbox).spawn();
        let events = nova.run_prompt("run them");
        let text = |id: &str| {
            let end = events
                .iter()
                .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
                .unwrap();
            end["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(text("mask"), "SigBlk:\t0000000000000000\n", "{sandbox}");
        assert_eq!(text("code"), "(no output)\n\nCommand exited with code 42");
        assert_eq!(
            text("signal"),
            "(no output)\n\nCommand was killed by signal SIGSEGV"
        );
    }
}

/// A launcher whose nova is gone by the time it starts (its parent is not the pid nova wrote)
/// runs nothing.
#[test]
fn a_keeper_started_for_a_dead_nova_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(["__sandbox", r#"{"parent":1}"#, "--", "touch", "ran"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(127));
    assert!(!dir.path().join("ran").exists());
}
