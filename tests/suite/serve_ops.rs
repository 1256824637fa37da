//! `nova serve`'s operations side: `GET /metrics` for a Prometheus scraper (over loopback TCP,
//! behind the token like every endpoint) and JSON log lines on stderr.

use super::serve::{Addr, Served, WAIT, connect, serve, serve_with};
use crate::support::mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET /metrics` as a scraper sends it: the status, the content type and the text.
async fn scrape(served: &Served, token: Option<&str>) -> (u16, String, String) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let mut io = connect(&served.addr).await;
    io.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, io.read_to_end(&mut response))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8(response).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (head[9..12].parse().unwrap(), content_type, body.to_owned())
}

/// The value of the sample `name` (with its labels, as written), if the text has it.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Over loopback TCP: no token, no figures (401); with it, Prometheus' text format with the
/// sessions live, runs in flight, clients attached, the tokens the provider reported and the
/// runs that failed.
#[tokio::test(flavor = "current_thread")]
async fn metrics_count_sessions_clients_tokens_and_errors_behind_the_token() {
    let mock = MockLlm::start();
    mock.push(Reply::text("counted").usage(1200, 34));
    mock.push(Reply::http_error(400, "no such thing"));
    let served = serve(&mock, Some("metrics-token"));
    assert!(matches!(served.addr, Addr::Tcp(_)));

    let (status, _, body) = scrape(&served, None).await;
    assert_eq!(status, 401, "{body}");
    let (status, _, body) = scrape(&served, Some("wrong")).await;
    assert_eq!(status, 401, "{body}");

    let (status, content_type, text) = scrape(&served, Some("metrics-token")).await;
    assert_eq!(status, 200, "{text}");
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    assert!(content_type.contains("version=0.0.4"), "{content_type}");
    assert_eq!(sample(&text, "nova_sessions_live"), Some(0.0), "{text}");
    assert!(text.contains("# TYPE nova_sessions_live gauge"), "{text}");

    let id = served.open(&served.nova.cwd()).await;
    let mut client = served.attach(&id, "").await;
    client
        .send(json!({"id": "p", "type": "prompt", "message": "hi"}))
        .await;
    client.until("agent_settled").await;
    client
        .send(json!({"id": "q", "type": "prompt", "message": "fail"}))
        .await;
    let failed = client.until("agent_settled").await;
    assert!(
        failed
            .iter()
            .any(|r| r["type"] == "message_end" && r["message"]["stopReason"] == "error"),
        "{failed:?}"
    );

    let (_, _, text) = scrape(&served, Some("metrics-token")).await;
    let expected: [(&str, f64); 6] = [
        ("nova_sessions_live", 1.0),
        ("nova_runs_active", 0.0),
        ("nova_clients_attached", 1.0),
        ("nova_tokens_total{kind=\"input\"}", 1200.0),
        ("nova_tokens_total{kind=\"output\"}", 34.0),
        ("nova_errors_total{kind=\"run\"}", 1.0),
    ];
    for (name, value) in expected {
        assert_eq!(sample(&text, name), Some(value), "{name} in:\n{text}");
    }
    let (status, body) = served
        .http("DELETE", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(status, 204, "{body}");
    let (_, _, text) = scrape(&served, Some("metrics-token")).await;
    assert_eq!(sample(&text, "nova_sessions_live"), Some(0.0), "{text}");
    // Counters do not go back when a session closes.
    assert_eq!(
        sample(&text, "nova_tokens_total{kind=\"input\"}"),
        Some(1200.0),
        "{text}"
    );
}

/// `--log-format json`: every line nova writes on stderr is a JSON object, its own notes
/// (listening, shutting down) and `tracing`'s records alike.
#[tokio::test(flavor = "current_thread")]
async fn json_logs_make_every_stderr_line_a_json_object() {
    let mock = MockLlm::start();
    let mut served = serve_with(&mock, None, &["--log-format", "json"]);
    let (status, body) = served.http("GET", "/health", None).await;
    assert_eq!(status, 200, "{body}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(served.nova.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = served.nova.wait_exit(WAIT);
    assert!(status.success(), "{status:?}");
    let stderr = served.nova.stderr();
    let records: Vec<Value> = stderr
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?} in:\n{stderr}"))
        })
        .collect();
    let messages: Vec<&str> = records
        .iter()
        .map(|r| {
            assert!(r["timestamp"].is_string() && r["level"].is_string(), "{r}");
            r["fields"]["message"].as_str().unwrap_or_default()
        })
        .collect();
    assert!(
        messages.iter().any(|m| m.starts_with("listening on ")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.starts_with("shutting down")),
        "{messages:?}"
    );
}
