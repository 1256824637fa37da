//! The session port: Pi's command table, for every front end. A front end turns its bytes
//! into a typed [`Command`] (RPC's stdin lines, a served WebSocket's frames) and hands it here
//! with a [`Reply`] that knows where the response goes; this is all that knows what each
//! command does to a session, and the one place where agent errors become wire text.
//!
//! Every command gets exactly one response. Commands that wait for the agent (`abort`,
//! `compact`) or for the disk (`export_html`, which takes the conversation at once and writes
//! it within a time bound; `list_sessions`) answer from their own task, so other commands are
//! served meanwhile; `switch_session` runs off the runtime thread but is awaited here, so the
//! commands after it see its effect, and so are `new_session`, `fork` and `clone` when the
//! session has no extensions (see [`replacement`]). A user `bash` command's output is an event of the session, tagged with the
//! id of the request that started it.

use super::{Agent, CommandError, Input, Prompted};
use crate::attach;
use crate::protocol::{
    Command, ContentBlock, Disposition, Event, ImageInput, Response, ResponseData,
};
use serde_json::Value;

/// Where a command's response goes: the connection (or stdout) it came from.
pub trait Reply: Clone + Send + Sync + 'static {
    /// Never waits: a front end queues the response with the session's events.
    fn respond(&self, response: Response);
}

type Answer = Result<Option<ResponseData>, CommandError>;

/// A message's images through the attachment policy, off the runtime thread (decoding and
/// shrinking a large image takes a while) but awaited, so the command still answers in order.
async fn attached(images: Option<Vec<ImageInput>>) -> Result<Vec<ContentBlock>, CommandError> {
    if images.as_ref().is_none_or(Vec::is_empty) {
        return Ok(Vec::new());
    }
    tokio::task::spawn_blocking(move || attach::wire::validate(images))
        .await
        .map_err(|e| CommandError::Crashed {
            what: "checking the images",
            detail: Some(e.to_string()),
        })?
        .map_err(CommandError::Invalid)
}

/// Runs `command` on `agent`; its response (`id` and `name` echo the request's) goes to `out`,
/// now or from a task of its own.
pub async fn execute<R: Reply>(
    agent: &Agent,
    out: &R,
    id: Option<Value>,
    name: String,
    command: Command,
) {
    if let Command::Prompt { message, .. } = &command
        // Pi's `abort` stops the model's run, not a command: nothing cancels one here.
        && let Some(handler) = agent.extension_command(message, Default::default())
    {
        // As in Pi, the answer waits for the command's handler; from a task of its own,
        // because the handler may wait for a dialog answered by a later command.
        return answer_later(out, id, name, async move {
            handler.await;
            Ok(Some(disposition(Disposition::Handled)))
        });
    }
    let answer: Answer = match command {
        Command::Prompt {
            message,
            images,
            streaming_behavior,
        } => {
            let Some(review) = agent.review_input(&message, streaming_behavior) else {
                return prompt(agent, out, id, name, message, images, streaming_behavior).await;
            };
            // The extensions' input hooks first, from a task of its own: a hook may wait for a
            // dialog answered by a later command.
            let (agent, out) = (agent.clone(), out.clone());
            tokio::spawn(async move {
                let message = match review.await {
                    Input::Handled => {
                        let handled = Some(disposition(Disposition::Handled));
                        return out.respond(Response::ok(id, name, handled));
                    }
                    Input::Transform(text) => text,
                    Input::Continue => message,
                };
                prompt(&agent, &out, id, name, message, images, streaming_behavior).await;
            });
            return;
        }
        Command::Steer { message, images } => attached(images)
            .await
            .and_then(|images| agent.steer(message, images))
            .map(|()| Some(disposition(Disposition::Queued))),
        Command::FollowUp { message, images } => attached(images)
            .await
            .and_then(|images| agent.follow_up(message, images))
            .map(|()| Some(disposition(Disposition::Queued))),
        Command::Abort {} => {
            let finished = agent.abort();
            return answer_later(out, id, name, async move {
                finished.await;
                Ok(None)
            });
        }
        Command::GetState {} => Ok(Some(ResponseData::State(Box::new(agent.wire_state())))),
        Command::GetMessages {} => Ok(Some(ResponseData::Messages {
            messages: agent.messages(),
        })),
        Command::GetLastAssistantText {} => Ok(Some(ResponseData::LastAssistantText {
            text: agent.last_assistant_text(),
        })),
        Command::NewSession { parent_session } => {
            let replacing = agent.clone();
            return replacement(agent, out, id, name, async move {
                replacing.new_session(parent_session).await.map(cancelled)
            })
            .await;
        }
        Command::SwitchSession {
            session_id,
            session_path,
        } => {
            let replacing = agent.clone();
            return replacement(agent, out, id, name, async move {
                replacing
                    .switch_session(session_id, session_path)
                    .await
                    .map(cancelled)
            })
            .await;
        }
        Command::SetModel { provider, model_id } => agent
            .set_model(&provider, &model_id)
            .map(|m| Some(ResponseData::Model(Box::new(m)))),
        Command::GetAvailableModels {} => Ok(Some(ResponseData::Models {
            models: agent.available_models(),
        })),
        Command::GetCommands {} => Ok(Some(ResponseData::Commands {
            commands: agent.commands(),
        })),
        Command::SetSteeringMode { mode } => {
            agent.set_steering_mode(mode);
            Ok(None)
        }
        Command::SetFollowUpMode { mode } => {
            agent.set_follow_up_mode(mode);
            Ok(None)
        }
        Command::GetSessionStats {} => Ok(Some(ResponseData::SessionStats(Box::new(
            agent.session_stats(),
        )))),
        Command::SetSessionName { name } => agent.set_session_name(&name).map(|()| None),
        Command::GetForkMessages {} => Ok(Some(ResponseData::ForkMessages {
            messages: agent.fork_messages(),
        })),
        Command::Fork { entry_id } => {
            let replacing = agent.clone();
            return replacement(agent, out, id, name, async move {
                replacing.fork(&entry_id).await.map(|text| {
                    Some(ResponseData::Forked {
                        cancelled: text.is_none(),
                        text,
                    })
                })
            })
            .await;
        }
        Command::Clone {} => {
            let replacing = agent.clone();
            return replacement(agent, out, id, name, async move {
                replacing.clone_session(None).await.map(cancelled)
            })
            .await;
        }
        Command::GetEntries { since } => agent.entries(since.as_deref()).map(Some),
        Command::GetTree {} => agent.tree().map(Some),
        Command::ExportHtml { output_path } => {
            let export = agent.export_html(output_path);
            return answer_later(out, id, name, async move {
                Ok(Some(ResponseData::Exported {
                    path: export.await?,
                }))
            });
        }
        Command::Compact {
            custom_instructions,
        } => match agent.compact(custom_instructions) {
            Ok(compaction) => {
                return answer_later(out, id, name, async move {
                    let result = compaction.await?;
                    Ok(Some(ResponseData::Compaction(Box::new(result))))
                });
            }
            Err(e) => Err(e),
        },
        Command::SetAutoCompaction { enabled } => {
            agent.set_auto_compaction(enabled);
            Ok(None)
        }
        Command::ClearQueue {} => {
            let (steering, follow_up) = agent.clear_queue();
            Ok(Some(ResponseData::ClearedQueue {
                steering,
                follow_up,
            }))
        }
        Command::SetThinkingLevel { level } => {
            agent.set_thinking_level(level);
            Ok(None)
        }
        Command::CycleThinkingLevel {} => Ok(Some(
            agent
                .cycle_thinking_level()
                .map_or(ResponseData::Null, |level| ResponseData::ThinkingLevel {
                    level,
                }),
        )),
        Command::GetAvailableThinkingLevels {} => Ok(Some(ResponseData::ThinkingLevels {
            levels: agent.available_thinking_levels(),
        })),
        Command::CycleModel {} => agent.cycle_model().map(|cycled| {
            Some(cycled.map_or(ResponseData::Null, |c| {
                ResponseData::CycledModel(Box::new(c))
            }))
        }),
        Command::Bash {
            command,
            exclude_from_context,
        } => match agent.bash(
            command,
            exclude_from_context,
            bash_output(agent, id.clone()),
        ) {
            Ok(run) => {
                return answer_later(out, id, name, async move {
                    Ok(Some(ResponseData::Bash(Box::new(run.await?))))
                });
            }
            Err(e) => Err(e),
        },
        Command::AbortBash {} => {
            agent.abort_bash();
            Ok(None)
        }
        Command::SetAutoRetry { enabled } => {
            agent.set_auto_retry(enabled);
            Ok(None)
        }
        Command::AbortRetry {} => {
            let stopped = agent.abort_retry();
            return answer_later(out, id, name, async move {
                stopped.await;
                Ok(None)
            });
        }
        Command::ExtensionUiResponse {
            value,
            confirmed,
            cancelled,
        } => {
            let answer = serde_json::json!({
                "id": id,
                "value": value,
                "confirmed": confirmed,
                "cancelled": cancelled,
            });
            // Pi sends no response to a dialog's answer; only a misdirected one gets an error.
            match agent.answer_dialog(answer) {
                Ok(()) => return,
                Err(e) => Err(e),
            }
        }
        Command::GetCapabilities {} => Ok(Some(ResponseData::Capabilities(Box::new(
            crate::protocol::Capabilities::of(agent.wire_state().sandbox),
        )))),
        Command::GetMcpServers {} => Ok(Some(ResponseData::McpServers {
            servers: agent.mcp_servers(),
        })),
        Command::GetTools {} => Ok(Some(ResponseData::Tools {
            tools: agent.tools(),
        })),
        Command::ListSessions { all } => {
            let listing = agent.list_sessions(all);
            return answer_later(out, id, name, async move {
                let sessions = listing.await?;
                Ok(Some(ResponseData::Sessions { sessions }))
            });
        }
        Command::SetActiveTools { tools } => agent
            .set_active_tools(tools)
            .map(|tools| Some(ResponseData::Tools { tools })),
        Command::PermissionResponse {
            request_id,
            approved,
        } => agent
            .resolve_permission(request_id, approved)
            .map(|()| None),
    };
    out.respond(response(id, name, answer));
}

/// Takes a prompt: a run started (answered before its first event) or a message queued.
async fn prompt<R: Reply>(
    agent: &Agent,
    out: &R,
    id: Option<Value>,
    name: String,
    message: String,
    images: Option<Vec<ImageInput>>,
    behavior: Option<crate::protocol::StreamingBehavior>,
) {
    let answer = match attached(images)
        .await
        .and_then(|images| agent.prompt(message, images, behavior))
    {
        Ok(Prompted::Started(run)) => {
            out.respond(Response::ok(
                id,
                name,
                Some(disposition(Disposition::Started)),
            ));
            return run.start();
        }
        Ok(Prompted::Queued) => Ok(Some(disposition(Disposition::Queued))),
        Err(e) => Err(e),
    };
    out.respond(response(id, name, answer));
}

/// Where a user `bash` command's output goes: events tagged with the id of the request that
/// started it, to the session's subscribers with the agent's own events.
fn bash_output(agent: &Agent, id: Option<Value>) -> impl Fn(&str) + Send + Sync + 'static {
    let agent = agent.clone();
    move |delta| {
        agent.emit(Event::BashExecutionUpdate {
            id: id.clone(),
            delta: delta.to_owned(),
        })
    }
}

/// A session replacement (`new_session`, `switch_session`, `fork`, `clone`). With extensions it
/// answers from a task of its own, as their hooks may wait for a dialog a later command
/// answers (Pi serves commands meanwhile too); without, it is done before the next command is
/// read, so that command sees its effect.
async fn replacement<R: Reply>(
    agent: &Agent,
    out: &R,
    id: Option<Value>,
    name: String,
    answer: impl Future<Output = Answer> + Send + 'static,
) {
    if agent.extensions().is_some() {
        return answer_later(out, id, name, answer);
    }
    let answer = answer.await;
    out.respond(response(id, name, answer));
}

/// Answers from a task of its own once `answer` resolves.
fn answer_later<R: Reply>(
    out: &R,
    id: Option<Value>,
    name: String,
    answer: impl Future<Output = Answer> + Send + 'static,
) {
    let out = out.clone();
    tokio::spawn(async move {
        let answer = answer.await;
        out.respond(response(id, name, answer));
    });
}

fn response(id: Option<Value>, name: String, answer: Answer) -> Response {
    match answer {
        Ok(data) => Response::ok(id, name, data),
        Err(error) => Response::error(id, name, error.to_string()),
    }
}

fn disposition(disposition: Disposition) -> ResponseData {
    ResponseData::Prompt { disposition }
}

fn cancelled(cancelled: bool) -> Option<ResponseData> {
    Some(ResponseData::Cancelled { cancelled })
}
