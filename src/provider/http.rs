//! The only provider code that does I/O: POST the body built by a wire format, then feed the
//! response bytes to its accumulator. Every await races the cancellation token and the idle
//! timeout, so a hung server or an abort never leaves the agent waiting.

use super::body::{self, BodyEncoder, Buffer, ChunkSender, Counter, Writer};
use super::estimate::Meter;
use super::hooks::{self, Hook, Hooks};
use super::openai_responses::Flavour;
use super::{
    Api, ProviderError, ProviderEvent, Request, anthropic, aws, azure, bedrock, github_copilot,
    google, ollama, openai, openai_codex, openai_responses, pi_messages,
};
use crate::pace::Pacer;
use crate::protocol::{ContentBlock, Message, UserContent};
use crate::warnings::Warnings;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use serde::Deserialize;
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// How much of an error response is read; the error text keeps less than this anyway.
const ERROR_BODY_LIMIT: usize = 16 * 1024;

const OLLAMA_HINT: &str = "is Ollama running? start it with `ollama serve`";

/// The HTTP client for all providers and MCP servers, shared (it pools connections) and built
/// on first use: building it reads every root certificate of the platform, milliseconds that
/// startup (and a session that never leaves plain HTTP on loopback) should not pay.
///
/// The client has no overall request timeout because a reply may stream for many minutes;
/// [`stream`] bounds the silence between chunks instead.
#[derive(Debug, Clone, Default)]
pub struct SharedClient(Arc<OnceLock<Result<reqwest::Client, String>>>);

impl SharedClient {
    pub fn get(&self) -> Result<&reqwest::Client, ProviderError> {
        self.0
            .get_or_init(build_client)
            .as_ref()
            .map_err(|e| ProviderError::ClientSetup(e.clone()))
    }
}

fn build_client() -> Result<reqwest::Client, String> {
    // reqwest is built without a crypto provider so that ring, not aws-lc (a C build), is used.
    // An error only means some provider is installed already, which is all we need.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = || reqwest::Client::builder().redirect(same_origin_redirects());
    builder().build().or_else(|e| {
        // Without platform roots HTTPS cannot be verified, but local servers on plain HTTP,
        // nova's main use, still work; say why HTTPS will fail instead of failing every request.
        tracing::warn!(
            "TLS root certificates unavailable ({}); HTTPS requests will fail",
            describe(&e)
        );
        builder()
            .tls_certs_only([])
            .build()
            .map_err(|e| describe(&e))
    })
}

/// Redirects are followed only to the same origin (scheme, host and port), at most 10 in a row.
/// reqwest drops `Authorization` on a cross-host hop but keeps every other header, and a
/// provider's credentials also travel as `x-api-key` or as models.json headers of any name;
/// so rather than guess which headers are secret, nova does not follow a redirect that would
/// carry them to another server: the 3xx becomes the request's error, naming where it pointed.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first();
        let same = first.is_some_and(|from| {
            let to = attempt.url();
            from.scheme() == to.scheme()
                && from.host_str() == to.host_str()
                && from.port_or_known_default() == to.port_or_known_default()
        });
        if attempt.previous().len() > 10 {
            attempt.error("more than 10 redirects")
        } else if same {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// How requests reach a provider: the shared client, how long a stream may stay silent, the
/// provider's resolved credentials, and the session's warnings for what a reply reveals about
/// the server. A turn and the compaction summaries go the same way.
#[derive(Debug, Clone)]
pub struct Transport<'a> {
    pub client: &'a SharedClient,
    pub idle_timeout: Duration,
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    /// Where a request goes when the provider's environment or login decides it (Bedrock,
    /// Azure, Copilot on GitHub Enterprise); `None` otherwise.
    pub route: Option<Route>,
    pub warnings: &'a Warnings,
    /// The session's provider hooks, when it has extensions.
    pub hooks: Option<&'a dyn Hooks>,
}

/// An address, and for Bedrock a credential, resolved from the provider's environment (or, for
/// Copilot on GitHub Enterprise, from its login).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Aws(aws::Target),
    Azure(azure::Target),
    /// GitHub Copilot on an enterprise's address, when the token names none.
    Copilot(String),
    /// The model's address with the variables it names filled in (Cloudflare's).
    Address(String),
}

/// Streams one reply: sends `req` in the wire format its model's `api` names and calls
/// `on_event` for each event as soon as it is parsed. On error, events already delivered stand.
pub async fn stream(
    transport: &Transport<'_>,
    req: &Request<'_>,
    cancel: &CancellationToken,
    on_event: impl FnMut(ProviderEvent),
) -> Result<super::ReplyFacts, ProviderError> {
    stream_paced(transport, req, cancel, on_event, || std::future::ready(())).await
}

/// [`stream`], awaiting `pace` before reading each chunk: whoever receives the events can so
/// hold back a reply it cannot pass on yet (a client that stopped reading), instead of
/// buffering it.
pub async fn stream_paced<F: Future<Output = ()>>(
    transport: &Transport<'_>,
    req: &Request<'_>,
    cancel: &CancellationToken,
    mut on_event: impl FnMut(ProviderEvent),
    pace: impl Fn() -> F,
) -> Result<super::ReplyFacts, ProviderError> {
    let api = req.model.api;
    let key = transport.api_key.as_deref().filter(|k| !k.is_empty());
    // Copilot's token names the address its requests go to.
    let copilot = req.model.provider == github_copilot::PROVIDER;
    let rebased;
    let rebased_req;
    let enterprise = match &transport.route {
        Some(Route::Copilot(base)) => Some(base.as_str()),
        _ => None,
    };
    let copilot_base =
        copilot.then(|| github_copilot::base_url(key, enterprise, &req.model.base_url));
    let filled = match &transport.route {
        Some(Route::Address(base)) => Some(base.clone()),
        _ => None,
    };
    let req = match copilot_base.or(filled) {
        Some(base_url) if base_url != req.model.base_url => {
            rebased = crate::protocol::Model {
                base_url,
                ..req.model.clone()
            };
            rebased_req = Request {
                model: &rebased,
                ..req.clone()
            };
            &rebased_req
        }
        _ => req,
    };
    let identity = anthropic::Identity::of(key, copilot);
    let flavour = if copilot {
        Flavour::Copilot
    } else if openai_responses::is_chatgpt_sign_in(req.model, key) {
        Flavour::ChatGpt
    } else {
        Flavour::OpenAi
    };
    let (url, mut decoder) = match api {
        Api::Ollama => (
            ollama::endpoint(&req.model.base_url),
            Decoder::Ollama(ollama::Accumulator::new(req.model)),
        ),
        Api::OpenAiCompletions => (
            openai::endpoint(&req.model.base_url),
            Decoder::OpenAi(openai::Accumulator::new(req.model)),
        ),
        Api::OpenAiResponses => (
            openai_responses::endpoint(&req.model.base_url),
            Decoder::Responses(openai_responses::Accumulator::for_flavour(
                req.model, flavour,
            )),
        ),
        Api::AnthropicMessages => (
            anthropic::endpoint(&req.model.base_url),
            Decoder::Anthropic(anthropic::Accumulator::for_request(
                req.model, identity, req.tools,
            )),
        ),
        Api::GoogleGenerativeAi => (
            google::endpoint(&req.model.base_url, &req.model.id),
            Decoder::Google(google::Accumulator::new(req.model)),
        ),
        Api::BedrockConverseStream => (
            bedrock::endpoint(
                match &transport.route {
                    Some(Route::Aws(target)) => &target.base_url,
                    _ => &req.model.base_url,
                },
                &req.model.id,
            ),
            Decoder::Bedrock(bedrock::Accumulator::new(req.model)),
        ),
        Api::AzureOpenAiResponses => (
            match &transport.route {
                Some(Route::Azure(target)) => azure::endpoint(target),
                _ => openai_responses::endpoint(&req.model.base_url),
            },
            Decoder::Responses(openai_responses::Accumulator::new(req.model)),
        ),
        Api::OpenAiCodexResponses => (
            openai_codex::endpoint(&req.model.base_url),
            Decoder::Responses(openai_responses::Accumulator::for_flavour(
                req.model,
                Flavour::Codex,
            )),
        ),
        Api::PiMessages => (
            pi_messages::endpoint(&req.model.base_url),
            Decoder::PiMessages(pi_messages::Accumulator::new(req.model)),
        ),
    };
    let unrouted = |what: &str| ProviderError::InvalidRequest {
        url: url.clone(),
        message: format!("no {what} was resolved for this request"),
    };
    let deployment = match (api, &transport.route) {
        (Api::AzureOpenAiResponses, Some(Route::Azure(target))) => Some(target.deployment.clone()),
        (Api::AzureOpenAiResponses, _) => return Err(unrouted("Azure OpenAI address")),
        _ => None,
    };

    let hooks = transport.hooks;
    let hooked = |hook| hooks.filter(|h| h.subscribed(hook));
    let payload_hooks = hooked(Hook::BeforeProviderRequest);
    let invalid = |message| ProviderError::InvalidRequest {
        url: url.clone(),
        message,
    };
    let mut body = build_body(
        api,
        req,
        deployment,
        identity,
        flavour,
        payload_hooks.is_some(),
    )
    .await
    .map_err(invalid)?;
    // Before Bedrock signs the body, so that its signature covers what is sent.
    if let (Some(hooks), Payload::Whole(bytes)) = (payload_hooks, &body) {
        let payload = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        if let Some(replaced) = cancellable(cancel, hooks.payload(payload)).await? {
            body =
                Payload::Whole(serde_json::to_vec(&replaced).map_err(|e| invalid(e.to_string()))?);
        }
    }
    let signed = match (api, &transport.route, &body) {
        (Api::BedrockConverseStream, Some(Route::Aws(target)), Payload::Whole(bytes)) => {
            bedrock_auth(target, &url, bytes)?
        }
        (Api::BedrockConverseStream, _, _) => return Err(unrouted("AWS region or credential")),
        _ => Vec::new(),
    };
    let builder = transport
        .client
        .get()?
        .post(&url)
        .header(CONTENT_TYPE, "application/json");
    let mut builder = match body {
        Payload::Whole(bytes) => builder.body(bytes),
        // The length the client sends is the counted one; hyper then sends the chunks as they
        // come, not chunked.
        Payload::Streamed { len, body } => builder.header(CONTENT_LENGTH, len).body(body),
    };
    match api {
        Api::BedrockConverseStream => {
            for (name, value) in &signed {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        Api::AnthropicMessages => {
            builder = builder.header("anthropic-version", anthropic::VERSION);
            match (key, identity) {
                (Some(key), anthropic::Identity::ApiKey) => {
                    builder = builder.header("x-api-key", key);
                }
                (Some(key), _) => builder = builder.bearer_auth(key),
                (None, _) => {}
            }
            for (name, value) in anthropic::identity_headers(req, identity, &transport.headers) {
                builder = builder.header(name, value);
            }
        }
        Api::GoogleGenerativeAi => {
            if let Some(key) = key {
                builder = builder.header("x-goog-api-key", key);
            }
        }
        Api::AzureOpenAiResponses => {
            if let Some(key) = key {
                builder = builder.header("api-key", key);
            }
        }
        Api::OpenAiCodexResponses => {
            let account = key
                .ok_or_else(|| "no ChatGPT login or key was found".to_owned())
                .and_then(openai_codex::account_id)
                .map_err(|message| ProviderError::InvalidRequest {
                    url: url.clone(),
                    message,
                })?;
            builder = builder.bearer_auth(key.unwrap_or_default());
            for (name, value) in openai_codex::headers(account, &transport.headers) {
                builder = builder.header(name, value);
            }
        }
        Api::PiMessages => {
            builder = builder.header(reqwest::header::ACCEPT, "text/event-stream");
            if let Some(key) = key {
                builder = builder.bearer_auth(key);
            }
        }
        Api::Ollama | Api::OpenAiCompletions | Api::OpenAiResponses => {
            if let Some(key) = key {
                builder = builder.bearer_auth(key);
            }
        }
    }
    if copilot {
        for (name, value) in github_copilot::headers(req.messages, &transport.headers) {
            builder = builder.header(name, value);
        }
    }
    for (name, value) in super::session_headers(req) {
        // A configured header of the same name wins, as in Pi.
        if !transport
            .headers
            .iter()
            .any(|(h, _)| h.eq_ignore_ascii_case(name))
        {
            builder = builder.header(name, value);
        }
    }
    for (name, value) in &transport.headers {
        // The signature and the endpoint own these; a configured header must not replace them.
        let lower = name.to_ascii_lowercase();
        let reserved = lower == "authorization" || lower == "host" || lower.starts_with("x-amz-");
        if api == Api::BedrockConverseStream && reserved {
            continue;
        }
        builder = builder.header(name.as_str(), value.as_str());
    }

    let guard = Guard {
        cancel,
        idle_timeout: transport.idle_timeout,
        url: &url,
    };
    let client = transport.client.get()?;
    let mut request = builder.build().map_err(|e| send_error(&e, &url, api))?;
    if let Some(hooks) = hooked(Hook::BeforeProviderHeaders) {
        let configured = &transport.headers;
        let shown = hooks::shown(request.headers(), configured);
        if let Some(left) = cancellable(cancel, hooks.headers(shown.clone())).await? {
            hooks::apply(request.headers_mut(), &shown, left, configured, hooks);
        }
    }
    // Sent once. A pooled connection found closed before the request was written is retried by
    // the connection pool itself; once written, a request may have been delivered (a server or
    // proxy that read it and hung up), so sending it again here could bill or act twice. That
    // failure is retryable and goes through the retry policy like any other.
    let mut response = guard
        .run(client.execute(request))
        .await?
        .map_err(|e| send_error(&e, &url, api))?;
    let status = response.status();
    if let Some(hooks) = hooked(Hook::AfterProviderResponse) {
        let headers = hooks::response_headers(response.headers());
        cancellable(cancel, hooks.response(status.as_u16(), headers)).await?;
    }
    if !status.is_success() {
        let retry_after = retry_after(response.headers());
        let location = status
            .is_redirection()
            .then(|| response.headers().get(reqwest::header::LOCATION))
            .flatten()
            .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
        let error_type = response
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = read_error_body(&mut response, &guard).await?;
        if api == Api::BedrockConverseStream {
            body = bedrock::http_error_text(error_type.as_deref(), &body);
        }
        if api == Api::OpenAiResponses && flavour == Flavour::ChatGpt {
            body = openai_responses::chatgpt_error_text(&body);
        }
        if api == Api::OpenAiCodexResponses {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            body = openai_codex::http_error_text(status.as_u16(), &body, now);
        }
        if let Some(location) = location {
            body = format!(
                "redirected to {location}, another server: nova does not follow a provider's \
                 redirect to another origin, since the request carries its credentials \
                 (set baseUrl to the new address if it is right)"
            );
        }
        // Gemini says when to retry in the body rather than in a header.
        let retry_after = retry_after.or_else(|| match api {
            Api::GoogleGenerativeAi => google::retry_delay(&body),
            _ => None,
        });
        return Err(ProviderError::http(status.as_u16(), &url, &body).with_retry_after(retry_after));
    }

    let mut events = Vec::new();
    let mut meter = Meter::new(req);
    let mut hand_on = async |events: &mut Vec<ProviderEvent>| {
        let warnings = transport.warnings;
        forward(events, &mut meter, req, api, warnings, &mut on_event, &pace).await
    };
    // A reply begins with its response, as Pi has it; Anthropic's begins with its own
    // `message_start`, which carries the reply's id and input usage.
    if api != Api::AnthropicMessages {
        events.push(ProviderEvent::Start {
            response_id: None,
            usage: None,
        });
        hand_on(&mut events).await?;
    }
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ProviderError::Aborted),
            () = pace() => {}
        }
        let chunk = guard
            .run(response.chunk())
            .await?
            .map_err(|e| ProviderError::StreamCut {
                url: url.clone(),
                message: describe(&e),
            })?;
        let Some(chunk) = chunk else { break };
        let pushed = decoder.push(&chunk, &mut events);
        hand_on(&mut events).await?;
        pushed?;
    }
    let facts = decoder.facts().clone();
    let finished = decoder.finish(&mut events);
    hand_on(&mut events).await?;
    finished.map(|()| facts)
}

/// `work`, unless the request is cancelled first.
async fn cancellable<T>(
    cancel: &CancellationToken,
    work: impl Future<Output = T>,
) -> Result<T, ProviderError> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ProviderError::Aborted),
        done = work => Ok(done),
    }
}

/// A request body: whole in memory, or streamed from the shared conversation with its length
/// counted beforehand (see [`body`](super::body)).
enum Payload {
    Whole(Vec<u8>),
    Streamed { len: u64, body: reqwest::Body },
}

/// Writes the request body of `api` into `out`.
fn write_body<E: BodyEncoder>(
    api: Api,
    req: &Request<'_>,
    deployment: Option<&str>,
    identity: anthropic::Identity,
    flavour: Flavour<'_>,
    out: E,
) -> serde_json::Result<E::Output> {
    match api {
        Api::Ollama => ollama::build_body(req, out),
        Api::OpenAiCompletions => openai::build_body(req, out),
        Api::OpenAiResponses => openai_responses::build_body(req, flavour, out),
        Api::AnthropicMessages => anthropic::build_body(req, identity, out),
        Api::GoogleGenerativeAi => google::build_body(req, out),
        Api::BedrockConverseStream => bedrock::build_body(req, out),
        Api::AzureOpenAiResponses => openai_responses::build_body(
            req,
            Flavour::Azure {
                deployment: deployment.unwrap_or(&req.model.id),
            },
            out,
        ),
        Api::OpenAiCodexResponses => openai_responses::build_body(req, Flavour::Codex, out),
        Api::PiMessages => pi_messages::build_body(req, out),
    }
}

/// Serialises the request body. A long conversation (a reply of a hundred thousand tool calls
/// and their results) is serialised on a blocking thread, since it takes long enough to stall the
/// runtime's one thread; the messages are shared, so the copy handed over is a list of pointers.
/// A body larger than [`body::STREAMED_BODY_BYTES`] is streamed from there rather than held,
/// except Bedrock's, whose signature covers the bytes, and one `whole` asks for (a payload the
/// hooks see).
async fn build_body(
    api: Api,
    req: &Request<'_>,
    deployment: Option<String>,
    identity: anthropic::Identity,
    flavour: Flavour<'static>,
    whole: bool,
) -> Result<Payload, String> {
    let size = body_size_hint(req);
    if size < INLINE_BODY_BYTES {
        return write_body(api, req, deployment.as_deref(), identity, flavour, Buffer)
            .map(Payload::Whole)
            .map_err(|e| e.to_string());
    }
    let owned = Owned::from(req);
    let failed = |e: tokio::task::JoinError| format!("building the request failed: {e}");
    if size < body::STREAMED_BODY_BYTES || api == Api::BedrockConverseStream || whole {
        let built = tokio::task::spawn_blocking(move || {
            let write = |req: &Request<'_>| {
                write_body(api, req, deployment.as_deref(), identity, flavour, Buffer)
            };
            write(&owned.request())
        })
        .await
        .map_err(failed)?;
        return built.map(Payload::Whole).map_err(|e| e.to_string());
    }
    let (chunks, received) = mpsc::channel(body::CHUNKS_AHEAD);
    let (counted, len) = oneshot::channel();
    tokio::task::spawn_blocking(move || {
        let req = owned.request();
        let deployment = deployment.as_deref();
        let len =
            write_body(api, &req, deployment, identity, flavour, Writer(Counter(0))).map(|c| c.0);
        let ok = len.is_ok();
        if counted.send(len.map_err(|e| e.to_string())).is_err() || !ok {
            return;
        }
        // A failure here is the receiver gone (the request failed or was cancelled), or one that
        // the count above would have met first.
        let out = Writer(ChunkSender::new(chunks.clone()));
        if let Err(e) = write_body(api, &req, deployment, identity, flavour, out) {
            let _ = chunks.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    let len = len
        .await
        .map_err(|_| "building the request failed".to_owned())??;
    let stream = futures_util::stream::unfold(received, |mut received| async move {
        received.recv().await.map(|chunk| (chunk, received))
    });
    Ok(Payload::Streamed {
        len,
        body: reqwest::Body::wrap_stream(stream),
    })
}

/// A [`Request`]'s parts owned, to be serialised on another thread: the messages are shared,
/// so this is a list of pointers, not a copy of the conversation.
struct Owned {
    model: super::Model,
    system_prompt: String,
    messages: Vec<Arc<Message>>,
    tools: Vec<super::ToolSpec>,
    max_tokens: Option<u64>,
    thinking: Option<super::ThinkingLevel>,
    session_id: Option<(String, bool)>,
}

impl Owned {
    fn from(req: &Request<'_>) -> Owned {
        Owned {
            model: req.model.clone(),
            system_prompt: req.system_prompt.to_owned(),
            messages: req.messages.to_vec(),
            tools: req.tools.to_vec(),
            max_tokens: req.max_tokens,
            thinking: req.thinking,
            session_id: req.session_id.map(|s| (s.id.to_owned(), s.cache)),
        }
    }

    fn request(&self) -> Request<'_> {
        Request {
            model: &self.model,
            system_prompt: &self.system_prompt,
            messages: &self.messages,
            tools: &self.tools,
            max_tokens: self.max_tokens,
            thinking: self.thinking,
            session_id: self
                .session_id
                .as_ref()
                .map(|(id, cache)| super::SessionId { id, cache: *cache }),
        }
    }
}

/// Bodies expected below this are built on the runtime's thread: serialising a few MiB takes a
/// few milliseconds, less than handing the work to a blocking thread costs, whose fresh heap
/// must be faulted in and zeroed page by page for every body (measured: 1.5 ms of a 2,000-message
/// turn).
const INLINE_BODY_BYTES: usize = 4 << 20;

/// A cheap lower bound of the body's size, from the lengths of the strings it will carry: the
/// conversation's text is most of any body, and summing lengths is far cheaper than serialising.
fn body_size_hint(req: &Request<'_>) -> usize {
    let blocks = |blocks: &[ContentBlock]| -> usize {
        blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text, .. } => text.len(),
                ContentBlock::Thinking { thinking, .. } => thinking.len(),
                ContentBlock::Image { data, .. } => data.len(),
                ContentBlock::ToolCall {
                    name, arguments, ..
                } => name.len() + value_size_hint(arguments),
            })
            .sum()
    };
    let messages: usize = req
        .messages
        .iter()
        .map(|m| match &**m {
            Message::User(u) => match &u.content {
                UserContent::Text(t) => t.len(),
                UserContent::Blocks(b) => blocks(b),
            },
            Message::Assistant(a) => blocks(&a.content),
            Message::ToolResult(r) => blocks(&r.content),
            Message::CompactionSummary(s) => s.summary.len(),
            Message::BashExecution(b) => b.command.len() + b.output.len(),
            Message::Custom(c) => match &c.content {
                UserContent::Text(t) => t.len(),
                UserContent::Blocks(b) => blocks(b),
            },
        })
        .sum();
    req.system_prompt.len() + messages
}

fn value_size_hint(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(value_size_hint).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + value_size_hint(v)).sum(),
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
    }
}

/// Hands parsed events on, through the [`Meter`] that completes usage. At the end of an Ollama
/// reply, a prompt count far below the estimate is a prompt the server cut: a warning (once per
/// session), and when nothing came back, the turn's error too (which reads as an overflow, so
/// the agent compacts and tries again). Paced by `pace` too: one frame may carry a hundred
/// thousand tool calls.
async fn forward<F: Future<Output = ()>>(
    events: &mut Vec<ProviderEvent>,
    meter: &mut Meter,
    req: &Request<'_>,
    api: Api,
    warnings: &Warnings,
    on_event: &mut impl FnMut(ProviderEvent),
    pace: &impl Fn() -> F,
) -> Result<(), ProviderError> {
    let mut pacer = Pacer::default();
    for event in events.drain(..) {
        pacer.tick(pace).await;
        if matches!(event, ProviderEvent::Finish(_)) && api == Api::Ollama {
            let cut = meter.reported_prompt();
            if let Some(message) = ollama::truncation(meter.prompt_estimate(), cut) {
                warnings.warn_once(ollama::TRUNCATED, &format!("warning: {message}"));
                if meter.reply_is_empty() {
                    return Err(ProviderError::Api(message));
                }
            }
        }
        meter.pass(req, event, on_event);
    }
    Ok(())
}

/// The names of the models an Ollama server has pulled (`GET /api/tags`).
pub async fn list_ollama_models(
    client: &reqwest::Client,
    base_url: &str,
    timeout: Duration,
) -> Result<Vec<String>, ProviderError> {
    #[derive(Deserialize)]
    struct Tags {
        #[serde(default)]
        models: Vec<Tag>,
    }
    #[derive(Deserialize)]
    struct Tag {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        model: Option<String>,
    }

    let url = format!("{}/api/tags", ollama::root(base_url));
    let tags: Tags = json_reply(client.get(&url), &url, timeout).await?;
    Ok(tags
        .models
        .into_iter()
        .filter_map(|t| t.name.or(t.model))
        .collect())
}

/// The context length `model` was trained for, as an Ollama server describes it
/// (`POST /api/show`: `model_info["<architecture>.context_length"]`); `None` when it says
/// nothing about it.
pub async fn ollama_context_length(
    client: &reqwest::Client,
    base_url: &str,
    model: &str,
    timeout: Duration,
) -> Result<Option<u64>, ProviderError> {
    #[derive(Deserialize)]
    struct Show {
        #[serde(default)]
        model_info: serde_json::Map<String, serde_json::Value>,
    }

    let url = format!("{}/api/show", ollama::root(base_url));
    let request = client
        .post(&url)
        .header(CONTENT_TYPE, "application/json")
        .body(serde_json::json!({ "model": model }).to_string());
    let show: Show = json_reply(request, &url, timeout).await?;
    let arch = show
        .model_info
        .get("general.architecture")
        .and_then(|a| a.as_str());
    let key = arch.map(|a| format!("{a}.context_length"));
    let length = key
        .and_then(|k| show.model_info.get(&k))
        .or_else(|| {
            show.model_info
                .iter()
                .find(|(k, _)| k.ends_with(".context_length"))
                .map(|(_, v)| v)
        })
        .and_then(serde_json::Value::as_u64);
    Ok(length)
}

/// Sends one of Ollama's small JSON requests and decodes the reply, all within `timeout`.
async fn json_reply<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    url: &str,
    timeout: Duration,
) -> Result<T, ProviderError> {
    let work = async {
        let response = request
            .send()
            .await
            .map_err(|e| send_error(&e, url, Api::Ollama))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| ProviderError::StreamCut {
                url: url.to_owned(),
                message: describe(&e),
            })?;
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(ProviderError::http(status.as_u16(), url, &text));
        }
        serde_json::from_str(&text).map_err(|e| ProviderError::invalid_json(&text, &e))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| ProviderError::IdleTimeout {
            url: url.to_owned(),
            after: timeout,
        })?
}

/// Dispatch over the wire formats' accumulators.
enum Decoder {
    Ollama(ollama::Accumulator),
    OpenAi(openai::Accumulator),
    Responses(openai_responses::Accumulator),
    Anthropic(anthropic::Accumulator),
    Google(google::Accumulator),
    Bedrock(bedrock::Accumulator),
    PiMessages(pi_messages::Accumulator),
}

impl Decoder {
    fn push(&mut self, bytes: &[u8], out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        match self {
            Decoder::Ollama(a) => a.push(bytes, out),
            Decoder::OpenAi(a) => a.push(bytes, out),
            Decoder::Responses(a) => a.push(bytes, out),
            Decoder::Anthropic(a) => a.push(bytes, out),
            Decoder::Google(a) => a.push(bytes, out),
            Decoder::Bedrock(a) => a.push(bytes, out),
            Decoder::PiMessages(a) => a.push(bytes, out),
        }
    }

    fn facts(&self) -> &super::ReplyFacts {
        match self {
            Decoder::Ollama(a) => a.facts(),
            Decoder::OpenAi(a) => a.facts(),
            Decoder::Responses(a) => a.facts(),
            Decoder::Anthropic(a) => a.facts(),
            Decoder::Google(a) => a.facts(),
            Decoder::Bedrock(a) => a.facts(),
            Decoder::PiMessages(a) => a.facts(),
        }
    }

    fn finish(self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        match self {
            Decoder::Ollama(a) => a.finish(out),
            Decoder::OpenAi(a) => a.finish(out),
            Decoder::Responses(a) => a.finish(out),
            Decoder::Anthropic(a) => a.finish(out),
            Decoder::Google(a) => a.finish(out),
            Decoder::Bedrock(a) => a.finish(out),
            Decoder::PiMessages(a) => a.finish(out),
        }
    }
}

/// The headers that authenticate a Bedrock request: a bearer token, or a SigV4 signature over
/// the URL, the content type and the body.
fn bedrock_auth(
    target: &aws::Target,
    url: &str,
    body: &[u8],
) -> Result<Vec<(String, String)>, ProviderError> {
    match &target.credential {
        aws::Credential::Bearer(token) => Ok(vec![(
            "authorization".to_owned(),
            format!("Bearer {token}"),
        )]),
        aws::Credential::Keys(keys) => aws::sign(
            keys,
            &target.region,
            url,
            &[("content-type", "application/json")],
            body,
            std::time::SystemTime::now(),
        )
        .map_err(|message| ProviderError::InvalidRequest {
            url: url.to_owned(),
            message,
        }),
    }
}

/// What every await in [`stream`] is raced against.
struct Guard<'a> {
    cancel: &'a CancellationToken,
    idle_timeout: Duration,
    url: &'a str,
}

impl Guard<'_> {
    async fn run<T>(&self, work: impl Future<Output = T>) -> Result<T, ProviderError> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(ProviderError::Aborted),
            done = tokio::time::timeout(self.idle_timeout, work) => {
                done.map_err(|_| ProviderError::IdleTimeout {
                    url: self.url.to_string(),
                    after: self.idle_timeout,
                })
            }
        }
    }
}

/// Reads the start of an error response; a body that fails mid-way still yields what came.
async fn read_error_body(
    response: &mut reqwest::Response,
    guard: &Guard<'_>,
) -> Result<String, ProviderError> {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match guard.run(response.chunk()).await? {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The delay the server asked for: `retry-after-ms` (OpenAI's, more precise) when present,
/// else `Retry-After`. Only the seconds form of the latter is read: model servers do not send
/// dates.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name| -> Option<f64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
    let seconds = number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number(RETRY_AFTER.as_str()))?;
    Duration::try_from_secs_f64(seconds).ok()
}

fn send_error(e: &reqwest::Error, url: &str, api: Api) -> ProviderError {
    if e.is_builder() {
        return ProviderError::InvalidRequest {
            url: url.to_string(),
            message: describe(e),
        };
    }
    if e.is_connect() && is_connection_refused(e) {
        return ProviderError::ConnectionRefused {
            url: url.to_string(),
            hint: (api == Api::Ollama).then(|| OLLAMA_HINT.to_string()),
        };
    }
    ProviderError::Connection {
        url: url.to_string(),
        message: describe(e),
    }
}

fn is_connection_refused(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// An error with its causes: reqwest's own text ("error sending request") hides the reason.
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(err) = source {
        let part = err.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = err.source();
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::{Model, StopReason};
    use crate::provider::ErrorKind;
    use crate::provider::prepare::tests::{model, user_text};
    use ProviderEvent::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// One step of a scripted server reply.
    enum Step {
        Send(String),
        Sleep(u64),
    }
    use Step::*;

    /// Serves one connection on 127.0.0.1 with a scripted reply, then closes it. Returns the
    /// base URL and a handle yielding the raw request it received.
    async fn serve(steps: Vec<Step>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let handle = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let request = read_request(&mut socket).await;
            for step in steps {
                match step {
                    Send(bytes) => {
                        if socket.write_all(bytes.as_bytes()).await.is_err() {
                            break;
                        }
                        let _ = socket.flush().await;
                    }
                    Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                }
            }
            request
        });
        (base, handle)
    }

    /// Reads one HTTP request (head and `Content-Length` body) from a test server's socket.
    pub(crate) async fn read_request(socket: &mut TcpStream) -> String {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = socket.read(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf);
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text[..end]
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    break;
                }
            }
        }
        String::from_utf8(buf).unwrap()
    }

    fn with_length(status_line: &str, body: &str) -> String {
        format!(
            "{status_line}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    /// One chunk of a `Transfer-Encoding: chunked` body.
    fn chunk(data: &str) -> String {
        format!("{:x}\r\n{data}\r\n", data.len())
    }

    const SSE_HEAD: &str =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

    fn model_at(api: &str, base: &str) -> Model {
        Model {
            base_url: base.to_string(),
            ..model(api, true)
        }
    }

    async fn run(
        model: &Model,
        cancel: &CancellationToken,
        idle_ms: u64,
    ) -> (
        Vec<ProviderEvent>,
        Result<crate::provider::ReplyFacts, ProviderError>,
    ) {
        let messages = [Arc::new(user_text("hi"))];
        let req = Request {
            model,
            system_prompt: "sys",
            messages: &messages,
            tools: &[],
            max_tokens: None,
            thinking: None,
            session_id: None,
        };
        let client = SharedClient::default();
        let warnings = Warnings::default();
        let transport = Transport {
            client: &client,
            idle_timeout: Duration::from_millis(idle_ms),
            api_key: Some("sk-test".into()),
            headers: vec![("X-Extra".into(), "yes".into())],
            route: None,
            warnings: &warnings,
            hooks: None,
        };
        let mut events = Vec::new();
        let result = stream(&transport, &req, cancel, |e| events.push(e)).await;
        // Every reply that got through begins with its start, which the tests below leave out.
        if !events.is_empty() {
            assert!(
                matches!(events.remove(0), ProviderEvent::Start { .. }),
                "a reply must begin with its start"
            );
        }
        (events, result)
    }

    #[tokio::test]
    async fn openai_success_across_split_writes() {
        let (base, server) = serve(vec![
            Send(SSE_HEAD.into()),
            Send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel".into()),
            Sleep(30),
            Send("lo\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n".into()),
            Sleep(30),
            Send("data: [DONE]\n\n".into()),
        ])
        .await;
        let m = model_at("openai-completions", &format!("{base}/v1"));
        let (events, result) = run(&m, &CancellationToken::new(), 5000).await;
        result.unwrap();
        // The server sent no usage: nova's estimate stands in, before `Finish`.
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0], Text("Hello".into()));
        assert!(matches!(&events[1], ProviderEvent::Usage(u) if u.output == 2 && u.input > 0));
        assert_eq!(events[2], Finish(StopReason::Stop));
        let request = server.await.unwrap();
        assert!(
            request.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{request}"
        );
        let lower = request.to_lowercase();
        assert!(
            lower.contains("authorization: bearer sk-test\r\n"),
            "{request}"
        );
        assert!(lower.contains("x-extra: yes\r\n"), "{request}");
        assert!(
            lower.contains("content-type: application/json\r\n"),
            "{request}"
        );
        let body: serde_json::Value =
            serde_json::from_str(request.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["messages"][0]["content"], "sys");
        assert_eq!(body["stream"], true);
    }

    /// A server that reads the whole request and hangs up without a word may have acted on it:
    /// the request is sent once, and the failure is left to the retry policy.
    #[tokio::test]
    async fn a_request_read_and_hung_up_on_is_sent_once_and_fails_retryably() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut first, _) = listener.accept().await.unwrap();
            read_request(&mut first).await;
            drop(first);
            // A second request would arrive well within this wait.
            tokio::time::timeout(Duration::from_millis(500), listener.accept())
                .await
                .is_ok()
        });
        let m = model_at("openai-completions", &format!("{base}/v1"));
        let (_, result) = run(&m, &CancellationToken::new(), 5000).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Retryable, "{err}");
        assert!(!server.await.unwrap(), "the request was sent again");
    }

    #[tokio::test]
    async fn ollama_success_chunked() {
        let (base, server) = serve(vec![
            Send("HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n".into()),
            Send(chunk("{\"message\":{\"content\":\"Hi\"}}\n")),
            Send(chunk("{\"done\":true}")),
            Send("0\r\n\r\n".into()),
        ])
        .await;
        let m = model_at("ollama", &base);
        let (events, result) = run(&m, &CancellationToken::new(), 5000).await;
        result.unwrap();
        assert_eq!(events[0], Text("Hi".into()));
        assert_eq!(events.last(), Some(&Finish(StopReason::Stop)));
        assert!(
            server
                .await
                .unwrap()
                .starts_with("POST /api/chat HTTP/1.1\r\n")
        );
    }

    #[tokio::test]
    async fn http_error_keeps_the_body() {
        let (base, _server) = serve(vec![Send(with_length(
            "HTTP/1.1 500 Internal Server Error",
            "{\"error\":\"model exploded\"}\n",
        ))])
        .await;
        let m = model_at("ollama", &base);
        let (events, result) = run(&m, &CancellationToken::new(), 5000).await;
        assert!(events.is_empty());
        let err = result.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("HTTP 500 from {base}/api/chat: {{\"error\":\"model exploded\"}}")
        );
        assert_eq!(err.kind(), ErrorKind::Retryable);
    }

    #[tokio::test]
    async fn http_error_keeps_retry_after() {
        let (base, _server) = serve(vec![Send(
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 4\r\n\
             Connection: close\r\n\r\nbusy"
                .into(),
        )])
        .await;
        let m = model_at("ollama", &base);
        let (_, result) = run(&m, &CancellationToken::new(), 5000).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Retryable);
        assert!(
            matches!(err, ProviderError::Http { status: 429, retry_after: Some(d), .. } if d == Duration::from_secs(7)),
            "{err:?}"
        );
        let (base, _server) = serve(vec![Send(
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nretry-after-ms: 1500\r\n\
             Content-Length: 4\r\nConnection: close\r\n\r\nbusy"
                .into(),
        )])
        .await;
        let m = model_at("ollama", &base);
        let (_, result) = run(&m, &CancellationToken::new(), 5000).await;
        assert!(
            matches!(result, Err(ProviderError::Http { retry_after: Some(d), .. }) if d == Duration::from_millis(1500)),
            "{result:?}"
        );
        let (base, _server) = serve(vec![Send(with_length("HTTP/1.1 503 Busy", "busy"))]).await;
        let m = model_at("ollama", &base);
        let (_, result) = run(&m, &CancellationToken::new(), 5000).await;
        assert!(matches!(
            result,
            Err(ProviderError::Http {
                retry_after: None,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn connection_refused_names_the_url() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let m = model_at("ollama", &base);
        let (_, result) = run(&m, &CancellationToken::new(), 5000).await;
        assert_eq!(
            result.unwrap_err().to_string(),
            format!("connection refused by {base}/api/chat ({OLLAMA_HINT})")
        );
        let m = model_at("openai-completions", &base);
        let (_, result) = run(&m, &CancellationToken::new(), 5000).await;
        let err = result.unwrap_err();
        assert_eq!(
            err,
            ProviderError::ConnectionRefused {
                url: format!("{base}/chat/completions"),
                hint: None
            }
        );
        assert_eq!(err.kind(), ErrorKind::Retryable);
    }

    #[tokio::test]
    async fn stall_hits_the_idle_timeout() {
        let (base, _server) = serve(vec![
            Send(SSE_HEAD.into()),
            Send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n".into()),
            Sleep(5000),
        ])
        .await;
        let m = model_at("openai-completions", &base);
        let started = std::time::Instant::now();
        let (events, result) = run(&m, &CancellationToken::new(), 300).await;
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(events, [Text("Hi".into())]);
        assert_eq!(
            result.unwrap_err().to_string(),
            format!("no data from {base}/chat/completions for 0.3 s")
        );
    }

    #[tokio::test]
    async fn stall_before_headers_hits_the_idle_timeout() {
        let (base, _server) = serve(vec![Sleep(5000)]).await;
        let m = model_at("ollama", &base);
        let (_, result) = run(&m, &CancellationToken::new(), 300).await;
        assert!(matches!(result, Err(ProviderError::IdleTimeout { .. })));
    }

    #[tokio::test]
    async fn cut_streams() {
        // Chunked body closed without its last chunk: the transport reports the cut.
        let (base, _server) = serve(vec![
            Send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".into()),
            Send(chunk("{\"message\":{\"content\":\"Hi\"}}\n")),
        ])
        .await;
        let m = model_at("ollama", &base);
        let (events, result) = run(&m, &CancellationToken::new(), 5000).await;
        assert_eq!(events, [Text("Hi".into())]);
        let err = result.unwrap_err();
        assert!(matches!(err, ProviderError::StreamCut { .. }), "{err:?}");
        assert_eq!(err.kind(), ErrorKind::Retryable);

        // A cleanly closed body that never finished the reply.
        let (base, _server) = serve(vec![
            Send(SSE_HEAD.into()),
            Send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n".into()),
        ])
        .await;
        let m = model_at("openai-completions", &base);
        let (events, result) = run(&m, &CancellationToken::new(), 5000).await;
        assert_eq!(events, [Text("Hi".into())]);
        assert_eq!(result, Err(ProviderError::EndedEarly));
    }

    #[tokio::test]
    async fn cancellation_aborts_promptly() {
        let (base, _server) = serve(vec![
            Send(SSE_HEAD.into()),
            Send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n".into()),
            Sleep(5000),
        ])
        .await;
        let m = model_at("openai-completions", &base);
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            trigger.cancel();
        });
        let started = std::time::Instant::now();
        let (events, result) = run(&m, &cancel, 10_000).await;
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(events, [Text("Hi".into())]);
        assert_eq!(result, Err(ProviderError::Aborted));
    }

    #[tokio::test]
    async fn anthropic_sends_its_key_and_version() {
        let (base, server) = serve(vec![
            Send(SSE_HEAD.into()),
            Send("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n".into()),
            Send("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into()),
            Sleep(30),
            Send("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n".into()),
            Send("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into()),
        ])
        .await;
        let m = model_at("anthropic-messages", &base);
        let (events, result) = run(&m, &CancellationToken::new(), 5000).await;
        result.unwrap();
        assert_eq!(events[0], Text("Hi".into()));
        assert_eq!(events.last(), Some(&Finish(StopReason::Stop)));
        let request = server.await.unwrap();
        assert!(
            request.starts_with("POST /v1/messages HTTP/1.1\r\n"),
            "{request}"
        );
        let lower = request.to_lowercase();
        assert!(lower.contains("x-api-key: sk-test\r\n"), "{request}");
        assert!(
            lower.contains("anthropic-version: 2023-06-01\r\n"),
            "{request}"
        );
        assert!(!lower.contains("authorization:"), "{request}");
        assert!(lower.contains("x-extra: yes\r\n"), "{request}");
    }

    #[tokio::test]
    async fn ollama_model_list() {
        let (base, server) = serve(vec![Send(with_length(
            "HTTP/1.1 200 OK",
            r#"{"models":[{"name":"qwen3:8b","model":"qwen3:8b","size":1},{"model":"llava:7b"}]}"#,
        ))])
        .await;
        let names = list_ollama_models(
            SharedClient::default().get().unwrap(),
            &format!("{base}/v1/"),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(names, ["qwen3:8b", "llava:7b"]);
        assert!(
            server
                .await
                .unwrap()
                .starts_with("GET /api/tags HTTP/1.1\r\n")
        );
    }
}
