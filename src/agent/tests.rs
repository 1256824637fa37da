//! The agent loop driven with an in-memory sink: no stdout, no RPC layer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::{Agent, EventSink, Prompted};
use crate::config::{Config, Registry, Settings, ToolSelection};
use crate::context::PromptSource;
use crate::protocol::{AssistantMessageEvent, Event, Message};
use crate::provider::http::tests::read_request;
use crate::session::Session;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Keeps every event, as a test front end would.
#[derive(Default)]
struct Recorder(Mutex<Vec<Event>>);

impl EventSink for Recorder {
    fn emit(&self, event: Event) {
        self.0.lock().unwrap().push(event);
    }
}

/// One Ollama reply, streamed as NDJSON, for every request.
async fn ollama_answering(text: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let body = format!(
        "{}\n{}\n",
        serde_json::json!({"message": {"role": "assistant", "content": text}, "done": false}),
        serde_json::json!({"message": {"role": "assistant", "content": ""}, "done": true,
            "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1}),
    );
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            read_request(&mut socket).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        }
    });
    base
}

fn config(base: &str, dir: &std::path::Path) -> Config {
    let registry = Registry::ollama_default(
        base,
        vec![crate::config::models::DiscoveredModel {
            name: "m".into(),
            trained_context: None,
        }],
        crate::config::models::DEFAULT_OLLAMA_MAX_CONTEXT,
    );
    Config {
        agent_dir: dir.to_path_buf(),
        cwd: dir.to_path_buf(),
        model: registry.models().first().cloned(),
        registry: Arc::new(registry),
        settings: Settings::default(),
        model_explicit: false,
        tools: ToolSelection::none(),
        permissions: Default::default(),
        compaction: Default::default(),
        mcp: Default::default(),
        system_prompt: None,
        append_system_prompt: None,
        no_session: true,
        max_turns: None,
        session_dir: None,
        resume: crate::config::Resume::New,
        session_name: None,
        warnings: Vec::new(),
        later: Default::default(),
        extensions: Vec::new(),
        extension_flags: Vec::new(),
        sandbox: crate::sandbox::Sandbox::off(),
        scope: Vec::new(),
        thinking_level: None,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_streams_into_the_sink() {
    let base = ollama_answering("hello").await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(&base, dir.path());
    let (prompt_source, _) = PromptSource::load(&crate::context::PromptFiles {
        context_files: true,
        agent_dir: dir.path(),
        cwd: dir.path(),
        project_trusted: false,
        custom: None,
        append: None,
        date: "2026-12-02",
    });
    let session = Session::create(None, dir.path(), None);
    let recorder = Arc::new(Recorder::default());
    let agent = Agent::new(
        config,
        session,
        prompt_source,
        crate::provider::http::SharedClient::default(),
        recorder.clone(),
    );
    let Ok(Prompted::Started(run)) = agent.prompt("hi".into(), Vec::new(), None) else {
        panic!("the prompt did not start a run");
    };
    run.start();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while agent.wire_state().is_streaming {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the run did not finish");

    let events = recorder.0.lock().unwrap().clone();
    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("agent_start"));
    assert_eq!(kinds.last().map(String::as_str), Some("agent_settled"));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. },
            ..
        } if delta == "hello"
    )));
    assert_eq!(agent.last_assistant_text().as_deref(), Some("hello"));
    assert!(matches!(&*agent.messages()[0], Message::User(_)));
}
