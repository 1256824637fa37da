//! OAuth logins in auth.json, used and refreshed as Pi does, against a local token endpoint
//! (Kimi Code's, found through `KIMI_CODE_OAUTH_HOST` as Pi finds it): a fresh token is used as
//! it is; a stale one is refreshed and written back (0600, other entries kept); two processes
//! refreshing at once refresh once, with a token endpoint that rotates refresh tokens; a revoked
//! login fails the turn naming `nova login`; no token ever reaches stdout, stderr or a session.

use super::providers::{assert_error_turn, last_assistant, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A token endpoint that rotates: each refresh token works once, and is answered (after a
/// pause that lets a second process arrive meanwhile) with the next access and refresh token.
struct TokenServer {
    port: u16,
    /// Every refresh token it was sent, in order.
    seen: Arc<Mutex<Vec<String>>>,
}

impl TokenServer {
    fn start(revoked: bool) -> TokenServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut valid = "refresh-1".to_owned();
            let mut n = 1;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let body = String::from_utf8(body).unwrap();
                let token = body
                    .split('&')
                    .find_map(|p| p.strip_prefix("refresh_token="))
                    .unwrap_or_default()
                    .to_owned();
                log.lock().unwrap().push(token.clone());
                std::thread::sleep(Duration::from_millis(300));
                let (status, answer) =
                    if !revoked && token == valid && body.contains("grant_type=refresh_token") {
                        n += 1;
                        valid = format!("refresh-{n}");
                        let answer = json!({"access_token": format!("access-{n}"),
                                        "refresh_token": valid, "expires_in": 3600});
                        ("200 OK", answer)
                    } else {
                        ("400 Bad Request", json!({"error": "invalid_grant"}))
                    };
                let answer = answer.to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        TokenServer { port, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// An agent dir whose auth.json holds a Kimi Code login expiring at `expires` (ms), another
/// provider's key beside it, and a models.json pointing Kimi Code at the mock.
fn agent_dir(mock: &MockLlm, expires: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let auth = json!({
        "kimi-coding": {"type": "oauth", "access": "access-1", "refresh": "refresh-1",
                        "expires": expires},
        "groq": {"type": "api_key", "key": "gsk-kept"},
    });
    let path = dir.path().join("auth.json");
    std::fs::write(&path, auth.to_string()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let models = json!({"providers": {"kimi-coding": {"baseUrl": mock.base_url_openai()}}});
    std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
    dir
}

fn nova(agent: &std::path::Path, cwd: &std::path::Path, tokens: &TokenServer) -> Nova {
    Nova::builder()
        .dirs(agent, cwd)
        .env(
            "KIMI_CODE_OAUTH_HOST",
            format!("http://127.0.0.1:{}", tokens.port),
        )
        .args(["--model", "kimi-coding/kimi-for-coding"])
        .spawn()
}

fn stored(agent: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(agent.join("auth.json")).unwrap()).unwrap()
}

#[test]
fn a_fresh_login_is_used_and_a_stale_one_refreshed_and_written_back() {
    let mock = MockLlm::start();
    let tokens = TokenServer::start(false);
    let cwd = tempfile::tempdir().unwrap();

    // Valid for an hour: used as it is.
    let agent = agent_dir(&mock, now_ms() + 3_600_000);
    let mut fresh = nova(agent.path(), cwd.path(), &tokens);
    mock.push(Reply::text("fresh"));
    fresh.run_prompt("hi");
    assert_eq!(
        mock.chat_requests()[0].header("authorization"),
        Some("Bearer access-1")
    );
    assert!(tokens.seen().is_empty());

    // Two minutes left, under Pi's five: refreshed first, then used, and kept for the next turn.
    let agent = agent_dir(&mock, now_ms() + 120_000);
    let mut stale = nova(agent.path(), cwd.path(), &tokens);
    mock.push(Reply::text("refreshed"));
    mock.push(Reply::text("again"));
    let events = stale.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "refreshed");
    stale.run_prompt("again");
    let reqs = mock.chat_requests();
    assert_eq!(reqs[1].header("authorization"), Some("Bearer access-2"));
    assert_eq!(reqs[2].header("authorization"), Some("Bearer access-2"));
    assert_eq!(tokens.seen(), ["refresh-1"]);
    let auth = stored(agent.path());
    assert_eq!(auth["kimi-coding"]["access"], "access-2");
    assert_eq!(auth["kimi-coding"]["refresh"], "refresh-2");
    assert!(auth["kimi-coding"]["expires"].as_u64().unwrap() > now_ms() + 3_000_000);
    assert_eq!(auth["groq"]["key"], "gsk-kept");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(agent.path().join("auth.json")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }

    // No token anywhere but the requests.
    let state = stale.request_ok(json!({"type": "get_state"}));
    let session = std::fs::read_to_string(state["sessionFile"].as_str().unwrap()).unwrap();
    let stdout: String = stale.log().iter().map(|l| l.raw.clone() + "\n").collect();
    let stderr = stale.stderr();
    for text in [&stdout, &stderr, &session] {
        for secret in ["access-1", "access-2", "refresh-1", "refresh-2"] {
            assert!(!text.contains(secret), "{secret} leaked");
        }
    }
    mock.assert_no_violations();
}

#[test]
fn two_processes_refreshing_at_once_refresh_once() {
    let mock = MockLlm::start();
    let tokens = TokenServer::start(false);
    let cwd = tempfile::tempdir().unwrap();
    let agent = agent_dir(&mock, now_ms().saturating_sub(1000));
    let mut a = nova(agent.path(), cwd.path(), &tokens);
    let mut b = nova(agent.path(), cwd.path(), &tokens);
    mock.push(Reply::text("one"));
    mock.push(Reply::text("two"));
    a.request_ok(json!({"type": "prompt", "message": "hi"}));
    b.request_ok(json!({"type": "prompt", "message": "hi"}));
    let (ea, eb) = (
        a.events_until("agent_settled"),
        b.events_until("agent_settled"),
    );
    for events in [&ea, &eb] {
        assert_eq!(last_assistant(events)["stopReason"], "stop", "{events:?}");
    }
    // The second process waited for the first's refresh and used its tokens; the endpoint,
    // which takes each refresh token once, saw one refresh.
    assert_eq!(tokens.seen(), ["refresh-1"]);
    for r in mock.chat_requests() {
        assert_eq!(r.header("authorization"), Some("Bearer access-2"));
    }
    assert_eq!(stored(agent.path())["kimi-coding"]["refresh"], "refresh-2");
}

#[test]
fn a_revoked_login_names_nova_login() {
    let mock = MockLlm::start();
    let tokens = TokenServer::start(true);
    let cwd = tempfile::tempdir().unwrap();
    let agent = agent_dir(&mock, now_ms().saturating_sub(1000));
    let mut nova = nova(agent.path(), cwd.path(), &tokens);
    let msg = assert_error_turn(&nova.run_prompt("hi"));
    assert!(
        msg.contains("expired or was revoked") && msg.contains("`nova login kimi-coding`"),
        "{msg}"
    );
    assert!(!msg.contains("refresh-1"), "{msg}");
    assert!(mock.chat_requests().is_empty());
    assert_eq!(stored(agent.path())["kimi-coding"]["refresh"], "refresh-1");
}

/// `nova auth <args>` with `agent` as the agent dir and the token server as Kimi Code's.
fn auth(agent: &std::path::Path, tokens: &TokenServer, args: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_nova"));
    cmd.arg("auth")
        .args(args)
        .env("NOVA_AGENT_DIR", agent)
        .env("HOME", agent)
        .env(
            "KIMI_CODE_OAUTH_HOST",
            format!("http://127.0.0.1:{}", tokens.port),
        )
        .stdin(std::process::Stdio::null());
    for builtin in nova::config::builtin::CATALOG {
        for var in builtin.key_vars {
            cmd.env_remove(var);
        }
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Pi's credential commands: a key or a token printed for another program (a login refreshed
/// first when it would expire too soon, under the same lock a session uses), and a readiness
/// check with Pi's statuses, JSON and exit codes.
#[test]
fn auth_commands_print_and_check_credentials_as_pi_does() {
    let mock = MockLlm::start();
    let tokens = TokenServer::start(false);
    // Twenty minutes left: enough for a session (five), not for a printed token (thirty).
    let agent = agent_dir(&mock, now_ms() + 20 * 60_000);
    let dir = agent.path();

    let (code, out, err) = auth(
        dir,
        &tokens,
        &[
            "print-bearer-token",
            "--provider",
            "kimi-coding",
            "--min-expiry",
            "10m",
        ],
    );
    assert_eq!((code, out.as_str()), (0, "access-1\n"), "{err}");
    assert!(tokens.seen().is_empty(), "still valid for ten minutes");
    let (code, out, err) = auth(
        dir,
        &tokens,
        &["print-bearer-token", "--provider", "kimi-coding"],
    );
    assert_eq!((code, out.as_str()), (0, "access-2\n"), "{err}");
    assert_eq!(tokens.seen(), ["refresh-1"]);
    assert_eq!(
        stored(dir)["kimi-coding"]["refresh"],
        "refresh-2",
        "written back"
    );

    let (code, out, err) = auth(dir, &tokens, &["print-api-key", "--provider", "groq"]);
    assert_eq!((code, out.as_str()), (0, "gsk-kept\n"), "{err}");
    let (code, out, err) = auth(
        dir,
        &tokens,
        &["print-api-key", "--provider", "kimi-coding"],
    );
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("OAuth login, not an API key"), "{err}");
    let (code, _, err) = auth(dir, &tokens, &["print-bearer-token", "--provider", "groq"]);
    assert_eq!(code, 1);
    assert!(err.contains("no OAuth login"), "{err}");

    let check = |args: &[&str]| {
        let (code, out, err) = auth(dir, &tokens, args);
        (code, out.trim().to_owned(), err)
    };
    assert_eq!(check(&["check", "--provider", "groq"]).1, "ready");
    let (code, out, _) = check(&["check", "--provider", "groq", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"status": "ready", "provider": "groq", "authType": "api_key"})
    );
    let (code, out, _) = check(&[
        "check",
        "--provider",
        "kimi-coding",
        "--json",
        "--credentials",
    ]);
    assert_eq!(code, 0);
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (out["authType"].as_str(), out["credentials"].as_str()),
        (Some("oauth"), Some("access-2"))
    );
    let (code, out, _) = check(&["check", "--provider", "openai", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"status": "not_ready", "provider": "openai", "reason": "credentials_not_configured"})
    );
    let (code, out, _) = check(&["check", "--provider", "no-such-provider", "--json"]);
    assert_eq!(code, 1);
    assert!(out.contains("provider_not_found"), "{out}");
    assert_eq!(check(&["check", "--provider", "openai"]).1, "not_ready");

    let (code, out, _) = auth(dir, &tokens, &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("print-bearer-token") && out.contains("check"),
        "{out}"
    );
    let (code, _, err) = auth(dir, &tokens, &["frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("frobnicate"), "{err}");
    let (code, _, err) = auth(dir, &tokens, &["check"]);
    assert_eq!(code, 2);
    assert!(err.contains("--provider"), "{err}");
    let (code, _, err) = auth(
        dir,
        &tokens,
        &["print-api-key", "--provider", "groq", "--json"],
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = auth(dir, &tokens, &["logout", "groq"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stored(dir).get("groq").is_none(),
        "auth logout is nova logout"
    );
}
