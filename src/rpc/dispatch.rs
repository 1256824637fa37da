//! Commands → agent calls → exactly one response each. Everything here is synchronous except
//! `abort`, whose response waits (in its own task) for the run's final events.

use super::images;
use super::parse::{Parsed, parse_record};
use super::reader::MAX_RECORD;
use super::writer::Outbox;
use crate::agent::{Agent, Prompted};
use crate::protocol::{Command, Response};
use serde::Serialize;
use serde_json::{Value, json};

pub fn oversized_response() -> Response {
    Response::error(
        None,
        "parse",
        format!(
            "Record exceeded the {} MiB limit; it was discarded up to the next newline",
            MAX_RECORD / (1024 * 1024)
        ),
    )
}

pub fn dispatch(agent: &Agent, out: &Outbox, record: &[u8]) {
    let (id, name, command) = match parse_record(record) {
        Parsed::Blank => return,
        Parsed::Error(response) => return out.respond(response),
        Parsed::Command { id, name, command } => (id, name, command),
    };
    let result: Result<Option<Value>, String> = match command {
        Command::Prompt {
            message,
            images,
            streaming_behavior,
        } => match images::validate(images)
            .and_then(|images| agent.prompt(message, images, streaming_behavior))
        {
            Ok(Prompted::Started(run)) => {
                out.respond(Response::ok(
                    id,
                    name,
                    Some(json!({"disposition": "started"})),
                ));
                return run.start();
            }
            Ok(Prompted::Queued) => Ok(Some(json!({"disposition": "queued"}))),
            Err(e) => Err(e),
        },
        Command::Steer { message, images } => images::validate(images)
            .map(|images| agent.steer(message, images))
            .map(|()| None),
        Command::FollowUp { message, images } => images::validate(images)
            .map(|images| agent.follow_up(message, images))
            .map(|()| None),
        Command::Abort {} => {
            let finished = agent.abort();
            let out = out.clone();
            tokio::spawn(async move {
                finished.await;
                out.respond(Response::ok(id, name, None));
            });
            return;
        }
        Command::GetState {} => data(agent.wire_state()),
        Command::GetMessages {} => {
            return out.respond(Response::messages(id, name, agent.messages()));
        }
        Command::GetLastAssistantText {} => {
            Ok(Some(json!({ "text": agent.last_assistant_text() })))
        }
        Command::NewSession { parent_session } => agent.new_session(parent_session).map(Some),
        Command::SwitchSession {
            session_id,
            session_path,
        } => agent.switch_session(session_id, session_path).map(Some),
        Command::SetModel { provider, model_id } => {
            agent.set_model(&provider, &model_id).and_then(data)
        }
        Command::GetAvailableModels {} => Ok(Some(json!({ "models": agent.available_models() }))),
        Command::GetCommands {} => Ok(Some(json!({ "commands": [] }))),
        Command::SetSteeringMode { mode } => {
            agent.set_steering_mode(mode);
            Ok(None)
        }
        Command::SetFollowUpMode { mode } => {
            agent.set_follow_up_mode(mode);
            Ok(None)
        }
        Command::GetSessionStats {} => Ok(Some(agent.session_stats())),
        Command::SetSessionName { name } => agent.set_session_name(&name).map(|()| None),
        Command::GetForkMessages {} => agent.fork_messages().map(Some),
        Command::Fork { entry_id } => agent.fork(&entry_id).map(Some),
        Command::Clone {} => agent.clone_session().map(Some),
        Command::GetEntries { since } => agent.entries(since.as_deref()).map(Some),
        Command::GetTree {} => agent.tree().map(Some),
        Command::ExportHtml { output_path } => agent.export_html(output_path.as_deref()).map(Some),
        Command::Compact {
            custom_instructions,
        } => match agent.compact(custom_instructions) {
            Ok(compaction) => {
                let out = out.clone();
                tokio::spawn(async move {
                    out.respond(match compaction.await.and_then(data) {
                        Ok(result) => Response::ok(id, name, result),
                        Err(error) => Response::error(id, name, error),
                    });
                });
                return;
            }
            Err(e) => Err(e),
        },
        Command::SetAutoCompaction { enabled } => {
            agent.set_auto_compaction(enabled);
            Ok(None)
        }
        Command::PermissionResponse {
            request_id,
            approved,
        } => agent
            .resolve_permission(request_id, approved)
            .map(|()| None),
    };
    out.respond(match result {
        Ok(data) => Response::ok(id, name, data),
        Err(error) => Response::error(id, name, error),
    });
}

fn data(value: impl Serialize) -> Result<Option<Value>, String> {
    serde_json::to_value(value)
        .map(Some)
        .map_err(|e| format!("internal error encoding the response: {e}"))
}
