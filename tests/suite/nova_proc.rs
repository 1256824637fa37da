//! The nova driver against scripted `sh` stand-ins, so it is known to work before nova does.

use crate::support::mock_llm::MockLlm;
use crate::support::nova_proc::{Nova, ollama_models};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(10);

fn fake(script: &str) -> Nova {
    Nova::builder().program("sh", ["-c", script]).spawn()
}

#[test]
fn request_keeps_other_lines_buffered() {
    let mut nova = fake(
        r#"echo '{"type":"agent_start"}'
read line
echo "got: $line" >&2
echo '{"type":"turn_start"}'
echo '{"id":"req-1","type":"response","command":"get_state","success":false,"error":"nope"}'
echo '{"type":"agent_settled","aborted":false}'
cat >/dev/null
exit 3"#,
    );
    let r = nova.request(json!({"type": "get_state"}));
    assert_eq!(r["id"], "req-1");
    assert_eq!(r["error"], "nope");
    assert_eq!(nova.next_event(LONG)["type"], "agent_start");
    let rest = nova.events_until("agent_settled");
    let types: Vec<_> = rest.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["turn_start", "agent_settled"]);
    assert_eq!(nova.log().len(), 4);
    nova.close_stdin();
    assert_eq!(nova.wait_exit(LONG).code(), Some(3));
    let stderr = nova.stderr();
    assert!(
        stderr.contains(r#"got: {"type":"get_state","id":"req-1"}"#),
        "{stderr}"
    );
}

#[test]
fn wait_for_skips_to_the_match() {
    let mut nova = fake(
        r#"echo '{"type":"agent_start"}'
echo '{"type":"turn_start"}'
echo '{"type":"agent_settled","aborted":true}'
cat"#,
    );
    let v = nova.wait_for(|v| v["aborted"] == true, LONG);
    assert_eq!(v["type"], "agent_settled");
    assert_eq!(nova.log().len(), 3);
    assert!(nova.drain_pending().is_empty());
}

#[test]
fn builder_writes_the_agent_dir_and_cwd() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(ollama_models(&mock))
        .settings(json!({"steeringMode": "all"}))
        .file("src/a.txt", "hello")
        .env("NOVA_TEST_VAR", "42")
        .program(
            "sh",
            [
                "-c",
                r#"cat "$NOVA_AGENT_DIR/models.json" "$NOVA_AGENT_DIR/settings.json" src/a.txt >&2
echo "var=$NOVA_TEST_VAR" >&2"#,
            ],
        )
        .spawn();
    assert!(nova.wait_exit(LONG).success());
    let stderr = nova.stderr();
    assert!(stderr.contains(&mock.base_url_ollama()), "{stderr}");
    assert!(stderr.contains("\"mock-ollama\""), "{stderr}");
    assert!(stderr.contains("steeringMode"), "{stderr}");
    assert!(stderr.contains("hello"), "{stderr}");
    assert!(stderr.contains("var=42"), "{stderr}");
    assert!(nova.cwd().join("src/a.txt").exists());
}

#[test]
#[should_panic(expected = "not JSON")]
fn a_non_json_line_fails() {
    let mut nova = fake("echo nope; cat");
    nova.next_event(LONG);
}

#[test]
#[should_panic(expected = "does not match the wire mirror types")]
fn a_drifted_line_fails() {
    let mut nova = fake(r#"echo '{"type":"agent_start","extra":1}'; cat"#);
    nova.next_event(LONG);
}

#[test]
#[should_panic(expected = "no line from nova within")]
fn waits_time_out_readably() {
    let mut nova = fake("cat");
    nova.next_event(Duration::from_millis(100));
}

#[test]
#[should_panic(expected = "nova closed stdout")]
fn a_closed_stdout_fails_at_once() {
    let mut nova = fake("echo '{\"type\":\"agent_start\"}'; echo dying >&2");
    nova.events_until("agent_end");
}
