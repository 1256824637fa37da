//! `nova login <provider>` and `nova logout <provider>`: an API key stored in auth.json, in
//! Pi's format (`{"type": "api_key", "key": …}`), or removed from it. The key is read from
//! stdin — one line, not echoed when stdin is a terminal — so it never lands in the shell's
//! history or the process list; auth.json is written as the OAuth refresh writes it (under its
//! lock, replaced atomically, 0600). OAuth logins (browser and device flows) are not here yet.

use crate::config::{auth, builtin};
use crate::frontend::{fatal, note, usage_error};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

/// What the command line asks, when its first word is `login` or `logout`.
pub enum Request {
    Login(String),
    Logout(String),
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
    Some(match rest {
        [provider] if valid_name(provider) => Ok(if login {
            Request::Login(provider.clone())
        } else {
            Request::Logout(provider.clone())
        }),
        _ => Err(usage_error(&format!(
            "usage: nova {command} <provider> (a built-in one: {})",
            builtin::CATALOG
                .iter()
                .map(|b| b.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    })
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
        Request::Login(provider) => {
            let key = match read_key(&provider) {
                Ok(key) => key,
                Err(message) => return fatal(&message),
            };
            let entry = serde_json::json!({"type": "api_key", "key": key});
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
