//! `nova login <provider>` and `nova logout <provider>`. For a provider Pi signs in to, login
//! runs its OAuth flow ([`crate::config::oauth::login`]: a browser and a loopback redirect, with
//! the code pasted on stdin as the fallback, or a device code) and stores the tokens as Pi
//! does; `--api-key` (and every other provider) stores an API key instead, in Pi's format
//! (`{"type": "api_key", "key": …}`), read from stdin — one line, not echoed when stdin is a
//! terminal — so it never lands in the shell's history or the process list — and stored as
//! exactly what was given ([`crate::secret::literal`]: Pi 1.6's `$$`/`$!` escapes). auth.json is
//! written as the OAuth refresh writes it (under its lock, replaced atomically, 0600); logout
//! removes the provider's entry, whichever kind it is.

use crate::config::{auth, builtin, oauth};
use crate::frontend::{fatal, note, usage_error};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

/// What the command line asks, when its first word is `login` or `logout`.
pub enum Request {
    Login(Login),
    Logout(String),
}

pub struct Login {
    provider: String,
    /// Store an API key even where an OAuth login exists.
    api_key: bool,
    /// A GitHub Enterprise domain (Copilot).
    enterprise: Option<String>,
    /// A device code rather than a browser's redirect, where both are offered.
    device: bool,
}

/// `Some` when the arguments (after the program's name) are a login command; a malformed one
/// is a usage error right away.
pub fn parse(args: &[String]) -> Option<Result<Request, ExitCode>> {
    let (command, rest) = args.split_first()?;
    let login = match command.as_str() {
        "login" => true,
        "logout" => false,
        _ => return None,
    };
    let usage = || {
        usage_error(&format!(
            "usage: nova {command} <provider>{} (a built-in one: {})",
            if login {
                " [--api-key] [--device|--no-browser] [--enterprise <GitHub Enterprise domain>]"
            } else {
                ""
            },
            builtin::CATALOG
                .iter()
                .map(|b| b.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let Some((provider, mut flags)) = rest.split_first() else {
        return Some(Err(usage()));
    };
    if !valid_name(provider) {
        return Some(Err(usage()));
    }
    if !login {
        return Some(if flags.is_empty() {
            Ok(Request::Logout(provider.clone()))
        } else {
            Err(usage())
        });
    }
    let mut request = Login {
        provider: provider.clone(),
        api_key: false,
        enterprise: None,
        device: false,
    };
    while let Some((flag, more)) = flags.split_first() {
        flags = more;
        match flag.as_str() {
            "--api-key" => request.api_key = true,
            // Pi's `--no-browser`: its other sign-in method, a device code.
            "--device" | "--no-browser" => request.device = true,
            "--enterprise" => match flags.split_first() {
                Some((domain, more)) if !domain.starts_with('-') => {
                    request.enterprise = Some(domain.clone());
                    flags = more;
                }
                _ => return Some(Err(usage())),
            },
            _ => return Some(Err(usage())),
        }
    }
    Some(Ok(Request::Login(request)))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Carries out `request` on the agent dir's auth.json.
pub async fn run(request: Request, agent_dir: &Path) -> ExitCode {
    let path = agent_dir.join("auth.json");
    match request {
        Request::Login(login) if !login.api_key && oauth::can_log_in(&login.provider) => {
            sign_in(login, &path).await
        }
        Request::Login(Login { provider, .. }) => {
            let key = match read_key(&provider) {
                Ok(key) => key,
                Err(message) => return fatal(&message),
            };
            // Stored escaped, so a pasted `!…` never runs and a pasted `$…` is never expanded.
            let entry = serde_json::json!({"type": "api_key", "key": crate::secret::literal(&key)});
            match auth::store(&path, &provider, Some(entry)).await {
                Ok(_) => {
                    note(&format!(
                        "stored the API key of {provider} in {}",
                        path.display()
                    ));
                    ExitCode::SUCCESS
                }
                Err(message) => fatal(&message),
            }
        }
        Request::Logout(provider) => match auth::store(&path, &provider, None).await {
            Ok(true) => {
                note(&format!("removed {provider} from {}", path.display()));
                ExitCode::SUCCESS
            }
            Ok(false) => {
                note(&format!("{provider} has no entry in {}", path.display()));
                ExitCode::SUCCESS
            }
            Err(message) => fatal(&message),
        },
    }
}

/// Runs the provider's OAuth login and stores what it gives.
async fn sign_in(login: Login, path: &Path) -> ExitCode {
    let (lines, pasted) = tokio::sync::mpsc::channel(4);
    // Lines pasted on stdin: the fallback when the browser's redirect cannot reach nova. The
    // thread blocks on stdin and ends with the process.
    let _ = std::thread::Builder::new()
        .name("login-stdin".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                // A pasted address is short; anything longer is not one.
                if lines
                    .blocking_send(line.chars().take(8192).collect())
                    .is_err()
                {
                    break;
                }
            }
        });
    let var = |name: &str| std::env::var(name).ok();
    let mut io = oauth::login::Interaction {
        say: &note,
        pasted,
        var: &var,
        domain: login.enterprise,
        device: login.device,
        device_id: if login.provider == "openai" {
            device_id(path)
        } else {
            String::new()
        },
    };
    if builtin::CATALOG.iter().any(|b| b.name == login.provider) {
        note(&format!(
            "(to store an API key for {0} instead: nova login {0} --api-key)",
            login.provider
        ));
    }
    let entry = match oauth::log_in(&login.provider, &mut io).await {
        Ok(entry) => entry,
        Err(message) => return fatal(&message),
    };
    let entry_access = entry
        .get("access")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match auth::store(
        path,
        &login.provider,
        Some(serde_json::Value::Object(entry)),
    )
    .await
    {
        Ok(_) => {
            note(&format!(
                "signed in to {}; the login is stored in {}",
                login.provider,
                path.display()
            ));
            if login.provider == "radius" {
                radius_catalog(path, &entry_access, &var).await;
            }
            ExitCode::SUCCESS
        }
        Err(message) => fatal(&message),
    }
}

/// Fetches the account's Radius catalog after a login; the login stands when that fails, and
/// Pi's baseline models stay.
async fn radius_catalog(auth: &Path, token: &str, var: oauth::http::Vars<'_>) {
    let agent_dir = auth.parent().unwrap_or(Path::new("."));
    match crate::config::radius::refresh(agent_dir, token, var).await {
        Ok(count) => note(&format!(
            "the gateway lists {count} models for this account; they are kept in {}",
            agent_dir.join(crate::config::radius::STORE_FILE).display()
        )),
        Err(message) => note(&format!(
            "could not load the account's Radius models ({message}); Pi's baseline list is used"
        )),
    }
}

/// This installation's id, as Pi keeps it: `deviceId` in the agent dir's settings.json, made
/// (a random UUID) and stored there the first time it is needed. When the file cannot be
/// read as an object or written, the id is made afresh for this login.
fn device_id(auth: &Path) -> String {
    let path = auth.with_file_name("settings.json");
    let mut settings = match std::fs::read_to_string(&path) {
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(map)) => Some(map),
            _ => None,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(serde_json::Map::new()),
        Err(_) => None,
    };
    if let Some(id) = settings
        .as_ref()
        .and_then(|s| s.get("deviceId"))
        .and_then(serde_json::Value::as_str)
        .filter(|id| uuid::Uuid::parse_str(id).is_ok())
    {
        return id.to_owned();
    }
    let id = uuid::Uuid::new_v4().to_string();
    if let Some(settings) = settings.as_mut() {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        settings.insert("deviceId".into(), id.clone().into());
        let temp = path.with_file_name(format!(".settings.json.{}.tmp", std::process::id()));
        let written = serde_json::to_string_pretty(settings)
            .map_err(std::io::Error::other)
            .and_then(|text| std::fs::write(&temp, text + "\n"))
            .and_then(|()| std::fs::rename(&temp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
    }
    id
}

/// One line from stdin; at a terminal, asked for on stderr and not echoed.
fn read_key(provider: &str) -> Result<String, String> {
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    let echo = if terminal {
        let _ = write!(std::io::stderr(), "API key for {provider}: ");
        let _ = std::io::stderr().flush();
        hide_input(&stdin)
    } else {
        None
    };
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if let Some(saved) = echo {
        let _ = nix::sys::termios::tcsetattr(&stdin, nix::sys::termios::SetArg::TCSANOW, &saved);
        let _ = writeln!(std::io::stderr());
    }
    read.map_err(|e| format!("cannot read the key: {e}"))?;
    let key = line.trim();
    if key.is_empty() {
        return Err(format!(
            "no key given: type or pipe the API key of {provider} into `nova login {provider}`"
        ));
    }
    Ok(key.to_owned())
}

/// Turns the terminal's echo off, returning the settings to put back.
fn hide_input(stdin: &std::io::Stdin) -> Option<nix::sys::termios::Termios> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let saved = tcgetattr(stdin).ok()?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    tcsetattr(stdin, SetArg::TCSANOW, &quiet).ok()?;
    Some(saved)
}
