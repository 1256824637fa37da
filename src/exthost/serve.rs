//! What the host asks of nova: an extension's actions and the queries behind its mirror, carried
//! out through the session port where a client command expresses them, and answered back to the
//! host.

use super::*;

/// The session port's commands an extension's actions map onto one to one (`newSession`,
/// `switchSession`, `setSessionName`, `compact`, `abort`, `setActiveTools`,
/// `setThinkingLevel`, `setModel`; `fork` is the port's too, unless it clones), and the queries that keep the
/// host's mirror of the session's state current (`ctx.model`, `getActiveTools`,
/// `getContextUsage`…), sent by the host under their RPC names; anything else is refused.
const PORT_COMMANDS: [&str; 13] = [
    "new_session",
    "switch_session",
    "set_session_name",
    "compact",
    "abort",
    "set_active_tools",
    "set_thinking_level",
    "set_model",
    "get_state",
    "get_tools",
    "get_session_stats",
    "get_available_models",
    "get_entries",
];

/// Carries out what an extension asked of the session, through the session port.
pub(super) async fn serve(method: String, params: Value, reply: HostReply, agent: Agent) {
    let command = match method.as_str() {
        "send_user_message" => serde_json::from_value::<wire::UserMessage>(params).map(|m| {
            let streaming_behavior = match m.options.and_then(|o| o.deliver_as).as_deref() {
                Some("steer") => Some(StreamingBehavior::Steer),
                Some("followUp") => Some(StreamingBehavior::FollowUp),
                _ => None,
            };
            Command::Prompt {
                message: text_of(&m.content),
                images: None,
                streaming_behavior,
            }
        }),
        // No client command sends a custom message or reads the system prompt: the session
        // answers these directly.
        "send_message" => {
            let answer = serde_json::from_value::<wire::SentMessage>(params)
                .map_err(|e| format!("malformed send_message: {e}"))
                .and_then(|m| {
                    let options = m.options.unwrap_or_default();
                    let deliver = match options.deliver_as.as_deref() {
                        Some("followUp") => Deliver::FollowUp,
                        Some("nextTurn") => Deliver::NextTurn,
                        _ => Deliver::Steer,
                    };
                    agent
                        .send_custom(m.message, deliver, options.trigger_turn)
                        .map_err(|e| e.to_string())
                });
            reply.answer(answer.map(|run| {
                if let Some(run) = run {
                    run.start();
                }
                json!({})
            }));
            return;
        }
        "exec" => {
            let answer = match serde_json::from_value::<wire::Exec>(params) {
                Ok(call) => Ok(exec(call, &reply, &agent).await),
                Err(e) => Err(format!("malformed exec: {e}")),
            };
            reply.answer(answer);
            return;
        }
        "get_system_prompt" => {
            reply.answer(Ok(json!({ "systemPrompt": &*agent.system_prompt() })));
            return;
        }
        // Pi's RPC has no command for the session file's header either.
        "get_session_header" => {
            reply.answer(serde_json::to_value(agent.session_header()).map_err(|e| e.to_string()));
            return;
        }
        // No client command writes an extension's entry: the session takes it directly.
        "append_entry" => {
            let answer = serde_json::from_value::<wire::CustomEntry>(params)
                .map_err(|e| format!("malformed append_entry: {e}"))
                .and_then(|e| {
                    agent
                        .append_custom_entry(&e.custom_type, e.data)
                        .map_err(|e| e.to_string())
                });
            reply.answer(answer.map(|id| json!({ "id": id })));
            return;
        }
        // Nor a provider: an extension's are the session's own, not a client's.
        "register_provider" | "unregister_provider" => {
            let answer = serde_json::from_value::<wire::Provider>(params)
                .map_err(|e| format!("malformed {method}: {e}"))
                .and_then(|p| match method.as_str() {
                    "register_provider" => agent.register_provider(&p.name, p.config),
                    _ => {
                        agent.unregister_provider(&p.name);
                        Ok(())
                    }
                });
            reply.answer(answer.map(|()| json!({})));
            return;
        }
        // Nor a label (Pi's RPC has no command for it).
        "set_label" => {
            let answer = serde_json::from_value::<wire::Label>(params)
                .map_err(|e| format!("malformed set_label: {e}"))
                .and_then(|l| {
                    agent
                        .set_label(&l.entry_id, l.label.as_deref())
                        .map_err(|e| e.to_string())
                });
            reply.answer(answer.map(|id| json!({ "id": id })));
            return;
        }
        // Pi's fork `position: "at"` clones through an entry, which no client command does.
        "fork" => match serde_json::from_value::<wire::Fork>(params) {
            Ok(fork) if fork.position.as_deref() == Some("at") => {
                let answer = agent.clone_session(Some(&fork.entry_id)).await;
                reply.answer(
                    answer
                        .map(|cancelled| json!({ "cancelled": cancelled }))
                        .map_err(|e| e.to_string()),
                );
                return;
            }
            Ok(fork) => Ok(Command::Fork {
                entry_id: fork.entry_id,
            }),
            Err(e) => Err(e),
        },
        // `ctx.waitForIdle()` and `ctx.reload()` act on the extensions' side of the session.
        "wait_for_idle" => {
            agent.idle().await;
            reply.answer(Ok(json!({})));
            return;
        }
        "reload" => {
            let answer = agent.reload_extensions().await;
            reply.answer(answer.map(|()| json!({})).map_err(|e| e.to_string()));
            return;
        }
        // The rest are the port's own commands under their RPC names and fields.
        name if PORT_COMMANDS.contains(&name) => {
            serde_json::from_value::<Command>(json!({ name: params }))
        }
        other => {
            reply.answer(Err(format!(
                "{other} is not supported by nova's extension host yet"
            )));
            return;
        }
    };
    match command {
        Ok(command) => {
            let name = method.clone();
            port::execute(&agent, &reply, Some(reply.id.clone()), name, command).await;
        }
        Err(e) => reply.answer(Err(format!("malformed {method}: {e}"))),
    }
}

/// Runs an extension's `pi.exec` through the session's gate and sandbox; what it answers is
/// Pi's `ExecResult`.
async fn exec(call: wire::Exec, reply: &HostReply, agent: &Agent) -> Value {
    let id = match &reply.id {
        Value::String(id) => id.clone(),
        other => other.to_string(),
    };
    let cancel = CancellationToken::new();
    lock(&reply.shared.execs).insert(id.clone(), cancel.clone());
    // Milliseconds from JavaScript: a number, maybe fractional, maybe nonsense.
    let positive = |n: Option<f64>| n.filter(|n| n.is_finite() && *n > 0.0);
    let call = ExtensionExec {
        id: format!("exec-{id}"),
        path: host_path(&reply.shared.launch.shim).ok(),
        program: call.command,
        args: call.args,
        cwd: call.cwd.map(PathBuf::from),
        timeout: positive(call.timeout).map(|ms| Duration::from_secs_f64(ms.min(1e12) / 1000.0)),
        max_output: positive(call.max_buffer).map(|n| n.min(usize::MAX as f64) as usize),
    };
    let out = agent.extension_exec(call, &cancel).await;
    lock(&reply.shared.execs).remove(&id);
    json!({
        "stdout": out.stdout,
        "stderr": out.stderr,
        "code": out.code,
        "killed": out.killed,
        "truncated": out.truncated,
    })
}

/// A user message's text: a string, or the text blocks of a content array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Where the session port's answer to a host request goes: back to the host.
#[derive(Clone)]
pub(super) struct HostReply {
    pub(super) shared: Arc<Shared>,
    pub(super) id: Value,
}

impl HostReply {
    fn answer(&self, answer: Answer) {
        let line = match answer {
            Ok(result) => json!({"id": self.id, "result": result}),
            Err(error) => json!({"id": self.id, "error": error}),
        };
        let _ = self.shared.send_line(line.to_string());
    }
}

impl Reply for HostReply {
    fn respond(&self, response: Response) {
        self.answer(match response.error {
            Some(error) if !response.success => Err(error),
            _ => Ok(serde_json::to_value(&response.data).unwrap_or(Value::Null)),
        });
    }
}
