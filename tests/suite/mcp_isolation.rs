//! The user's own MCP servers and the repository nova runs in: a server from
//! `<agent dir>/mcp.json` starts in nova's own directory (`<agent dir>/mcp-cwd`), not in the
//! project, and inherits no search path into it, so `python3 -m pkg`, node's `require` and a
//! relative command never load the repository's code (nor do its `!command` values); the
//! project's trusted servers still start in the project.

use crate::support::mcp::{STARTUP, mcp_json, test_server, wait_file_contains};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;

/// Waits until each of `names` has reached `status`, in any order; their statuses by name.
fn wait_all(nova: &mut Nova, names: &[&str], status: &str) -> HashMap<String, Value> {
    let mut seen = HashMap::new();
    while seen.len() < names.len() {
        let event = nova.wait_for(
            |v| v["type"] == "mcp_server_status" && v["server"]["status"] == status,
            STARTUP,
        );
        let server = event["server"].clone();
        seen.insert(server["name"].as_str().unwrap().to_owned(), server);
    }
    seen
}

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn has(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_users_server_loads_nothing_from_the_project() {
    if !has("python3") {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipping: python3 is not available");
        }
        return;
    }
    let builder = Nova::builder();
    let project = builder.cwd().to_path_buf();
    // Markers land outside the project, in a place the test reads after nova is done.
    let markers = builder.agent_dir().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let mark = |name: &str| {
        format!(
            "open({:?}, 'w').write('loaded')\n",
            markers.join(name).display().to_string()
        )
    };
    std::fs::write(project.join("evilpkg.py"), mark("python-module")).unwrap();
    std::fs::create_dir_all(project.join("lib")).unwrap();
    std::fs::write(project.join("lib/evilpkg2.py"), mark("pythonpath")).unwrap();
    let fake = format!(
        "#!/bin/sh\necho loaded > {:?}\nexit 1\n",
        markers.join("path-program").display().to_string()
    );
    executable(&project.join("bin/python3"), &fake);
    executable(
        &project.join("bin/srv"),
        &fake.replace("path-program", "relative"),
    );
    let node = has("node");
    if node {
        let module = project.join("node_modules/evilmod/index.js");
        std::fs::create_dir_all(module.parent().unwrap()).unwrap();
        let js = format!(
            "require('fs').writeFileSync({:?}, 'loaded')\n",
            markers.join("node-module").display().to_string()
        );
        std::fs::write(module, js).unwrap();
    }
    let mut servers = json!({
        "py-module": {"command": "python3", "args": ["-m", "evilpkg"]},
        "py-path": {"command": "python3", "args": ["-m", "evilpkg2"]},
        "relative": {"command": "bin/srv"},
    });
    if node {
        servers["node-module"] = json!({"command": "node", "args": ["-e", "require('evilmod')"]});
    }
    let path = format!(
        "{}/bin:.:bin::{}",
        project.display(),
        std::env::var("PATH").unwrap()
    );
    let mut nova = builder
        .agent_file("mcp.json", mcp_json(servers.clone()))
        .env("PATH", path)
        .env("PYTHONPATH", format!("{}/lib:.", project.display()))
        .env("NODE_PATH", format!("{}/node_modules", project.display()))
        .spawn();
    let names: Vec<&str> = servers
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    let failed = wait_all(&mut nova, &names, "failed");
    for (name, failed) in &failed {
        let reason = failed["reason"].as_str().unwrap();
        assert!(
            !reason.contains("loaded"),
            "{name} ran the project's code: {reason}"
        );
        if name.starts_with("py-") {
            assert!(reason.contains("No module named evilpkg"), "{reason}");
        }
    }
    let found: Vec<String> = std::fs::read_dir(&markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(found.is_empty(), "the project's code ran: {found:?}");
}

#[test]
fn a_users_server_starts_in_the_neutral_dir_and_the_projects_in_the_project() {
    let Some(server) = test_server() else { return };
    let builder = Nova::builder();
    let project = builder.cwd().to_path_buf();
    let agent = builder.agent_dir().to_path_buf();
    let (user_log, project_log) = (agent.join("user.log"), agent.join("project.log"));
    let entry = |log: &Path| {
        json!({"command": server, "env": {
            "MCP_TEST_LOG": log, "WHERE": "!pwd -P",
            "MCP_TEST_LOG_ENV": "WHERE,PATH,PYTHONPATH,PWD,VIRTUAL_ENV"}})
    };
    let path = format!(
        "{}/.venv/bin:{}",
        project.display(),
        std::env::var("PATH").unwrap()
    );
    let mut nova = builder
        .agent_file("mcp.json", mcp_json(json!({"mine": entry(&user_log)})))
        .file(
            ".nova/mcp.json",
            mcp_json(json!({"theirs": entry(&project_log)})),
        )
        .args(["--trust-project"])
        .env("PATH", &path)
        .env("PYTHONPATH", project.display().to_string())
        .env("VIRTUAL_ENV", format!("{}/.venv", project.display()))
        .spawn();
    wait_all(&mut nova, &["mine", "theirs"], "ready");

    let neutral = agent.join("mcp-cwd").canonicalize().unwrap();
    let log = wait_file_contains(&user_log, "env VIRTUAL_ENV", STARTUP);
    assert!(
        log.contains(&format!("cwd {}\n", neutral.display())),
        "{log}"
    );
    // Its `!command` values run there too.
    let neutral_text = neutral.display().to_string();
    assert!(
        log.contains(&format!("env WHERE=Some({neutral_text:?})")),
        "{log}"
    );
    let inherited = std::env::var("PATH").unwrap();
    assert!(
        log.contains(&format!("env PATH=Some({inherited:?})")),
        "only the project's entry left PATH:\n{log}"
    );
    assert!(log.contains("env PYTHONPATH=None"), "{log}");
    assert!(log.contains("env VIRTUAL_ENV=None"), "{log}");
    assert!(
        log.contains(&format!("env PWD=Some({:?})", agent.join("mcp-cwd"))),
        "{log}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&neutral).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the neutral dir is the user's alone");

    // The project's own server, trusted, runs in the project with nova's environment.
    let log = wait_file_contains(&project_log, "env VIRTUAL_ENV", STARTUP);
    let project = project.canonicalize().unwrap();
    assert!(
        log.contains(&format!("cwd {}\n", project.display())),
        "{log}"
    );
    let project_text = project.display().to_string();
    assert!(
        log.contains(&format!("env WHERE=Some({project_text:?})")),
        "{log}"
    );
    assert!(log.contains(&format!("env PATH=Some({path:?})")), "{log}");
}
