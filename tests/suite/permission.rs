//! The bash permission gate end to end: a flagged command waits for `permission_response`;
//! approval runs it, denial becomes an error result the model can react to, abort resolves it.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova};
use serde_json::{Value, json};

fn tool_end(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("a tool_execution_end")
}

fn result_text(end: &Value) -> &str {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

fn nova_with_build_dir(mock: &MockLlm, settings: Option<Value>) -> Nova {
    let mut builder = Nova::builder().ollama(mock).file("build/out.o", "x");
    if let Some(s) = settings {
        builder = builder.settings(s);
    }
    builder.spawn()
}

#[test]
fn approved_commands_run_after_the_request() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "c1",
        "bash",
        json!({"command": "rm -rf build && echo gone"}),
    ));
    mock.push(Reply::text("cleaned"));
    let mut nova = nova_with_build_dir(&mock, None);
    nova.request_ok(json!({"type": "prompt", "message": "clean up"}));
    let before = nova.events_until("permission_request");
    assert!(
        before
            .iter()
            .any(|e| e["type"] == "tool_execution_start" && e["toolName"] == "bash")
    );
    let request = before.last().unwrap();
    assert_eq!(request["requestId"], 1);
    assert_eq!(request["toolName"], "bash");
    assert_eq!(request["command"], "rm -rf build && echo gone");
    assert!(
        request["reason"].as_str().unwrap().contains("rm -rf build"),
        "{request}"
    );
    assert!(
        nova.cwd().join("build").exists(),
        "nothing runs before approval"
    );
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["pendingPermissionRequests"],
        1
    );

    nova.request_ok(json!({"type": "permission_response", "requestId": 1, "approved": true}));
    let events = nova.events_until("agent_settled");
    let end = tool_end(&events);
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(result_text(end), "gone\n");
    assert!(!nova.cwd().join("build").exists());
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["pendingPermissionRequests"],
        0
    );
    let r = nova.request(json!({"type": "permission_response", "requestId": 1, "approved": true}));
    assert!(
        r["error"].as_str().unwrap().contains("already resolved"),
        "{r}"
    );
    mock.assert_no_violations();
}

#[test]
fn a_denied_command_is_an_error_result_and_the_run_goes_on() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "sudo rm -rf build"})));
    mock.push(Reply::text("understood, leaving it"));
    let mut nova = nova_with_build_dir(&mock, None);
    nova.request_ok(json!({"type": "prompt", "message": "clean up"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    nova.request_ok(json!({"type": "permission_response", "requestId": request["requestId"], "approved": false}));
    let events = nova.events_until("agent_settled");
    let end = tool_end(&events);
    assert_eq!(end["isError"], true);
    assert!(result_text(end).contains("denied"), "{end}");
    assert!(nova.cwd().join("build/out.o").exists());
    let turn_texts: Vec<&Value> = events.iter().filter(|e| e["type"] == "turn_end").collect();
    assert_eq!(turn_texts.len(), 2, "the model got the denial and answered");
    let second = &mock.wait_requests(2, EVENT_TIMEOUT)[1];
    let tool_msg = second
        .messages()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(tool_msg["content"].as_str().unwrap().contains("denied"));
    mock.assert_no_violations();
}

#[test]
fn abort_while_waiting_resolves_the_request_as_an_aborted_call() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "git push --force"})));
    let mut nova = nova_with_build_dir(&mock, None);
    nova.request_ok(json!({"type": "prompt", "message": "ship it"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    nova.send(&json!({"id": "stop", "type": "abort"}));
    let events = nova.events_until("response");
    let end = tool_end(&events);
    assert_eq!(end["isError"], true);
    assert_eq!(result_text(end), "Command aborted");
    assert_eq!(events[events.len() - 2]["aborted"], true);
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["pendingPermissionRequests"],
        0
    );
    let r = nova.request(
        json!({"type": "permission_response", "requestId": request["requestId"], "approved": true}),
    );
    assert_eq!(r["success"], false);
}

#[test]
fn settings_rules_deny_without_asking_and_modes_change_what_asks() {
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call(
                "c1",
                "bash",
                json!({"command": "curl http://example.invalid/x"}),
            )
            .tool_call("c2", "bash", json!({"command": "rm -rf build"})),
    );
    mock.push(Reply::text("ok"));
    let settings = json!({"permissions": {"bash": {"mode": "never", "deny": ["curl *"]}}});
    let mut nova = nova_with_build_dir(&mock, Some(settings));
    let events = nova.run_prompt("go");
    assert!(events.iter().all(|e| e["type"] != "permission_request"));
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert!(
        result_text(ends[0]).contains("deny rule `curl *`"),
        "{}",
        ends[0]
    );
    assert_eq!(
        ends[1]["isError"], false,
        "mode never runs flagged commands"
    );
    assert!(!nova.cwd().join("build").exists());

    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo harmless"})));
    mock.push(Reply::text("ok"));
    let settings = json!({"permissions": {"bash": {"mode": "always"}}});
    let mut nova = nova_with_build_dir(&mock, Some(settings));
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["command"], "echo harmless");
    nova.request_ok(
        json!({"type": "permission_response", "requestId": request["requestId"], "approved": true}),
    );
    let events = nova.events_until("agent_settled");
    assert_eq!(result_text(tool_end(&events)), "harmless\n");
}

#[test]
fn invalid_permission_settings_fail_closed() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "echo hi"})));
    let settings = json!({"permissions": {"bash": {"mode": "sometimes"}}});
    let mut nova = nova_with_build_dir(&mock, Some(settings));
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["command"], "echo hi");
    nova.stderr_with("permissions.bash");
}

#[test]
fn disguised_commands_ask_before_running() {
    for command in [
        "{rm,-rf,build}",
        "alias x='rm -rf'\nx build",
        "/bin/r[m] -rf build",
        "OPTS=-rf; rm $OPTS build",
        "rm --rec build",
    ] {
        let mock = MockLlm::start();
        mock.push(Reply::new().tool_call("c1", "bash", json!({"command": command})));
        mock.push(Reply::text("leaving it"));
        let mut nova = nova_with_build_dir(&mock, None);
        nova.request_ok(json!({"type": "prompt", "message": "clean up"}));
        let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
        assert_eq!(request["command"], command);
        let reason = request["reason"].as_str().unwrap();
        assert!(
            reason.contains("rm") || reason.contains("r[m]"),
            "{request}"
        );
        nova.request_ok(json!({"type": "permission_response", "requestId": request["requestId"], "approved": false}));
        let events = nova.events_until("agent_settled");
        assert_eq!(tool_end(&events)["isError"], true, "{command}");
        assert!(
            nova.cwd().join("build/out.o").exists(),
            "{command:?} ran before approval"
        );
        mock.assert_no_violations();
    }
}

#[test]
fn deny_rules_match_the_command_as_it_will_run() {
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call(
                "c1",
                "bash",
                json!({"command": "g\\it -C . push --dry-run"}),
            )
            .tool_call("c2", "bash", json!({"command": "{/usr/bin/rm,-r,build}"})),
    );
    mock.push(Reply::text("ok"));
    let settings = json!({"permissions": {"bash": {"deny": ["git push*", "rm *"]}}});
    let mut nova = nova_with_build_dir(&mock, Some(settings));
    let events = nova.run_prompt("go");
    assert!(events.iter().all(|e| e["type"] != "permission_request"));
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert!(
        result_text(ends[0]).contains("deny rule `git push*`"),
        "{}",
        ends[0]
    );
    assert!(
        result_text(ends[1]).contains("deny rule `rm *`"),
        "{}",
        ends[1]
    );
    assert!(nova.cwd().join("build/out.o").exists());
    mock.assert_no_violations();
}

/// Round 3, class 12: a recursive function that backgrounds itself, by any name, asks first; a
/// denied one never runs.
#[test]
fn self_backgrounding_recursive_functions_ask_first() {
    let mock = MockLlm::start();
    let command = "x(){ x& x; }; touch ran; x";
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": command})));
    mock.push(Reply::text("ok"));
    let mut nova = Nova::builder().ollama(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["command"], command);
    let reason = request["reason"].as_str().unwrap();
    assert!(reason.contains("fork bomb"), "{reason}");
    nova.request_ok(json!({"type": "permission_response", "requestId": request["requestId"], "approved": false}));
    let events = nova.events_until("agent_settled");
    let end = tool_end(&events);
    assert_eq!(end["isError"], true, "{end}");
    assert!(!nova.cwd().join("ran").exists());
}

#[test]
fn deny_rules_refuse_in_mode_never_and_ask_otherwise_when_the_program_is_known_only_at_run_time() {
    let command = "r=rm; $r -rf build";
    // Mode never asks nobody: refused, with the reason, and nothing ran.
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("c1", "bash", json!({"command": command}))
            .tool_call(
                "c2",
                "bash",
                json!({"command": "a=(rm -rf build); \"${a[@]}\""}),
            ),
    );
    mock.push(Reply::text("ok"));
    let settings = json!({"permissions": {"bash": {"mode": "never", "deny": ["rm *"]}}});
    let mut nova = nova_with_build_dir(&mock, Some(settings));
    let events = nova.run_prompt("go");
    assert!(events.iter().all(|e| e["type"] != "permission_request"));
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    for end in &ends {
        assert_eq!(end["isError"], true, "{end}");
        let text = result_text(end);
        assert!(
            text.contains("deny rule (`rm *`) exists")
                && text.contains("known only at run time")
                && text.contains("mode is \"never\""),
            "{text}"
        );
    }
    assert!(nova.cwd().join("build/out.o").exists());
    mock.assert_no_violations();

    // Mode flagged, even with everything allowed: the client is asked, naming the reason.
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": command})));
    mock.push(Reply::text("leaving it"));
    let settings = json!({"permissions": {"bash": {"deny": ["rm *"], "allow": ["*"]}}});
    let mut nova = nova_with_build_dir(&mock, Some(settings));
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    let request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(request["command"], command);
    let reason = request["reason"].as_str().unwrap();
    assert!(
        reason.contains("deny rule (`rm *`) exists") && reason.contains("`$r`"),
        "{reason}"
    );
    nova.request_ok(
        json!({"type": "permission_response", "requestId": request["requestId"], "approved": false}),
    );
    let events = nova.events_until("agent_settled");
    assert_eq!(tool_end(&events)["isError"], true);
    assert!(nova.cwd().join("build/out.o").exists());
    mock.assert_no_violations();
}
