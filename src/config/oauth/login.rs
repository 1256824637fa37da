//! The two ways Pi's providers log in, carried out for `nova login`: the authorization-code
//! flow with PKCE, whose redirect reaches a loopback server on the provider's port ([`Loopback`]:
//! every loopback address the redirect's host can mean, or none; each connection served on its
//! own; a redirect without the login's `state` is refused), raced against a code or
//! redirect URL pasted on stdin for machines whose browser cannot reach that server; and the
//! device-code flow (RFC 8628), polled at the server's interval, slower after `slow_down`,
//! until it succeeds, is refused or expires. Both end with the entry Pi would store.

use super::http::{self, Answer, Body, Vars};
use super::providers::{Grant, Provider, Refresh};
use serde_json::{Map, Value};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An authorization-code login.
pub(super) struct Browser {
    pub authorize: Authorize,
    /// Query parameters besides the standard ones (scope among them).
    pub params: &'static [(&'static str, &'static str)],
    /// The loopback port the provider expects the redirect on.
    pub port: u16,
    /// Whether the provider accepts any loopback port when that one is taken.
    pub any_port: bool,
    pub path: &'static str,
    /// The host the redirect URI names; for `localhost` the server listens on 127.0.0.1 and
    /// ::1 alike, since a browser may try either first.
    pub redirect_host: &'static str,
    /// The PKCE verifier doubles as the `state` (Anthropic), else a random one is made.
    pub state_is_verifier: bool,
    /// Whether the code exchange carries the `state` too.
    pub exchange_state: bool,
}

/// Where the browser is sent to sign in.
pub(super) enum Authorize {
    /// This authorization endpoint.
    At(&'static str),
    /// The `authorizationEndpoint` a JSON document at this address names (Radius's gateway
    /// says where its sign-in lives).
    DiscoveredAt(&'static str),
}

/// A device-code login offered beside a browser one (`nova login --device`).
pub(super) enum SecondLogin {
    Codex(CodexDevice),
    Device(Device),
}

/// OpenRouter's login: PKCE without a `state` (a random callback path stands in for it), the
/// code exchanged for a key that does not expire.
pub(super) struct KeyExchange {
    pub authorize: &'static str,
    pub exchange: &'static str,
}

/// OpenAI's sign-in with ChatGPT: a client registered for each login (OpenAI names it in the
/// redirect as `client_id`) for this installation (its device id), with a nonce and a
/// resource, on the fixed redirect `127.0.0.1:1455`.
pub(super) struct ChatGpt {
    pub authorize: &'static str,
    pub scope: &'static str,
    pub port: u16,
    pub path: &'static str,
}

/// OpenAI Codex's own device-code login (not RFC 8628): the server hands out a user code, and
/// once it is entered, an authorization code and its PKCE verifier for the usual exchange.
pub(super) struct CodexDevice {
    pub usercode: &'static str,
    pub poll: &'static str,
    /// Where the person enters the code.
    pub verify: &'static str,
    /// The redirect URI the exchange names.
    pub redirect: &'static str,
}

/// A device-code login.
pub(super) struct Device {
    pub client_id: &'static str,
    /// Where the device code is asked for; `{domain}` is GitHub's (or an enterprise's).
    pub start: &'static str,
    pub params: &'static [(&'static str, &'static str)],
    /// Sent with both requests.
    pub headers: &'static [(&'static str, &'static str)],
    /// Where it is polled.
    pub poll: &'static str,
    /// The server's answer is a token for another step, not the login itself.
    pub then: Then,
}

pub(super) enum Then {
    /// The answer is the login's tokens, read as the refresh grant reads them.
    Tokens,
    /// A GitHub token, exchanged for a Copilot token as a refresh does.
    Copilot,
    /// A Meta identity token, which mints the key as a refresh does.
    Meta,
}

/// What a login may ask of the person running it.
pub struct Interaction<'a> {
    /// One line for the person (stderr).
    pub say: &'a (dyn Fn(&str) + Sync),
    /// Lines pasted on stdin.
    pub pasted: tokio::sync::mpsc::Receiver<String>,
    pub var: Vars<'a>,
    /// A GitHub Enterprise domain, for Copilot.
    pub domain: Option<String>,
    /// Sign in with a device code where the provider offers both ways.
    pub device: bool,
    /// This installation's id (a UUID), which OpenAI's sign-in with ChatGPT names.
    pub device_id: String,
}

/// How long a login may wait for the person.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Logs in to `provider`, returning the auth.json entry.
pub async fn login(
    provider: &Provider,
    io: &mut Interaction<'_>,
) -> Result<Map<String, Value>, String> {
    let grant = match &provider.refresh {
        Refresh::Grant(grant) => Some(grant),
        _ => None,
    };
    if io.device {
        match (&provider.device, grant) {
            (Some(SecondLogin::Codex(device)), Some(grant)) => {
                return by_codex_device(provider, device, grant, io).await;
            }
            (Some(SecondLogin::Device(device)), _) => {
                return by_device(provider, device, grant, io).await;
            }
            _ => {}
        }
    }
    if io.device && !matches!(provider.login, super::providers::Login::Device(_)) {
        return Err(format!(
            "{} has no device-code login; without --device, the browser's address (or code) \
             can be pasted when the browser runs elsewhere",
            provider.name
        ));
    }
    match (&provider.login, grant) {
        (super::providers::Login::Browser(browser), Some(grant)) => {
            by_browser(provider, browser, grant, io).await
        }
        (super::providers::Login::Device(device), _) => {
            by_device(provider, device, grant, io).await
        }
        (super::providers::Login::ChatGpt(login), Some(grant)) => {
            by_chatgpt(provider, login, grant, io).await
        }
        (super::providers::Login::KeyExchange(login), _) => {
            by_key_exchange(provider, login, io).await
        }
        _ => Err(format!(
            "nova cannot log in to {} yet; give it an API key with `nova login {} --api-key`",
            provider.name, provider.id
        )),
    }
}

async fn by_browser(
    provider: &Provider,
    browser: &Browser,
    grant: &Grant,
    io: &mut Interaction<'_>,
) -> Result<Map<String, Value>, String> {
    let super::providers::Client::Fixed(client_id) = grant.client else {
        return Err(format!("nova cannot log in to {} yet", provider.name));
    };
    let verifier = random_b64(32)?;
    let challenge =
        b64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
    let state = if browser.state_is_verifier {
        verifier.clone()
    } else {
        random_hex(16)?
    };
    let listener = Loopback::bind(browser.redirect_host, browser.port, browser.any_port).await;
    let port = listener.as_ref().map_or(browser.port, |l| l.port);
    let redirect = format!("http://{}:{port}{}", browser.redirect_host, browser.path);
    let mut query = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect.as_str()),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", state.as_str()),
    ];
    query.extend_from_slice(browser.params);
    let authorize = match browser.authorize {
        Authorize::At(url) => http::endpoint(url, &[], io.var)?,
        Authorize::DiscoveredAt(url) => discover(url, provider, io.var).await?,
    };
    let url = format!(
        "{authorize}?{}",
        http::form_encode(&query).replace('+', "%20")
    );
    (io.say)(&format!("Sign in to {} in a browser:", provider.name));
    (io.say)(&url);
    match &listener {
        Some(_) => (io.say)(&format!(
            "Waiting for the browser's redirect to {redirect}. If the browser runs on another \
             machine, paste the address it ends on (or the code it shows) here and press Enter."
        )),
        None => (io.say)(&format!(
            "Port {} is taken on {}, so nova does not listen for the redirect: paste the \
             address the browser ends on (or the code it shows) here and press Enter.",
            browser.port,
            Loopback::addresses(browser.redirect_host)
        )),
    }
    open_browser(&url);
    let code = tokio::time::timeout(LOGIN_TIMEOUT, async {
        let redirect = tokio::select! {
            code = callback(listener, browser.path, Some(&state), provider.name) => code,
            code = pasted_code(&mut io.pasted, Some(&state)) => code,
        };
        redirect.map(|r| r.code)
    })
    .await
    .map_err(|_| format!("the {} login timed out", provider.name))??;
    (io.say)("Exchanging the authorization code for tokens…");
    let token_url = http::endpoint(grant.url, grant.host_vars, io.var)?;
    let mut pairs = vec![
        ("grant_type", "authorization_code"),
        ("client_id", client_id),
        ("code", code.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("code_verifier", verifier.as_str()),
    ];
    if browser.exchange_state {
        pairs.push(("state", state.as_str()));
    }
    pairs.extend_from_slice(grant.extra);
    let answer = post(&token_url, &pairs, grant.json, &[], provider.name).await?;
    if !answer.ok() {
        return Err(answer.login_failure("exchanging the authorization code", &token_url));
    }
    provider.tokens(grant, &answer, None, client_id)
}

/// The authorization endpoint the document at `url` names. It only goes to the browser, but it
/// comes from a server: it must be https, or http on this machine.
async fn discover(url: &str, provider: &Provider, var: Vars<'_>) -> Result<String, String> {
    let url = http::endpoint(url, &[], var)?;
    let answer = http::send(&url, &[], Body::None, provider.name).await?;
    if !answer.ok() {
        return Err(answer.login_failure("loading the sign-in configuration", &url));
    }
    answer
        .field("authorizationEndpoint")
        .and_then(|e| reqwest::Url::parse(e).ok())
        .filter(|e| {
            e.scheme() == "https"
                || (e.scheme() == "http"
                    && matches!(e.host_str(), Some("127.0.0.1" | "localhost" | "[::1]")))
        })
        .map(|e| e.to_string())
        .ok_or_else(|| {
            format!(
                "the {} sign-in configuration at {url} names no usable authorization endpoint",
                provider.name
            )
        })
}

async fn by_chatgpt(
    provider: &Provider,
    login: &ChatGpt,
    grant: &Grant,
    io: &mut Interaction<'_>,
) -> Result<Map<String, Value>, String> {
    let verifier = random_b64(32)?;
    let challenge =
        b64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
    let (state, nonce) = (random_b64(32)?, random_b64(32)?);
    let host = format!("urn:uuid:{}", io.device_id.to_ascii_lowercase());
    let listener = Loopback::bind("127.0.0.1", login.port, false).await;
    let redirect = format!("http://127.0.0.1:{}{}", login.port, login.path);
    let resource = grant
        .extra
        .iter()
        .find(|(k, _)| *k == "resource")
        .map_or("", |(_, v)| *v);
    let query = [
        ("client_id", "dynamic_agent_client"),
        ("agent_name_hint", "nova"),
        ("ext_agent_host_id", host.as_str()),
        ("response_type", "code"),
        ("redirect_uri", redirect.as_str()),
        ("resource", resource),
        ("scope", login.scope),
        ("state", state.as_str()),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("nonce", nonce.as_str()),
    ];
    let url = format!(
        "{}?{}",
        http::endpoint(login.authorize, &[], io.var)?,
        http::form_encode(&query).replace('+', "%20")
    );
    (io.say)(&format!("Sign in to {} in a browser:", provider.name));
    (io.say)(&url);
    (io.say)(&match &listener {
        Some(_) => format!(
            "Waiting for the browser's redirect to {redirect}. If the browser runs on another \
             machine, paste the whole address it ends on here and press Enter."
        ),
        // Pi refuses here; the pasted address still finishes the login.
        None => format!(
            "Port {} is in use (an unfinished login, or the Codex CLI): paste the whole address \
             the browser ends on here and press Enter.",
            login.port
        ),
    });
    open_browser(&url);
    let redirected = tokio::time::timeout(LOGIN_TIMEOUT, async {
        tokio::select! {
            got = callback(listener, login.path, Some(&state), provider.name) => got,
            got = pasted_code(&mut io.pasted, Some(&state)) => got,
        }
    })
    .await
    .map_err(|_| format!("the {} login timed out", provider.name))??;
    let client_id = redirected
        .client_id
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| {
            format!(
                "the redirect names no issued client id; paste the whole address the browser \
                 ends on (it starts with {redirect})"
            )
        })?;
    (io.say)("Exchanging the authorization code for tokens…");
    let token_url = http::endpoint(grant.url, grant.host_vars, io.var)?;
    let mut pairs = vec![
        ("grant_type", "authorization_code"),
        ("client_id", client_id.as_str()),
        ("code", redirected.code.as_str()),
        ("code_verifier", verifier.as_str()),
        ("redirect_uri", redirect.as_str()),
    ];
    pairs.extend_from_slice(grant.extra);
    let answer = post(&token_url, &pairs, false, &[], provider.name).await?;
    if !answer.ok() {
        return Err(answer.login_failure("exchanging the authorization code", &token_url));
    }
    // OpenAI's answer to a sign-in carries an ID token; nova does not read it, Pi checks it.
    if answer.field("id_token").is_none() {
        return Err(format!("the {} answer carries no ID token", provider.name));
    }
    provider.tokens(grant, &answer, None, &client_id)
}

async fn by_codex_device(
    provider: &Provider,
    device: &CodexDevice,
    grant: &Grant,
    io: &mut Interaction<'_>,
) -> Result<Map<String, Value>, String> {
    let super::providers::Client::Fixed(client_id) = grant.client else {
        return Err(format!("nova cannot log in to {} yet", provider.name));
    };
    let start = http::endpoint(device.usercode, &[], io.var)?;
    let body = serde_json::json!({ "client_id": client_id });
    let answer = http::send(&start, &[], Body::Json(body), provider.name).await?;
    if answer.status == 404 {
        return Err(format!(
            "{} does not offer device-code login here; run `nova login {}` without --device",
            provider.name, provider.id
        ));
    }
    if !answer.ok() {
        return Err(answer.login_failure("asking for a device code", &start));
    }
    let (Some(auth_id), Some(user_code)) =
        (answer.field("device_auth_id"), answer.field("user_code"))
    else {
        return Err(format!(
            "the {} device code answer is incomplete",
            provider.name
        ));
    };
    // The interval comes as a number or as a string of one.
    let seconds = match answer.body.get("interval") {
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(v) => v.as_f64(),
        None => None,
    }
    .filter(|s| s.is_finite() && *s >= 0.0)
    .unwrap_or(5.0);
    let mut interval = Duration::from_secs_f64(seconds.max(1.0));
    let (auth_id, user_code) = (auth_id.to_owned(), user_code.to_owned());
    let shown_code = printable(&user_code);
    (io.say)(&format!(
        "To sign in to {}, open {} and enter the code {shown_code}",
        provider.name, device.verify
    ));
    (io.say)("Waiting for the sign-in to complete…");
    open_browser(device.verify);
    let poll = http::endpoint(device.poll, &[], io.var)?;
    let deadline = Instant::now() + LOGIN_TIMEOUT;
    let answer = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the {} device code expired before the sign-in completed",
                provider.name
            ));
        }
        tokio::time::sleep(interval.min(left)).await;
        let body = serde_json::json!({ "device_auth_id": auth_id, "user_code": user_code });
        let answer = http::send(&poll, &[], Body::Json(body), provider.name).await?;
        if answer.ok() {
            break answer;
        }
        match answer.error() {
            _ if matches!(answer.status, 403 | 404) => {}
            Some("deviceauth_authorization_pending" | "authorization_pending") => {}
            Some("slow_down") => interval += Duration::from_secs(5),
            _ => return Err(answer.login_failure("polling for the sign-in", &poll)),
        }
    };
    let (Some(code), Some(verifier)) = (
        answer.field("authorization_code"),
        answer.field("code_verifier"),
    ) else {
        return Err(format!(
            "the {} sign-in answer lacks the authorization code",
            provider.name
        ));
    };
    let token_url = http::endpoint(grant.url, grant.host_vars, io.var)?;
    let pairs = [
        ("grant_type", "authorization_code"),
        ("client_id", client_id),
        ("code", code),
        ("code_verifier", verifier),
        ("redirect_uri", device.redirect),
    ];
    let exchanged = post(&token_url, &pairs, grant.json, &[], provider.name).await?;
    if !exchanged.ok() {
        return Err(exchanged.login_failure("exchanging the authorization code", &token_url));
    }
    provider.tokens(grant, &exchanged, None, client_id)
}

async fn by_key_exchange(
    provider: &Provider,
    login: &KeyExchange,
    io: &mut Interaction<'_>,
) -> Result<Map<String, Value>, String> {
    let verifier = random_b64(32)?;
    let challenge =
        b64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
    let path = format!("/oauth/callback/{}", random_hex(16)?);
    let listener = Loopback::bind("127.0.0.1", 0, true)
        .await
        .ok_or("cannot listen on 127.0.0.1 for the sign-in")?;
    let redirect = format!("http://127.0.0.1:{}{path}", listener.port);
    let query = [
        ("callback_url", redirect.as_str()),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    let url = format!(
        "{}?{}",
        http::endpoint(login.authorize, &[], io.var)?,
        http::form_encode(&query).replace('+', "%20")
    );
    (io.say)(&format!("Sign in to {} in a browser:", provider.name));
    (io.say)(&url);
    (io.say)(&format!(
        "Waiting for the browser's redirect to {redirect}. If the browser runs on another \
         machine, paste the address it ends on here and press Enter."
    ));
    open_browser(&url);
    let code = tokio::time::timeout(LOGIN_TIMEOUT, async {
        let redirect = tokio::select! {
            code = callback(Some(listener), &path, None, provider.name) => code,
            code = pasted_code(&mut io.pasted, None) => code,
        };
        redirect.map(|r| r.code)
    })
    .await
    .map_err(|_| format!("the {} login timed out", provider.name))??;
    let exchange = http::endpoint(login.exchange, &[], io.var)?;
    let body = serde_json::json!({"code": code, "code_verifier": verifier,
                                  "code_challenge_method": "S256"});
    let answer = http::send(&exchange, &[], Body::Json(body), provider.name).await?;
    if !answer.ok() {
        return Err(answer.login_failure("exchanging the code for a key", &exchange));
    }
    let key = answer
        .field("key")
        .ok_or_else(|| format!("the {} server's answer carries no key", provider.name))?;
    // Pi's mark for "never expires": JavaScript's largest exact integer.
    Ok(super::providers::oauth_fields(
        key,
        "",
        9_007_199_254_740_991,
    ))
}

async fn post(
    url: &str,
    pairs: &[(&str, &str)],
    json: bool,
    headers: &[(&str, &str)],
    name: &str,
) -> Result<Answer, String> {
    http::send(url, headers, Body::pairs(pairs, json), name).await
}

/// The listeners a loopback redirect can reach: 127.0.0.1, and ::1 too when the redirect names
/// `localhost` (where the machine has IPv6). All on one port or none at all: a browser that
/// tries ::1 first would otherwise hand the code and `state` to whoever holds [::1]:<port>.
struct Loopback {
    listeners: Vec<tokio::net::TcpListener>,
    port: u16,
}

impl Loopback {
    /// Listens on `port` for a redirect to `host`; with `any_port`, on another port free on
    /// every address when that one is taken anywhere (`port` 0: any port from the start).
    async fn bind(host: &str, port: u16, any_port: bool) -> Option<Loopback> {
        if port != 0
            && let Some(bound) = Self::bind_all(host, port).await
        {
            return Some(bound);
        }
        if !any_port {
            return None;
        }
        // The port the first address gets may be taken on the other: try a few.
        for _ in 0..16 {
            let first = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.ok()?;
            let port = first.local_addr().ok()?.port();
            if let Some(rest) = Self::bind_v6(host, port).await {
                let mut listeners = vec![first];
                listeners.extend(rest);
                return Some(Loopback { listeners, port });
            }
        }
        None
    }

    async fn bind_all(host: &str, port: u16) -> Option<Loopback> {
        let first = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .ok()?;
        let mut listeners = vec![first];
        listeners.extend(Self::bind_v6(host, port).await?);
        Some(Loopback { listeners, port })
    }

    /// The ::1 listener a `localhost` redirect needs: `Some(None)` when it needs none (another
    /// host, or no IPv6 loopback here, which no browser can reach either), `None` when the
    /// port is taken there.
    async fn bind_v6(host: &str, port: u16) -> Option<Option<tokio::net::TcpListener>> {
        if host != "localhost" {
            return Some(None);
        }
        match tokio::net::TcpListener::bind(("::1", port)).await {
            Ok(listener) => Some(Some(listener)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => Some(None),
            Err(e) if e.raw_os_error() == Some(nix::libc::EAFNOSUPPORT) => Some(None),
            Err(_) => None,
        }
    }

    /// The addresses a redirect to `host` may reach, for messages.
    fn addresses(host: &str) -> &'static str {
        if host == "localhost" {
            "127.0.0.1 or [::1]"
        } else {
            "127.0.0.1"
        }
    }

    async fn accept(&self) -> std::io::Result<tokio::net::TcpStream> {
        let accepts = self.listeners.iter().map(|l| Box::pin(l.accept()));
        let (accepted, _, _) = futures_util::future::select_all(accepts).await;
        accepted.map(|(stream, _)| stream)
    }
}

/// How many callback connections are served at once; more wait to be accepted.
const CALLBACK_CONNECTIONS: usize = 32;

/// Serves the redirect until one carries the login's `state` and a code (or an error). Each
/// connection is served on its own, so one that sends nothing cannot hold the real redirect
/// back while its 10 s run out.
async fn callback(
    listener: Option<Loopback>,
    path: &str,
    state: Option<&str>,
    name: &str,
) -> Result<Redirect, String> {
    use futures_util::StreamExt;
    let Some(listener) = listener else {
        return std::future::pending().await;
    };
    let mut serving = futures_util::stream::FuturesUnordered::new();
    loop {
        tokio::select! {
            accepted = listener.accept(), if serving.len() < CALLBACK_CONNECTIONS => {
                match accepted {
                    Ok(stream) => serving.push(serve_callback(stream, path, state, name)),
                    // Out of descriptors, say: wait rather than spin.
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
            Some(served) = serving.next() => {
                if let Some(outcome) = served {
                    return outcome;
                }
            }
        }
    }
}

/// One connection to the callback server: `None` when it was not the redirect (the login
/// keeps waiting), else the code or the provider's refusal.
async fn serve_callback(
    mut stream: tokio::net::TcpStream,
    path: &str,
    state: Option<&str>,
    name: &str,
) -> Option<Result<Redirect, String>> {
    let head = tokio::time::timeout(Duration::from_secs(10), read_head(&mut stream))
        .await
        .ok()??;
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_default();
    let Ok(url) = reqwest::Url::parse(&format!("http://localhost{target}")) else {
        reply(&mut stream, 400, "Not a sign-in address.").await;
        return None;
    };
    if url.path() != path {
        reply(&mut stream, 404, "Not a sign-in address.").await;
        return None;
    }
    let param = |key: &str| {
        url.query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    };
    if state.is_some() && param("state").as_deref() != state {
        reply(
            &mut stream,
            400,
            "This sign-in is not the one nova started (state mismatch).",
        )
        .await;
        return None;
    }
    if let Some(error) = param("error") {
        reply(&mut stream, 400, &format!("{name} refused the sign-in.")).await;
        let error: String = error
            .chars()
            .filter(char::is_ascii_graphic)
            .take(80)
            .collect();
        return Some(Err(format!("{name} refused the sign-in: {error}")));
    }
    let Some(code) = param("code").filter(|c| !c.is_empty()) else {
        reply(
            &mut stream,
            400,
            "The address carries no authorization code.",
        )
        .await;
        return None;
    };
    reply(
        &mut stream,
        200,
        &format!("Signed in to {name}. You can close this page and return to nova."),
    )
    .await;
    let client_id = param("client_id");
    Some(Ok(Redirect { code, client_id }))
}

/// A request's head (up to 16 KiB), or `None` when the client sends none.
async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() > 16 * 1024 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(head).ok()
}

async fn reply(stream: &mut tokio::net::TcpStream, status: u16, text: &str) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>nova</title><p>{}</p>",
        text.replace('&', "&amp;").replace('<', "&lt;")
    );
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\n\
         cache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The code from a pasted line: the redirect address, `code#state`, a query string, or the
/// bare code. A pasted `state` must be the login's.
async fn pasted_code(
    pasted: &mut tokio::sync::mpsc::Receiver<String>,
    state: Option<&str>,
) -> Result<Redirect, String> {
    loop {
        let Some(line) = pasted.recv().await else {
            // stdin closed: only the redirect can finish the login.
            return std::future::pending().await;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (code, given_state) = parse_pasted(line);
        if let (Some(given), Some(state)) = (given_state, state)
            && given != state
        {
            return Err("the pasted sign-in is not the one nova started (state mismatch)".into());
        }
        match code {
            Some(code) if !code.is_empty() => {
                let client_id = pasted_param(line, "client_id");
                return Ok(Redirect { code, client_id });
            }
            _ => return Err("the pasted text carries no authorization code".into()),
        }
    }
}

/// One parameter of a pasted redirect address or query string.
fn pasted_param(line: &str, key: &str) -> Option<String> {
    let query = match reqwest::Url::parse(line) {
        Ok(url) if url.has_host() => url.query().unwrap_or_default().to_owned(),
        _ if line.contains('=') => line.to_owned(),
        _ => return None,
    };
    let url = reqwest::Url::parse(&format!("http://localhost/?{query}")).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// What a redirect brings: the code, and the client id a dynamically registered client is
/// issued (ChatGPT's sign-in).
struct Redirect {
    code: String,
    client_id: Option<String>,
}

fn parse_pasted(line: &str) -> (Option<String>, Option<String>) {
    let pairs = |query: &str| {
        let url = reqwest::Url::parse(&format!("http://localhost/?{query}")).ok();
        let get = |key: &str| {
            url.as_ref().and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.into_owned())
            })
        };
        (get("code"), get("state"))
    };
    if let Ok(url) = reqwest::Url::parse(line)
        && url.has_host()
    {
        return pairs(url.query().unwrap_or_default());
    }
    if let Some((code, state)) = line.split_once('#') {
        return (Some(code.to_owned()), Some(state.to_owned()));
    }
    if line.contains("code=") {
        return pairs(line);
    }
    (Some(line.to_owned()), None)
}

async fn by_device(
    provider: &Provider,
    device: &Device,
    grant: Option<&Grant>,
    io: &mut Interaction<'_>,
) -> Result<Map<String, Value>, String> {
    let client_id = device.client_id;
    let host_vars = grant.map_or(&[][..], |g| g.host_vars);
    let enterprise = match &io.domain {
        Some(raw) => Some(
            super::providers::domain(raw)
                .ok_or_else(|| format!("\"{raw}\" is not a GitHub Enterprise URL or domain"))?,
        ),
        None => None,
    };
    let domain = enterprise
        .clone()
        .unwrap_or_else(|| "github.com".to_owned());
    let start_url = http::endpoint(
        &device.start.replace("{domain}", &domain),
        host_vars,
        io.var,
    )?;
    let poll_url = http::endpoint(&device.poll.replace("{domain}", &domain), host_vars, io.var)?;
    let mut pairs = vec![("client_id", client_id)];
    pairs.extend_from_slice(device.params);
    let answer = post(&start_url, &pairs, false, device.headers, provider.name).await?;
    if !answer.ok() {
        return Err(answer.login_failure("asking for a device code", &start_url));
    }
    let (Some(device_code), Some(user_code)) =
        (answer.field("device_code"), answer.field("user_code"))
    else {
        return Err(format!(
            "the {} device code answer is incomplete",
            provider.name
        ));
    };
    let verify = answer
        .field("verification_uri_complete")
        .or_else(|| answer.field("verification_uri"))
        .and_then(|u| reqwest::Url::parse(u).ok())
        .filter(|u| matches!(u.scheme(), "https" | "http"))
        .ok_or_else(|| {
            format!(
                "the {} device code answer has no usable address",
                provider.name
            )
        })?
        // Printed as parsed: the server's text, with nothing a terminal would act on.
        .to_string();
    let number = |key: &str| {
        answer
            .body
            .get(key)
            .and_then(Value::as_f64)
            .filter(|n| n.is_finite() && *n > 0.0)
    };
    let mut interval = Duration::from_secs_f64(number("interval").unwrap_or(5.0).max(1.0));
    let deadline = Instant::now()
        + number("expires_in").map_or(LOGIN_TIMEOUT, |s| Duration::from_secs_f64(s.min(3600.0)));
    let device_code = device_code.to_owned();
    let user_code = printable(user_code);
    (io.say)(&format!(
        "To sign in to {}, open {verify} and enter the code {user_code}",
        provider.name
    ));
    (io.say)("Waiting for the sign-in to complete…");
    open_browser(&verify);
    let grant_type = "urn:ietf:params:oauth:grant-type:device_code";
    let mut slowed = false;
    let answer = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the {} device code expired before the sign-in completed{}",
                provider.name,
                if slowed {
                    " (the server asked nova to slow down; a drifting clock can cause that)"
                } else {
                    ""
                }
            ));
        }
        tokio::time::sleep(interval.min(left)).await;
        let pairs = [
            ("grant_type", grant_type),
            ("client_id", client_id),
            ("device_code", device_code.as_str()),
        ];
        let answer = post(&poll_url, &pairs, false, device.headers, provider.name).await?;
        if answer.field("access_token").is_some() {
            break answer;
        }
        match answer.error() {
            Some("authorization_pending") => {}
            Some("slow_down") => {
                slowed = true;
                interval = match answer.body.get("interval").and_then(Value::as_f64) {
                    Some(i) if i.is_finite() && i > 0.0 => Duration::from_secs_f64(i.max(1.0)),
                    _ => interval + Duration::from_secs(5),
                };
            }
            Some("expired_token") => {
                return Err(format!(
                    "the {} device code expired; run `nova login {}` again",
                    provider.name, provider.id
                ));
            }
            Some("access_denied" | "authorization_denied") => {
                return Err(format!("the {} sign-in was denied", provider.name));
            }
            _ => return Err(answer.login_failure("polling for the sign-in", &poll_url)),
        }
    };
    let token = answer.field("access_token").unwrap_or_default();
    match (&device.then, grant) {
        (Then::Tokens, Some(grant)) => provider.tokens(grant, &answer, None, client_id),
        (Then::Copilot | Then::Meta, _) => {
            let mut entry = Map::new();
            if let Some(domain) = enterprise {
                entry.insert("enterpriseUrl".into(), domain.into());
            }
            provider.refresh(&entry, token, io.var).await
        }
        (Then::Tokens, None) => Err(format!("nova cannot log in to {} yet", provider.name)),
    }
}

/// A server's short text for the terminal: printable ASCII only.
fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(64)
        .collect()
}

/// Opens `url` in a browser when there is a display to show one; failing quietly, since the
/// address is printed anyway.
fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        let display = ["DISPLAY", "WAYLAND_DISPLAY"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
        if !display {
            return;
        }
        "xdg-open"
    };
    let _ = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

fn random_bytes(n: usize) -> Result<Vec<u8>, String> {
    use ring::rand::SecureRandom;
    let mut bytes = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(bytes)
}

fn random_b64(n: usize) -> Result<String, String> {
    Ok(b64url(&random_bytes(n)?))
}

fn random_hex(n: usize) -> Result<String, String> {
    Ok(random_bytes(n)?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasted_forms() {
        let both = |c: &str, s: &str| (Some(c.to_owned()), Some(s.to_owned()));
        assert_eq!(
            parse_pasted("http://localhost:1455/auth/callback?code=c1&state=s1"),
            both("c1", "s1")
        );
        assert_eq!(parse_pasted("c2#s2"), both("c2", "s2"));
        assert_eq!(parse_pasted("code=c3&state=s3"), both("c3", "s3"));
        assert_eq!(parse_pasted("c4"), (Some("c4".to_owned()), None));
        // RFC 7636's example pair.
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            b"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        );
        assert_eq!(
            b64url(digest.as_ref()),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }
}
