//! The official Python ACP SDK (`agent-client-protocol` on PyPI) driving `nova --mode acp`
//! through `scripts/acp-client.py`, against the mock model. Needs the SDK installed:
//! `scripts/test.sh` installs it into a venv and runs this with `NOVA_ACP_PYTHON` set to
//! the venv's python; without it the test says so on stderr and passes.

use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{openai_models, wait_or_kill};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
// The skip must be visible: a silent pass would hide that the client never ran.
#[allow(clippy::print_stderr)]
fn the_python_sdks_client_drives_nova() {
    let Some(python) = std::env::var_os("NOVA_ACP_PYTHON") else {
        eprintln!(
            "SKIPPED the Python ACP SDK test: NOVA_ACP_PYTHON is not set (scripts/test.sh \
             installs the SDK and sets it)"
        );
        return;
    };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "c1",
        "bash",
        json!({"command": "rm -rf build && echo gone"}),
    ));
    mock.push(Reply::text("done"));
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let cwd_path = cwd.path().canonicalize().unwrap();
    std::fs::create_dir(cwd_path.join("build")).unwrap();
    std::fs::write(
        agent.path().join("models.json"),
        openai_models(&mock).to_string(),
    )
    .unwrap();

    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/acp-client.py");
    let stderr_path = agent.path().join("acp-client.stderr");
    let mut cmd = Command::new(&python);
    cmd.arg(&driver)
        .env("NOVA_BIN", env!("CARGO_BIN_EXE_nova"))
        .env("NOVA_AGENT_DIR", agent.path())
        .env("NOVA_CWD", &cwd_path)
        .env("HOME", home.path())
        .env_remove("PI_CODING_AGENT_DIR")
        .env_remove("OLLAMA_HOST")
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    for builtin in nova::config::builtin::CATALOG {
        for var in builtin.key_vars {
            cmd.env_remove(var);
        }
    }
    let mut child = cmd.spawn().expect("the venv's python runs");
    let status = wait_or_kill(
        &mut child,
        Duration::from_secs(90),
        "the Python ACP client",
        &stderr_path,
    );
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(
        status.success(),
        "the Python ACP client failed ({status}):\n{stderr}"
    );
    assert_eq!(
        mock.pending_replies(),
        0,
        "both scripted replies were asked for"
    );
}
