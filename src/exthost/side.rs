//! The host as the session sees it: a subscriber of its events ([`HostEvents`]), and the
//! agent's [`Extensions`] and the providers' [`Hooks`] seams ([`Side`]), each crossing to the
//! host only for what some extension handles.

use super::*;

/// The host as a subscriber of the session's events: only those an extension handles cross.
pub(super) struct HostEvents(pub(super) Arc<Shared>);

impl HostEvents {
    /// Whether `event` crosses as itself: an extension handles it (and its handlers did not
    /// have it as a hook already), or the mirror needs it.
    fn crosses(&self, event: &Event) -> bool {
        let name: &'static str = event.into();
        MIRRORED.contains(&name) || (self.0.subscribed(name) && !hooked(event))
    }

    /// Warns when a line for the `name` event found the host's queue full.
    fn kept_up(name: &str, queued: bool) {
        if !queued {
            tracing::warn!("the extension host is not keeping up; it missed a {name} event");
        }
    }
}

impl EventSink for HostEvents {
    fn emit(&self, event: Event) {
        self.emit_ref(&event);
    }

    fn borrows(&self) -> bool {
        true
    }

    fn emit_ref(&self, event: &Event) {
        let name: &'static str = event.into();
        if !self.crosses(event) {
            if CHANGES.contains(&name) {
                Self::kept_up(name, self.0.notify("changed", json!({ "event": name })));
            }
            return;
        }
        // Encoded straight from the event: no JSON tree per event. The writer frames a whole
        // event as the `event` notification, as it frames one encoded for stdout too.
        let queued = match wire::Delta::of(event) {
            Some(delta) => serde_json::to_string(&delta).map(|line| self.0.send_delta(line)),
            None => {
                serde_json::to_string(event).map(|json| self.0.send_event(EventJson::from(json)))
            }
        };
        match queued {
            Ok(queued) => Self::kept_up(name, queued),
            Err(e) => {
                tracing::warn!("a {name} event could not be encoded for the extension host: {e}")
            }
        }
    }

    fn writes_json(&self, event: &Event) -> bool {
        self.crosses(event) && wire::Delta::of(event).is_none()
    }

    fn emit_json(&self, event: &Event, json: &EventJson) {
        Self::kept_up(event.into(), self.0.send_event(json.clone()));
    }
}

/// Whether the event's handlers had it as a hook already ([`message_end_hooked`]); then only
/// the mirror hears of it.
fn hooked(event: &Event) -> bool {
    matches!(event, Event::MessageEnd { message } if message_end_hooked(message))
}

/// The agent's view of the host.
pub(super) struct Side(pub(super) Arc<Shared>);

impl Extensions for Side {
    fn commands(&self) -> Vec<SlashCommand> {
        let registry = self.0.lock_registry();
        let Some(registry) = registry.as_ref() else {
            return Vec::new();
        };
        registry
            .commands
            .iter()
            .map(|c| SlashCommand {
                name: c.name.clone(),
                description: c.description.clone(),
                source: CommandSource::Extension,
                source_info: self.0.source_info(&c.source_info.path),
            })
            .collect()
    }

    fn run_command(
        &self,
        name: &str,
        args: &str,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, ()>> {
        let known = self
            .0
            .lock_registry()
            .as_ref()
            .is_some_and(|r| r.commands.iter().any(|c| c.name == name));
        if !known {
            return None;
        }
        let shared = self.0.clone();
        let run = self.0.next.fetch_add(1, Ordering::Relaxed);
        let params = json!({"name": name, "args": args, "run": run});
        Some(Box::pin(async move {
            // The handler's failure is the host's extension_error; nothing more to say here.
            let call = shared.request("command", params);
            tokio::pin!(call);
            tokio::select! {
                _ = &mut call => {}
                () = cancel.cancelled() => {
                    shared.notify("cancel_command", json!({"run": run}));
                    // A handler that ignores its signal runs on in the host, unwaited for.
                    let _ = tokio::time::timeout(CANCEL_GRACE, call).await;
                }
            }
        }))
    }

    fn tool_specs(&self) -> Vec<ToolSpec> {
        self.0
            .lock_registry()
            .as_ref()
            .map(|r| {
                r.tools
                    .iter()
                    .map(|t| ToolSpec {
                        name: t.name.clone().into(),
                        description: t.description.clone().into(),
                        parameters: t.parameters.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn has_tool(&self, name: &str) -> bool {
        self.0
            .lock_registry()
            .as_ref()
            .is_some_and(|r| r.tools.iter().any(|t| t.name == name))
    }

    fn before_tool_call(
        &self,
        (id, name, args): &(String, String, Value),
    ) -> Option<BoxFuture<'static, Hooked>> {
        if !self.0.subscribed("tool_call") {
            return None;
        }
        let shared = self.0.clone();
        let params = json!({"toolCallId": id, "toolName": name, "input": args});
        let original = args.clone();
        Some(Box::pin(async move {
            match shared
                .hook_as::<wire::ToolCallVerdict>("tool_call", params)
                .await
            {
                Ok(v) if v.block => Hooked::Block(
                    v.reason
                        .unwrap_or_else(|| "Blocked by an extension".to_owned()),
                ),
                Ok(v) => Hooked::Run(v.input.unwrap_or(original)),
                // Fail closed, as Pi does when a hook throws.
                Err(e) => Hooked::Block(format!("Extension failed, blocking execution: {e}")),
            }
        }))
    }

    fn review_input(
        &self,
        text: &str,
        behavior: Option<StreamingBehavior>,
    ) -> Option<BoxFuture<'static, Input>> {
        if !self.0.subscribed("input") {
            return None;
        }
        let shared = self.0.clone();
        let params = json!({"text": text, "streamingBehavior": behavior});
        Some(Box::pin(async move {
            match shared.hook_as("input", params).await.ok() {
                Some(wire::InputVerdict::Handled) => Input::Handled,
                Some(wire::InputVerdict::Transform { text }) => Input::Transform(text),
                // A failed hook is an extension_error; the prompt goes on unchanged.
                Some(wire::InputVerdict::Continue) | None => Input::Continue,
            }
        }))
    }

    fn after_tool_call(
        &self,
        (id, name, args): &(String, String, Value),
        output: &ToolOutput,
    ) -> Option<BoxFuture<'static, Reviewed>> {
        if !self.0.subscribed("tool_result") {
            return None;
        }
        let shared = self.0.clone();
        let params = json!({
            "toolCallId": id,
            "toolName": name,
            "input": args,
            "content": output.content,
            "details": output.details,
            "isError": output.is_error,
        });
        Some(Box::pin(async move {
            // The hooks' own failures are extension_error events; the result stays as it was.
            shared
                .hook_as::<wire::ToolResultPatch>("tool_result", params)
                .await
                .ok()
                .map(|p| Reviewed {
                    content: p.content,
                    details: p.details,
                    is_error: p.is_error,
                })
                .unwrap_or_default()
        }))
    }

    fn before_agent_start(
        &self,
        starting: &Message,
        system_prompt: &str,
    ) -> Option<BoxFuture<'static, Starting>> {
        if !self.0.subscribed("before_agent_start") {
            return None;
        }
        // Pi's trigger: the user's prompt and images, or the extension's message that started
        // the run.
        let trigger = match starting {
            Message::User(user) => {
                let blocks = user.content.blocks();
                let images: Vec<_> = blocks
                    .iter()
                    .filter(|b| matches!(b, ContentBlock::Image { .. }))
                    .collect();
                json!({
                    "messageType": "user",
                    "prompt": user.content.joined_text(),
                    "images": images,
                })
            }
            other => json!({ "messageType": "custom", "message": other }),
        };
        let shared = self.0.clone();
        let params = json!({ "trigger": trigger, "systemPrompt": system_prompt });
        Some(Box::pin(async move {
            // The hooks' own failures are extension_error events; the run starts as it was.
            shared
                .hook_as::<wire::Started>("before_agent_start", params)
                .await
                .ok()
                .map(|s| Starting {
                    system_prompt: s.system_prompt,
                    messages: s.messages,
                })
                .unwrap_or_default()
        }))
    }

    fn message_end(
        &self,
        message: &Message,
    ) -> Option<BoxFuture<'static, Result<Option<Message>, String>>> {
        self.0.read_hook(
            "message_end",
            || json!({ "message": message }),
            |m: wire::MessageEnd| m.message,
            "a message_end hook returned no message nova can keep",
        )
    }

    fn context(
        &self,
        messages: &[Arc<Message>],
    ) -> Option<BoxFuture<'static, Result<Option<Vec<Message>>, String>>> {
        self.0.read_hook(
            "context",
            || json!({ "messages": messages }),
            |c: wire::Context| c.messages,
            "the context hooks returned messages nova cannot send",
        )
    }

    fn call_tool(
        &self,
        (id, name, args): (String, String, Value),
        updates: UpdateFn,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ToolOutput> {
        let shared = self.0.clone();
        Box::pin(async move {
            lock(&shared.updates).insert(id.clone(), updates);
            let params = json!({"toolCallId": id, "name": name, "input": args});
            let call = shared.request("tool", params);
            tokio::pin!(call);
            let answer = tokio::select! {
                answer = &mut call => answer,
                () = cancel.cancelled() => {
                    shared.notify("cancel", json!({"toolCallId": id}));
                    tokio::time::timeout(CANCEL_GRACE, call)
                        .await
                        .unwrap_or_else(|_| Err("Command aborted".to_owned()))
                }
            };
            lock(&shared.updates).remove(&id);
            let result = answer.and_then(|v| {
                serde_json::from_value::<wire::ToolResult>(v).map_err(|e| e.to_string())
            });
            match result {
                Ok(result) => ToolOutput {
                    is_error: result.is_error,
                    content: result.content,
                    details: result.details.map(ToolDetails::Other),
                    structured: None,
                },
                Err(e) => ToolOutput::error(e),
            }
        })
    }

    fn user_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        cwd: &std::path::Path,
    ) -> Option<BoxFuture<'static, Result<Option<BashResult>, String>>> {
        if !self.0.subscribed("user_bash") {
            return None;
        }
        let shared = self.0.clone();
        let params = json!({
            "command": command,
            "excludeFromContext": exclude_from_context,
            "cwd": cwd,
        });
        Some(Box::pin(async move {
            let answer = shared
                .hook_as::<wire::UserBash>("user_bash", params)
                .await?;
            Ok(answer.result)
        }))
    }

    fn model_selected(&self, model: &Model, previous: Option<&Model>, source: ModelSource) {
        // No client event announces a model change: the host hears of it here, as the event
        // when an extension handles it, else by name for its mirror.
        let sent = if self.0.subscribed("model_select") {
            let event = json!({
                "type": "model_select",
                "model": model,
                "previousModel": previous,
                "source": source,
            });
            self.0.notify("event", json!({ "event": event }))
        } else {
            self.0.notify("changed", json!({ "event": "model_select" }))
        };
        if !sent {
            tracing::warn!("the extension host is not keeping up; it missed a model_select event");
        }
    }

    fn answer_dialog(&self, answer: Value) {
        self.0.notify("ui_response", answer);
    }

    fn leave(&self, before: Option<Value>, shutdown: Value) -> BoxFuture<'static, bool> {
        let shared = self.0.clone();
        let before = before.filter(|b| shared.subscribed(event_type(b)));
        Box::pin(async move {
            // Nothing to ask: `enter` retires the old extensions itself.
            if before.is_none() && !shared.subscribed("session_shutdown") {
                return false;
            }
            let params = json!({ "before": before, "shutdown": shutdown });
            // A hook that fails or times out does not cancel, as a throwing handler does not
            // in Pi: the replacement goes on, reported as an extension_error.
            shared
                .hook_as::<wire::Left>("leave", params)
                .await
                .is_ok_and(|left| left.cancelled)
        })
    }

    fn enter(&self, start: Value) -> BoxFuture<'static, ()> {
        let shared = self.0.clone();
        Box::pin(async move {
            let entered = tokio::time::timeout(
                LOAD_TIMEOUT,
                shared.request("enter", json!({ "start": start })),
            )
            .await
            .map_err(|_| format!("no answer in {}s", LOAD_TIMEOUT.as_secs()))
            .and_then(|answer| answer)
            .and_then(|v| serde_json::from_value::<wire::Loaded>(v).map_err(|e| e.to_string()));
            let Some(agent) = shared.agent.upgrade() else {
                return;
            };
            let loaded = match entered {
                Ok(loaded) => loaded,
                Err(error) => {
                    return agent.extension_event(Event::ExtensionError {
                        extension_path: "<extension host>".into(),
                        event: "session_start".into(),
                        error: format!("the extensions were not loaded again: {error}"),
                    });
                }
            };
            for failure in &loaded.errors {
                agent.extension_event(Event::ExtensionError {
                    extension_path: failure.path.clone(),
                    event: "load".into(),
                    error: failure.error.clone(),
                });
            }
            super::discovered(&agent, &loaded, true);
        })
    }

    fn before_compact(
        &self,
        event: &dyn Fn() -> Value,
    ) -> Option<BoxFuture<'static, BeforeCompact>> {
        if !self.0.subscribed("session_before_compact") {
            return None;
        }
        let event = event();
        let shared = self.0.clone();
        Some(Box::pin(async move {
            // Failed hooks are extension_error events, and nova summarises as if they had
            // not run (Pi goes on after a throwing handler).
            let Ok(verdict) = shared
                .hook_as::<wire::CompactVerdict>(
                    "session_before_compact",
                    json!({ "event": event }),
                )
                .await
            else {
                return BeforeCompact::Summarize;
            };
            if verdict.cancel {
                return BeforeCompact::Cancel;
            }
            let Some(compaction) = verdict.compaction else {
                return BeforeCompact::Summarize;
            };
            match serde_json::from_value(compaction) {
                Ok(compaction) => BeforeCompact::Replace(Box::new(compaction)),
                Err(e) => {
                    if let Some(agent) = shared.agent.upgrade() {
                        agent.extension_event(Event::ExtensionError {
                            extension_path: "<session_before_compact>".into(),
                            event: "session_before_compact".into(),
                            error: format!("its compaction cannot be recorded: {e}"),
                        });
                    }
                    BeforeCompact::Summarize
                }
            }
        }))
    }

    fn session_event(&self, event: Value) {
        if self.0.subscribed(event_type(&event)) {
            self.0.notify("event", json!({ "event": event }));
        }
    }

    fn provider_hooks(&self) -> Option<&dyn Hooks> {
        Some(self)
    }
}

/// A session event's `type`.
fn event_type(event: &Value) -> &str {
    event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The provider hooks cross only when an extension subscribed; their failures are the host's
/// extension_error events, and the request then goes out as nova built it.
impl Hooks for Side {
    fn subscribed(&self, hook: Hook) -> bool {
        self.0.subscribed(hook.event())
    }

    fn payload(&self, payload: Value) -> BoxFuture<'static, Option<Value>> {
        let shared = self.0.clone();
        Box::pin(async move {
            shared
                .hook_as::<wire::Payload>("before_provider_request", json!({ "payload": payload }))
                .await
                .ok()
                .and_then(|p| p.payload)
        })
    }

    fn headers(
        &self,
        headers: hooks::Headers,
    ) -> BoxFuture<'static, Option<BTreeMap<String, Option<String>>>> {
        let shared = self.0.clone();
        Box::pin(async move {
            shared
                .hook_as::<wire::ProviderHeaders>(
                    "before_provider_headers",
                    json!({ "headers": headers }),
                )
                .await
                .ok()
                .map(|h| h.headers)
        })
    }

    fn response(&self, status: u16, headers: hooks::Headers) -> BoxFuture<'static, ()> {
        let shared = self.0.clone();
        let params = json!({ "status": status, "headers": headers });
        Box::pin(async move {
            let _ = shared.hook("after_provider_response", params).await;
        })
    }

    fn refused(&self, hook: Hook, why: String) {
        if let Some(agent) = self.0.agent.upgrade() {
            agent.extension_event(Event::ExtensionError {
                extension_path: format!("<{}>", hook.event()),
                event: hook.event().into(),
                error: why,
            });
        }
    }
}
