//! The runtime of sessions from library code: one process, one runtime, three sessions on three
//! working directories, each prompting at once against the mock, none seeing another's project
//! or events.

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::openai_models;
use clap::Parser;
use nova::agent::{EventSink, Prompted, Runtime};
use nova::config::{Cli, ModelChoice, Resume, SessionSpec};
use nova::mcp::{ClientServer, ClientTransport};
use nova::protocol::Event;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl EventSink for Recorder {
    fn emit(&self, event: Event) {
        let line = serde_json::to_string(&event).unwrap();
        self.0.lock().unwrap().push(line);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn three_sessions_on_three_cwds_run_side_by_side_in_one_process() {
    let mock = MockLlm::start();
    // Every reply stops after its first frame until all three are streaming: the sessions must
    // be running at the same time for the test to end.
    let gate = Gate::new();
    for _ in 0..3 {
        mock.push(Reply::text("done").text_chunks(20).gate_after(1, &gate));
    }
    let agent_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        agent_dir.path().join("models.json"),
        openai_models(&mock).to_string(),
    )
    .unwrap();
    let cli =
        Cli::try_parse_from(["nova", "--mode", "rpc", "--no-session", "--sandbox", "off"]).unwrap();
    let runtime = Runtime::load(cli, agent_dir.path().to_path_buf())
        .await
        .unwrap();

    let cwds: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut sessions = Vec::new();
    for (i, cwd) in cwds.iter().enumerate() {
        std::fs::write(cwd.path().join("AGENTS.md"), format!("project number {i}")).unwrap();
        let spec = SessionSpec::new(cwd.path().to_path_buf());
        let prepared = runtime.prepare(&spec).unwrap();
        assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
        let recorder = Arc::new(Recorder::default());
        let agent = prepared.start(recorder.clone());
        sessions.push((agent, recorder));
    }
    let runs: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(
            |(i, (agent, _))| match agent.prompt(format!("hello from {i}"), Vec::new(), None) {
                Ok(Prompted::Started(run)) => run.run(),
                _ => panic!("session {i} did not start"),
            },
        )
        .collect();
    let all_streaming = async {
        while gate.times_reached() < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        gate.open();
    };
    let (_, ()) = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        futures_util::future::join(futures_util::future::join_all(runs), all_streaming),
    )
    .await
    .expect("the three sessions did not all stream at once");

    let requests = mock.chat_requests();
    assert_eq!(requests.len(), 3);
    for (i, (agent, recorder)) in sessions.iter().enumerate() {
        assert_eq!(agent.last_assistant_text().as_deref(), Some("done"));
        let events = recorder.0.lock().unwrap();
        assert!(events.iter().any(|e| e.contains("agent_settled")));
        assert!(
            events
                .iter()
                .any(|e| e.contains(&format!("hello from {i}")))
        );
        for other in (0..3).filter(|&o| o != i) {
            assert!(
                !events
                    .iter()
                    .any(|e| e.contains(&format!("hello from {other}")))
            );
        }
        // Its request carried its own project's context and prompt, and no one else's.
        let request = requests
            .iter()
            .find(|r| r.body.to_string().contains(&format!("hello from {i}")))
            .unwrap();
        let body = request.body.to_string();
        assert!(body.contains(&format!("project number {i}")), "{body}");
        assert!(body.contains(&cwds[i].path().display().to_string()));
        for other in (0..3).filter(|&o| o != i) {
            assert!(!body.contains(&format!("project number {other}")));
        }
    }
}

async fn runtime_with(
    agent_dir: &std::path::Path,
    models: serde_json::Value,
    flags: &[&str],
) -> Runtime {
    std::fs::write(agent_dir.join("models.json"), models.to_string()).unwrap();
    let mut args = vec!["nova", "--mode", "rpc", "--sandbox", "off"];
    args.extend_from_slice(flags);
    Runtime::load(Cli::try_parse_from(args).unwrap(), agent_dir.to_path_buf())
        .await
        .unwrap()
}

async fn prompted(agent: &nova::agent::Agent, text: &str) {
    match agent.prompt(text.to_owned(), Vec::new(), None) {
        Ok(Prompted::Started(run)) => run.run().await,
        _ => panic!("the prompt did not start"),
    }
}

/// What a client can ask of a session beside its cwd: a stored conversation by exact id or by
/// file, and a model other than the default; what cannot be opened is named.
#[tokio::test(flavor = "current_thread")]
async fn a_session_opens_by_id_by_path_and_with_the_model_the_spec_names() {
    let mock = MockLlm::start();
    mock.push(Reply::text("stored"));
    let agent_dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut models = openai_models(&mock);
    let provider = &mut models["providers"]["mock-openai"];
    let mut second = provider["models"][0].clone();
    second["id"] = "second-model".into();
    second["name"] = "second-model".into();
    provider["models"].as_array_mut().unwrap().push(second);
    let runtime = runtime_with(agent_dir.path(), models, &[]).await;

    let first = runtime
        .prepare(&SessionSpec::new(cwd.path().to_path_buf()))
        .unwrap();
    let id = first.header().id.clone();
    let agent = first.start(Arc::new(Recorder::default()));
    prompted(&agent, "remember this").await;
    let file = agent.wire_state().session_file.unwrap();
    assert_eq!(agent.wire_state().model.unwrap().id, "test-model");
    agent.shutdown().await;

    for resume in [Resume::Id(id.clone()), Resume::Path(file.clone().into())] {
        let spec = SessionSpec {
            resume: resume.clone(),
            ..SessionSpec::new(cwd.path().to_path_buf())
        };
        let agent = runtime
            .prepare(&spec)
            .unwrap()
            .start(Arc::new(Recorder::default()));
        assert_eq!(agent.wire_state().session_id, id, "{resume:?}");
        assert_eq!(agent.last_assistant_text().as_deref(), Some("stored"));
        agent.shutdown().await;
    }

    let spec = SessionSpec {
        model: Some(ModelChoice {
            provider: Some("mock-openai".into()),
            id: "second-model".into(),
        }),
        ..SessionSpec::new(cwd.path().to_path_buf())
    };
    let agent = runtime
        .prepare(&spec)
        .unwrap()
        .start(Arc::new(Recorder::default()));
    assert_eq!(agent.wire_state().model.unwrap().id, "second-model");
    agent.shutdown().await;

    // An id prefix is a person's shortcut; a client names a session exactly.
    let prefix = SessionSpec {
        resume: Resume::Id(id[..8].to_owned()),
        ..SessionSpec::new(cwd.path().to_path_buf())
    };
    let unknown_model = SessionSpec {
        model: Some(ModelChoice {
            provider: None,
            id: "no-such-model".into(),
        }),
        ..SessionSpec::new(cwd.path().to_path_buf())
    };
    let missing_file = SessionSpec {
        resume: Resume::Path("gone/away.jsonl".into()),
        ..SessionSpec::new(cwd.path().to_path_buf())
    };
    for (spec, named) in [
        (prefix, &id[..8]),
        (unknown_model, "no-such-model"),
        (missing_file, "gone/away.jsonl"),
    ] {
        let err = runtime
            .prepare(&spec)
            .err()
            .expect("it cannot be opened")
            .to_string();
        assert!(err.contains(named), "{err}");
    }
}

/// A client's MCP server that cannot be used is refused with its name, before anything starts.
/// (How a client's servers start is `mcp::config`'s unit tests: in this test binary the library
/// cannot act as the launcher that every program nova starts goes through.)
#[tokio::test(flavor = "current_thread")]
async fn a_bad_client_mcp_server_is_refused_with_its_name() {
    let mock = MockLlm::start();
    let agent_dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let runtime = runtime_with(agent_dir.path(), openai_models(&mock), &["--no-session"]).await;
    let server = |name: &str, transport: ClientTransport| ClientServer {
        name: name.into(),
        transport,
    };
    let http = |url: &str| ClientTransport::Http {
        url: url.into(),
        headers: Vec::new(),
    };
    let stdio = |command: &str| ClientTransport::Stdio {
        command: command.into(),
        args: Vec::new(),
        env: Vec::new(),
    };
    for (servers, named, problem) in [
        (
            vec![server("web", http("ftp://127.0.0.1/mcp"))],
            "\"web\"",
            "http",
        ),
        (vec![server("blank", stdio(" "))], "\"blank\"", "empty"),
        (vec![server("a b", stdio("x"))], "\"a b\"", "letters"),
        (
            vec![
                server("my-tools", stdio("x")),
                server("my_tools", stdio("y")),
            ],
            "\"my_tools\"",
            "twice",
        ),
    ] {
        let spec = SessionSpec {
            mcp_servers: servers,
            ..SessionSpec::new(cwd.path().to_path_buf())
        };
        let err = runtime.prepare(&spec).err().expect("refused").to_string();
        assert!(err.contains(named) && err.contains(problem), "{err}");
    }
}
