//! The runtime of sessions from library code: one process, one runtime, three sessions on three
//! working directories, each prompting at once against the mock, none seeing another's project
//! or events.

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::openai_models;
use clap::Parser;
use nova::agent::{EventSink, Prompted, Runtime};
use nova::config::{Cli, Resume, SessionSpec};
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
        let spec = SessionSpec {
            cwd: cwd.path().to_path_buf(),
            resume: Resume::New,
        };
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
