//! An extension's `ctx.ui` dialogs in an editor, answered through the extensions' one dialog
//! path ([`Agent::answer_dialog`], as a client's `extension_ui_response`):
//!
//! - `confirm` is a `session/request_permission` with an allow and a reject option;
//! - `select` is one with an option per choice (ACP has no neutral option kind, so each is
//!   `allow_once`);
//! - `input` and `editor` are a one-field `elicitation/create` form when the client offered
//!   forms (`initialize`), and are otherwise answered at once with nothing, as in Pi's
//!   non-interactive modes (the extension gets `undefined`).
//!
//! Neither request names a tool call of the model's (an extension asks from a hook or a
//! command, and its call, if any, is not known here): the dialog's own id stands for one.
//! A client that cancels, fails or declines gives the extension its default answer.

use crate::agent::Agent;
use crate::protocol::UiRequest;
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use serde_json::{Value, json};

const YES: &str = "yes";
const NO: &str = "no";
/// The one field of an `input`/`editor` form.
const FIELD: &str = "value";

/// Whether `method` is a dialog (it waits for an answer), not fire-and-forget UI.
pub fn is_dialog(method: &str) -> bool {
    matches!(method, "confirm" | "select" | "input" | "editor")
}

/// Asks the client `request`'s question and hands the answer to the extensions.
pub async fn ask(
    agent: Agent,
    cx: ConnectionTo<Client>,
    session_id: acp::SessionId,
    request: UiRequest,
    forms: bool,
) {
    let answer = match request.method.as_str() {
        "confirm" => {
            let options = vec![
                acp::PermissionOption::new(YES, "Yes", acp::PermissionOptionKind::AllowOnce),
                acp::PermissionOption::new(NO, "No", acp::PermissionOptionKind::RejectOnce),
            ];
            permission(&cx, session_id, &request, options)
                .await
                .map(|chosen| json!({ "confirmed": chosen == YES }))
        }
        "select" => {
            let choices = request.options.clone().unwrap_or_default();
            let options = choices
                .iter()
                .enumerate()
                .map(|(i, choice)| {
                    acp::PermissionOption::new(
                        choice_id(i),
                        choice.clone(),
                        acp::PermissionOptionKind::AllowOnce,
                    )
                })
                .collect();
            permission(&cx, session_id, &request, options)
                .await
                .and_then(|chosen| {
                    let i = (0..choices.len()).find(|&i| choice_id(i) == chosen)?;
                    Some(json!({ "value": choices[i] }))
                })
        }
        "input" | "editor" if forms => form(&cx, session_id, &request)
            .await
            .map(|value| json!({ "value": value })),
        _ => None,
    };
    let mut answer = answer.unwrap_or_else(|| json!({ "cancelled": true }));
    answer["id"] = Value::String(request.id);
    // Fails only once the extensions are gone, and with them the dialog.
    let _ = agent.answer_dialog(answer);
}

fn choice_id(i: usize) -> String {
    format!("choice-{i}")
}

/// The option the client chose; `None` when it cancelled or the request failed.
async fn permission(
    cx: &ConnectionTo<Client>,
    session_id: acp::SessionId,
    request: &UiRequest,
    options: Vec<acp::PermissionOption>,
) -> Option<String> {
    let mut fields =
        acp::ToolCallUpdateFields::new().title(request.title.clone().unwrap_or_default());
    if let Some(message) = &request.message {
        fields = fields.content(vec![acp::ToolCallContent::Content(acp::Content::new(
            acp::ContentBlock::from(message.clone()),
        ))]);
    }
    let call = acp::ToolCallUpdate::new(request.id.clone(), fields);
    let asked = cx
        .send_request(acp::RequestPermissionRequest::new(
            session_id, call, options,
        ))
        .block_task()
        .await;
    match asked {
        Ok(response) => match response.outcome {
            acp::RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
            _ => None,
        },
        Err(e) => {
            tracing::debug!("an extension's dialog: session/request_permission failed: {e}");
            None
        }
    }
}

/// The text the user entered in a one-field form; `None` when they declined or cancelled.
async fn form(
    cx: &ConnectionTo<Client>,
    session_id: acp::SessionId,
    request: &UiRequest,
) -> Option<String> {
    let mut field = acp::StringPropertySchema::new();
    if let Some(hint) = &request.placeholder {
        field = field.description(hint.clone());
    }
    if let Some(prefill) = &request.prefill {
        field = field.default_value(prefill.clone());
    }
    let schema = acp::ElicitationSchema::new().property(FIELD, field, true);
    let mode = acp::ElicitationFormMode::new(acp::ElicitationSessionScope::new(session_id), schema);
    let message = request.title.clone().unwrap_or_default();
    let asked = cx
        .send_request(acp::CreateElicitationRequest::new(
            acp::ElicitationMode::Form(mode),
            message,
        ))
        .block_task()
        .await;
    match asked {
        Ok(response) => match response.action {
            acp::ElicitationAction::Accept(accepted) => match accepted.content?.remove(FIELD)? {
                acp::ElicitationContentValue::String(text) => Some(text),
                _ => None,
            },
            _ => None,
        },
        Err(e) => {
            tracing::debug!("an extension's dialog: elicitation/create failed: {e}");
            None
        }
    }
}
