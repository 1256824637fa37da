//! MCP servers end to end through the nova binary, with nova's own test server
//! (`examples/mcp_test_server.rs`): the model calls a server's tool and the result reaches the
//! next request; `permissions.mcp` denies or asks; an untrusted project starts nothing; RPC
//! reports every server's status; no server outlives nova.

use crate::support::mcp::{
    STARTUP, live_members, mcp_json, offered_tools, test_server, text, tool_ends,
    wait_file_contains, wait_status,
};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, NovaBuilder};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// A builder with the test server configured in the user's `mcp.json` as `faulty`, logging to
/// `<cwd>/server.log`.
fn with_faulty(mock: &MockLlm, server: &Path, extra: Value) -> NovaBuilder {
    with_server_named("faulty", mock, server, extra)
}

/// The same with the test server configured as `name`.
fn with_server_named(name: &str, mock: &MockLlm, server: &Path, extra: Value) -> NovaBuilder {
    let builder = Nova::builder().ollama(mock);
    let log = builder.cwd().join("server.log");
    let mut entry = json!({"command": server, "env": {"MCP_TEST_LOG": log}});
    if let (Value::Object(entry), Value::Object(extra)) = (&mut entry, extra) {
        entry.extend(extra);
    }
    builder.agent_file("mcp.json", mcp_json(json!({ name: entry })))
}

#[test]
fn a_called_tool_reaches_the_server_and_its_result_the_next_request() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "mcp__faulty__echo", json!({"text": "hello mcp"})));
    mock.push(Reply::text("done"));
    let mut nova = with_faulty(&mock, &server, json!({"description": "faults"})).spawn();
    let ready = wait_status(&mut nova, "faulty", "ready");
    assert_eq!(
        ready,
        json!({"name": "faulty", "status": "ready", "toolCount": 9, "transport": "stdio",
               "source": "user", "description": "faults"})
    );
    let events = nova.run_prompt("echo something");
    let ends = tool_ends(&events);
    assert_eq!(ends[0]["toolName"], "mcp__faulty__echo");
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(text(ends[0]), "hello mcp");
    assert_eq!(
        ends[0]["result"]["details"],
        json!({"server": "faulty", "tool": "echo"})
    );

    let requests = mock.wait_requests(2, EVENT_TIMEOUT);
    let offered = offered_tools(&requests[0].body);
    assert!(
        offered.contains(&"read".to_owned()),
        "built-ins stay: {offered:?}"
    );
    assert!(
        offered.contains(&"mcp__faulty__echo".to_owned()),
        "{offered:?}"
    );
    let echo = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__faulty__echo")
        .unwrap();
    assert_eq!(echo["function"]["description"], "Echo the text back.");
    assert_eq!(
        echo["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );
    let tool_message = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_message["content"], "hello mcp");
    let log = std::fs::read_to_string(nova.cwd().join("server.log")).unwrap();
    assert!(log.contains("call echo {\"text\":\"hello mcp\"}"), "{log}");

    let listed = nova.request_ok(json!({"type": "get_mcp_servers"}));
    assert_eq!(listed["servers"], json!([ready.clone()]));
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["mcpServers"],
        json!([ready])
    );
    mock.assert_no_violations();
}

#[test]
fn nova_answers_at_once_and_the_first_prompt_waits_for_a_slow_server() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("hi"));
    let builder = with_faulty(&mock, &server, json!({"args": ["--slow-start", "1.5"]}));
    let started = Instant::now();
    let mut nova = builder.spawn();
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "get_state waited for the server"
    );
    assert_eq!(state["mcpServers"][0]["status"], "starting");
    nova.run_prompt("hello");
    let offered = offered_tools(&mock.wait_requests(1, EVENT_TIMEOUT)[0].body);
    assert!(
        offered.contains(&"mcp__faulty__slow".to_owned()),
        "{offered:?}"
    );
}

#[test]
fn past_the_wait_limit_the_prompt_goes_on_without_the_server() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text("hi"));
    mock.push(Reply::text("again"));
    let mut nova = with_faulty(&mock, &server, json!({"args": ["--slow-start", "2"]}))
        .settings(json!({"mcpStartupWaitSeconds": 0.2}))
        .spawn();
    nova.run_prompt("hello");
    let offered = offered_tools(&mock.wait_requests(1, EVENT_TIMEOUT)[0].body);
    assert!(
        offered.iter().all(|t| !t.starts_with("mcp__")),
        "{offered:?}"
    );
    nova.stderr_with("nova: mcp: not waiting for faulty (still starting after 200ms)");
    // Its tools join the next request once it is ready.
    wait_status(&mut nova, "faulty", "ready");
    nova.run_prompt("again");
    let offered = offered_tools(&mock.wait_requests(2, EVENT_TIMEOUT)[1].body);
    assert!(
        offered.contains(&"mcp__faulty__echo".to_owned()),
        "{offered:?}"
    );
}

#[test]
fn permission_rules_deny_ask_and_allow() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "mcp__faulty__fail", json!({}))
            .tool_call("c2", "mcp__faulty__echo", json!({"text": "x"})),
    );
    mock.push(Reply::text("ok"));
    mock.push(Reply::new().tool_call("c3", "mcp__faulty__echo", json!({"text": "y"})));
    mock.push(Reply::text("ok"));
    let settings = json!({"permissions": {"mcp": {
        "deny": ["mcp__faulty__fail"], "ask": ["mcp__faulty__e*"]}}});
    let mut nova = with_faulty(&mock, &server, json!({}))
        .settings(settings)
        .spawn();
    wait_status(&mut nova, "faulty", "ready");

    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["toolName"], "mcp__faulty__echo");
    assert_eq!(request["command"], "{\"text\":\"x\"}");
    assert_eq!(
        request["reason"],
        "mcp__faulty__echo matches the permissions.mcp ask rule `mcp__faulty__e*`"
    );
    nova.request_ok(json!({"type": "permission_response",
                           "requestId": request["requestId"], "approved": false}));
    let events = nova.events_until("agent_settled");
    let ends = tool_ends(&events);
    assert_eq!(
        text(ends[0]),
        "Blocked by the permissions.mcp deny rule `mcp__faulty__fail`; mcp__faulty__fail was \
         not called."
    );
    assert!(text(ends[1]).contains("denied"), "{}", ends[1]);
    assert!(ends.iter().all(|e| e["isError"] == true));
    let log = std::fs::read_to_string(nova.cwd().join("server.log")).unwrap();
    assert!(!log.contains("call "), "nothing reached the server:\n{log}");

    nova.request_ok(json!({"type": "prompt", "message": "again"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    nova.request_ok(json!({"type": "permission_response",
                           "requestId": request["requestId"], "approved": true}));
    let events = nova.events_until("agent_settled");
    assert_eq!(text(tool_ends(&events)[0]), "y");
}

#[test]
fn an_untrusted_project_starts_no_server_until_trusted() {
    let Some(server) = test_server() else { return };
    let project = mcp_json(json!({"proj": {"command": server}}));
    let mut nova = Nova::builder().file(".nova/mcp.json", &project).spawn();
    nova.stderr_with("nova: warning: mcp: not starting the project's servers proj (");
    let servers = nova.request_ok(json!({"type": "get_mcp_servers"}))["servers"].clone();
    assert_eq!(servers[0]["status"], "disabled");
    assert_eq!(servers[0]["source"], "project");
    assert!(
        servers[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not trusted"),
        "{servers}"
    );

    let mut nova = Nova::builder()
        .file(".nova/mcp.json", &project)
        .args(["--trust-project"])
        .spawn();
    wait_status(&mut nova, "proj", "ready");
}

#[test]
fn without_mcp_json_nothing_changes() {
    let mock = MockLlm::start();
    mock.push(Reply::text("hi"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    assert_eq!(
        nova.request_ok(json!({"type": "get_mcp_servers"})),
        json!({"servers": []})
    );
    let events = nova.run_prompt("hello");
    assert!(events.iter().all(|e| e["type"] != "mcp_server_status"));
    let offered = offered_tools(&mock.wait_requests(1, EVENT_TIMEOUT)[0].body);
    assert!(offered.iter().all(|t| !t.starts_with("mcp__")));
}

#[test]
fn no_server_outlives_nova_even_behind_a_wrapper_that_ignores_sigterm() {
    let Some(server) = test_server() else { return };
    let builder = Nova::builder();
    let log = builder.cwd().join("server.log");
    // Like an `npx` wrapper: the shell outlives the server, and it ignores SIGTERM.
    let wrapper = json!({"wrapped": {
        "command": "/bin/sh",
        "args": ["-c", "trap '' TERM; \"$0\"; exec sleep 1000", server],
        "env": {"MCP_TEST_LOG": log},
    }});
    let mut nova = builder.agent_file("mcp.json", mcp_json(wrapper)).spawn();
    wait_status(&mut nova, "wrapped", "ready");
    let started = wait_file_contains(&log, "started pid", STARTUP);
    let pgid: i32 = started
        .split_whitespace()
        .skip_while(|w| *w != "pgid")
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(live_members(pgid) >= 2, "the shell and the server run");
    nova.close_stdin();
    let exited = Instant::now();
    assert!(nova.wait_exit(Duration::from_secs(10)).success());
    assert!(
        exited.elapsed() < Duration::from_secs(5),
        "{:?}",
        exited.elapsed()
    );
    assert_eq!(live_members(pgid), 0, "the server's group is gone");
}

#[test]
fn rules_in_the_servers_own_spelling_match_and_rules_that_match_nothing_are_reported() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "mcp__my_faulty__fail", json!({}))
            .tool_call("c2", "mcp__my_faulty__echo", json!({"text": "x"})),
    );
    mock.push(Reply::text("ok"));
    let settings = json!({"permissions": {"mcp": {
        "deny": ["mcp__my-faulty__fail", "mcp__faulty__*"],
        "ask": ["mcp__my-faulty__e*", "mcp__my-faulty__ecko"]}}});
    let mut nova = with_server_named("my-faulty", &mock, &server, json!({}))
        .settings(settings)
        .spawn();
    wait_status(&mut nova, "my-faulty", "ready");
    let warned = nova.stderr_with("`mcp__my-faulty__ecko` matches no tool");
    assert!(
        warned.contains(
            "nova: mcp: warning: the permissions.mcp.deny rule `mcp__faulty__*` matches no tool \
             of the configured servers (my-faulty)"
        ),
        "{warned}"
    );
    assert!(!warned.contains("`mcp__my-faulty__e*`"), "{warned}");
    assert!(!warned.contains("`mcp__my-faulty__fail`"), "{warned}");

    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["toolName"], "mcp__my_faulty__echo");
    assert_eq!(
        request["reason"],
        "mcp__my_faulty__echo matches the permissions.mcp ask rule `mcp__my-faulty__e*`"
    );
    nova.request_ok(json!({"type": "permission_response",
                           "requestId": request["requestId"], "approved": false}));
    let events = nova.events_until("agent_settled");
    let ends = tool_ends(&events);
    assert_eq!(
        text(ends[0]),
        "Blocked by the permissions.mcp deny rule `mcp__my-faulty__fail`; mcp__my_faulty__fail \
         was not called."
    );
    let log = std::fs::read_to_string(nova.cwd().join("server.log")).unwrap();
    assert!(!log.contains("call "), "nothing reached the server:\n{log}");
}

#[test]
fn set_active_tools_names_mcp_tools_too_and_a_tool_left_out_is_not_found() {
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "mcp__faulty__echo", json!({"text": "hi"})));
    mock.push(Reply::text("done"));
    let mut nova = with_faulty(&mock, &server, json!({})).spawn();
    wait_status(&mut nova, "faulty", "ready");
    let listed = nova.request_ok(json!({"type": "get_tools"}));
    let echo = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__faulty__echo")
        .unwrap();
    assert_eq!(echo["source"], "mcp");
    assert_eq!(echo["active"], true);
    assert_eq!(echo["description"], "Echo the text back.");

    nova.request_ok(json!({"type": "set_active_tools", "tools": ["read", "mcp__faulty__fail"]}));
    let events = nova.run_prompt("echo something");
    let ends = tool_ends(&events);
    assert_eq!(ends[0]["isError"], true, "{}", ends[0]);
    assert_eq!(text(ends[0]), "Tool mcp__faulty__echo not found");
    let requests = mock.wait_requests(2, EVENT_TIMEOUT);
    assert_eq!(
        offered_tools(&requests[0].body),
        ["read", "mcp__faulty__fail"]
    );
    let log = std::fs::read_to_string(nova.cwd().join("server.log")).unwrap_or_default();
    assert!(!log.contains("call echo"), "{log}");
}
