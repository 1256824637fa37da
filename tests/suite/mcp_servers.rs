//! Real MCP servers nobody in this project wrote, installed by `scripts/mcp-servers.sh`: the
//! reference filesystem server from npm over stdio, and a server built on the Python `mcp` SDK
//! over streamable HTTP. Each test skips with a message when its server is not installed.

use crate::support::mcp::{
    PyHttpServer, filesystem_server, mcp_json, offered_tools, python_with_mcp, text, tool_ends,
    wait_status,
};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova};
use serde_json::json;

#[test]
fn the_reference_filesystem_server_reads_and_writes_with_permission() {
    let Some(entry) = filesystem_server() else {
        return;
    };
    let mock = MockLlm::start();
    let builder = Nova::builder()
        .ollama(&mock)
        .file("notes.txt", "remember the milk\n");
    let root = builder.cwd().canonicalize().unwrap();
    let config = mcp_json(json!({"fs": {"command": "node", "args": [entry, root]}}));
    let settings = json!({"permissions": {"mcp": {"ask": ["mcp__fs__write_*"]}}});
    let notes = root.join("notes.txt");
    let todo = root.join("todo.txt");
    mock.push(
        Reply::new()
            .tool_call("c1", "mcp__fs__read_text_file", json!({"path": notes}))
            .tool_call(
                "c2",
                "mcp__fs__write_file",
                json!({"path": todo, "content": "buy milk"}),
            ),
    );
    mock.push(Reply::text("done"));
    let mut nova = builder
        .agent_file("mcp.json", config)
        .settings(settings)
        .spawn();
    let ready = wait_status(&mut nova, "fs", "ready");
    assert!(ready["toolCount"].as_u64().unwrap() >= 10, "{ready}");

    nova.request_ok(json!({"type": "prompt", "message": "note it down"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["toolName"], "mcp__fs__write_file");
    assert!(!todo.exists(), "nothing is written before approval");
    nova.request_ok(json!({"type": "permission_response",
                           "requestId": request["requestId"], "approved": true}));
    let events = nova.events_until("agent_settled");
    let ends = tool_ends(&events);
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(text(ends[0]), "remember the milk\n");
    assert_eq!(ends[1]["isError"], false, "{}", ends[1]);
    assert_eq!(std::fs::read_to_string(&todo).unwrap(), "buy milk");

    let requests = mock.wait_requests(2, EVENT_TIMEOUT);
    let offered = offered_tools(&requests[0].body);
    assert!(
        offered.contains(&"mcp__fs__list_directory".to_owned()),
        "{offered:?}"
    );
    let tool_message = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_message["content"], "remember the milk\n");
    mock.assert_no_violations();
}

#[test]
fn a_python_sdk_server_over_streamable_http() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let server = PyHttpServer::start(&python);
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "mcp__py__add", json!({"a": 2, "b": 3}))
            .tool_call("c2", "mcp__py__shout_loud", json!({"text": "hi"}))
            .tool_call("c3", "mcp__py__broken", json!({})),
    );
    mock.push(Reply::text("done"));
    let config = mcp_json(json!({"py": {
        "url": server.url,
        "headers": {"X-Nova-Test": "${NOVA_TEST_HEADER}"},
    }}));
    let mut nova = Nova::builder()
        .ollama(&mock)
        .env("NOVA_TEST_HEADER", "set")
        .agent_file("mcp.json", config)
        .spawn();
    let ready = wait_status(&mut nova, "py", "ready");
    assert_eq!(ready["transport"], "http");
    assert_eq!(ready["toolCount"], 3);
    let events = nova.run_prompt("compute");
    let ends = tool_ends(&events);
    assert_eq!(text(ends[0]), "5");
    assert_eq!(ends[1]["toolName"], "mcp__py__shout_loud");
    assert_eq!(text(ends[1]), "HI");
    assert_eq!(ends[2]["isError"], true);
    assert!(
        text(ends[2]).starts_with("MCP server py reported an error from broken: "),
        "{}",
        ends[2]
    );
    assert!(text(ends[2]).contains("always fails"), "{}", ends[2]);
    mock.assert_no_violations();
}

#[test]
fn an_unset_header_variable_fails_the_server_with_the_reason() {
    let mock = MockLlm::start();
    let config = mcp_json(json!({"remote": {
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer ${NOVA_TEST_SURELY_UNSET}"},
    }}));
    let mut nova = Nova::builder()
        .ollama(&mock)
        .agent_file("mcp.json", config)
        .spawn();
    let failed = wait_status(&mut nova, "remote", "failed");
    assert_eq!(
        failed["reason"],
        "header \"Authorization\": environment variable NOVA_TEST_SURELY_UNSET is not set"
    );
}
