//! The endpoints: `GET /health`, `GET /metrics`; `POST /v1/sessions {cwd, model?, resume?}`, `GET
//! /v1/sessions`, `DELETE /v1/sessions/{id}`; `GET /v1/sessions/{id}/rpc[?since=N][&client=K]`,
//! the WebSocket that speaks nova's RPC. Errors are `{"error": "…"}` with a status that says
//! whose fault it is.

use super::journal::{ClientKey, Journal};
use super::{Served, Server, auth, connection, editor, frame};
use crate::config::{ModelChoice, Resume, SessionSpec};
use crate::frontend;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

type Shared = Arc<Server>;

/// The routes; `tcp` ones also demand the token.
pub(super) fn router(server: Shared, tcp: bool) -> Router {
    let app = Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/sessions", post(open).get(list))
        .route("/v1/sessions/{id}", delete(close))
        .route("/v1/sessions/{id}/rpc", get(attach))
        .route("/v1/acp", get(editor))
        .layer(middleware::from_fn_with_state(server.clone(), guard));
    let app = if tcp {
        app.layer(middleware::from_fn_with_state(server.clone(), bearer))
    } else {
        app
    };
    app.with_state(server)
}

/// A refusal: its status and what to tell the client.
pub(super) struct Refusal(StatusCode, pub(super) String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

/// Every TCP request: the bearer token, or 401 before anything else is looked at.
async fn bearer(State(server): State<Shared>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if server.token.admits(given) {
        return next.run(request).await;
    }
    let mut refused = Refusal(
        StatusCode::UNAUTHORIZED,
        format!(
            "missing or wrong bearer token (Authorization: Bearer …; see {} or the token file \
             nova serve named)",
            auth::TOKEN_VAR
        ),
    )
    .into_response();
    refused.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    refused
}

/// Every request: a browser's `Origin` must be on the allowlist.
async fn guard(State(server): State<Shared>, request: Request, next: Next) -> Response {
    let origin = request.headers().get(header::ORIGIN).map(|v| v.as_bytes());
    if auth::origin_allowed(origin, &server.origins) {
        return next.run(request).await;
    }
    Refusal(
        StatusCode::FORBIDDEN,
        "this Origin may not use nova serve (see --allow-origin)".to_owned(),
    )
    .into_response()
}

/// 200 while serving, 503 once shutting down (so a load balancer stops sending sessions).
async fn health(State(server): State<Shared>) -> (StatusCode, Json<Value>) {
    let sessions = server.runtime.live().list().len();
    if server.draining() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "shutting_down", "sessions": sessions })),
        )
    } else {
        (
            StatusCode::OK,
            Json(json!({ "status": "ok", "sessions": sessions })),
        )
    }
}

/// The figures in Prometheus' text format ([`super::metrics`]); over TCP it needs the token,
/// as every request does (a scraper sends it as a bearer token).
async fn metrics(State(server): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, super::metrics::CONTENT_TYPE)],
        server.metrics(),
    )
        .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenRequest {
    cwd: PathBuf,
    /// `provider/id`, or an id alone.
    model: Option<String>,
    /// A stored session's id (as `GET /v1/sessions` lists it) to continue.
    resume: Option<String>,
}

/// Opens a session (or, asked to resume one that is live, answers with it).
async fn open(
    State(server): State<Shared>,
    body: Result<Json<OpenRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Refusal> {
    if server.draining() {
        return Err(shutting_down());
    }
    let Json(req) = body.map_err(|e| Refusal(StatusCode::BAD_REQUEST, e.body_text()))?;
    let cwd = server.allowed_cwd(&req.cwd)?;
    if let Some(id) = &req.resume
        && let Some(live) = server.runtime.live().find(id)
    {
        return Ok((StatusCode::OK, Json(server.describe_live(&live))));
    }
    let mut spec = SessionSpec {
        resume: req.resume.map_or(Resume::New, Resume::Id),
        model: req.model.map(|m| match m.split_once('/') {
            Some((provider, id)) => ModelChoice {
                provider: Some(provider.to_owned()),
                id: id.to_owned(),
            },
            None => ModelChoice {
                provider: None,
                id: m,
            },
        }),
        ..SessionSpec::new(cwd)
    };
    frontend::vote_on_trust(
        &server.runtime,
        &mut spec,
        crate::exthost::Mode::Rpc,
        |text| tracing::warn!("{text}"),
    )
    .await;
    let prepared = server
        .runtime
        .prepare(&spec)
        .map_err(|e| Refusal(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    let warnings = prepared.warnings.clone();
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    let extensions = frontend::extension_spec(&prepared, crate::exthost::Mode::Rpc);
    let journal = Arc::new(Journal::default());
    let (live, subscription) = server.runtime.live().open(prepared, journal.clone());
    // Answered once the extensions have loaded, so that the first get_commands lists theirs;
    // a host that cannot start fails this session only.
    let host = match extensions {
        Some(spec) => match frontend::start_host(spec, &live).await {
            Ok(host) => Some(host),
            Err(e) => {
                drop(subscription);
                server.runtime.live().close_exactly(&live).await;
                return Err(Refusal(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()));
            }
        },
        None => None,
    };
    server.meter(&live);
    server.journals().insert(
        live.id().to_owned(),
        Served {
            journal,
            _subscription: subscription,
            _extensions: host,
        },
    );
    let mut described = server.describe_live(&live);
    described["warnings"] = json!(warnings);
    Ok((StatusCode::CREATED, Json(described)))
}

/// The live sessions, then the stored ones under the roots, each with `live` and `clients`.
async fn list(State(server): State<Shared>) -> Json<Value> {
    let live = server.runtime.live().list();
    let mut listed: Vec<Value> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for session in &live {
        seen.insert(session.id().to_owned(), listed.len());
        listed.push(server.describe_live(session));
    }
    for stored in server.runtime.list_sessions(None).await {
        if !server.under_roots(std::path::Path::new(&stored.cwd)) {
            continue;
        }
        let Ok(mut value) = serde_json::to_value(&stored) else {
            continue;
        };
        match seen.get(&stored.id) {
            Some(&i) => {
                if let (Some(entry), Value::Object(fields)) = (listed.get_mut(i), value) {
                    for (k, v) in fields {
                        entry[k] = v;
                    }
                }
            }
            None => {
                value["live"] = json!(false);
                value["clients"] = json!(0);
                listed.push(value);
            }
        }
    }
    Json(json!({ "sessions": listed }))
}

async fn close(
    State(server): State<Shared>,
    Path(id): Path<String>,
) -> Result<StatusCode, Refusal> {
    if server.close_session(&id).await {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_live(&id))
    }
}

/// The upgrade's answer: the number the client's stream starts after.
pub(super) const SINCE_HEADER: &str = "nova-since";

#[derive(Deserialize)]
struct AttachQuery {
    /// The last `seq` the client saw: it receives every later record first.
    since: Option<u64>,
    /// The client's own key, the same on every reconnect, so that responses it missed are
    /// replayed to it.
    client: Option<String>,
}

async fn attach(
    State(server): State<Shared>,
    Path(id): Path<String>,
    query: Result<Query<AttachQuery>, axum::extract::rejection::QueryRejection>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, Refusal> {
    let Query(query) = query.map_err(|e| Refusal(StatusCode::BAD_REQUEST, e.body_text()))?;
    let live = server
        .runtime
        .live()
        .find(&id)
        .ok_or_else(|| not_live(&id))?;
    let journal = server.journal(&live);
    let client: ClientKey = query
        .client
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
        .into();
    // Without `since`, the live stream: the records after the newest now. The answer says
    // which number that was, so a client that loses the connection before its first record
    // can still ask for exactly what followed.
    let since = query.since.unwrap_or_else(|| journal.newest());
    let mut response = upgrade
        .max_message_size(frame::CEILING)
        .max_frame_size(frame::CEILING)
        .on_upgrade(move |socket| connection::serve(socket, live, journal, client, since));
    response
        .headers_mut()
        .insert(SINCE_HEADER, header::HeaderValue::from(since));
    Ok(response)
}

/// An ACP client: one JSON-RPC message per text frame ([`editor`](super::editor)).
async fn editor(
    State(server): State<Shared>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, Refusal> {
    if server.draining() {
        return Err(shutting_down());
    }
    Ok(upgrade
        .max_message_size(frame::CEILING)
        .max_frame_size(frame::CEILING)
        .on_upgrade(move |socket| editor::serve(server, socket)))
}

fn shutting_down() -> Refusal {
    Refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "nova serve is shutting down: open the session on another server".to_owned(),
    )
}

fn not_live(id: &str) -> Refusal {
    Refusal(
        StatusCode::NOT_FOUND,
        format!("no live session {id}: open it with POST /v1/sessions (resume: \"{id}\")"),
    )
}

impl Server {
    /// `cwd`, canonical, when it lies under a root.
    pub(super) fn allowed_cwd(&self, cwd: &std::path::Path) -> Result<PathBuf, Refusal> {
        let refuse = |why: String| Refusal(StatusCode::FORBIDDEN, why);
        if !cwd.is_absolute() {
            return Err(Refusal(
                StatusCode::BAD_REQUEST,
                format!("cwd must be an absolute path, got {}", cwd.display()),
            ));
        }
        let canonical = std::fs::canonicalize(cwd).map_err(|e| {
            Refusal(
                StatusCode::BAD_REQUEST,
                format!("cwd {}: {e}", cwd.display()),
            )
        })?;
        if !canonical.is_dir() {
            return Err(Refusal(
                StatusCode::BAD_REQUEST,
                format!("cwd {}: not a directory", cwd.display()),
            ));
        }
        if !self.under_roots(&canonical) {
            return Err(refuse(format!(
                "cwd {} is outside the directories this server may open sessions in (--root)",
                cwd.display()
            )));
        }
        Ok(canonical)
    }

    pub(super) fn under_roots(&self, dir: &std::path::Path) -> bool {
        self.roots.iter().any(|root| dir.starts_with(root))
    }

    /// The live session's journal, made now for a session opened elsewhere (over ACP).
    fn journal(&self, live: &Arc<crate::agent::Live>) -> Arc<Journal> {
        self.journals()
            .entry(live.id().to_owned())
            .or_insert_with(|| {
                let journal = Arc::new(Journal::default());
                let subscription = live.subscribe(journal.clone());
                // Its extension host is the ACP connection's, which opened it.
                Served {
                    journal,
                    _subscription: subscription,
                    _extensions: None,
                }
            })
            .journal
            .clone()
    }

    fn describe_live(&self, live: &crate::agent::Live) -> Value {
        let clients = self.clients(live.id());
        json!({
            "id": live.id(),
            "cwd": live.cwd(),
            "live": true,
            "clients": clients,
        })
    }
}
