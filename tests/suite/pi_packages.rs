//! Real pi packages from the npm registry, end to end through the nova binary: `nova install
//! npm:<name>@<version>` puts each one (pinned in `tests/pi-packages.txt`) into an agent dir,
//! with npm offline on the cache `scripts/test.sh` fills, and sessions load them through
//! the `packages` setting into the real extension host, against the mock model.
//!
//! Without that cache (or without Pi 1.6) every test here says so on stderr and passes; CI runs
//! them through `scripts/test.sh`, which fills the cache first, so they never skip there.

use super::extensions::{commands, pi_modules, with_pi};
use crate::support::mcp::test_server;
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{Nova, NovaBuilder};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The pinned packages, as `name@version`.
fn specs() -> Vec<String> {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pi-packages.txt");
    std::fs::read_to_string(list)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Where `scripts/counterparts.sh` caches the packages.
fn cache_dir() -> PathBuf {
    match std::env::var_os("NOVA_PI_PACKAGES_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
                });
            cache.join("nova/pi-packages")
        }
    }
}

/// What every test here shares: Pi's `node_modules`, and an agent dir into which `nova install`
/// put every package of the list.
struct Installed {
    modules: PathBuf,
    agent: PathBuf,
    /// What `nova list` printed after the installs.
    list: String,
}

/// Installs the packages once per run of the suite (the first test to ask does it; npm runs
/// offline, from the cache); `None`, said loudly, when the cache or Pi is missing.
// The skip must be visible: a silent pass would hide that no package ran.
#[allow(clippy::print_stderr)]
fn installed() -> Option<&'static Installed> {
    static INSTALLED: OnceLock<Option<Installed>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let modules = pi_modules()?;
            let cache = cache_dir();
            let stamp = std::fs::read_to_string(cache.join("stamp")).unwrap_or_default();
            let wanted = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pi-packages.txt"),
            )
            .unwrap();
            if stamp != wanted {
                eprintln!(
                    "SKIPPED: the pi packages of tests/pi-packages.txt are not cached in {} \
                     (scripts/test.sh caches them and runs these tests); no pi package ran",
                    cache.display()
                );
                return None;
            }
            // One copy per build dir, replaced on every run: the install is what is tested.
            let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pi-packages");
            let _ = std::fs::remove_dir_all(&root);
            let (agent, cwd) = (root.join("agent"), root.join("project"));
            std::fs::create_dir_all(&cwd).unwrap();
            let nova = |args: &[&str]| {
                Command::new(env!("CARGO_BIN_EXE_nova"))
                    .args(args)
                    .current_dir(&cwd)
                    .env("NOVA_AGENT_DIR", &agent)
                    .env("HOME", &root)
                    .env("npm_config_cache", cache.join("npm-cache"))
                    .env("npm_config_offline", "true")
                    .env("npm_config_update_notifier", "false")
                    .output()
                    .unwrap()
            };
            let started = Instant::now();
            for spec in specs() {
                let out = nova(&["install", &format!("npm:{spec}")]);
                assert!(
                    out.status.success(),
                    "nova install npm:{spec}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            eprintln!(
                "pi packages: {} installed with `nova install` (npm offline) in {:.1} s",
                specs().len(),
                started.elapsed().as_secs_f64()
            );
            let list = String::from_utf8(nova(&["list"]).stdout).unwrap();
            Some(Installed {
                modules,
                agent,
                list,
            })
        })
        .as_ref()
}

/// A session whose `packages` setting names `specs` (npm sources), installed where `nova
/// install` put them: the test's own agent dir links to the shared `npm/`.
fn with_packages(builder: NovaBuilder, installed: &Installed, specs: &[&str]) -> NovaBuilder {
    std::os::unix::fs::symlink(installed.agent.join("npm"), builder.agent_dir().join("npm"))
        .unwrap();
    let sources: Vec<String> = specs.iter().map(|s| format!("npm:{s}")).collect();
    with_pi(builder, &installed.modules).settings(json!({ "packages": sources }))
}

/// The spec of the list whose name is `name`.
fn spec(name: &str) -> String {
    specs()
        .into_iter()
        .find(|s| s.rsplit_once('@').is_some_and(|(n, _)| n == name))
        .unwrap()
}

fn names(listed: &[Value]) -> Vec<&str> {
    listed.iter().filter_map(|c| c["name"].as_str()).collect()
}

/// The run's call of `tool` (the mock's Ollama replies carry no call ids).
fn tool_end<'a>(events: &'a [Value], tool: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolName"] == tool)
        .unwrap_or_else(|| panic!("no call of {tool}: {events:#?}"))
}

fn result_text(end: &Value) -> String {
    end["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn no_extension_errors(events: &[Value]) {
    let errors: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "extension_error")
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

// The figure is the point of the test's output.
#[allow(clippy::print_stderr)]
#[test]
fn real_pi_packages_install_from_npm_and_load_their_commands_and_tools() {
    let Some(installed) = installed() else { return };
    let specs = specs();
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(installed.agent.join("settings.json")).unwrap(),
    )
    .unwrap();
    let sources: Vec<String> = specs.iter().map(|s| format!("npm:{s}")).collect();
    assert_eq!(settings["packages"], json!(sources));
    for spec in &specs {
        let (name, _) = spec.rsplit_once('@').unwrap();
        assert!(
            installed.list.contains(&format!("npm:{spec}")),
            "{}",
            installed.list
        );
        assert!(
            installed.list.contains(
                &installed
                    .agent
                    .join("npm/node_modules")
                    .join(name)
                    .display()
                    .to_string()
            ),
            "{}",
            installed.list
        );
    }

    let mock = MockLlm::start();
    mock.push(Reply::text("hello"));
    let spec_refs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let builder = with_packages(Nova::builder().ollama(&mock), installed, &spec_refs);
    let spawned = Instant::now();
    let mut nova = builder.spawn();
    let listed = commands(&mut nova);
    eprintln!(
        "pi packages: {} loaded, commands listed {:.2} s after spawn (debug build)",
        specs.len(),
        spawned.elapsed().as_secs_f64()
    );
    let listed_names = names(&listed);
    // A command of each package, its skills and prompt templates too.
    for (command, package) in [
        ("subagents", "pi-subagents"),
        ("ps", "@aliou/pi-processes"),
        ("mcp", "pi-mcp-adapter"),
        ("websearch", "pi-web-access"),
        ("chain-prompts", "pi-prompt-template-model"),
        ("skill:pi-processes", "@aliou/pi-processes"),
        ("parallel-review", "pi-subagents"),
        ("pi-mermaid", "pi-mermaid"),
        // Named by its resources_discover handler, not its manifest.
        ("skill:mcp-scripting", "pi-mcp-adapter"),
    ] {
        let found = listed
            .iter()
            .find(|c| c["name"] == command)
            .unwrap_or_else(|| panic!("{command} not listed: {listed_names:?}"));
        assert!(
            found["sourceInfo"]["path"]
                .as_str()
                .is_some_and(|p| p.contains(&format!("node_modules/{package}/"))),
            "{found}"
        );
    }
    assert_eq!(
        listed.iter().find(|c| c["name"] == "ps").unwrap()["source"],
        "extension"
    );

    let events = nova.run_prompt("hi");
    no_extension_errors(&events);
    let requests = mock.chat_requests();
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for tool in ["subagent", "process", "mcp", "web_search", "fetch_content"] {
        assert!(tools.contains(&tool), "{tool} not offered: {tools:?}");
    }
    mock.assert_no_violations();
}

#[test]
fn pi_processes_starts_a_background_process_and_reads_its_output() {
    let Some(installed) = installed() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "p1",
        "process",
        json!({
            "action": "start",
            "name": "greeter",
            "command": "echo hello-from-process",
            "notify": {"onSuccess": "ignore"},
        }),
    ));
    mock.push(Reply::text("started"));
    let builder = with_packages(
        Nova::builder().ollama(&mock),
        installed,
        &[&spec("@aliou/pi-processes")],
    );
    let mut nova = builder.spawn();
    commands(&mut nova);
    let events = nova.run_prompt("start the greeter");
    no_extension_errors(&events);
    let started = result_text(tool_end(&events, "process"));
    assert!(
        started.starts_with("Started process greeter ("),
        "{started}"
    );
    let id = started
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(id, _)| id.to_owned())
        .unwrap();

    // The process is the extension's own child; its output is there once it has run.
    let deadline = Instant::now() + Duration::from_secs(20);
    let output = loop {
        mock.push(Reply::new().tool_call("p2", "process", json!({"action": "output", "id": id})));
        mock.push(Reply::text("read"));
        let events = nova.run_prompt("read its output");
        no_extension_errors(&events);
        let output = result_text(tool_end(&events, "process"));
        if output.contains("hello-from-process") || Instant::now() > deadline {
            break output;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(output.contains("hello-from-process"), "{output}");
    mock.assert_no_violations();
}

#[test]
fn pi_mermaid_draws_the_replys_diagram_as_a_custom_message() {
    let Some(installed) = installed() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::text(
        "The flow:\n\n```mermaid\ngraph TD\n  Draft --> Review\n```\n",
    ));
    let builder = with_packages(
        Nova::builder().ollama(&mock),
        installed,
        &[&spec("pi-mermaid")],
    );
    let mut nova = builder.spawn();
    commands(&mut nova);
    let events = nova.run_prompt("draw the flow");
    no_extension_errors(&events);
    // Its agent_end handler draws the diagram with Mermaid's parser and sends it as a message
    // of its own type, which the session keeps (and a client shows) as Pi's sendMessage does.
    let drawn = nova.wait_for(
        |v| v["type"] == "message_end" && v["message"]["customType"] == "pi-mermaid",
        Duration::from_secs(60),
    );
    let ascii = drawn["message"]["details"]["ascii"]
        .as_str()
        .unwrap_or_default();
    assert!(
        ascii.contains("│ Draft  │") && ascii.contains('▼') && ascii.contains("│ Review │"),
        "{drawn}"
    );
    mock.assert_no_violations();
}

#[test]
fn pi_mcp_adapter_calls_a_tool_of_an_mcp_server() {
    let Some(installed) = installed() else { return };
    let Some(server) = test_server() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "m1",
        "mcp",
        json!({"tool": "echo", "server": "faulty", "args": {"text": "through the adapter"}}),
    ));
    mock.push(Reply::text("called"));
    let builder = with_packages(
        Nova::builder().ollama(&mock),
        installed,
        &[&spec("pi-mcp-adapter")],
    );
    // The adapter's own configuration (not nova's mcp.json): nova starts no server itself.
    let config = builder.home().join(".config/mcp/mcp.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        json!({"mcpServers": {"faulty": {"command": server, "args": []}}}).to_string(),
    )
    .unwrap();
    let mut nova = builder.spawn();
    commands(&mut nova);
    let events = nova.run_prompt("echo through the adapter");
    let end = tool_end(&events, "mcp");
    assert_eq!(end["isError"], false, "{end}");
    assert!(result_text(end).contains("through the adapter"), "{end}");
    mock.assert_no_violations();
}

/// Serves one page on loopback, once.
fn serve_page(body: &'static str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten().take(4) {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/page.html")
}

#[test]
fn pi_web_access_refuses_an_internal_address_then_fetches_it_when_allowed() {
    let Some(installed) = installed() else { return };
    let url = serve_page(
        "<html><head><title>Loopback page</title></head><body><article><h1>Loopback page</h1>\
         <p>Served to pi-web-access by the test, never from the internet.</p></article></body></html>",
    );
    let mock = MockLlm::start();
    let builder = with_packages(
        Nova::builder().ollama(&mock),
        installed,
        &[&spec("pi-web-access")],
    );
    // The package's own settings file, in Pi's agent dir: the host names nova's as that
    // (`PI_CODING_AGENT_DIR`), so a Pi user's file moves over unchanged.
    let config = builder.agent_dir().join("web-search.json");
    let mut nova = builder.spawn();
    let listed = commands(&mut nova);
    assert!(names(&listed).contains(&"websearch"), "{listed:?}");

    // Its SSRF guard refuses loopback by default: a clean result, not a failure of the session.
    mock.push(Reply::new().tool_call("w1", "fetch_content", json!({"url": url})));
    mock.push(Reply::text("refused"));
    let events = nova.run_prompt("fetch the page");
    no_extension_errors(&events);
    let refused = result_text(tool_end(&events, "fetch_content"));
    assert!(refused.contains("Blocked internal address"), "{refused}");

    std::fs::write(
        &config,
        json!({"ssrf": {"allowRanges": ["127.0.0.0/8"]}}).to_string(),
    )
    .unwrap();
    // Raw: the exact body (a page this short is too little for its readable extraction).
    mock.push(Reply::new().tool_call("w2", "fetch_content", json!({"url": url, "mode": "raw"})));
    mock.push(Reply::text("fetched"));
    let events = nova.run_prompt("fetch it again");
    no_extension_errors(&events);
    let end = tool_end(&events, "fetch_content");
    assert!(
        result_text(end).contains("Served to pi-web-access by the test"),
        "{end:#}"
    );
    mock.assert_no_violations();
}

/// pi-subagents 0.67 runs a foreground child as Pi's own `AgentSession` inside the extension
/// host (Pi's SDK, not a `pi` process): the child reads the models of nova's agent dir, asks
/// the model itself, and its last answer is the parent's tool result.
#[test]
fn pi_subagents_runs_a_child_whose_answer_is_the_tool_result() {
    let Some(installed) = installed() else { return };
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "s1",
        "subagent",
        json!({"agent": "delegate", "task": "Name the secret word.", "async": false}),
    ));
    mock.push(Reply::text("The secret word is heliotrope."));
    mock.push(Reply::text("The child said heliotrope."));
    let builder = with_packages(
        Nova::builder().openai(&mock),
        installed,
        &[&spec("pi-subagents")],
    );
    let mut nova = builder.spawn();
    commands(&mut nova);
    let events = nova.run_prompt("ask a subagent for the secret word");
    no_extension_errors(&events);
    let end = tool_end(&events, "subagent");
    assert_eq!(end["isError"], false, "{end:#}");
    assert!(result_text(end).contains("heliotrope"), "{end:#}");

    // The parent's call, the child's own request with its task, then the parent again.
    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let child = requests[1].body["messages"].to_string();
    assert!(child.contains("You are a child subagent"), "{child}");
    assert!(child.contains("Name the secret word."), "{child}");
    assert!(
        requests[2].body["messages"]
            .to_string()
            .contains("heliotrope"),
        "the parent's model did not get the child's answer"
    );
    mock.assert_no_violations();
}
