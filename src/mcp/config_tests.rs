#![allow(clippy::unwrap_used)]

use super::*;
use serde_json::json;
use tempfile::TempDir;

struct Dirs {
    _tmp: TempDir,
    user: PathBuf,
    claude: PathBuf,
    pi_project: PathBuf,
    project: PathBuf,
    cwd: PathBuf,
    home: PathBuf,
    agent: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("proj");
    std::fs::create_dir_all(cwd.join(".nova")).unwrap();
    std::fs::create_dir_all(cwd.join(".pi")).unwrap();
    Dirs {
        user: tmp.path().join("agent-mcp.json"),
        claude: cwd.join(".mcp.json"),
        pi_project: cwd.join(".pi/mcp.json"),
        project: cwd.join(".nova/mcp.json"),
        home: tmp.path().join("home"),
        agent: tmp.path().join("agent"),
        cwd,
        _tmp: tmp,
    }
}

fn write(path: &Path, value: Value) {
    std::fs::write(path, value.to_string()).unwrap();
}

fn load_all(d: &Dirs, trusted: bool) -> (Vec<ServerConfig>, Vec<String>) {
    let mut warnings = Vec::new();
    let files = Files {
        user: &d.user,
        claude: &d.claude,
        pi_project: &d.pi_project,
        project: &d.project,
        cwd: &d.cwd,
        agent_dir: &d.agent,
        home: Some(&d.home),
        trusted,
    };
    (load(&files, &mut warnings), warnings)
}

fn by_name<'a>(servers: &'a [ServerConfig], name: &str) -> &'a ServerConfig {
    servers
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name} in {servers:?}"))
}

#[test]
fn no_files_means_no_servers_and_no_warnings() {
    let d = dirs();
    assert_eq!(load_all(&d, false), (Vec::new(), Vec::new()));
}

#[test]
fn entries_parse_with_defaults_and_home_expansion() {
    let d = dirs();
    write(
        &d.user,
        json!({"mcpServers": {
            "fs": {"command": "~/bin/fs-server", "args": ["~/data", "-v"],
                   "env": {"TOKEN": "${TOKEN}"}, "cwd": "sub", "description": "files"},
            "docs": {"type": "streamable-http", "url": "https://example.test/mcp",
                     "headers": {"Authorization": "Bearer ${DOCS}"}, "timeout": 2.5},
        }}),
    );
    let (servers, warnings) = load_all(&d, false);
    assert!(warnings.is_empty(), "{warnings:?}");
    let fs = by_name(&servers, "fs");
    assert_eq!(
        fs.transport,
        Transport::Stdio {
            command: d.home.join("bin/fs-server").display().to_string(),
            args: vec![d.home.join("data").display().to_string(), "-v".into()],
            env: vec![("TOKEN".into(), "${TOKEN}".into())],
            cwd: d.cwd.join("sub"),
        }
    );
    assert_eq!(fs.timeout, DEFAULT_TIMEOUT);
    assert_eq!(fs.description.as_deref(), Some("files"));
    assert_eq!((fs.source, fs.disabled.clone()), (McpSource::User, None));
    let docs = by_name(&servers, "docs");
    assert_eq!(docs.timeout, Duration::from_millis(2500));
    assert_eq!(docs.transport.kind(), McpTransport::Http);
}

#[test]
fn the_users_servers_start_outside_the_project_and_the_projects_inside() {
    let d = dirs();
    write(
        &d.user,
        json!({"mcpServers": {"mine": {"command": "python3", "args": ["-m", "pkg"]},
                              "here": {"command": "srv", "cwd": "."}}}),
    );
    write(
        &d.project,
        json!({"mcpServers": {"theirs": {"command": "python3", "args": ["-m", "pkg"]}}}),
    );
    let (servers, _) = load_all(&d, true);
    let stdio = |name: &str| {
        let server = by_name(&servers, name);
        match &server.transport {
            Transport::Stdio { cwd, .. } => (cwd.clone(), server.isolation.clone()),
            Transport::Http { .. } => panic!("{name} is not stdio"),
        }
    };
    let isolated = Some(Isolation {
        project: d.cwd.clone(),
        dir: d.agent.join("mcp-cwd"),
    });
    assert_eq!(stdio("mine"), (d.agent.join("mcp-cwd"), isolated.clone()));
    // A `cwd` the user names is theirs to choose, the project too; the search paths still
    // lose the project's entries.
    assert_eq!(stdio("here"), (d.cwd.clone(), isolated));
    assert_eq!(stdio("theirs"), (d.cwd.clone(), None));
}

#[test]
fn invalid_entries_are_reported_and_skipped() {
    let d = dirs();
    write(
        &d.user,
        json!({"mcpServers": {
            "ok": {"command": "srv"},
            "bad name": {"command": "srv"},
            "sse": {"type": "sse", "url": "http://x/sse"},
            "both": {"command": "a", "url": "http://x"},
            "neither": {"args": []},
            "args": {"command": "a", "args": "nope"},
            "timeout": {"command": "a", "timeout": -1},
            "scheme": {"url": "ftp://x"},
            "kind": {"type": "websocket", "url": "ws://x"},
            "ok_too": {"url": "http://127.0.0.1:1/mcp"},
            "ok-too": {"url": "http://127.0.0.1:2/mcp"},
        }}),
    );
    let (servers, warnings) = load_all(&d, false);
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0] == "ok" && names[1].starts_with("ok"), "{names:?}");
    let all = warnings.join("\n");
    for needle in [
        "\"bad name\": a server name may contain only",
        "\"sse\": the legacy SSE transport is not supported",
        "\"both\": has both",
        "\"neither\": needs a \"command\"",
        "\"args\": \"args\" must be a list",
        "\"timeout\": \"timeout\" must be a positive",
        "\"scheme\": \"url\" must be an http",
        "\"kind\": unknown \"type\"",
        "has the same name as another entry once `-` and `_` are treated alike",
    ] {
        assert!(all.contains(needle), "missing {needle:?} in:\n{all}");
    }
    assert_eq!(warnings.len(), 9, "{all}");
}

#[test]
fn a_broken_file_is_reported_and_the_others_still_load() {
    let d = dirs();
    std::fs::write(&d.user, "{ not json").unwrap();
    write(&d.project, json!({"mcpServers": {"p": {"command": "p"}}}));
    write(&d.claude, json!({"mcpServers": []}));
    let (servers, warnings) = load_all(&d, true);
    assert_eq!(servers.len(), 1);
    assert!(warnings[0].contains("invalid JSON"), "{warnings:?}");
    assert!(
        warnings[1].contains("\"mcpServers\" must be an object"),
        "{warnings:?}"
    );
}

#[test]
fn precedence_is_user_then_claude_then_project() {
    let d = dirs();
    write(
        &d.user,
        json!({"mcpServers": {
            "a": {"command": "user-a"},
            "b": {"command": "user-b"},
            "c": {"command": "user-c"},
            "off": {"command": "user-off", "enabled": false},
        }}),
    );
    write(
        &d.claude,
        json!({"mcpServers": {
            "b": {"type": "stdio", "command": "claude-b"},
            "c-": {"command": "claude-c-"},
            "c": {"command": "claude-c"},
        }}),
    );
    write(
        &d.project,
        json!({"mcpServers": {
            "c": {"url": "http://127.0.0.1:9/mcp"},
            "a": {"enabled": false},
            "off": {"enabled": true},
            "ghost": {"enabled": true},
        }}),
    );
    let (servers, warnings) = load_all(&d, true);
    let command = |name: &str| match &by_name(&servers, name).transport {
        Transport::Stdio { command, .. } => command.clone(),
        Transport::Http { url, .. } => url.clone(),
    };
    assert_eq!(command("b"), "claude-b");
    assert_eq!(by_name(&servers, "b").source, McpSource::Claude);
    assert_eq!(
        command("c"),
        "http://127.0.0.1:9/mcp",
        "the project file wins"
    );
    assert_eq!(by_name(&servers, "c").source, McpSource::Project);
    // An entry with only `enabled` overrides just that, keeping the rest.
    assert_eq!(command("a"), "user-a");
    assert!(
        by_name(&servers, "a")
            .disabled
            .as_deref()
            .unwrap()
            .contains(".nova/mcp.json"),
    );
    assert_eq!(by_name(&servers, "off").disabled, None);
    assert_eq!(command("c-"), "claude-c-");
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "b", "c", "off", "c-"],
        "first definition keeps its place"
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("\"ghost\" only sets \"enabled\""));
}

#[test]
fn an_untrusted_project_starts_nothing_and_may_only_switch_servers_off() {
    let d = dirs();
    write(
        &d.user,
        json!({"mcpServers": {
            "mine": {"command": "mine"},
            "quiet": {"command": "quiet", "enabled": false},
            "shadowed": {"command": "user-version"},
        }}),
    );
    write(
        &d.claude,
        json!({"mcpServers": {"claude": {"command": "c"}}}),
    );
    write(
        &d.project,
        json!({"mcpServers": {
            "proj": {"command": "evil"},
            "mine": {"enabled": false},
            "quiet": {"enabled": true},
            "shadowed": {"command": "project-version"},
        }}),
    );
    let (servers, warnings) = load_all(&d, false);
    let disabled = |name: &str| by_name(&servers, name).disabled.clone().unwrap_or_default();
    assert!(disabled("proj").contains("not trusted"));
    assert!(disabled("claude").contains("not trusted"));
    assert!(
        disabled("shadowed").contains("not trusted"),
        "a replacement is the project's"
    );
    assert!(
        disabled("mine").contains("\"enabled\": false"),
        "switching off only tightens"
    );
    assert!(
        disabled("quiet").contains("\"enabled\": false"),
        "switching on is ignored"
    );
    let all = warnings.join("\n");
    assert!(
        all.contains("ignoring \"enabled\": true for server \"quiet\""),
        "{all}"
    );
    let skipped = warnings.last().unwrap();
    assert!(
        skipped.starts_with("mcp: not starting the project's servers ")
            && skipped.contains("claude (")
            && skipped.contains("proj (")
            && skipped.contains("shadowed (")
            && skipped.contains("--approve"),
        "{skipped}"
    );

    let (servers, _) = load_all(&d, true);
    assert_eq!(by_name(&servers, "proj").disabled, None);
    assert!(
        by_name(&servers, "quiet").disabled.is_none(),
        "trusted may switch on"
    );
}

#[test]
fn the_sandboxs_placeholder_for_a_missing_mcp_json_reads_as_no_file() {
    let d = dirs();
    std::fs::create_dir(&d.claude).unwrap();
    let (servers, warnings) = load_all(&d, true);
    assert!(servers.is_empty() && warnings.is_empty(), "{warnings:?}");
    std::fs::write(d.claude.join("x"), "").unwrap();
    let (_, warnings) = load_all(&d, true);
    assert!(warnings[0].contains("cannot read"), "{warnings:?}");
}

#[test]
fn a_clients_servers_start_apart_from_the_project_replace_same_named_ones_and_keep_their_values() {
    let d = dirs();
    write(
        &d.user,
        json!({"mcpServers": {"shared_name": {"command": "from-file"},
                              "kept": {"url": "http://127.0.0.1:1/mcp"}}}),
    );
    let (mut servers, _) = load_all(&d, false);
    let sent = vec![("TOKEN".to_owned(), "${HOME} !echo run".to_owned())];
    let given = [
        ClientServer {
            name: "shared-name".into(),
            transport: ClientTransport::Stdio {
                command: "editor-server".into(),
                args: vec!["--stdio".into()],
                env: sent.clone(),
            },
        },
        ClientServer {
            name: "remote".into(),
            transport: ClientTransport::Http {
                url: "http://127.0.0.1:2/mcp".into(),
                headers: sent.clone(),
            },
        },
    ];
    add_client_servers(&mut servers, &given, &d.agent, &d.cwd).unwrap();
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["shared-name", "kept", "remote"]);
    let replaced = by_name(&servers, "shared-name");
    assert_eq!(replaced.source, McpSource::Client);
    assert!(replaced.literal_values() && replaced.disabled.is_none());
    assert_eq!(
        replaced.isolation,
        Some(Isolation {
            project: d.cwd.clone(),
            dir: d.agent.join("mcp-cwd"),
        })
    );
    assert_eq!(
        replaced.transport,
        Transport::Stdio {
            command: "editor-server".into(),
            args: vec!["--stdio".into()],
            env: sent.clone(),
            cwd: d.agent.join("mcp-cwd"),
        }
    );
    let remote = by_name(&servers, "remote");
    assert!(remote.literal_values());
    assert_eq!(
        remote.transport,
        Transport::Http {
            url: "http://127.0.0.1:2/mcp".into(),
            headers: sent,
        }
    );
    assert!(!by_name(&servers, "kept").literal_values());
}

#[test]
fn pis_project_file_sits_below_novas_and_needs_trust_as_it_does() {
    let d = dirs();
    write(
        &d.pi_project,
        json!({"mcpServers": {
            "shared": {"command": "from-pi"},
            "pi-only": {"command": "pi-only"},
        }}),
    );
    write(
        &d.project,
        json!({"mcpServers": {"shared": {"command": "from-nova"}}}),
    );
    let (servers, _) = load_all(&d, true);
    let command = |name: &str| match &by_name(&servers, name).transport {
        Transport::Stdio { command, .. } => command.clone(),
        Transport::Http { url, .. } => url.clone(),
    };
    assert_eq!(command("shared"), "from-nova", "nova's own file wins");
    assert_eq!(command("pi-only"), "pi-only");
    assert!(servers.iter().all(|s| s.disabled.is_none()));
    let (servers, warnings) = load_all(&d, false);
    assert!(servers.iter().all(|s| s.disabled.is_some()));
    let line = warnings
        .iter()
        .find(|w| w.contains("not starting"))
        .unwrap();
    assert!(
        line.contains("pi-only (") && line.contains(".pi/mcp.json"),
        "{line}"
    );
    assert!(
        line.contains("shared (") && line.contains(".nova/mcp.json"),
        "{line}"
    );
}
