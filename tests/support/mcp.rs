//! MCP servers for the suite: nova's own fault-injecting server (`examples/mcp_test_server.rs`,
//! built by `cargo test`), and the third-party servers `scripts/mcp-servers.sh` installs into a
//! cache outside the repository. A test whose server is missing skips with a message saying how
//! to get it.

use super::nova_proc::Nova;
use serde_json::{Value, json};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to come up in a test.
pub const STARTUP: Duration = Duration::from_secs(20);

#[allow(clippy::print_stderr)]
fn skip(what: &str, how: &str) {
    eprintln!("skipping: {what} is not available; {how}");
}

/// nova's own test server, next to the nova binary.
pub fn test_server() -> Option<PathBuf> {
    let nova = Path::new(env!("CARGO_BIN_EXE_nova"));
    let path = nova.parent()?.join("examples").join("mcp_test_server");
    if path.is_file() {
        return Some(path);
    }
    skip(
        "the MCP test server",
        "`cargo test` builds it (or `cargo build --example mcp_test_server`)",
    );
    None
}

/// Where `scripts/mcp-servers.sh` installs the third-party servers.
pub fn servers_dir() -> PathBuf {
    match std::env::var_os("NOVA_MCP_SERVERS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/nova/mcp-servers"),
    }
}

/// The reference filesystem server's entry point, when it and `node` are installed.
pub fn filesystem_server() -> Option<PathBuf> {
    let entry = servers_dir()
        .join("npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if entry.is_file() && node {
        return Some(entry);
    }
    skip(
        "@modelcontextprotocol/server-filesystem (or node)",
        "run scripts/mcp-servers.sh",
    );
    None
}

/// The Python interpreter of the virtualenv that has the `mcp` SDK.
pub fn python_with_mcp() -> Option<PathBuf> {
    let python = servers_dir().join("py/bin/python");
    let has_sdk = Command::new(&python)
        .args(["-c", "import mcp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if has_sdk {
        return Some(python);
    }
    skip("the Python mcp SDK", "run scripts/mcp-servers.sh");
    None
}

/// `{"mcpServers": servers}` as file contents.
pub fn mcp_json(servers: Value) -> String {
    json!({ "mcpServers": servers }).to_string()
}

/// Waits for `mcp_server_status` saying `server` is `status`; returns the server object.
pub fn wait_status(nova: &mut Nova, server: &str, status: &str) -> Value {
    let event = nova.wait_for(
        |v| {
            v["type"] == "mcp_server_status"
                && v["server"]["name"] == server
                && v["server"]["status"] == status
        },
        STARTUP,
    );
    event["server"].clone()
}

/// The names of the tools a recorded chat request offered (either wire format).
pub fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Polls `path` until it contains `needle`; returns its text.
pub fn wait_file_contains(path: &Path, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} never contained {needle:?}:\n{text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes of group `pgid` that still run (zombies left unreaped by a container's init do
/// not count).
pub fn live_members(pgid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|stat| {
            // pid (comm) state ppid pgrp …; comm may hold spaces, so split after the `)`.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
            fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
        })
        .count()
}

/// The Python streamable HTTP server (`tests/mcp/http_server.py`) on a free loopback port;
/// killed when dropped.
pub struct PyHttpServer {
    child: Child,
    pub url: String,
}

impl PyHttpServer {
    pub fn start(python: &Path) -> PyHttpServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/http_server.py");
        let child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = PyHttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        let deadline = Instant::now() + STARTUP;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("the Python MCP server exited at start: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the Python MCP server never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for PyHttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `tool_execution_end` events of a run, in order.
pub fn tool_ends(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect()
}

/// The first text block of a tool result.
pub fn text(end: &Value) -> &str {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}
