//! Issue 16, classes 1, 5 and 6, end to end: a file tool acts on the path it checked even when a
//! `bash` call of the same reply swaps a directory for a symlink; `export_html` never writes
//! through a link or outside the workspace for a relative path; special files are refused at
//! once, and `abort` answers within a second whatever the file tools are stuck on.

use super::sandbox::outside;
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, NovaBuilder};
use nix::sys::stat::Mode;
use nix::unistd::mkfifo;
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn builder(mock: &MockLlm) -> NovaBuilder {
    // The OpenAI wire keeps the scripted tool call ids.
    Nova::builder().openai(mock)
}

/// Each call's `(isError, text)`, by tool call id.
fn result(events: &[Value], id: &str) -> (bool, String) {
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool_execution_end for {id}"));
    let text = end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    (end["isError"] == true, text.to_owned())
}

fn fifo(path: &Path) {
    mkfifo(path, Mode::from_bits_truncate(0o644)).unwrap();
}

/// The reported escape: `edit` opens `dir/file`, a FIFO, and waits; the `bash` call beside it
/// swaps `dir` for a link to a directory outside the workspace and only then feeds the FIFO, so
/// the edit's write comes exactly after the swap. Nothing outside may change, and nothing may
/// be written without asking.
#[test]
fn a_bash_call_swapping_the_directory_cannot_redirect_an_edit() {
    let out = outside();
    let precious = out.path().join("file");
    fs::write(&precious, "precious a\n").unwrap();
    let mock = MockLlm::start();
    let swap = format!(
        "mv dir dir.old && ln -s {} dir && timeout 3 sh -c 'printf a > dir.old/file'; true",
        out.path().display()
    );
    mock.push(
        Reply::new()
            .tool_call(
                "edit",
                "edit",
                json!({"path": "dir/file", "edits": [{"oldText": "a", "newText": "OWNED"}]}),
            )
            .tool_call("swap", "bash", json!({"command": swap})),
    );
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock).file("dir/.keep", "").spawn();
    fifo(&nova.cwd().join("dir/file"));
    let events = nova.run_prompt("edit it");
    assert_eq!(fs::read_to_string(&precious).unwrap(), "precious a\n");
    let (failed, text) = result(&events, "edit");
    assert!(failed, "{text}");
    assert!(
        text.contains("Not a regular file") && text.contains("FIFO"),
        "{text}"
    );
    assert!(events.iter().all(|e| e["type"] != "permission_request"));
}

/// The same race made exact by the permission gate: the user approves a write to the path the
/// request names, a `bash` call (approved first) swaps a directory on that path for a link,
/// and only then is the write approved. It must not land where the link points.
#[test]
fn an_approved_write_goes_to_the_approved_path_or_nowhere() {
    let approved_dir = outside();
    let elsewhere = outside();
    let base = approved_dir.path().canonicalize().unwrap();
    fs::create_dir(base.join("dir")).unwrap();
    let precious = elsewhere.path().join("file");
    fs::write(&precious, "precious").unwrap();
    let target = base.join("dir/file");
    let swap = format!(
        "mv {0}/dir {0}/dir.old && ln -s {1} {0}/dir",
        base.display(),
        elsewhere.path().display()
    );
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("swap", "bash", json!({"command": swap, "sandbox": false}))
            .tool_call(
                "write",
                "write",
                json!({"path": target.display().to_string(), "content": "approved"}),
            ),
    );
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock).spawn();
    nova.request_ok(json!({"type": "prompt", "message": "write"}));
    let bash_request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(bash_request["toolName"], "bash");
    let write_request = nova.wait_for_type("permission_request", EVENT_TIMEOUT);
    assert_eq!(write_request["toolName"], "write");
    assert_eq!(write_request["command"], target.display().to_string());
    nova.answer_permission(&bash_request, true);
    nova.wait_for(
        |e| e["type"] == "tool_execution_end" && e["toolCallId"] == "swap",
        EVENT_TIMEOUT,
    );
    assert!(fs::symlink_metadata(base.join("dir")).unwrap().is_symlink());
    nova.answer_permission(&write_request, true);
    let events = nova.events_until("agent_settled");
    assert_eq!(fs::read_to_string(&precious).unwrap(), "precious");
    let (failed, text) = result(&events, "write");
    assert!(failed, "{text}");
    assert!(
        text.contains("changed after the path was checked"),
        "{text}"
    );
    assert!(!base.join("dir.old/file").exists());
}

fn session_stem(nova: &mut Nova) -> String {
    let state = nova.request_ok(json!({"type": "get_state"}));
    match state["sessionFile"].as_str() {
        Some(file) => Path::new(file)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        None => state["sessionId"].as_str().unwrap().to_owned(),
    }
}

fn export_error(nova: &mut Nova, output_path: Option<&str>) -> String {
    let mut command = json!({"type": "export_html"});
    if let Some(p) = output_path {
        command["outputPath"] = json!(p);
    }
    let r = nova.request(command);
    assert_eq!(r["success"], false, "{r}");
    r["error"].as_str().unwrap().to_owned()
}

#[test]
fn export_html_never_writes_through_a_link_or_out_of_the_workspace() {
    let out = outside();
    let keys = out.path().join("authorized_keys");
    let profile = out.path().join(".profile");
    fs::write(&keys, "ssh-ed25519 AAAA user\n").unwrap();
    fs::write(&profile, "export PATH\n").unwrap();
    let mock = MockLlm::start();
    mock.push(Reply::text("hello"));
    let mut nova = builder(&mock).spawn();
    nova.run_prompt("hi");
    let cwd = nova.cwd();
    let stem = session_stem(&mut nova);
    let default = cwd.join(format!("nova-session-{stem}.html"));
    symlink(&keys, &default).unwrap();
    symlink(&profile, cwd.join("notes.html")).unwrap();
    symlink(out.path(), cwd.join("sub")).unwrap();
    fifo(&cwd.join("pipe.html"));

    let text = export_error(&mut nova, None);
    assert!(text.contains("symbolic link"), "{text}");
    let text = export_error(&mut nova, Some("notes.html"));
    assert!(text.contains("symbolic link"), "{text}");
    for escape in ["../escape.html", "sub/escape.html"] {
        let text = export_error(&mut nova, Some(escape));
        assert!(text.contains("inside the workspace"), "{escape}: {text}");
    }
    let text = export_error(&mut nova, Some("pipe.html"));
    assert!(
        text.contains("Not a regular file") && text.contains("FIFO"),
        "{text}"
    );
    // An absolute path is the client's choice, but a link there is not followed either.
    let text = export_error(&mut nova, Some(cwd.join("notes.html").to_str().unwrap()));
    assert!(text.contains("symbolic link"), "{text}");

    assert_eq!(
        fs::read_to_string(&keys).unwrap(),
        "ssh-ed25519 AAAA user\n"
    );
    assert_eq!(fs::read_to_string(&profile).unwrap(), "export PATH\n");
    assert!(!out.path().join("escape.html").exists());
    assert!(!cwd.parent().unwrap().join("escape.html").exists());
    assert!(fs::symlink_metadata(&default).unwrap().is_symlink());

    // A regular file is replaced, and a relative path below the workspace still works.
    fs::remove_file(&default).unwrap();
    fs::write(&default, "old").unwrap();
    let r = nova.request_ok(json!({"type": "export_html"}));
    assert_eq!(PathBuf::from(r["path"].as_str().unwrap()), default);
    assert!(fs::read_to_string(&default).unwrap().contains("hello"));
    fs::create_dir(cwd.join("pages")).unwrap();
    nova.request_ok(json!({"type": "export_html", "outputPath": "pages/p.html"}));
    assert!(cwd.join("pages/p.html").is_file());
}

/// `/dev/zero` once grew to 2 GB in memory; a FIFO held a thread (and `grep` the whole call).
#[test]
fn special_files_are_refused_at_once_by_name() {
    let mock = MockLlm::start();
    mock.push(
        Reply::new()
            .tool_call("zero", "read", json!({"path": "/dev/zero"}))
            .tool_call("fifo", "read", json!({"path": "pipe"}))
            .tool_call("grep", "grep", json!({"pattern": "x", "path": "pipe"}))
            .tool_call("image", "view_image", json!({"path": "/dev/zero"}))
            .tool_call("write", "write", json!({"path": "pipe", "content": "x"})),
    );
    mock.push(Reply::text("done"));
    let mut nova = builder(&mock)
        .args(["--tools", "read,grep,view_image,write"])
        .spawn();
    fifo(&nova.cwd().join("pipe"));
    let started = Instant::now();
    let events = nova.run_prompt("read them");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let (failed, text) = result(&events, "zero");
    assert!(failed, "{text}");
    assert_eq!(
        text,
        "Not a regular file: /dev/zero is a character device; nova's file tools read regular \
         files only"
    );
    for (id, kind) in [
        ("fifo", "a FIFO"),
        ("image", "a character device"),
        ("write", "a FIFO"),
    ] {
        let (failed, text) = result(&events, id);
        assert!(
            failed && text.contains("Not a regular file") && text.contains(kind),
            "{id}: {text}"
        );
    }
    assert_eq!(
        result(&events, "grep"),
        (false, "No matches found".to_owned())
    );
    let meta = fs::symlink_metadata(nova.cwd().join("pipe")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
}

/// Fifty reads of FIFOs and an edit of one in a reply, beside a long command: none of them waits
/// on its FIFO (the edit once held the run, and with it `abort`, forever), `abort` answers
/// within a second, and the commands after it (`get_state`, `export_html`) answer too.
#[test]
fn abort_answers_within_a_second_whatever_the_file_tools_wait_on() {
    let mock = MockLlm::start();
    let mut reply = Reply::new();
    for i in 0..50 {
        reply = reply.tool_call(format!("r{i}"), "read", json!({"path": format!("p{i}")}));
    }
    reply = reply
        .tool_call(
            "edit",
            "edit",
            json!({"path": "p0", "edits": [{"oldText": "a", "newText": "b"}]}),
        )
        .tool_call("long", "bash", json!({"command": "sleep 30"}));
    mock.push(reply);
    mock.push(Reply::text("after"));
    let mut nova = builder(&mock).spawn();
    for i in 0..50 {
        fifo(&nova.cwd().join(format!("p{i}")));
    }
    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    // Ends come in call order, so the edit's end means every read has ended too, none of them
    // waiting on its FIFO; the long command is still running.
    let edit = nova.wait_for(
        |e| e["type"] == "tool_execution_end" && e["toolCallId"] == "edit",
        EVENT_TIMEOUT,
    );
    let text = edit["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Not a regular file"), "{text}");
    let started = Instant::now();
    let r = nova.request(json!({"type": "abort"}));
    let took = started.elapsed();
    assert_eq!(r["success"], true, "{r}");
    assert!(took < Duration::from_secs(1), "abort took {took:?}");
    let events = nova.events_until("agent_settled");
    assert_eq!(
        result(&events, "long"),
        (true, "Command aborted".to_owned())
    );
    let started = Instant::now();
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["isStreaming"], false);
    let exported = nova.request_ok(json!({"type": "export_html", "outputPath": "after.html"}));
    assert!(Path::new(exported["path"].as_str().unwrap()).is_file());
    assert!(started.elapsed() < Duration::from_secs(2));
}
