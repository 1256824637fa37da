//! `nova auth …`, Pi 1.6's credential commands under the same words: `login` and `logout`
//! (the same as `nova login|logout`, [`crate::login`]), `print-api-key` and
//! `print-bearer-token` (a provider's resolved credential on stdout, for a program that calls
//! the provider itself; a login is refreshed first when it expires too soon), and `check`
//! (`ready`, `not_ready` or `invalid`, exit 0, 1 or 2; `--json` for the structured result).
//!
//! A refresh goes through the same locked read-refresh-write of auth.json as a session's
//! ([`crate::config::oauth::access_token`]), so a script asking for a token while nova runs
//! never spends a refresh token the other already replaced.

use crate::config::{self, Cli, Registry, builtin, oauth};
use crate::frontend::{fatal, usage_error};
use crate::protocol::Model;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// What `nova auth …` asks.
pub enum Command {
    Help,
    Login(crate::login::Request),
    Print {
        kind: Kind,
        target: Target,
        /// `--min-expiry`: how long a bearer token must still be valid.
        min_expiry: Duration,
    },
    Check {
        target: Target,
        json: bool,
        credentials: bool,
        refresh: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ApiKey,
    BearerToken,
}

/// `--provider` and/or `--model`.
#[derive(Debug, Default)]
pub struct Target {
    provider: Option<String>,
    model: Option<String>,
}

/// Pi's default for `print-bearer-token`: a token handed to another program should last a
/// while.
const DEFAULT_MIN_EXPIRY: Duration = Duration::from_secs(30 * 60);

const USAGE: &str = "usage:
  nova auth login <provider> [--api-key] [--no-browser] [--enterprise <domain>]
  nova auth logout <provider>
  nova auth print-api-key --provider <provider> | --model <model>
  nova auth print-bearer-token --provider <provider> | --model <model> [--min-expiry <30m>]
  nova auth check --provider <provider> | --model <model> [--json] [--credentials] [--no-refresh]

Log in to or out of a model provider, print its credential for another program, or check that it
is ready. Credentials are kept in auth.json in the agent dir ($NOVA_AGENT_DIR, else ~/.nova/agent).

  login <provider>     sign in with an account (browser or device code), or store an API key
                       read from stdin (--api-key); the same as `nova login`
  logout <provider>    remove what login stored; the same as `nova logout`
  print-api-key        print the provider's resolved API key
  print-bearer-token   print its OAuth access token, refreshed first when it expires within
                       --min-expiry (ms, s, m or h; default 30m)
  check                print ready, not_ready or invalid and exit 0, 1 or 2; --json prints
                       the result as JSON, --credentials adds the credential, --no-refresh
                       does not refresh an expired login

Credential commands write secrets to stdout.";

/// `Some` when the arguments (after the program's name) are an `auth` command; a malformed
/// one is a usage error right away.
pub fn parse(args: &[String]) -> Option<Result<Command, ExitCode>> {
    let (first, rest) = args.split_first()?;
    if first != "auth" {
        return None;
    }
    Some(parse_command(rest))
}

fn parse_command(args: &[String]) -> Result<Command, ExitCode> {
    let usage = |message: &str| usage_error(&format!("{message}\n\n{USAGE}"));
    let Some((command, rest)) = args.split_first() else {
        return Ok(Command::Help);
    };
    if matches!(command.as_str(), "help" | "--help" | "-h")
        || rest.iter().any(|a| a == "--help" || a == "-h")
    {
        return Ok(Command::Help);
    }
    match command.as_str() {
        "login" | "logout" => {
            let mut words = vec![command.clone()];
            words.extend(rest.iter().filter(|a| *a != "--offline").cloned());
            return match crate::login::parse(&words) {
                Some(Ok(request)) => Ok(Command::Login(request)),
                Some(Err(code)) => Err(code),
                None => Err(usage("unknown auth command")),
            };
        }
        "print-api-key" | "print-bearer-token" | "check" => {}
        other => {
            return Err(usage(&format!(
                "unknown auth command \"{other}\": use login, logout, print-api-key, \
                 print-bearer-token or check"
            )));
        }
    }
    let check = command == "check";
    let bearer = command == "print-bearer-token";
    let mut target = Target::default();
    let (mut json, mut credentials, mut refresh) = (false, false, true);
    let mut min_expiry = DEFAULT_MIN_EXPIRY;
    let mut iter = rest.iter();
    while let Some(arg) = iter.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| iter.next().cloned());
        match flag {
            "--provider" => target.provider = value().filter(|v| !v.trim().is_empty()),
            "--model" => target.model = value().filter(|v| !v.trim().is_empty()),
            "--offline" => {}
            "--min-expiry" if bearer => {
                min_expiry = value().as_deref().and_then(duration).ok_or_else(|| {
                    usage("--min-expiry takes a duration such as 30m or 1h (ms, s, m or h)")
                })?;
            }
            "--json" if check => json = true,
            "--credentials" if check => credentials = true,
            "--no-refresh" if check => refresh = false,
            "--min-expiry" | "--json" | "--credentials" | "--no-refresh" => {
                return Err(usage(&format!("{flag} does not apply to auth {command}")));
            }
            other => {
                return Err(usage(&format!(
                    "auth {command} takes only --provider and --model (and its own options), \
                     not {other}"
                )));
            }
        }
    }
    if target.provider.is_none() && target.model.is_none() {
        return Err(usage(&format!(
            "auth {command} needs --provider <provider> or --model <model>"
        )));
    }
    Ok(if check {
        Command::Check {
            target,
            json,
            credentials,
            refresh,
        }
    } else {
        Command::Print {
            kind: if bearer {
                Kind::BearerToken
            } else {
                Kind::ApiKey
            },
            target,
            min_expiry,
        }
    })
}

/// `30m`, `1h`, `45s`, `500ms`.
fn duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let ms = match unit.to_ascii_lowercase().as_str() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    Some(Duration::from_millis(n.checked_mul(ms)?))
}

/// Carries out `command` with the agent dir's models.json, auth.json and the environment.
pub async fn run(command: Command, agent_dir: &Path) -> ExitCode {
    let (kind, target, min_expiry) = match command {
        Command::Help => {
            let _ = writeln!(std::io::stdout(), "{USAGE}");
            return ExitCode::SUCCESS;
        }
        Command::Login(request) => return crate::login::run(request, agent_dir).await,
        Command::Check {
            target,
            json,
            credentials,
            refresh,
        } => return check(target, json, credentials, refresh, agent_dir).await,
        Command::Print {
            kind,
            target,
            min_expiry,
        } => (kind, target, min_expiry),
    };
    let registry = match registry(agent_dir).await {
        Ok(r) => r,
        Err(e) => return fatal(&e),
    };
    let (provider, model) = match resolve(&registry, &target) {
        Ok(found) => found,
        Err(e) => return fatal(&e),
    };
    let printed = match kind {
        Kind::BearerToken => match registry.login(&provider) {
            Some(tokens) => bearer(&registry, &provider, tokens, min_expiry).await,
            None => Err(format!(
                "provider \"{provider}\" has no OAuth login (log in with `nova auth login \
                 {provider}`)"
            )),
        },
        Kind::ApiKey if registry.login(&provider).is_some() => Err(format!(
            "provider \"{provider}\" is configured with an OAuth login, not an API key (use \
             `nova auth print-bearer-token --provider {provider}`)"
        )),
        Kind::ApiKey => match model {
            Some(model) => match registry.credentials(&model).await {
                Ok(c) => c.api_key.ok_or_else(|| no_key(&provider)),
                Err(e) => Err(e.to_string()),
            },
            None => Err(no_key(&provider)),
        },
    };
    match printed {
        Ok(secret) => {
            let _ = writeln!(std::io::stdout(), "{secret}");
            ExitCode::SUCCESS
        }
        Err(e) => fatal(&e),
    }
}

fn no_key(provider: &str) -> String {
    format!(
        "provider \"{provider}\" has no usable API key (set its variable, `nova auth login \
         {provider} --api-key`, or apiKey in models.json)"
    )
}

/// The registry as a session would see it, without asking a local Ollama for its models.
async fn registry(agent_dir: &Path) -> Result<Arc<Registry>, String> {
    let cli = Cli::parse_args(&[]).map_err(|e| e.to_string())?;
    let process = config::load_process(cli, agent_dir.to_path_buf(), async |_: &str| Vec::new())
        .await
        .map_err(|e| e.to_string())?;
    Ok(process.registry)
}

/// The provider the target names, and a model of it when the registry lists one (a built-in
/// provider is listed only once it has a credential).
fn resolve(registry: &Registry, target: &Target) -> Result<(String, Option<Model>), String> {
    if let Some(id) = &target.model {
        let found = registry
            .resolve(target.provider.as_deref(), id)
            .or_else(|| {
                let (base, _) = id.rsplit_once(':')?;
                registry.resolve(target.provider.as_deref(), base)
            })
            .ok_or_else(|| format!("unknown model \"{id}\" (see nova --list-models)"))?;
        return Ok((found.provider.clone(), Some(found.clone())));
    }
    let provider = target.provider.clone().unwrap_or_default();
    let model = registry
        .models()
        .iter()
        .find(|m| m.provider == provider)
        .cloned();
    Ok((provider, model))
}

async fn bearer(
    registry: &Registry,
    provider: &str,
    tokens: &oauth::Tokens,
    min_validity: Duration,
) -> Result<String, String> {
    let var = |name: &str| std::env::var(name).ok();
    let store = oauth::Store {
        path: registry.auth_path(),
        var: &var,
    };
    oauth::access_token_valid_for(provider, tokens, &store, min_validity).await
}

async fn check(
    target: Target,
    json: bool,
    credentials: bool,
    refresh: bool,
    agent_dir: &Path,
) -> ExitCode {
    let named = target
        .provider
        .clone()
        .or_else(|| target.model.clone())
        .unwrap_or_default();
    let outcome = match registry(agent_dir).await {
        Ok(registry) => match resolve(&registry, &target) {
            Ok((provider, model)) => {
                check_provider(&registry, &provider, model.as_ref(), refresh).await
            }
            Err(_) => Outcome::not_ready(&named, "model_not_found"),
        },
        Err(_) => Outcome::invalid(&named),
    };
    let credential = outcome.credential.filter(|_| credentials);
    let line = if json {
        let mut value = outcome.json;
        if let (Some(c), Some(map)) = (&credential, value.as_object_mut()) {
            map.insert("credentials".into(), c.clone().into());
        }
        value.to_string()
    } else {
        credential.unwrap_or_else(|| outcome.status.to_owned())
    };
    let _ = writeln!(std::io::stdout(), "{line}");
    ExitCode::from(match outcome.status {
        "ready" => 0,
        "not_ready" => 1,
        _ => 2,
    })
}

/// A check's result: Pi's `status`, the JSON it prints, and the credential when ready.
struct Outcome {
    status: &'static str,
    json: Value,
    credential: Option<String>,
}

impl Outcome {
    fn ready(provider: &str, auth_type: &str, credential: Option<String>) -> Outcome {
        Outcome {
            status: "ready",
            json: json!({"status": "ready", "provider": provider, "authType": auth_type}),
            credential,
        }
    }

    fn not_ready(provider: &str, reason: &str) -> Outcome {
        Outcome {
            status: "not_ready",
            json: json!({"status": "not_ready", "provider": provider, "reason": reason}),
            credential: None,
        }
    }

    fn invalid(provider: &str) -> Outcome {
        Outcome {
            status: "invalid",
            json: json!({"status": "invalid", "provider": provider, "reason": "invalid_state"}),
            credential: None,
        }
    }
}

async fn check_provider(
    registry: &Registry,
    provider: &str,
    model: Option<&Model>,
    refresh: bool,
) -> Outcome {
    if let Some(tokens) = registry.login(provider) {
        if !refresh {
            return Outcome::ready(provider, "oauth", Some(tokens.access.clone()));
        }
        return match bearer(registry, provider, tokens, Duration::ZERO).await {
            Ok(token) => Outcome::ready(provider, "oauth", Some(token)),
            Err(_) => Outcome::invalid(provider),
        };
    }
    let Some(model) = model else {
        let known = registry.provider(provider).is_some() || builtin::find(provider).is_some();
        let reason = if known {
            "credentials_not_configured"
        } else {
            "provider_not_found"
        };
        return Outcome::not_ready(provider, reason);
    };
    match registry.credentials(model).await {
        Ok(c) if c.api_key.is_some() => Outcome::ready(provider, "api_key", c.api_key),
        // Bedrock signs with the AWS credentials it found; there is no one key to print.
        Ok(c) if c.route.is_some() && model.api == crate::provider::Api::BedrockConverseStream => {
            Outcome::ready(provider, "aws", None)
        }
        Ok(_) => Outcome::not_ready(provider, "credentials_not_configured"),
        Err(_) => Outcome::invalid(provider),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_pi_units() {
        assert_eq!(duration("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(duration("2d"), None);
        assert_eq!(duration("m"), None);
        assert_eq!(duration("10"), None);
    }
}
