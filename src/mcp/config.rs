//! `mcp.json` files → the servers nova knows about, in Pi 1.6's shape:
//! `{"mcpServers": {"name": {"command", "args", "env", "cwd"} | {"url", "headers"},
//! "type"?, "enabled"?, "timeout"?, "description"?}}`.
//!
//! Four files, from the lowest precedence to the highest: the user's `<agent dir>/mcp.json`,
//! Claude's `.mcp.json` in the project root, the project's `.pi/mcp.json` (for a repository
//! that keeps Pi's project dir) and its `.nova/mcp.json`. An entry
//! replaces one of the same name from a file below it; an entry with neither `command`, `url`
//! nor `type` only overrides `enabled`. Names that differ only in `-` and `_` are the same
//! server (their tools would get the same names). Invalid entries are reported and skipped.
//!
//! Project entries are kept but not started unless the project is trusted: a cloned repository
//! must not be able to run programs through nova. The user's own stdio servers start outside
//! the project, with its entries removed from their search paths ([`super::isolate`]), so that
//! they do not load the repository's code either. `${VAR}` and `!command` in `env` and `headers`
//! are resolved when the server starts ([`super::resolve`]), never while loading.

use super::isolate::{Isolation, neutral_dir};
use crate::protocol::{McpSource, McpTransport};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A call (and the start-up handshake) may take this long unless `timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub source: McpSource,
    pub transport: Transport,
    pub timeout: Duration,
    pub description: Option<String>,
    /// Why the server is listed but not started (`enabled: false`, an untrusted project).
    pub disabled: Option<String>,
    /// A user's server: kept apart from the project, its `!command` values too.
    pub isolation: Option<Isolation>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Values still unresolved (`${VAR}`, `!command`).
        env: Vec<(String, String)>,
        /// Absolute: the configured `cwd` (relative to nova's cwd); else nova's cwd for the
        /// project's servers, and [`Isolation::dir`] for the user's.
        cwd: PathBuf,
    },
    Http {
        url: String,
        /// Values still unresolved (`${VAR}`, `!command`).
        headers: Vec<(String, String)>,
    },
}

impl ServerConfig {
    /// A client's values are what it sent: its `${VAR}` or `!command` is text, not an
    /// instruction to nova.
    pub fn literal_values(&self) -> bool {
        self.source == McpSource::Client
    }
}

/// An MCP server a front end's client gives for one session (ACP's `session/new`). The client
/// acts for the user, so it is trusted like the user's mcp.json; like the user's servers, a
/// stdio one starts apart from the project.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientServer {
    pub name: String,
    pub transport: ClientTransport,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClientTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// Adds the client's servers to those of the files, a client's replacing a file's of the same
/// name. An `Err` names the first server that cannot be used.
pub fn add_client_servers(
    servers: &mut Vec<ServerConfig>,
    given: &[ClientServer],
    agent_dir: &Path,
    cwd: &Path,
) -> Result<(), String> {
    let mut seen: Vec<String> = Vec::new();
    for server in given {
        let name = &server.name;
        check_name(name).map_err(|e| format!("MCP server \"{name}\": {e}"))?;
        let key = canonical(name);
        if seen.contains(&key) {
            return Err(format!(
                "MCP server \"{name}\" is given twice (`-` and `_` count as the same)"
            ));
        }
        seen.push(key.clone());
        let isolation = Isolation {
            project: cwd.to_path_buf(),
            dir: neutral_dir(agent_dir, cwd),
        };
        let transport = match &server.transport {
            ClientTransport::Stdio { command, .. } if command.trim().is_empty() => {
                return Err(format!("MCP server \"{name}\": the command is empty"));
            }
            ClientTransport::Stdio { command, args, env } => Transport::Stdio {
                command: command.clone(),
                args: args.clone(),
                env: env.clone(),
                cwd: isolation.dir.clone(),
            },
            ClientTransport::Http { url, headers } => {
                check_url(url).map_err(|e| format!("MCP server \"{name}\": {e}"))?;
                Transport::Http {
                    url: url.clone(),
                    headers: headers.clone(),
                }
            }
        };
        let config = ServerConfig {
            name: name.clone(),
            source: McpSource::Client,
            isolation: matches!(transport, Transport::Stdio { .. }).then_some(isolation),
            transport,
            timeout: DEFAULT_TIMEOUT,
            description: None,
            disabled: None,
        };
        match servers.iter().position(|s| canonical(&s.name) == key) {
            Some(i) => servers[i] = config,
            None => servers.push(config),
        }
    }
    Ok(())
}

impl Transport {
    pub fn kind(&self) -> McpTransport {
        match self {
            Transport::Stdio { .. } => McpTransport::Stdio,
            Transport::Http { .. } => McpTransport::Http,
        }
    }
}

/// Where the files are and what the project may do.
pub struct Files<'a> {
    pub user: &'a Path,
    pub claude: &'a Path,
    /// Pi's `.pi/mcp.json`, below nova's own `.nova/mcp.json`.
    pub pi_project: &'a Path,
    pub project: &'a Path,
    pub cwd: &'a Path,
    /// Nova's agent dir, under which the user's stdio servers start when their entry names no
    /// `cwd` ([`super::isolate::neutral_dir`]).
    pub agent_dir: &'a Path,
    pub home: Option<&'a Path>,
    /// `config.settings.project_trusted`.
    pub trusted: bool,
}

impl Files<'_> {
    /// The files, from the lowest precedence to the highest.
    fn in_order(&self) -> [(&Path, McpSource); 4] {
        [
            (self.user, McpSource::User),
            (self.claude, McpSource::Claude),
            (self.pi_project, McpSource::Project),
            (self.project, McpSource::Project),
        ]
    }
}

/// The merged servers in a stable order (first definition wins the position). Problems go to
/// `warnings`, one line each.
pub fn load(files: &Files, warnings: &mut Vec<String>) -> Vec<ServerConfig> {
    let mut servers: Vec<ServerConfig> = Vec::new();
    // The file each server's definition came from, beside it.
    let mut origins: Vec<&Path> = Vec::new();
    for (path, source) in files.in_order() {
        let Some(entries) = read_file(path, warnings) else {
            continue;
        };
        let untrusted = source != McpSource::User && !files.trusted;
        let mut seen_here: Vec<String> = Vec::new();
        for (name, value) in entries {
            let key = canonical(&name);
            if seen_here.contains(&key) {
                warnings.push(format!(
                    "{}: server \"{name}\" has the same name as another entry once `-` and `_` \
                     are treated alike; skipped",
                    path.display()
                ));
                continue;
            }
            seen_here.push(key.clone());
            let existing = servers.iter().position(|s| canonical(&s.name) == key);
            match parse_entry(&name, &value, source, path, files) {
                Err(e) => warnings.push(format!(
                    "{}: server \"{name}\": {e}; skipped",
                    path.display()
                )),
                Ok(Entry::Enabled(enabled)) => {
                    let Some(i) = existing else {
                        warnings.push(format!(
                            "{}: server \"{name}\" only sets \"enabled\", but no other file \
                             defines it; skipped",
                            path.display()
                        ));
                        continue;
                    };
                    if !enabled {
                        servers[i].disabled = Some(switched_off(path));
                    } else if untrusted {
                        warnings.push(format!(
                            "{}: ignoring \"enabled\": true for server \"{name}\": {UNTRUSTED}",
                            path.display()
                        ));
                    } else if servers[i].disabled.as_deref().is_some_and(is_switched_off) {
                        servers[i].disabled = None;
                    }
                }
                Ok(Entry::Server(mut server)) => {
                    if untrusted && server.disabled.is_none() {
                        server.disabled = Some(UNTRUSTED.to_owned());
                    }
                    match existing {
                        Some(i) => {
                            servers[i] = *server;
                            origins[i] = path;
                        }
                        None => {
                            servers.push(*server);
                            origins.push(path);
                        }
                    }
                }
            }
        }
    }
    let skipped: Vec<String> = servers
        .iter()
        .zip(&origins)
        .filter(|(s, _)| s.disabled.as_deref() == Some(UNTRUSTED))
        .map(|(s, path)| format!("{} ({})", s.name, path.display()))
        .collect();
    if !skipped.is_empty() {
        warnings.push(format!(
            "mcp: not starting the project's servers {}: {UNTRUSTED}",
            skipped.join(", ")
        ));
    }
    servers
}

const UNTRUSTED: &str = "the project is not trusted (trust it with --approve, trust.json or the trustedProjects setting)";
const SWITCHED_OFF: &str = "\"enabled\": false in ";

fn switched_off(path: &Path) -> String {
    format!("{SWITCHED_OFF}{}", path.display())
}

fn is_switched_off(reason: &str) -> bool {
    reason.starts_with(SWITCHED_OFF)
}

/// The name a server's tools are prefixed with; two servers with the same one are one server.
pub fn canonical(name: &str) -> String {
    name.replace('-', "_")
}

enum Entry {
    Server(Box<ServerConfig>),
    /// Neither `command`, `url` nor `type`: overrides `enabled` of a server defined below.
    Enabled(bool),
}

/// `None` when the file does not exist or cannot be used (then a warning says why).
fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

fn read_file(path: &Path, warnings: &mut Vec<String>) -> Option<Map<String, Value>> {
    let text = match crate::files::safe_open::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        // The empty directory the sandbox keeps at a missing `.mcp.json` while commands run.
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory && is_empty_dir(path) => {
            return None;
        }
        Err(e) => {
            warnings.push(format!("cannot read {}: {e}", path.display()));
            return None;
        }
    };
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            warnings.push(format!(
                "{}:{}:{}: invalid JSON: {e}; no MCP servers read from it",
                path.display(),
                e.line(),
                e.column()
            ));
            return None;
        }
    };
    match value.get("mcpServers") {
        None | Some(Value::Null) => None,
        Some(Value::Object(servers)) => Some(servers.clone()),
        Some(_) => {
            warnings.push(format!(
                "{}: \"mcpServers\" must be an object; no MCP servers read from it",
                path.display()
            ));
            None
        }
    }
}

fn parse_entry(
    name: &str,
    value: &Value,
    source: McpSource,
    path: &Path,
    files: &Files,
) -> Result<Entry, String> {
    check_name(name)?;
    let Value::Object(entry) = value else {
        return Err("must be an object".into());
    };
    let kind = optional_str(entry, "type")?;
    let command = optional_str(entry, "command")?;
    let url = optional_str(entry, "url")?;
    let enabled = match entry.get("enabled") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err("\"enabled\" must be true or false".into()),
    };
    if kind.is_none() && command.is_none() && url.is_none() {
        return match enabled {
            Some(enabled) => Ok(Entry::Enabled(enabled)),
            None => Err("needs a \"command\" (stdio) or a \"url\" (streamable HTTP)".into()),
        };
    }
    let isolation = (source == McpSource::User).then(|| Isolation {
        project: files.cwd.to_path_buf(),
        dir: neutral_dir(files.agent_dir, files.cwd),
    });
    let transport = match (kind, command, url) {
        (Some("sse"), ..) => {
            return Err(
                "the legacy SSE transport is not supported; use the server's streamable \
                        HTTP endpoint (often /mcp instead of /sse)"
                    .into(),
            );
        }
        (Some(k), ..) if !matches!(k, "stdio" | "http" | "streamable-http") => {
            return Err(format!(
                "unknown \"type\" \"{k}\" (stdio, http or streamable-http)"
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err("has both \"command\" and \"url\"; keep one".into());
        }
        (Some("stdio") | None, Some(command), None) => {
            stdio(command, entry, isolation.as_ref(), files)?
        }
        (Some("http" | "streamable-http") | None, None, Some(url)) => http(url, entry)?,
        (Some("stdio"), None, _) => return Err("\"type\": \"stdio\" needs a \"command\"".into()),
        _ => return Err("an HTTP server needs a \"url\" (and no \"command\")".into()),
    };
    let timeout = match entry.get("timeout") {
        None => DEFAULT_TIMEOUT,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(secs) if secs > 0.0 && secs.is_finite() => Duration::from_secs_f64(secs),
            _ => return Err("\"timeout\" must be a positive number of seconds".into()),
        },
        Some(_) => return Err("\"timeout\" must be a positive number of seconds".into()),
    };
    Ok(Entry::Server(Box::new(ServerConfig {
        name: name.to_owned(),
        source,
        transport,
        timeout,
        description: optional_str(entry, "description")?.map(str::to_owned),
        disabled: (enabled == Some(false)).then(|| switched_off(path)),
        isolation,
    })))
}

fn stdio(
    command: &str,
    entry: &Map<String, Value>,
    isolation: Option<&Isolation>,
    files: &Files,
) -> Result<Transport, String> {
    if command.trim().is_empty() {
        return Err("\"command\" is empty".into());
    }
    let args = match entry.get("args") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|a| a.as_str().map(|a| home(a, files.home)))
            .collect::<Option<Vec<_>>>()
            .ok_or("\"args\" must be a list of strings")?,
        Some(_) => return Err("\"args\" must be a list of strings".into()),
    };
    let cwd = match (optional_str(entry, "cwd")?, isolation) {
        (Some(dir), _) => files.cwd.join(home(dir, files.home)),
        (None, Some(isolation)) => isolation.dir.clone(),
        (None, None) => files.cwd.to_path_buf(),
    };
    Ok(Transport::Stdio {
        command: home(command, files.home),
        args,
        env: string_map(entry, "env")?,
        cwd,
    })
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err("a server name may contain only letters, digits, `_` and `-`".into());
    }
    Ok(())
}

fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "\"url\" must be an http:// or https:// address, not \"{url}\""
        ));
    }
    Ok(())
}

fn http(url: &str, entry: &Map<String, Value>) -> Result<Transport, String> {
    check_url(url)?;
    Ok(Transport::Http {
        url: url.to_owned(),
        headers: string_map(entry, "headers")?,
    })
}

fn optional_str<'a>(entry: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("\"{key}\" must be a string")),
    }
}

fn string_map(entry: &Map<String, Value>, key: &str) -> Result<Vec<(String, String)>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("every value of \"{key}\" must be a string")),
        Some(_) => Err(format!("\"{key}\" must be an object of strings")),
    }
}

/// A leading `~/` names the home directory, as in a shell.
fn home(value: &str, home: Option<&Path>) -> String {
    match (value.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest).to_string_lossy().into_owned(),
        _ => value.to_owned(),
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
