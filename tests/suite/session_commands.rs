//! Pi's session commands through the real binary: stats, name, fork, clone, entries, tree and
//! the HTML export.

use super::sessions::{
    Dirs, all_files, assert_in_order, file_messages, finish, is_hex8, last_request, lines,
    make_session, messages, session_file, state, text, texts,
};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::EVENT_TIMEOUT;
use serde_json::{Value, json};
use std::fs;
use std::path::PathBuf;

#[test]
fn session_stats_count_the_conversation() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("looking")
            .tool_call("c1", "bash", json!({"command": "echo a"}))
            .usage(100, 20),
    );
    mock.push(Reply::text("done").usage(150, 30));
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    let empty = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(empty["totalMessages"], 0);
    nova.run_prompt("count");
    let st = state(&mut nova);
    let stats = nova.request_ok(json!({"type": "get_session_stats"}));
    assert_eq!(
        stats,
        json!({
            "sessionId": st["sessionId"],
            "sessionFile": st["sessionFile"],
            "userMessages": 1,
            "assistantMessages": 2,
            "toolCalls": 1,
            "toolResults": 1,
            "totalMessages": 4,
            "tokens": {"input": 250, "output": 50, "cacheRead": 0, "cacheWrite": 0, "total": 300},
            "cost": 0.0,
            "contextUsage": {
                "tokens": 180,
                "contextWindow": 128000,
                "percent": 180.0 / 128000.0 * 100.0,
            },
        })
    );
    finish(nova);
}

#[test]
fn set_session_name_is_trimmed_stored_and_shown() {
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    nova.run_prompt("hi");
    assert!(state(&mut nova).get("sessionName").is_none());
    let r = nova.request(json!({"type": "set_session_name", "name": "   "}));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Session name cannot be empty");
    assert_eq!(r["command"], "set_session_name");
    let r = nova.request(json!({"type": "set_session_name", "name": "  Refactor parser \n"}));
    assert_eq!(r["success"], true, "{r}");
    assert!(r.get("data").is_none(), "{r}");
    assert_eq!(state(&mut nova)["sessionName"], "Refactor parser");
    let file = session_file(&mut nova);
    let last = lines(&file).pop().unwrap();
    assert_eq!(last["type"], "session_info");
    assert_eq!(last["name"], "Refactor parser");
    assert!(is_hex8(&last["id"]));
    let id = state(&mut nova)["sessionId"].as_str().unwrap().to_owned();
    finish(nova);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    assert_eq!(state(&mut nova)["sessionName"], "Refactor parser");
    // The name entry is no message.
    assert_eq!(messages(&mut nova).len(), 2);
    finish(nova);
}

#[test]
fn fork_messages_and_fork() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, expected) = make_session(&dirs, &mock);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let forks = nova.request_ok(json!({"type": "get_fork_messages"}));
    let user_entries: Vec<Value> = lines(&path)
        .into_iter()
        .filter(|l| l["type"] == "message" && l["message"]["role"] == "user")
        .collect();
    assert_eq!(
        forks,
        json!({"messages": [
            {"entryId": user_entries[0]["id"], "text": "first question"},
            {"entryId": user_entries[1]["id"], "text": "second question"},
        ]})
    );
    let before = fs::read(&path).unwrap();

    let r = nova.request(json!({"type": "fork", "entryId": "nope1234"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("nope1234"), "{r}");
    // Not a user message.
    let model_change = lines(&path)[1]["id"].clone();
    let r = nova.request(json!({"type": "fork", "entryId": model_change}));
    assert_eq!(r["success"], false, "{r}");

    let r = nova.request_ok(json!({"type": "fork", "entryId": user_entries[1]["id"]}));
    assert_eq!(r, json!({"text": "second question", "cancelled": false}));
    let st = state(&mut nova);
    assert_ne!(st["sessionId"], json!(id));
    let forked = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(forked, path);
    assert_eq!(forked.parent().unwrap(), dirs.session_dir());
    assert_eq!(messages(&mut nova), expected[..4]);
    let flines = lines(&forked);
    assert_eq!(flines[0]["id"], st["sessionId"]);
    assert_eq!(flines[0]["parentSession"], json!(path.to_str().unwrap()));
    assert_eq!(file_messages(&forked), expected[..4]);
    // The entries keep their ids: the path up to the fork point.
    let originals = lines(&path);
    assert_eq!(flines[1..], originals[1..flines.len()]);
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "the original is untouched"
    );

    mock.push(Reply::text("another way"));
    nova.run_prompt("different second question");
    let req = last_request(&mock);
    assert!(!req.contains("\"second question"), "{req}");
    assert_in_order(
        &req,
        &["first question", "first answer", "different second"],
    );
    assert_eq!(
        texts(&file_messages(&forked)[4..]),
        ["user:different second question", "assistant:another way"]
    );
    finish(nova);
}

#[test]
fn clone_copies_the_conversation_into_a_new_file() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, expected) = make_session(&dirs, &mock);
    let before = fs::read(&path).unwrap();
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let r = nova.request_ok(json!({"type": "clone"}));
    assert_eq!(r, json!({"cancelled": false}));
    let st = state(&mut nova);
    assert_ne!(st["sessionId"], json!(id));
    let cloned = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(cloned, path);
    assert!(cloned.is_file());
    assert_eq!(messages(&mut nova), expected);
    let clines = lines(&cloned);
    assert_eq!(clines[0]["id"], st["sessionId"]);
    assert_eq!(clines[0]["parentSession"], json!(path.to_str().unwrap()));
    assert_eq!(clines[1..], lines(&path)[1..]);
    mock.push(Reply::text("in the clone"));
    nova.run_prompt("clone question");
    finish(nova);
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "the original is untouched"
    );
    assert_eq!(file_messages(&cloned).len(), expected.len() + 2);
}

#[test]
fn get_entries_since_a_cursor_and_get_tree() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, _) = make_session(&dirs, &mock);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let file_entries: Vec<Value> = lines(&path).split_off(1);
    let leaf = file_entries.last().unwrap()["id"].clone();
    let all = nova.request_ok(json!({"type": "get_entries"}));
    assert_eq!(all, json!({"entries": file_entries, "leafId": leaf}));

    let cursor = file_entries[3]["id"].clone();
    let since = nova.request_ok(json!({"type": "get_entries", "since": cursor}));
    assert_eq!(since, json!({"entries": file_entries[4..], "leafId": leaf}));
    let at_leaf = nova.request_ok(json!({"type": "get_entries", "since": leaf}));
    assert_eq!(at_leaf, json!({"entries": [], "leafId": leaf}));
    let r = nova.request(json!({"type": "get_entries", "since": "feedf00d"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("feedf00d"), "{r}");

    // New entries show up after the old leaf as a cursor.
    mock.push(Reply::text("later"));
    nova.run_prompt("later question");
    let newer = nova.request_ok(json!({"type": "get_entries", "since": leaf}));
    let newer = newer["entries"].as_array().unwrap();
    assert_eq!(newer.len(), 2);
    assert_eq!(newer[0]["parentId"], leaf);
    assert_eq!(text(&newer[0]["message"]), "later question");

    // A linear session is a chain of single children, in file order.
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    let file_entries: Vec<Value> = lines(&path).split_off(1);
    assert_eq!(tree["leafId"], file_entries.last().unwrap()["id"]);
    let roots = tree["tree"].as_array().unwrap();
    assert_eq!(roots.len(), 1, "{tree}");
    let mut node = &roots[0];
    let mut walked = Vec::new();
    loop {
        walked.push(node["entry"].clone());
        let children = node["children"].as_array().unwrap();
        match children.len() {
            0 => break,
            1 => node = &children[0],
            n => panic!("{n} children in a linear session: {tree}"),
        }
    }
    assert_eq!(walked, file_entries);
    finish(nova);
}

#[test]
fn export_html_writes_a_self_contained_page() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (id, path, _) = make_session(&dirs, &mock);
    let mut nova = dirs.nova(&mock, &["--session", &id]);
    let r = nova.request_ok(json!({"type": "export_html"}));
    let default = PathBuf::from(r["path"].as_str().unwrap());
    assert_eq!(default.parent().unwrap(), dirs.cwd());
    let name = default.file_name().unwrap().to_str().unwrap();
    let stem = path.file_stem().unwrap().to_str().unwrap();
    assert!(
        name.ends_with(".html") && name.contains(stem),
        "named after the session file: {name}"
    );
    let out = tempfile::tempdir().unwrap();
    let given = out.path().join("conversation.html");
    let r = nova.request_ok(json!({"type": "export_html", "outputPath": given.to_str().unwrap()}));
    assert_eq!(r, json!({"path": given.to_str().unwrap()}));
    let r = nova.request_ok(json!({"type": "export_html", "outputPath": "relative.html"}));
    assert_eq!(
        r,
        json!({"path": dirs.cwd().join("relative.html").to_str().unwrap()})
    );
    for page in [&default, &given] {
        let html = fs::read_to_string(page).unwrap();
        assert!(html.starts_with("<!DOCTYPE html") || html.starts_with("<!doctype html"));
        for needle in [
            "first question",
            "first answer",
            "second question",
            "second answer",
            "tool-output-1",
            "echo tool-output-1",
        ] {
            assert!(
                html.contains(needle),
                "{needle:?} not in {}",
                page.display()
            );
        }
        assert_no_fetch(&html);
    }
    let r = nova.request(json!({"type": "export_html", "outputPath": "no/such/dir/x.html"}));
    assert_eq!(r["success"], false, "{r}");
    finish(nova);
}

/// No URL the browser would fetch: every `http://`/`https://` is an XML namespace.
fn assert_no_fetch(html: &str) {
    for (at, _) in html.match_indices("http") {
        let rest = &html[at..];
        if !(rest.starts_with("http://") || rest.starts_with("https://")) {
            continue;
        }
        let before = &html[at.saturating_sub(7)..at];
        assert!(
            before.ends_with("xmlns=\"") || before.ends_with("xmlns='"),
            "a network URL in the export: …{}…",
            &html[at.saturating_sub(40)..(at + 60).min(html.len())]
        );
    }
}

#[test]
fn get_entries_and_tree_of_a_fresh_session() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    // Nothing is on disk yet, but the session already records the model and thinking level.
    let entries = nova.request_ok(json!({"type": "get_entries"}));
    let list = entries["entries"].as_array().unwrap();
    let kinds: Vec<&str> = list.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change"]);
    assert_eq!(entries["leafId"], list[1]["id"]);
    let tree = nova.request_ok(json!({"type": "get_tree"}));
    assert_eq!(tree["leafId"], list[1]["id"]);
    assert_eq!(tree["tree"][0]["entry"], list[0]);
    assert_eq!(tree["tree"][0]["children"][0]["entry"], list[1]);
    assert_eq!(
        nova.request_ok(json!({"type": "get_fork_messages"})),
        json!({"messages": []})
    );
    assert!(all_files(dirs.cwd()).is_empty());
    assert!(!dirs.agent().join("sessions").exists());
    finish(nova);
}

#[test]
fn list_sessions_summarises_the_cwd_s_sessions_or_all_of_them_newest_first() {
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let (first_id, first_path, _) = make_session(&dirs, &mock);

    // A second session in this cwd, named, whose first message is long and spans lines.
    let long = format!("line one\n{}", "word ".repeat(100));
    mock.push(Reply::text("ok"));
    let mut nova = dirs.nova(&mock, &[]);
    nova.run_prompt(&long);
    nova.request_ok(json!({"type": "set_session_name", "name": "Second"}));
    let second_id = state(&mut nova)["sessionId"].as_str().unwrap().to_owned();

    // Another cwd's session (a Pi file), and files that are not sessions.
    let other_dir = dirs.agent().join("sessions").join("--elsewhere--");
    fs::create_dir_all(&other_dir).unwrap();
    fs::copy(
        "src/session/testdata/pi-branched.jsonl",
        other_dir.join("2026-01-06T09-00-00-000Z_pi.jsonl"),
    )
    .unwrap();
    fs::write(dirs.session_dir().join("notes.jsonl"), "not a session\n").unwrap();
    fs::write(dirs.session_dir().join("empty.jsonl"), "").unwrap();

    let listed = nova.request_ok(json!({"type": "list_sessions"}))["sessions"].clone();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let (second, first) = (&listed[0], &listed[1]);
    assert_eq!(second["id"], second_id.as_str(), "newest first");
    assert_eq!(second["name"], "Second");
    assert_eq!(second["messageCount"], 2);
    let preview = second["firstMessage"].as_str().unwrap();
    assert!(preview.starts_with("line one word word"), "{preview}");
    assert_eq!(
        preview.chars().count(),
        201,
        "200 characters and an ellipsis"
    );
    assert!(preview.ends_with('…'));

    assert_eq!(first["id"], first_id.as_str());
    assert_eq!(first["path"], first_path.to_str().unwrap());
    assert_eq!(first["cwd"], dirs.cwd().to_str().unwrap());
    assert_eq!(first["messageCount"], 6);
    assert_eq!(first["firstMessage"], "first question");
    assert!(first.get("name").is_none());
    assert!(first.get("parentSession").is_none());
    for key in ["created", "modified"] {
        let t = first[key].as_str().unwrap();
        assert!(t.starts_with("20") && t.ends_with('Z'), "{key}: {t}");
    }

    let all = nova.request_ok(json!({"type": "list_sessions", "all": true}))["sessions"].clone();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    let pi = all.iter().find(|s| s["cwd"] == "/home/u/project").unwrap();
    assert_eq!(pi["firstMessage"], "Write a poem");
    assert!(pi["parentSession"].as_str().unwrap().ends_with(".jsonl"));

    let r = nova.request(json!({"type": "list_sessions", "all": "yes"}));
    assert_eq!(r["success"], false, "{r}");
    finish(nova);
}

/// Peak resident memory of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    crate::support::nova_proc::peak_rss_kib(pid) * 1024
}

/// Issue 30 item 7: session files holding one huge line each (here 64 MiB of a `message` line,
/// sparse on disk) costs the listing a bounded buffer, not the line, and the listing runs beside
/// the command loop: a `get_state` sent after `list_sessions` is answered first.
#[test]
fn list_sessions_reads_a_huge_line_in_bounded_memory_and_blocks_no_command() {
    use std::io::{Seek, SeekFrom, Write};
    const HUGE: u64 = 64 << 20;
    const LISTING: std::time::Duration = std::time::Duration::from_secs(60);
    let mock = MockLlm::start();
    let dirs = Dirs::new();
    let mut nova = dirs.nova(&mock, &[]);
    fs::create_dir_all(dirs.session_dir()).unwrap();
    let cwd = dirs.cwd().to_str().unwrap();
    for n in 0..4 {
        let path = dirs
            .session_dir()
            .join(format!("2026-01-0{n}T00-00-00-000Z_huge.jsonl"));
        let mut file = fs::File::create(&path).unwrap();
        let header = json!({"type": "session", "version": 3, "id": format!("huge-{n}"),
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd});
        writeln!(file, "{header}").unwrap();
        // The huge line: a message's start, then zeros (a hole) up to HUGE bytes.
        file.write_all(br#"{"type":"message","message":{"role":"user","content":""#)
            .unwrap();
        file.set_len(HUGE).unwrap();
        file.seek(SeekFrom::End(0)).unwrap();
        let message = json!({"type": "message", "id": "m2", "message":
            {"role": "user", "content": "after the huge line", "timestamp": 0}});
        write!(file, "\n{message}\n").unwrap();
    }
    // The baseline is taken once nova answers, so its own start-up is not counted as listing.
    nova.request_ok(json!({"type": "get_state"}));
    let before = peak_rss(nova.pid());

    nova.send(&json!({"id": "list", "type": "list_sessions"}));
    nova.send(&json!({"id": "state", "type": "get_state"}));
    let first = nova.wait_for(|v| v["type"] == "response", EVENT_TIMEOUT);
    assert_eq!(
        first["id"], "state",
        "get_state waited for the listing: {first}"
    );
    let listed = nova.wait_for(|v| v["type"] == "response", LISTING);
    assert_eq!(listed["id"], "list", "{listed}");
    let sessions = listed["data"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 4, "{listed}");
    for s in sessions {
        assert_eq!(s["messageCount"], 2, "{s}");
        assert_eq!(s["firstMessage"], "after the huge line", "{s}");
    }
    let grown = peak_rss(nova.pid()).saturating_sub(before);
    assert!(
        grown < 32 << 20,
        "listing a {} MiB line grew nova's peak memory by {} MiB",
        HUGE >> 20,
        grown >> 20
    );
    finish(nova);
}
