//! A provider that answers with a redirect to another server must not receive nova's
//! credentials there (issue 16, class 10): the redirect is not followed, and the turn's error
//! says where it pointed.

use crate::support::nova_proc::Nova;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Reads one HTTP/1.1 request (head and a `Content-Length` body) and returns its head.
fn read_request(stream: &TcpStream) -> String {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    head
}

/// A server that records every request head it gets and answers each with `response`.
fn server(response: String) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let head = read_request(&stream);
            log.lock().unwrap().push(head);
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (url, seen)
}

#[test]
fn a_cross_origin_redirect_is_not_followed_with_the_credentials() {
    let (elsewhere, elsewhere_seen) = server(
        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .into(),
    );
    for api in ["anthropic-messages", "openai-completions"] {
        let target = format!("{elsewhere}/stolen");
        let (provider, provider_seen) = server(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n"
        ));
        let mut nova = Nova::builder()
            .models_json(json!({"providers": {"gateway": {
                "baseUrl": provider,
                "api": api,
                "apiKey": "sk-secret-key",
                "headers": {"X-Team-Token": "team-secret"},
                "models": [{"id": "m"}],
            }}}))
            .settings(json!({"retry": {"enabled": false}}))
            .spawn();
        nova.request_ok(json!({"type": "prompt", "message": "hi"}));
        let end = nova.wait_for_type("agent_end", Duration::from_secs(20));
        let error = end["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["errorMessage"].as_str())
            .unwrap_or_default()
            .to_owned();
        assert!(error.contains("307"), "{api}: {error}");
        assert!(error.contains(&target), "{api}: {error}");
        assert!(error.contains("another origin"), "{api}: {error}");
        assert_eq!(provider_seen.lock().unwrap().len(), 1, "{api}");
        let heads = provider_seen.lock().unwrap().concat().to_ascii_lowercase();
        assert!(heads.contains("sk-secret-key") && heads.contains("team-secret"));
        assert!(
            elsewhere_seen.lock().unwrap().is_empty(),
            "{api}: the other server was reached: {:?}",
            elsewhere_seen.lock().unwrap()
        );
        assert!(
            !nova.stderr().contains("sk-secret-key"),
            "{}",
            nova.stderr()
        );
    }
}
