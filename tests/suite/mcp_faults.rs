//! MCP servers misbehaving, end to end with nova's own test server: a crash mid-call (reported,
//! tools withdrawn, restarted once on the next call), `abort` during a slow call (the server is
//! told), a hang past the timeout, a huge result, servers that fail to start, and a tool list
//! that changes.

use crate::support::mcp::{
    mcp_json, offered_tools, test_server, text, tool_ends, wait_file_contains, wait_status,
};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

fn nova_with(mock: &MockLlm, servers: impl FnOnce(&Path) -> Value) -> Nova {
    let builder = Nova::builder().ollama(mock);
    let config = mcp_json(servers(&builder.cwd().join("server.log")));
    builder.agent_file("mcp.json", config).spawn()
}

fn faulty(server: &Path, log: &Path) -> Value {
    json!({"command": server, "env": {"MCP_TEST_LOG": log}})
}

#[test]
fn a_crashed_server_is_reported_withdrawn_and_restarted_once() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "mcp__faulty__crash", json!({})));
    mock.push(Reply::new().tool_call("c2", "mcp__faulty__echo", json!({"text": "back"})));
    mock.push(Reply::text("recovered"));
    let mut nova = nova_with(&mock, |log| json!({"faulty": faulty(&server, log)}));
    wait_status(&mut nova, "faulty", "ready");

    let events = nova.run_prompt("crash it");
    let ends = tool_ends(&events);
    assert_eq!(ends[0]["isError"], true);
    assert!(
        text(ends[0]).starts_with(
            "MCP server faulty went away during the call to crash (exited \
                                   with code 3; stderr: crashing on purpose)"
        ),
        "{}",
        ends[0]
    );
    let failed = events
        .iter()
        .find(|e| e["type"] == "mcp_server_status" && e["server"]["status"] == "failed")
        .expect("a failed status event");
    assert_eq!(
        failed["server"]["reason"],
        "crashed: exited with code 3; stderr: crashing on purpose"
    );
    let statuses: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "mcp_server_status")
        .map(|e| e["server"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["failed", "starting", "ready"],
        "restarted on the next call"
    );
    assert_eq!(text(ends[1]), "back");
    let requests = mock.wait_requests(3, EVENT_TIMEOUT);
    let after_crash = offered_tools(&requests[1].body);
    assert!(
        after_crash.iter().all(|t| !t.starts_with("mcp__")),
        "{after_crash:?}"
    );
    let after_restart = offered_tools(&requests[2].body);
    assert!(after_restart.contains(&"mcp__faulty__echo".to_owned()));
    nova.stderr_with("nova: mcp: server faulty crashed: exited with code 3");

    // A second crash is final for the session.
    mock.push(Reply::new().tool_call("c3", "mcp__faulty__crash", json!({})));
    mock.push(Reply::new().tool_call("c4", "mcp__faulty__echo", json!({"text": "again"})));
    mock.push(Reply::text("gave up"));
    let events = nova.run_prompt("crash it again");
    let ends = tool_ends(&events);
    assert_eq!(
        text(ends[1]),
        "MCP server faulty is not available: crashed: exited with code 3; stderr: crashing on \
         purpose"
    );
    let servers = nova.request_ok(json!({"type": "get_mcp_servers"}))["servers"].clone();
    assert_eq!(servers[0]["status"], "failed");
    mock.assert_no_violations();
}

#[test]
fn abort_during_a_slow_call_cancels_it_on_the_server() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "mcp__faulty__slow", json!({"seconds": 30})));
    let mut nova = nova_with(&mock, |log| json!({"faulty": faulty(&server, log)}));
    wait_status(&mut nova, "faulty", "ready");
    let log = nova.cwd().join("server.log");
    nova.request_ok(json!({"type": "prompt", "message": "take your time"}));
    wait_file_contains(&log, "call slow", EVENT_TIMEOUT);
    nova.send(&json!({"id": "stop", "type": "abort"}));
    let events = nova.events_until("response");
    let end = tool_ends(&events)[0];
    assert_eq!(end["isError"], true);
    assert_eq!(text(end), "MCP call aborted");
    assert_eq!(events[events.len() - 2]["aborted"], true);
    wait_file_contains(&log, "cancelled slow", EVENT_TIMEOUT);
    let servers = nova.request_ok(json!({"type": "get_mcp_servers"}))["servers"].clone();
    assert_eq!(
        servers[0]["status"], "ready",
        "an aborted call leaves the server up"
    );
}

#[test]
fn a_call_past_the_timeout_is_cancelled_and_a_huge_result_is_bounded() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "mcp__faulty__hang", json!({}))
            .tool_call("c2", "mcp__faulty__huge", json!({"lines": 5000}))
            .tool_call("c3", "mcp__faulty__picture", json!({}))
            .tool_call("c4", "mcp__faulty__fail", json!({})),
    );
    mock.push(Reply::text("ok"));
    let mut nova = nova_with(&mock, |log| {
        let mut entry = faulty(&server, log);
        entry["timeout"] = json!(2);
        json!({ "faulty": entry })
    });
    wait_status(&mut nova, "faulty", "ready");
    let events = nova.run_prompt("misbehave");
    let ends = tool_ends(&events);
    assert_eq!(
        text(ends[0]),
        "MCP server faulty did not answer hang within 2s; the call was cancelled"
    );
    wait_file_contains(
        &nova.cwd().join("server.log"),
        "notification cancelled",
        EVENT_TIMEOUT,
    );

    let huge = text(ends[1]);
    let path = ends[1]["result"]["details"]["fullOutputPath"]
        .as_str()
        .unwrap();
    assert!(huge.starts_with("line 1\nline 2\n"), "{}", &huge[..40]);
    assert!(
        huge.ends_with(&format!(
            "line 2000\n\n[Showing lines 1-2000 of 5001. Full output: {path}]"
        )),
        "{}",
        &huge[huge.len() - 120..]
    );
    let full = std::fs::read_to_string(path).unwrap();
    assert!(full.ends_with("line 5000\n"));
    std::fs::remove_file(path).unwrap();

    assert_eq!(text(ends[2]), "a picture:");
    assert_eq!(ends[2]["result"]["content"][1]["type"], "image");
    assert_eq!(ends[2]["result"]["content"][1]["mimeType"], "image/png");

    assert_eq!(ends[3]["isError"], true);
    assert_eq!(
        text(ends[3]),
        "MCP server faulty reported an error from fail: it failed"
    );
    let servers = nova.request_ok(json!({"type": "get_mcp_servers"}))["servers"].clone();
    assert_eq!(
        servers[0]["status"], "ready",
        "a timeout leaves the server up"
    );
}

#[test]
fn servers_that_fail_to_start_are_reported_and_the_others_serve() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "mcp__good__echo", json!({"text": "still here"})));
    mock.push(Reply::text("ok"));
    let mut nova = nova_with(&mock, |log| {
        json!({
            "broken": {"command": server, "args": ["--exit-at-start"]},
            "missing": {"command": "/nonexistent/mcp-server"},
            "sleepy": {"command": server, "args": ["--slow-start", "30"], "timeout": 0.5},
            "good": faulty(&server, log),
        })
    });
    // The four settle in any order.
    let mut settled = std::collections::HashMap::new();
    while settled.len() < 4 {
        let event = nova.wait_for(
            |v| {
                v["type"] == "mcp_server_status"
                    && matches!(v["server"]["status"].as_str(), Some("failed" | "ready"))
            },
            Duration::from_secs(20),
        );
        let server = event["server"].clone();
        settled.insert(server["name"].as_str().unwrap().to_owned(), server);
    }
    assert_eq!(
        settled["broken"]["reason"],
        "exited with code 7; stderr: refusing to start"
    );
    let missing = settled["missing"]["reason"].as_str().unwrap();
    // The keeper that servers run under says why it could not start the program.
    assert!(
        missing.starts_with(
            "exited with code 127; stderr: nova: cannot run `/nonexistent/mcp-server` in "
        ) && missing.ends_with("No such file or directory (os error 2)"),
        "{missing}"
    );
    assert_eq!(settled["sleepy"]["reason"], "did not start within 500ms");
    assert_eq!(settled["good"]["status"], "ready");
    nova.stderr_with("nova: mcp: server broken failed to start: ");
    nova.stderr_with("nova: mcp: server sleepy failed to start: did not start within 500ms");

    let events = nova.run_prompt("echo");
    assert_eq!(text(tool_ends(&events)[0]), "still here");
    let offered = offered_tools(&mock.wait_requests(1, EVENT_TIMEOUT)[0].body);
    let mcp: Vec<&String> = offered.iter().filter(|t| t.starts_with("mcp__")).collect();
    assert!(mcp.iter().all(|t| t.starts_with("mcp__good__")), "{mcp:?}");
}

#[test]
fn a_changed_tool_list_reaches_the_next_request() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "mcp__faulty__grow", json!({})));
    mock.push(Reply::new().tool_call("c2", "mcp__faulty__extra", json!({})));
    mock.push(Reply::text("ok"));
    let mut nova = nova_with(&mock, |log| json!({"faulty": faulty(&server, log)}));
    wait_status(&mut nova, "faulty", "ready");
    nova.request_ok(json!({"type": "prompt", "message": "grow"}));
    let grown = nova.wait_for(
        |v| v["type"] == "mcp_server_status" && v["server"]["toolCount"] == 10,
        Duration::from_secs(10),
    );
    assert_eq!(grown["server"]["status"], "ready");
    let events = nova.events_until("agent_settled");
    let ends = tool_ends(&events);
    assert_eq!(text(ends[0]), "grown");
    assert_eq!(text(ends[1]), "extra works");
    let requests = mock.wait_requests(2, EVENT_TIMEOUT);
    assert!(!offered_tools(&requests[0].body).contains(&"mcp__faulty__extra".to_owned()));
    assert!(offered_tools(&requests[1].body).contains(&"mcp__faulty__extra".to_owned()));
}
