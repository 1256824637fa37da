//! `nova login` for the OAuth providers, against a fake authorization server on loopback that
//! stands in for every provider's through `NOVA_OAUTH_TEST_URL`: the test plays the browser
//! (it reads the address nova prints and follows the redirect itself, or pastes it on stdin),
//! and the server checks the PKCE verifier against the challenge the browser was shown; device
//! logins wait out `authorization_pending` and `slow_down`; Radius finds its authorization
//! endpoint at the gateway first. Also Anthropic's refresh (a JSON
//! token endpoint, Pi's expiry skew) with the new token used. No token reaches stdout, stderr,
//! the session file or an export.

use super::providers::{last_assistant, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One request the fake server got.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    authorization: String,
    body: String,
}

impl Seen {
    /// A form or JSON body's field.
    fn field(&self, key: &str) -> Option<String> {
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&self.body) {
            return map.get(key).and_then(Value::as_str).map(str::to_owned);
        }
        let url = reqwest::Url::parse(&format!("http://x/?{}", self.body)).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    }
}

type Handler = dyn Fn(&Seen, &State) -> (u16, Value) + Send + Sync;

/// What the test tells the server, and what it tallies.
#[derive(Default)]
struct State {
    /// The PKCE challenge the browser was shown.
    challenge: Mutex<Option<String>>,
    /// Device-code polls so far.
    polls: Mutex<u32>,
}

struct AuthServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    state: Arc<State>,
}

impl AuthServer {
    fn start(handler: Box<Handler>) -> AuthServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(State::default());
        let (log, shared) = (Arc::clone(&seen), Arc::clone(&state));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                reader.read_line(&mut first).unwrap_or(0);
                let mut parts = first.split_whitespace();
                let method = parts.next().unwrap_or_default().to_owned();
                let path = parts.next().unwrap_or_default().to_owned();
                let (mut length, mut authorization) = (0, String::new());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if lower.starts_with("authorization:") {
                        authorization = line["authorization:".len()..].trim().to_owned();
                    }
                    line.clear();
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let request = Seen {
                    method,
                    path,
                    authorization,
                    body: String::from_utf8(body).unwrap(),
                };
                log.lock().unwrap().push(request.clone());
                let (status, answer) = handler(&request, &shared);
                let answer = answer.to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        AuthServer { port, seen, state }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether `verifier` is the one the challenge was made from (S256).
fn verifies(state: &State, verifier: &str) -> bool {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    state.challenge.lock().unwrap().as_deref() == Some(b64url(digest.as_ref()).as_str())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A running `nova login`, its stderr read line by line.
struct Login {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: Vec<String>,
    home: tempfile::TempDir,
}

impl Login {
    fn start(args: &[&str], server: &AuthServer) -> Login {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nova"));
        cmd.arg("login")
            .args(args)
            .env("NOVA_AGENT_DIR", home.path().join("agent"))
            .env("HOME", home.path())
            .env("NOVA_OAUTH_TEST_URL", server.url())
            .env("KIMI_CODE_OAUTH_HOST", server.url())
            // No browser is started without a display.
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Login {
            child,
            lines,
            stderr: Vec::new(),
            home,
        }
    }

    /// The first stderr line containing `needle`.
    fn line_with(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no line with {needle}: {:?}", self.stderr));
            self.stderr.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// The authorization address nova printed, as a URL.
    fn authorize_url(&mut self) -> reqwest::Url {
        self.address_with("authorize?")
    }

    /// The first address nova printed that contains `needle`.
    fn address_with(&mut self, needle: &str) -> reqwest::Url {
        let line = self.line_with(needle);
        let start = line.find("http").unwrap();
        reqwest::Url::parse(&line[start..]).unwrap()
    }

    fn paste(&mut self, text: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the exit; its code and all of stdout and stderr.
    fn finish(mut self) -> (Option<i32>, String, Value, tempfile::TempDir) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "login hung: {:?}", self.stderr);
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.stderr.push(line);
        }
        let text = out + &self.stderr.join("\n");
        let auth = std::fs::read_to_string(self.home.path().join("agent/auth.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        (status.code(), text, auth, self.home)
    }
}

fn param(url: &reqwest::Url, key: &str) -> String {
    url.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// A GET from the test's "browser"; the status.
fn browse(url: &str) -> u16 {
    browse_via("127.0.0.1", url)
}

/// A GET from a "browser" that resolved the redirect's host to `address`; the status.
fn browse_via(address: &str, url: &str) -> u16 {
    let url = reqwest::Url::parse(url).unwrap();
    let mut stream = std::net::TcpStream::connect((address, url.port().unwrap()))
        .unwrap_or_else(|e| panic!("nothing listens on {address} for {url}: {e}"));
    let target = format!("{}?{}", url.path(), url.query().unwrap_or_default());
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A token endpoint for authorization codes and refreshes: code `good-code` with the right
/// verifier buys `<prefix>access-1`; refresh token `refresh-N` buys `access-(N+1)`.
fn token_endpoint(
    prefix: &'static str,
    access: impl Fn(u32) -> String + Send + Sync + 'static,
) -> Box<Handler> {
    Box::new(
        move |seen: &Seen, state: &State| match seen.field("grant_type").as_deref() {
            Some("authorization_code") => {
                let verifier = seen.field("code_verifier").unwrap_or_default();
                if seen.field("code").as_deref() != Some("good-code") || !verifies(state, &verifier)
                {
                    return (400, json!({"error": "invalid_grant"}));
                }
                (
                    200,
                    json!({"access_token": access(1), "refresh_token": format!("{prefix}refresh-1"),
                             "expires_in": 3600}),
                )
            }
            Some("refresh_token") => {
                let token = seen.field("refresh_token").unwrap_or_default();
                let Some(n) = token
                    .strip_prefix(prefix)
                    .and_then(|t| t.strip_prefix("refresh-"))
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    return (400, json!({"error": "invalid_grant"}));
                };
                (
                    200,
                    json!({"access_token": access(n + 1),
                             "refresh_token": format!("{prefix}refresh-{}", n + 1),
                             "expires_in": 3600}),
                )
            }
            _ => (400, json!({"error": "unsupported_grant_type"})),
        },
    )
}

fn anthropic_access(n: u32) -> String {
    format!("sk-ant-oat01-access-{n}")
}

fn assert_no_secrets(text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
}

#[test]
fn login_by_callback_refuses_a_wrong_state_and_stores_pi_s_entry() {
    let server = AuthServer::start(token_endpoint("ant-", anthropic_access));
    let mut login = Login::start(&["anthropic"], &server);
    let url = login.authorize_url();
    assert_eq!(url.path(), "/oauth/authorize");
    assert_eq!(param(&url, "code_challenge_method"), "S256");
    *server.state.challenge.lock().unwrap() = Some(param(&url, "code_challenge"));
    let redirect = param(&url, "redirect_uri");
    assert!(redirect.starts_with("http://localhost:") && redirect.ends_with("/callback"));
    let state = param(&url, "state");
    // A redirect that is not this login's, then the right one.
    assert_eq!(
        browse(&format!("{redirect}?code=good-code&state=forged")),
        400
    );
    assert_eq!(
        browse(&format!("{redirect}?code=good-code&state={state}")),
        200
    );
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    let entry = &auth["anthropic"];
    assert_eq!(entry["type"], "oauth");
    assert_eq!(entry["access"], "sk-ant-oat01-access-1");
    assert_eq!(entry["refresh"], "ant-refresh-1");
    // Pi stores Anthropic's expiry five minutes short.
    let expires = entry["expires"].as_u64().unwrap();
    let expected = now_ms() + 3_300_000;
    assert!(
        expires <= expected && expires > expected - 60_000,
        "{entry}"
    );
    // The exchange carried the state and the redirect, as Anthropic's endpoint wants.
    let exchange = server
        .seen()
        .into_iter()
        .find(|s| s.method == "POST")
        .unwrap();
    assert_eq!(exchange.path, "/v1/oauth/token");
    assert_eq!(exchange.field("state").as_deref(), Some(state.as_str()));
    assert_eq!(
        exchange.field("redirect_uri").as_deref(),
        Some(redirect.as_str())
    );
    assert_no_secrets(&text, &["sk-ant-oat01-access-1", "ant-refresh-1"]);
}

/// A JWT whose claims name a ChatGPT account, as OpenAI's access tokens do.
fn codex_access(n: u32) -> String {
    let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-42"}, "n": n});
    format!("h.{}.sig", b64url(claims.to_string().as_bytes()))
}

#[test]
fn login_by_pasted_redirect_and_a_pasted_forgery_refused() {
    let server = AuthServer::start(token_endpoint("cdx-", codex_access));
    let mut login = Login::start(&["openai-codex"], &server);
    let url = login.authorize_url();
    login.line_with("paste");
    *server.state.challenge.lock().unwrap() = Some(param(&url, "code_challenge"));
    let state = param(&url, "state");
    assert_eq!(
        param(&url, "redirect_uri"),
        "http://localhost:1455/auth/callback"
    );
    login.paste(&format!(
        "http://localhost:1455/auth/callback?code=good-code&state={state}\n"
    ));
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    let entry = &auth["openai-codex"];
    assert_eq!(entry["access"], codex_access(1));
    assert_eq!(entry["refresh"], "cdx-refresh-1");
    assert_eq!(entry["accountId"], "acct-42");
    assert_no_secrets(&text, &[&codex_access(1), "cdx-refresh-1"]);

    let mut forged = Login::start(&["openai-codex"], &server);
    forged.authorize_url();
    forged.paste("http://localhost:1455/auth/callback?code=good-code&state=forged\n");
    let (code, text, auth, _home) = forged.finish();
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("state mismatch"), "{text}");
    assert!(auth.get("openai-codex").is_none());
}

#[test]
fn device_login_waits_out_authorization_pending_then_buys_a_copilot_token_and_its_models() {
    let expires_at = now_ms() / 1000 + 1800;
    let server = AuthServer::start(Box::new(move |seen: &Seen, state: &State| {
        match seen.path.as_str() {
            "/login/device/code" => (
                200,
                json!({"device_code": "dev-1", "user_code": "ABCD-1234",
                "verification_uri": "https://github.com/login/device", "interval": 1,
                "expires_in": 60}),
            ),
            "/login/oauth/access_token" => {
                let mut polls = state.polls.lock().unwrap();
                *polls += 1;
                if seen.field("device_code").as_deref() != Some("dev-1") {
                    (400, json!({"error": "bad_verification_code"}))
                } else if *polls < 2 {
                    (200, json!({"error": "authorization_pending"}))
                } else {
                    (
                        200,
                        json!({"access_token": "gho_github-token", "token_type": "bearer"}),
                    )
                }
            }
            "/models" if seen.authorization.starts_with("Bearer tid=1;") => (
                200,
                json!({"data": [
                {"id": "gpt-5.5", "model_picker_enabled": true, "policy": {"state": "enabled"}},
                {"id": "claude-x", "model_picker_enabled": true, "policy": {"state": "disabled"}},
                {"id": "embed", "model_picker_enabled": true,
                 "capabilities": {"supports": {"tool_calls": false}}},
                {"id": "hidden", "model_picker_enabled": false}]}),
            ),
            "/copilot_internal/v2/token" if seen.authorization == "Bearer gho_github-token" => (
                200,
                json!({"token": "tid=1;exp=2;proxy-ep=proxy.individual.githubcopilot.com;x",
                             "expires_at": expires_at}),
            ),
            _ => (401, json!({"error": "unauthorized"})),
        }
    }));
    let mut login = Login::start(&["github-copilot"], &server);
    let line = login.line_with("ABCD-1234");
    assert!(line.contains("https://github.com/login/device"), "{line}");
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(*server.state.polls.lock().unwrap(), 2);
    let entry = &auth["github-copilot"];
    assert_eq!(entry["refresh"], "gho_github-token");
    assert!(entry["access"].as_str().unwrap().contains("proxy-ep="));
    assert_eq!(entry["expires"], expires_at * 1000 - 300_000);
    // The account's models, as Pi lists them: picker-enabled, not disabled, able to call tools.
    assert_eq!(entry["availableModelIds"], json!(["gpt-5.5"]));
    assert_no_secrets(&text, &["gho_github-token", "tid=1"]);
}

/// A stale Anthropic login is refreshed at its JSON token endpoint and the new token reaches
/// the provider; the refreshed entry is written back with Pi's skew.
#[test]
fn anthropic_refresh_uses_and_keeps_the_new_token() {
    let mock = MockLlm::start();
    let server = AuthServer::start(token_endpoint("ant-", anthropic_access));
    let auth = json!({"anthropic": {"type": "oauth", "access": anthropic_access(1),
                                    "refresh": "ant-refresh-1", "expires": now_ms() - 1000}});
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"anthropic": {"baseUrl": mock.base_url_anthropic()}}}))
        .agent_file("auth.json", auth.to_string())
        .env("NOVA_OAUTH_TEST_URL", server.url())
        .args(["--model", "anthropic/claude-sonnet-4-5"])
        .spawn();
    mock.push(Reply::text("refreshed"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "refreshed", "{events:?}");
    let refresh = &server.seen()[0];
    assert_eq!(refresh.path, "/v1/oauth/token");
    assert!(
        serde_json::from_str::<Value>(&refresh.body).is_ok(),
        "a JSON body"
    );
    let request = &mock.chat_requests()[0];
    let sent = [request.header("authorization"), request.header("x-api-key")];
    assert!(
        sent.iter()
            .flatten()
            .any(|v| v.contains(&anthropic_access(2))),
        "{sent:?}"
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    let session = std::fs::read_to_string(state["sessionFile"].as_str().unwrap()).unwrap();
    let page = nova.request_ok(json!({"type": "export_html"}));
    let html = std::fs::read_to_string(page["path"].as_str().unwrap()).unwrap();
    let stdout: String = nova.log().iter().map(|l| l.raw.clone() + "\n").collect();
    let secrets = [anthropic_access(1), anthropic_access(2)];
    let secrets = [
        secrets[0].as_str(),
        secrets[1].as_str(),
        "ant-refresh-1",
        "ant-refresh-2",
    ];
    assert_no_secrets(&(stdout + &nova.stderr() + &session + &html), &secrets);
}

/// OpenRouter's login has no `state`: the redirect's random path stands in for it, and the
/// code buys a key that never expires (Pi's mark: the largest exact integer).
#[test]
fn openrouter_login_by_callback_stores_a_key_that_never_expires() {
    let server = AuthServer::start(Box::new(|seen: &Seen, state: &State| {
        let verifier = seen.field("code_verifier").unwrap_or_default();
        if seen.path == "/api/v1/auth/keys"
            && seen.field("code").as_deref() == Some("good-code")
            && verifies(state, &verifier)
        {
            (200, json!({"key": "sk-or-v1-minted"}))
        } else {
            (400, json!({"error": "invalid_code"}))
        }
    }));
    let mut login = Login::start(&["openrouter"], &server);
    let url = login.address_with("/auth?");
    *server.state.challenge.lock().unwrap() = Some(param(&url, "code_challenge"));
    let callback = param(&url, "callback_url");
    assert!(callback.starts_with("http://127.0.0.1:") && callback.contains("/oauth/callback/"));
    let port = reqwest::Url::parse(&callback).unwrap().port().unwrap();
    assert_eq!(
        browse(&format!(
            "http://127.0.0.1:{port}/oauth/callback/guess?code=good-code"
        )),
        404
    );
    assert_eq!(browse(&format!("{callback}?code=good-code")), 200);
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        auth["openrouter"],
        json!({"type": "oauth", "access": "sk-or-v1-minted", "refresh": "",
               "expires": 9_007_199_254_740_991_u64})
    );
    assert_no_secrets(&text, &["sk-or-v1-minted"]);
}

/// Kimi Code's device login through Pi's own host variable: `slow_down` (with the server's new
/// interval), `authorization_pending`, then the tokens, stored with their full lifetime.
#[test]
fn kimi_device_login_honours_slow_down_and_pending() {
    let server = AuthServer::start(Box::new(|seen: &Seen, state: &State| {
        match seen.path.as_str() {
            "/api/oauth/device_authorization" => (
                200,
                json!({"device_code": "dev-k",
                "user_code": "KIMI-0001", "verification_uri": "https://www.kimi.com/code",
                "verification_uri_complete": "https://www.kimi.com/code?user_code=KIMI-0001",
                "interval": 1, "expires_in": 60}),
            ),
            "/api/oauth/token" => {
                let mut polls = state.polls.lock().unwrap();
                *polls += 1;
                match *polls {
                    1 => (400, json!({"error": "slow_down", "interval": 1})),
                    2 => (400, json!({"error": "authorization_pending"})),
                    _ => (
                        200,
                        json!({"access_token": "kimi-access", "refresh_token": "kimi-refresh",
                                      "expires_in": 3600}),
                    ),
                }
            }
            _ => (404, json!({"error": "not_found"})),
        }
    }));
    let mut login = Login::start(&["kimi-coding"], &server);
    let line = login.line_with("KIMI-0001");
    assert!(
        line.contains("https://www.kimi.com/code?user_code=KIMI-0001"),
        "{line}"
    );
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(*server.state.polls.lock().unwrap(), 3);
    let entry = &auth["kimi-coding"];
    assert_eq!(entry["access"], "kimi-access");
    assert_eq!(entry["refresh"], "kimi-refresh");
    assert!(entry["expires"].as_u64().unwrap() > now_ms() + 3_500_000);
    assert_no_secrets(&text, &["kimi-access", "kimi-refresh"]);
}

/// OpenAI Codex's own device login (`--device`): pending (403) until the code is entered, then
/// an authorization code and verifier, exchanged with the device redirect.
#[test]
fn codex_device_login_exchanges_the_code_it_is_given() {
    let server = AuthServer::start(Box::new(|seen: &Seen, state: &State| {
        match seen.path.as_str() {
            "/api/accounts/deviceauth/usercode" => (
                200,
                json!({"device_auth_id": "da-1",
                "user_code": "CDX-777", "interval": "1"}),
            ),
            "/api/accounts/deviceauth/token" => {
                let mut polls = state.polls.lock().unwrap();
                *polls += 1;
                if *polls < 2 || seen.field("device_auth_id").as_deref() != Some("da-1") {
                    (
                        403,
                        json!({"error": {"code": "deviceauth_authorization_pending"}}),
                    )
                } else {
                    (
                        200,
                        json!({"authorization_code": "dev-code", "code_verifier": "dev-verifier"}),
                    )
                }
            }
            "/oauth/token"
                if seen.field("code").as_deref() == Some("dev-code")
                    && seen.field("code_verifier").as_deref() == Some("dev-verifier")
                    && seen.field("redirect_uri").as_deref()
                        == Some("https://auth.openai.com/deviceauth/callback") =>
            {
                (
                    200,
                    json!({"access_token": codex_access(1), "refresh_token": "cdx-refresh-1",
                             "expires_in": 3600}),
                )
            }
            _ => (400, json!({"error": "invalid_request"})),
        }
    }));
    let mut login = Login::start(&["openai-codex", "--device"], &server);
    let line = login.line_with("CDX-777");
    assert!(
        line.contains("https://auth.openai.com/codex/device"),
        "{line}"
    );
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(auth["openai-codex"]["accountId"], "acct-42");
    assert_eq!(auth["openai-codex"]["refresh"], "cdx-refresh-1");
    assert_no_secrets(&text, &[&codex_access(1), "cdx-refresh-1"]);
}

/// Kimi Code's refresh is retried after a busy token endpoint (503), as Pi retries it.
#[test]
fn a_busy_kimi_token_endpoint_is_retried() {
    let mock = MockLlm::start();
    let server = AuthServer::start(Box::new(|_: &Seen, state: &State| {
        let mut polls = state.polls.lock().unwrap();
        *polls += 1;
        if *polls == 1 {
            (503, json!({"error": "busy"}))
        } else {
            (
                200,
                json!({"access_token": "kimi-access-2", "refresh_token": "kimi-refresh-2",
                         "expires_in": 3600}),
            )
        }
    }));
    let auth = json!({"kimi-coding": {"type": "oauth", "access": "kimi-access-1",
                                      "refresh": "kimi-refresh-1", "expires": now_ms() - 1000}});
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"kimi-coding": {"baseUrl": mock.base_url_openai()}}}))
        .agent_file("auth.json", auth.to_string())
        .env("KIMI_CODE_OAUTH_HOST", server.url())
        .args(["--model", "kimi-coding/kimi-for-coding"])
        .spawn();
    mock.push(Reply::text("after a retry"));
    let events = nova.run_prompt("hi");
    assert_eq!(
        text_of(&last_assistant(&events)),
        "after a retry",
        "{events:?}"
    );
    assert_eq!(*server.state.polls.lock().unwrap(), 2);
    assert_eq!(
        mock.chat_requests()[0].header("authorization"),
        Some("Bearer kimi-access-2")
    );
}

/// OpenAI's sign-in with ChatGPT: the client OpenAI registers for the login comes back in the
/// redirect (pasted here), the installation's id is Pi's `deviceId` in settings.json (made
/// and kept when missing), and the entry keeps the issued client id and the granted scopes.
#[test]
fn chatgpt_sign_in_keeps_the_issued_client_and_scopes() {
    let server = AuthServer::start(Box::new(|seen: &Seen, state: &State| {
        let verifier = seen.field("code_verifier").unwrap_or_default();
        if seen.path == "/api/accounts/oauth/token"
            && seen.field("client_id").as_deref() == Some("issued-7")
            && seen.field("resource").as_deref() == Some("https://api.openai.com/v1")
            && seen.field("code").as_deref() == Some("good-code")
            && verifies(state, &verifier)
        {
            (
                200,
                json!({"access_token": "oai-access-1", "refresh_token": "oai-refresh-1",
                "expires_in": 3600, "id_token": "h.e.s",
                "scope": "openid offline_access chatgpt.tokens.use.direct"}),
            )
        } else {
            (400, json!({"error": "invalid_grant"}))
        }
    }));
    let mut login = Login::start(&["openai"], &server);
    let url = login.authorize_url();
    login.line_with("paste");
    *server.state.challenge.lock().unwrap() = Some(param(&url, "code_challenge"));
    assert_eq!(param(&url, "client_id"), "dynamic_agent_client");
    let host = param(&url, "ext_agent_host_id");
    assert!(host.starts_with("urn:uuid:"), "{host}");
    let state = param(&url, "state");
    login.paste(&format!(
        "http://127.0.0.1:1455/auth/callback?code=good-code&state={state}&client_id=issued-7\n"
    ));
    let (code, text, auth, home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    let entry = &auth["openai"];
    assert_eq!(entry["access"], "oai-access-1");
    assert_eq!(entry["clientId"], "issued-7");
    assert_eq!(
        entry["scopes"],
        json!(["openid", "offline_access", "chatgpt.tokens.use.direct"])
    );
    let expires = entry["expires"].as_u64().unwrap();
    assert!(
        expires <= now_ms() + 3_420_000 && expires > now_ms() + 3_300_000,
        "{entry}"
    );
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("agent/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        format!("urn:uuid:{}", settings["deviceId"].as_str().unwrap()),
        host
    );
    assert_no_secrets(&text, &["oai-access-1", "oai-refresh-1"]);
}

fn radius_access(n: u32) -> String {
    format!("rad-access-{n}")
}

/// Radius's gateway: the sign-in configuration names the authorization endpoint, the token
/// endpoint is the gateway's own.
fn radius_gateway() -> Box<Handler> {
    let tokens = token_endpoint("rad-", radius_access);
    Box::new(
        move |seen: &Seen, state: &State| match (seen.method.as_str(), seen.path.as_str()) {
            ("GET", "/v1/oauth") => (
                200,
                json!({"authorizationEndpoint": "https://login.radius.example/authorize"}),
            ),
            ("POST", "/v1/oauth/token") => tokens(seen, state),
            ("GET", "/v1/config")
                if seen.authorization == format!("Bearer {}", radius_access(1)) =>
            {
                (
                    200,
                    json!({"baseUrl": "https://gw.radius.example/v1", "models": [
                    {"id": "org-only", "name": "Org Only", "reasoning": false, "input": ["text"],
                     "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
                     "contextWindow": 100000, "maxTokens": 8000},
                    {"id": "broken"}]}),
                )
            }
            _ => (404, json!({"error": "not_found"})),
        },
    )
}

#[test]
fn radius_login_discovers_the_endpoint_and_takes_a_pasted_redirect() {
    let server = AuthServer::start(radius_gateway());
    let mut login = Login::start(&["radius"], &server);
    let url = login.authorize_url();
    assert_eq!(url.host_str(), Some("login.radius.example"));
    assert_eq!(param(&url, "client_id"), "pi-gateway");
    assert_eq!(param(&url, "scope"), "gateway offline_access");
    assert_eq!(param(&url, "handoff"), "url");
    let redirect = param(&url, "redirect_uri");
    assert_eq!(redirect, "http://127.0.0.1:1456/oauth/callback");
    *server.state.challenge.lock().unwrap() = Some(param(&url, "code_challenge"));
    let state = param(&url, "state");
    login.paste(&format!("{redirect}?code=good-code&state={state}\n"));
    let (code, text, auth, home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    let entry = &auth["radius"];
    assert_eq!(entry["type"], "oauth");
    assert_eq!(entry["access"], radius_access(1));
    assert_eq!(entry["refresh"], "rad-refresh-1");
    // Pi keeps Radius's expiry one minute short.
    let expires = entry["expires"].as_u64().unwrap();
    let expected = now_ms() + 3_540_000;
    assert!(
        expires <= expected && expires > expected - 60_000,
        "{entry}"
    );
    let exchange = server
        .seen()
        .into_iter()
        .find(|s| s.method == "POST")
        .unwrap();
    assert_eq!(exchange.field("client_id").as_deref(), Some("pi-gateway"));
    assert_eq!(
        exchange.field("redirect_uri").as_deref(),
        Some(redirect.as_str())
    );
    assert_no_secrets(&text, &[&radius_access(1), "rad-refresh-1"]);
    // The account's catalog was fetched with the new token and kept where Pi keeps it.
    let store: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("agent/models-store.json")).unwrap(),
    )
    .unwrap();
    let models = store["radius"]["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "{store}");
    assert_eq!(models[0]["id"], "org-only");
    assert_eq!(models[0]["baseUrl"], "https://gw.radius.example/v1");
    assert_eq!(models[0]["api"], "pi-messages");
    assert!(text.contains("lists 1 models"), "{text}");
}

#[test]
fn radius_login_refuses_a_discovered_endpoint_it_cannot_trust() {
    let server = AuthServer::start(Box::new(|seen: &Seen, _: &State| {
        match seen.path.as_str() {
            "/v1/oauth" => (200, json!({"authorizationEndpoint": "javascript:alert(1)"})),
            _ => (404, json!({"error": "not_found"})),
        }
    }));
    let (code, text, auth, _home) = Login::start(&["radius"], &server).finish();
    assert_ne!(code, Some(0));
    assert!(text.contains("no usable authorization endpoint"), "{text}");
    assert_eq!(auth, Value::Null);
}

#[test]
fn radius_device_login_waits_out_pending() {
    let server = AuthServer::start(Box::new(|seen: &Seen, state: &State| {
        match seen.path.as_str() {
            "/v1/oauth/device" => (
                200,
                json!({"device_code": "dev-r", "user_code": "RAD-0001",
                       "verification_uri": "https://radius.example/device",
                       "interval": 1, "expires_in": 60}),
            ),
            "/v1/oauth/token" => {
                let mut polls = state.polls.lock().unwrap();
                *polls += 1;
                if *polls == 1 {
                    (400, json!({"error": "authorization_pending"}))
                } else {
                    (
                        200,
                        json!({"access_token": "rad-dev-access", "refresh_token": "rad-dev-refresh",
                               "expires_in": 3600}),
                    )
                }
            }
            _ => (404, json!({"error": "not_found"})),
        }
    }));
    let mut login = Login::start(&["radius", "--device"], &server);
    let line = login.line_with("RAD-0001");
    assert!(line.contains("https://radius.example/device"), "{line}");
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    let seen = server.seen();
    assert_eq!(seen[0].field("client_id").as_deref(), Some("pi-gateway"));
    assert_eq!(
        seen[0].field("scope").as_deref(),
        Some("gateway offline_access")
    );
    assert_eq!(
        seen[1].field("grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:device_code")
    );
    assert_eq!(auth["radius"]["access"], "rad-dev-access");
    assert_eq!(auth["radius"]["refresh"], "rad-dev-refresh");
    assert_no_secrets(&text, &["rad-dev-access", "rad-dev-refresh"]);
}

#[test]
fn radius_refresh_uses_the_new_token_at_the_gateway() {
    let mock = MockLlm::start();
    let server = AuthServer::start(radius_gateway());
    let auth = json!({"radius": {"type": "oauth", "access": radius_access(1),
                                 "refresh": "rad-refresh-1", "expires": now_ms() - 1000}});
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"radius": {"baseUrl": mock.base_url_pi()}}}))
        .agent_file("auth.json", auth.to_string())
        .env("NOVA_OAUTH_TEST_URL", server.url())
        .args(["--model", "radius/balanced"])
        .spawn();
    mock.push(Reply::text("refreshed"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "refreshed", "{events:?}");
    let refresh = &server.seen()[0];
    assert_eq!(refresh.path, "/v1/oauth/token");
    assert_eq!(refresh.field("client_id").as_deref(), Some("pi-gateway"));
    assert_eq!(
        refresh.field("refresh_token").as_deref(),
        Some("rad-refresh-1")
    );
    let bearer = format!("Bearer {}", radius_access(2));
    assert_eq!(
        mock.chat_requests()[0].header("authorization"),
        Some(bearer.as_str())
    );
    assert_no_secrets(&nova.stderr(), &[&radius_access(2), "rad-refresh-2"]);
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(nova.agent_dir().join("auth.json")).unwrap())
            .unwrap();
    assert_eq!(stored["radius"]["refresh"], "rad-refresh-2");
}

/// Issue 30 item 5: Anthropic's redirect names `localhost`, which a browser may try as ::1
/// first, so nova listens there too; and an idle connection (one on each address) does not
/// hold the real redirect back.
#[test]
fn the_callback_listens_on_both_loopbacks_and_serves_connections_side_by_side() {
    let server = AuthServer::start(token_endpoint("ant-", anthropic_access));
    let mut login = Login::start(&["anthropic"], &server);
    let url = login.authorize_url();
    *server.state.challenge.lock().unwrap() = Some(param(&url, "code_challenge"));
    let redirect = param(&url, "redirect_uri");
    let port = reqwest::Url::parse(&redirect).unwrap().port().unwrap();
    let state = param(&url, "state");
    let _idle = [
        std::net::TcpStream::connect(("127.0.0.1", port)).unwrap(),
        std::net::TcpStream::connect(("::1", port)).unwrap(),
    ];
    let started = Instant::now();
    assert_eq!(
        browse_via("::1", &format!("{redirect}?code=good-code&state={state}")),
        200
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the redirect waited {:?} behind idle connections",
        started.elapsed()
    );
    let (code, text, auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(auth["anthropic"]["access"], anthropic_access(1));
}

/// Issue 30 item 5: a port taken on either loopback address is not listened on at all: with
/// [::1]:53692 held by another program, Anthropic's login (which may move) names a port free
/// on both.
#[test]
fn a_port_taken_on_one_loopback_address_is_not_used() {
    const PREFERRED: u16 = 53692;
    // Held here, or already by another test's login: taken on ::1 either way.
    let _held = TcpListener::bind(("::1", PREFERRED));
    let server = AuthServer::start(token_endpoint("ant-", anthropic_access));
    let mut login = Login::start(&["anthropic"], &server);
    let url = login.authorize_url();
    *server.state.challenge.lock().unwrap() = Some(param(&url, "code_challenge"));
    let redirect = param(&url, "redirect_uri");
    let port = reqwest::Url::parse(&redirect).unwrap().port().unwrap();
    assert_ne!(port, PREFERRED, "{redirect}");
    let state = param(&url, "state");
    assert_eq!(
        browse_via("::1", &format!("{redirect}?code=good-code&state=forged")),
        400
    );
    assert_eq!(
        browse_via(
            "127.0.0.1",
            &format!("{redirect}?code=good-code&state={state}")
        ),
        200
    );
    let (code, text, _auth, _home) = login.finish();
    assert_eq!(code, Some(0), "{text}");
}
