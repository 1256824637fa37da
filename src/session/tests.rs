#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::paths::{Scope, cwd_slug, default_dir, newest, resolve};
use super::*;
use crate::protocol::{
    AssistantMessage, ContentBlock, StopReason, ToolResultMessage, Usage, UserMessage,
};
use serde_json::json;
use std::time::Duration;

const PI_SESSION: &str = include_str!("testdata/pi-session.jsonl");
const PI_BRANCHED: &str = include_str!("testdata/pi-branched.jsonl");

fn user(text: &str) -> Arc<Message> {
    Arc::new(Message::User(UserMessage {
        content: UserContent::Text(text.into()),
        timestamp: 1,
    }))
}

fn assistant(text: &str) -> Arc<Message> {
    Arc::new(Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::text(text)],
        api: "openai-completions".into(),
        provider: "ollama".into(),
        model: "m1".into(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        response_id: None,
        thinking_level: None,
        raw_stop_reason: None,
        duration_ms: None,
        timestamp: 2,
    }))
}

fn tool_result(text: &str) -> Arc<Message> {
    Arc::new(Message::ToolResult(ToolResultMessage {
        tool_call_id: "c1".into(),
        tool_name: "bash".into(),
        content: vec![ContentBlock::text(text)],
        details: None,
        is_error: false,
        duration_ms: None,
        timestamp: 3,
    }))
}

fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn texts<M: AsRef<Message>>(messages: &[M]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m.as_ref() {
            Message::User(u) => format!("user:{}", u.content.joined_text()),
            Message::Assistant(a) => {
                format!("assistant:{}", crate::protocol::joined_text(&a.content))
            }
            Message::ToolResult(r) => {
                format!("result:{}", crate::protocol::joined_text(&r.content))
            }
            Message::CompactionSummary(c) => format!("summary:{}", c.summary),
            Message::BashExecution(b) => format!("bash:{}", b.command),
            Message::Custom(c) => format!("custom:{}", c.content.joined_text()),
        })
        .collect()
}

fn as_floats(v: Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(a) => Value::Array(a.into_iter().map(as_floats).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, as_floats(v))).collect()),
        other => other,
    }
}

fn fixture(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_file_appears_with_the_first_user_message_header_first() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions/--tmp-p--");
    let mut s = Session::create(Some(sessions.clone()), Path::new("/tmp/p"), None);
    let path = s.path().unwrap().to_path_buf();
    assert_eq!(path.parent().unwrap(), sessions);
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with(&format!("_{}.jsonl", s.id())), "{name}");
    assert!(
        !name.contains(':') && name.matches('.').count() == 1,
        "{name}"
    );

    s.append_model_change("ollama", "m1").unwrap();
    s.append_thinking_level("off").unwrap();
    assert!(
        !sessions.exists(),
        "nothing is written before a user message"
    );
    s.append_message(&user("hi")).unwrap();
    let got = lines(&path);
    assert_eq!(got.len(), 4);
    assert_eq!(got[0]["type"], "session");
    assert_eq!(got[0]["version"], 3);
    assert_eq!(got[0]["id"], s.id());
    assert_eq!(got[0]["cwd"], "/tmp/p");
    let types: Vec<&str> = got[1..]
        .iter()
        .map(|l| l["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["model_change", "thinking_level_change", "message"]);
    assert!(uuid::Uuid::parse_str(s.id()).unwrap().get_version_num() == 7);
}

#[test]
fn every_append_is_on_disk_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::create(Some(dir.path().into()), Path::new("/p"), None);
    let path = s.path().unwrap().to_path_buf();
    s.append_message(&user("first")).unwrap();
    for i in 0..20 {
        let id = match i % 4 {
            0 => s.append_message(&assistant("a")),
            1 => s.append_message(&tool_result("r")),
            2 => s.append_model_change("ollama", "m2"),
            _ => s.append_session_info(" name "),
        }
        .unwrap();
        let got = lines(&path);
        assert_eq!(got.len(), i + 3);
        assert_eq!(got.last().unwrap()["id"], id.as_str());
    }
    assert_eq!(s.name(), Some("name"));
}

#[test]
fn ids_are_unique_8_hex_and_chained_to_the_leaf() {
    let mut s = Session::create(None, Path::new("/p"), None);
    let mut ids = Vec::new();
    for i in 0..500 {
        let m = if i % 2 == 0 {
            user("u")
        } else {
            assistant("a")
        };
        let id = s.append_message(&m).unwrap();
        assert_eq!(id.len(), 8);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(s.leaf_id(), Some(id.as_str()));
        ids.push(id);
    }
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
    assert_eq!(s.entries()[0].parent_id, None);
    for (i, e) in s.entries().iter().enumerate().skip(1) {
        assert_eq!(e.parent_id.as_deref(), Some(ids[i - 1].as_str()));
    }
    assert_eq!(s.path(), None);
    assert_eq!(s.context().messages.len(), 500);
}

#[test]
fn an_in_memory_session_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("cwd");
    let mut s = Session::create(None, &cwd, None);
    s.append_message(&user("hi")).unwrap();
    s.append_message(&assistant("yo")).unwrap();
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    let (forked, text) = s.fork(&s.entries()[0].id.clone(), None).unwrap();
    assert_eq!((forked.path(), text.as_str()), (None, "hi"));
    assert_eq!(forked.parent_session(), None);
}

#[test]
fn torn_and_malformed_lines_are_skipped_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::create(Some(dir.path().into()), Path::new("/p"), None);
    let path = s.path().unwrap().to_path_buf();
    s.append_message(&user("one")).unwrap();
    s.append_message(&assistant("two")).unwrap();
    let good = fs::read_to_string(&path).unwrap();
    let mut text: Vec<&str> = good.lines().collect();
    text.insert(2, "{\"type\":\"message\",\"id\":");
    let mut broken = text.join("\n");
    broken.push_str("\n{\"type\":\"message\",\"id\":\"abcd0123\",\"parentId\":\"x\",\"mess");
    fs::write(&path, &broken).unwrap();

    let (mut s, warnings) = Session::open(&path).unwrap();
    assert_eq!(
        warnings,
        [format!("skipped 2 malformed line(s) in {}", path.display())]
    );
    assert_eq!(texts(&s.context().messages), ["user:one", "assistant:two"]);

    // The torn fragment stays a line of its own: the next entry is not glued onto it.
    s.append_message(&user("three")).unwrap();
    let (s, warnings) = Session::open(&path).unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        texts(&s.context().messages),
        ["user:one", "assistant:two", "user:three"]
    );
}

#[test]
fn a_file_without_a_header_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path(), "x.jsonl", "{\"type\":\"message\"}\n");
    let err = Session::open(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    let empty = fixture(dir.path(), "e.jsonl", "");
    assert!(Session::open(&empty).is_err());
}

#[test]
fn a_pi_file_loads_and_unknown_entries_stay_out_of_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path(), "pi.jsonl", PI_SESSION);
    let (mut s, warnings) = Session::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(s.id(), "019a2b3c-4d5e-7f60-8a9b-0c1d2e3f4a5b");
    assert_eq!(s.cwd(), "/home/u/project");
    assert_eq!(s.entries().len(), 13);
    assert_eq!(s.leaf_id(), Some("a3b4c5d6"));
    let ctx = s.context();
    assert_eq!(
        texts(&ctx.messages),
        [
            "summary:## Goal\nList the files.",
            "assistant:There are two entries: Cargo.toml and src.",
            "bash:git status",
            "custom:injected",
            "user:Thanks",
        ]
    );
    let Message::CompactionSummary(c) = &*ctx.messages[0] else {
        panic!()
    };
    assert_eq!((c.tokens_before, c.timestamp), (332, 1_767_607_205_000));
    assert_eq!(ctx.model, Some(("ollama".into(), "llama3.1:8b".into())));
    assert_eq!(ctx.thinking_level.as_deref(), Some("off"));
    assert_eq!(ctx.name.as_deref(), Some("File listing"));
    let other: Vec<&str> = s
        .entries()
        .iter()
        .filter_map(|e| match &e.body {
            Body::Other(v) => v["type"].as_str(),
            _ => None,
        })
        .collect();
    assert_eq!(other, ["custom", "label"]);

    // Appending keeps every line Pi wrote, byte for byte.
    s.append_message(&assistant("welcome")).unwrap();
    let now = fs::read_to_string(&path).unwrap();
    assert!(now.starts_with(PI_SESSION));
    let (again, _) = Session::open(&path).unwrap();
    assert_eq!(again.entries()[..13], s.entries()[..13]);
    assert_eq!(again.context().messages.len(), 6);
}

#[test]
fn nova_writes_pi_field_names_in_pis_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::create(
        Some(dir.path().into()),
        Path::new("/p"),
        Some("/old.jsonl".into()),
    );
    s.append_model_change("ollama", "m1").unwrap();
    s.append_thinking_level("high").unwrap();
    let first = s.append_message(&user("hi")).unwrap();
    s.append_session_info("n").unwrap();
    s.append_compaction(
        "sum",
        &first,
        10,
        Some(json!({"readFiles": []})),
        None,
        false,
    )
    .unwrap();
    let text = fs::read_to_string(s.path().unwrap()).unwrap();
    let keys: Vec<Vec<String>> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        })
        .collect();
    let common = ["id", "parentId", "timestamp", "type"];
    let with = |extra: &[&str]| {
        let mut k: Vec<String> = common.iter().chain(extra).map(|s| s.to_string()).collect();
        k.sort();
        k
    };
    let mut header = vec!["cwd", "id", "parentSession", "timestamp", "type", "version"];
    header.sort();
    assert_eq!(keys[0], header);
    assert_eq!(keys[1], with(&["provider", "modelId"]));
    assert_eq!(keys[2], with(&["thinkingLevel"]));
    assert_eq!(keys[3], with(&["message"]));
    assert_eq!(keys[4], with(&["name"]));
    assert_eq!(
        keys[5],
        with(&["summary", "firstKeptEntryId", "tokensBefore", "details"])
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(r#"{"type":"session","version":3,"id":"#));
    assert!(lines[1].starts_with(r#"{"type":"model_change","id":""#));
    assert!(lines[1].contains(r#","parentId":null,"timestamp":""#));
    let header: Value = serde_json::from_str(lines[0]).unwrap();
    let ts = header["timestamp"].as_str().unwrap();
    // JavaScript's toISOString: milliseconds and a Z.
    assert_eq!((ts.len(), &ts[19..20], &ts[23..]), (24, ".", "Z"), "{ts}");
}

#[test]
fn an_omitted_reply_stays_in_the_file_but_leaves_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::create(Some(dir.path().into()), Path::new("/p"), None);
    s.append_message(&user("u1")).unwrap();
    let failed = assistant("cut");
    let failed_id = s.append_message(&failed).unwrap();
    // Only the newest entry can be omitted this way.
    s.omit_last_message(&user("other")).unwrap();
    assert_eq!(s.entries().len(), 2);
    s.omit_last_message(&failed).unwrap();
    s.append_message(&assistant("whole")).unwrap();
    assert_eq!(texts(&s.context().messages), ["user:u1", "assistant:whole"]);
    let path = s.path().unwrap().to_path_buf();
    let edit = &lines(&path)[3];
    assert_eq!(
        (&edit["type"], &edit["parentId"], &edit["targetId"]),
        (&json!("context_edit"), &json!(failed_id), &json!(failed_id))
    );
    assert_eq!(edit["replacement"], Value::Null);
    // Pi writes the same entry; one that replaces content is kept but not applied.
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str(&format!(
        "{}\n",
        json!({"type": "context_edit", "id": "e2", "parentId": s.leaf_id().unwrap(),
               "timestamp": "2026-01-01T00:00:00.000Z", "targetId": failed_id,
               "replacement": {"content": "x"}})
    ));
    fs::write(&path, text).unwrap();
    let (reopened, warnings) = Session::open(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        texts(&reopened.context().messages),
        ["user:u1", "assistant:whole"]
    );
    assert!(matches!(
        reopened.entries()[2].body,
        Body::ContextOmit { .. }
    ));
    assert!(matches!(reopened.entries()[4].body, Body::Other(_)));
}

#[test]
fn compaction_rebuilds_the_context_from_the_kept_entry() {
    let mut s = Session::create(None, Path::new("/p"), None);
    s.append_message(&user("u1")).unwrap();
    s.append_message(&assistant("a1")).unwrap();
    let kept = s.append_message(&user("u2")).unwrap();
    s.append_message(&assistant("a2")).unwrap();
    s.append_message(&tool_result("r2")).unwrap();
    let compaction = s
        .append_compaction("S", &kept, 99, None, None, false)
        .unwrap();
    s.append_message(&user("u3")).unwrap();
    let ctx = s.context_entries();
    assert_eq!(ctx[0].0, compaction);
    assert_eq!(ctx[1].0, kept);
    let messages: Vec<Arc<Message>> = ctx.into_iter().map(|(_, m)| m).collect();
    assert_eq!(
        texts(&messages),
        [
            "summary:S",
            "user:u2",
            "assistant:a2",
            "result:r2",
            "user:u3"
        ]
    );

    // A second compaction supersedes the first.
    let u3 = s.entries().last().unwrap().id.clone();
    s.append_compaction("T", &u3, 5, None, None, false).unwrap();
    assert_eq!(texts(&s.context().messages), ["summary:T", "user:u3"]);
}

#[test]
fn fork_holds_the_path_before_the_message_and_points_at_its_parent_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path(), "b.jsonl", PI_BRANCHED);
    let (s, _) = Session::open(&path).unwrap();
    let forks = dir.path().join("forks");

    let (f, text) = s.fork("66666666", Some(forks.clone())).unwrap();
    assert_eq!(text, "Shorter");
    assert_ne!(f.id(), s.id());
    assert_eq!(f.parent_session(), Some(path.to_str().unwrap()));
    let ids: Vec<&str> = f.entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["11111111", "22222222", "55555555"]);
    let written = lines(f.path().unwrap());
    assert_eq!(written[0]["parentSession"], path.to_str().unwrap());
    assert_eq!(written.len(), 4);
    let (reloaded, _) = Session::open(f.path().unwrap()).unwrap();
    assert_eq!(reloaded.entries(), f.entries());

    for bad in ["22222222", "nope"] {
        let err = s.fork(bad, Some(forks.clone())).unwrap_err().to_string();
        assert_eq!(err, format!("Invalid entry ID for forking: {bad}"));
    }
    // Forking the first message leaves nothing to write yet.
    let (first, text) = s.fork("11111111", Some(forks.clone())).unwrap();
    assert_eq!((text.as_str(), first.entries().len()), ("Write a poem", 0));
    assert!(!first.path().unwrap().exists());
}

#[test]
fn clone_copies_the_current_branch_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path(), "b.jsonl", PI_BRANCHED);
    let (s, _) = Session::open(&path).unwrap();
    let c = s.clone_session(Some(dir.path().join("c"))).unwrap();
    let ids: Vec<&str> = c.entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        ["11111111", "22222222", "55555555", "66666666", "77777777"]
    );
    assert_eq!(c.leaf_id(), Some("77777777"));
    assert_eq!(c.parent_session(), Some(path.to_str().unwrap()));
    let (reloaded, _) = Session::open(c.path().unwrap()).unwrap();
    assert_eq!(
        texts(&reloaded.context().messages),
        [
            "user:Write a poem",
            "assistant:Roses.",
            "user:Shorter",
            "assistant:Red."
        ]
    );
}

#[test]
fn tree_and_fork_messages_span_every_branch() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path(), "b.jsonl", PI_BRANCHED);
    let (s, _) = Session::open(&path).unwrap();
    let tree = serde_json::to_value(s.tree()).unwrap();
    assert_eq!(tree["leafId"], "77777777");
    assert_eq!(tree["tree"].as_array().unwrap().len(), 1);
    let root = &tree["tree"][0];
    assert_eq!(root["entry"]["id"], "11111111");
    let a1 = &root["children"][0];
    let kids: Vec<&str> = a1["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["entry"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(kids, ["33333333", "55555555"]);
    assert_eq!(
        json!({"messages": s.fork_messages()}),
        json!({"messages": [
            {"entryId": "11111111", "text": "Write a poem"},
            {"entryId": "33333333", "text": "Longer"},
            {"entryId": "66666666", "text": "Shorter"},
        ]})
    );

    let pi = fixture(dir.path(), "pi.jsonl", PI_SESSION);
    let (s, _) = Session::open(&pi).unwrap();
    let tree = serde_json::to_value(s.tree()).unwrap();
    assert_eq!(
        tree["tree"][0]["children"][0]["children"][0]["label"],
        "start"
    );
    assert!(tree["tree"][0].get("label").is_none());
}

#[test]
fn a_deep_tree_builds_and_drops_without_recursion() {
    let mut s = Session::create(None, Path::new("/p"), None);
    for _ in 0..200_000 {
        s.append_thinking_level("off").unwrap();
    }
    let tree = s.tree();
    assert_eq!(tree.tree.len(), 1);
    drop(tree);
}

#[test]
fn entries_since_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path(), "b.jsonl", PI_BRANCHED);
    let (s, _) = Session::open(&path).unwrap();
    let all = serde_json::to_value(s.entries_since(None).unwrap()).unwrap();
    assert_eq!(all["entries"].as_array().unwrap().len(), 7);
    assert_eq!(all["leafId"], "77777777");
    let expected: Vec<Value> = PI_BRANCHED
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Equal up to number spelling (`0` read into an f64 field comes back as `0.0`).
    assert_eq!(
        as_floats(all["entries"].clone()),
        as_floats(json!(expected)),
        "entries come back as Pi wrote them"
    );
    let page = s.entries_since(Some("55555555")).unwrap();
    let ids: Vec<&str> = page.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["66666666", "77777777"]);
    assert!(
        s.entries_since(Some("77777777"))
            .unwrap()
            .entries
            .is_empty()
    );
    assert_eq!(
        s.entries_since(Some("deadbeef")).unwrap_err().to_string(),
        "Entry not found: deadbeef"
    );
}

#[test]
fn a_write_error_is_returned_and_the_entry_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = fixture(dir.path(), "file", "x");
    let mut s = Session::create(Some(blocker.join("sub")), Path::new("/p"), None);
    s.append_model_change("ollama", "m").unwrap();
    let err = s.append_message(&user("hi")).unwrap_err().to_string();
    assert!(err.starts_with("Cannot write session"), "{err}");
    assert_eq!(s.entries().len(), 1);
    assert_eq!(s.leaf_id(), Some(s.entries()[0].id.as_str()));
}

#[test]
fn a_v1_file_is_migrated_to_v3() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = [
        json!({"type": "session", "id": "old-id", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/p"}),
        json!({"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": {"role": "user", "content": "a", "timestamp": 1}}),
        json!({"type": "message", "timestamp": "2025-01-01T00:00:02.000Z", "message": {"role": "user", "content": "b", "timestamp": 2}}),
        json!({"type": "compaction", "timestamp": "2025-01-01T00:00:03.000Z", "summary": "S", "firstKeptEntryIndex": 2, "tokensBefore": 3}),
    ];
    let text: String = v1.iter().map(|v| format!("{v}\n")).collect();
    let path = fixture(dir.path(), "v1.jsonl", &text);
    let (s, warnings) = Session::open(&path).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(texts(&s.context().messages), ["summary:S", "user:b"]);
    let (again, warnings) = Session::open(&path).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(lines(&path)[0]["version"], 3);
    assert_eq!(again.entries(), s.entries());
}

#[test]
fn slug_and_default_dir_follow_pi() {
    assert_eq!(cwd_slug(Path::new("/home/u/my proj")), "--home-u-my proj--");
    assert_eq!(cwd_slug(Path::new("C:\\work\\x")), "--C--work-x--");
    assert_eq!(
        default_dir(Path::new("/a"), Path::new("/w/x")),
        Path::new("/a/sessions/--w-x--")
    );
    assert_eq!(
        paths::file_name("2026-01-05T10:00:00.123Z", "u"),
        "2026-01-05T10-00-00-123Z_u.jsonl"
    );
}

fn session_file(dir: &Path, id: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let header = json!({"type": "session", "version": 3, "id": id, "timestamp": "t", "cwd": "/"});
    fixture(dir, &format!("2026_{id}.jsonl"), &format!("{header}\n"))
}

#[test]
fn ids_and_prefixes_resolve_in_scope_order() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path();
    let cwd = Path::new("/w/proj");
    let own = default_dir(agent, cwd);
    let elsewhere = agent.join("sessions/--other--");
    let a = session_file(&own, "0190aaaa-1111-7000-8000-000000000001");
    let b = session_file(&own, "0190aaab-2222-7000-8000-000000000002");
    let c = session_file(&elsewhere, "0190cccc-3333-7000-8000-000000000003");
    let d = session_file(&elsewhere, "0190aaaa-4444-7000-8000-000000000004");
    let scope = Scope {
        agent_dir: agent,
        cwd,
        session_dir: None,
    };
    assert_eq!(
        resolve("0190aaaa", scope).unwrap(),
        a,
        "the cwd's sessions first"
    );
    assert_eq!(resolve("0190AAAB", scope).unwrap(), b);
    assert_eq!(resolve("0190cc", scope).unwrap(), c);
    assert_eq!(
        resolve("0190aaaa-4444-7000-8000-000000000004", scope).unwrap(),
        d
    );
    let err = resolve("0190aa", scope).unwrap_err().to_string();
    assert!(
        err.contains("'0190aa'") && err.contains("ambiguous"),
        "{err}"
    );
    assert!(
        err.contains("0190aaaa-1111") && err.contains("0190aaab-2222"),
        "{err}"
    );
    let err = resolve("ffff", scope).unwrap_err().to_string();
    assert!(err.contains("'ffff'"), "{err}");

    assert_eq!(resolve(c.to_str().unwrap(), scope).unwrap(), c);
    let err = resolve("/nope/x.jsonl", scope).unwrap_err().to_string();
    assert!(err.contains("/nope/x.jsonl"), "{err}");

    let only = Scope {
        session_dir: Some(&elsewhere),
        ..scope
    };
    assert_eq!(resolve("0190aaaa", only).unwrap(), d);
    assert!(resolve("0190aaab", only).is_err());
}

#[test]
fn newest_is_by_modification_time() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(newest(dir.path()), None);
    let old = session_file(dir.path(), "id-z");
    let new = session_file(dir.path(), "id-a");
    let junk = fixture(dir.path(), "junk.jsonl", "not a session\n");
    let now = SystemTime::now();
    let set = |p: &Path, t: SystemTime| {
        fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap()
    };
    set(&junk, now - Duration::from_secs(200));
    set(&old, now - Duration::from_secs(100));
    set(&new, now - Duration::from_secs(10));
    assert_eq!(newest(dir.path()), Some(new.clone()));
    set(&old, now);
    assert_eq!(newest(dir.path()), Some(old));
    // A newest file without a valid header is still the newest (`--continue` salvages it).
    set(&junk, now + Duration::from_secs(10));
    assert_eq!(newest(dir.path()), Some(junk));
}

#[test]
fn every_message_shape_reads_back_as_written() {
    let rich = vec![
        Message::User(UserMessage {
            content: UserContent::Blocks(vec![
                ContentBlock::text("look"),
                ContentBlock::image("aGk=", "image/png"),
            ]),
            timestamp: 5,
        }),
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::Thinking {
                    thinking: "hmm".into(),
                    thinking_signature: Some("sig".into()),
                    redacted: Some(false),
                },
                ContentBlock::Text {
                    text: "t".into(),
                    text_signature: Some("ts".into()),
                },
                ContentBlock::ToolCall {
                    id: "c1".into(),
                    name: "edit".into(),
                    arguments: json!({"path": "a", "edits": [{"oldText": "x"}]}),
                    thought_signature: Some("th".into()),
                },
            ],
            error_message: Some("boom".into()),
            response_id: None,
            thinking_level: None,
            raw_stop_reason: None,
            duration_ms: None,
            stop_reason: StopReason::Error,
            ..match Message::clone(&assistant("")) {
                Message::Assistant(a) => a,
                _ => unreachable!(),
            }
        }),
        Message::ToolResult(ToolResultMessage {
            details: Some(json!({"diff": "-a\n+b"}).into()),
            is_error: true,
            duration_ms: None,
            ..match Message::clone(&tool_result("out")) {
                Message::ToolResult(r) => r,
                _ => unreachable!(),
            }
        }),
        Message::CompactionSummary(crate::protocol::CompactionSummaryMessage {
            summary: "s".into(),
            tokens_before: 3,
            timestamp: 4,
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::create(Some(dir.path().into()), Path::new("/p"), None);
    for m in &rich {
        s.append_message(&Arc::new(m.clone())).unwrap();
    }
    let (back, warnings) = Session::open(s.path().unwrap()).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(back.entries(), s.entries());
    let read: Vec<Message> = back
        .context()
        .messages
        .iter()
        .map(|m| Message::clone(m))
        .collect();
    assert_eq!(read, rich);
}

/// Pi's `custom_message` entry is a message of the conversation, with the entry's time, and is
/// written back as Pi wrote it.
#[test]
fn a_pi_custom_message_entry_is_a_message_and_round_trips() {
    let line = r#"{"type":"custom_message","customType":"note","content":"hi","display":true,"details":{"n":1},"id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-02T03:04:05.678Z"}"#;
    let entry = super::entry::parse(line.as_bytes()).unwrap();
    let super::entry::Body::Message(message) = &entry.body else {
        panic!("not a message: {entry:?}");
    };
    assert_eq!(texts(std::slice::from_ref(message)), ["custom:hi"]);
    let Message::Custom(custom) = &**message else {
        panic!("not custom: {message:?}");
    };
    assert_eq!(custom.timestamp, 1_767_323_045_678);
    assert_eq!(serde_json::to_string(&entry).unwrap(), line);
}
