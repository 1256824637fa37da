use super::*;
use crate::protocol::{Cost, UserContent, UserMessage};
use serde_json::json;

const SCRIPT: &str = "<script>alert(1)</script>";
/// A 1×1 PNG is not needed to test the page: any base64 text passes the checks.
const DATA: &str = "iVBORw0KGgo=";

fn meta() -> ExportMeta {
    ExportMeta {
        session_id: "0191-abc".into(),
        session_name: Some("Fix the parser".into()),
        cwd: "/home/me/project".into(),
        created: "2026-12-01T10:00:00Z".into(),
        model: Some("ollama/qwen3:8b".into()),
    }
}

fn user(text: &str) -> Message {
    Message::User(UserMessage {
        content: UserContent::Text(text.into()),
        timestamp: 1_764_583_200_000,
    })
}

fn assistant(content: Vec<ContentBlock>, stop_reason: StopReason) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        api: "ollama".into(),
        provider: "ollama".into(),
        model: "qwen3:8b".into(),
        usage: Usage {
            input: 1200,
            output: 300,
            cache_read: 0,
            cache_write: 0,
            cache_write_1h: None,
            reasoning: None,
            total_tokens: 1500,
            cost: Cost {
                total: 0.0125,
                ..Cost::default()
            },
        },
        stop_reason,
        error_message: None,
        response_id: None,
        thinking_level: None,
        raw_stop_reason: None,
        duration_ms: None,
        timestamp: 1_764_583_201_000,
    })
}

fn call(id: &str, name: &str, arguments: Value) -> ContentBlock {
    ContentBlock::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
        thought_signature: None,
    }
}

fn result(id: &str, name: &str, content: Vec<ContentBlock>, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content,
        details: None,
        is_error,
        timestamp: 1_764_583_202_000,
    })
}

fn thinking(text: &str) -> ContentBlock {
    ContentBlock::Thinking {
        thinking: text.into(),
        thinking_signature: None,
        redacted: None,
    }
}

#[test]
fn script_in_every_field_is_escaped() {
    let meta = ExportMeta {
        session_id: SCRIPT.into(),
        session_name: Some(SCRIPT.into()),
        cwd: SCRIPT.into(),
        created: SCRIPT.into(),
        model: Some(SCRIPT.into()),
    };
    let mut failed = assistant(
        vec![
            thinking(SCRIPT),
            ContentBlock::text(SCRIPT),
            call(SCRIPT, SCRIPT, json!({ SCRIPT: SCRIPT })),
        ],
        StopReason::Error,
    );
    if let Message::Assistant(a) = &mut failed {
        a.provider = SCRIPT.into();
        a.model = SCRIPT.into();
        a.error_message = Some(SCRIPT.into());
    }
    let messages = vec![
        user(SCRIPT),
        failed,
        result(
            SCRIPT,
            SCRIPT,
            vec![
                ContentBlock::text(SCRIPT),
                ContentBlock::image(SCRIPT, SCRIPT),
            ],
            true,
        ),
        result(
            "other",
            SCRIPT,
            vec![ContentBlock::image(DATA, SCRIPT)],
            false,
        ),
    ];
    let html = render_html(&meta, &messages);
    assert!(!html.to_ascii_lowercase().contains("<script"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn markdown_becomes_elements_and_raw_html_stays_text() {
    let text = "Some **bold** and `code`\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n\
                ```rust\nfn main() {}\n```\n\n<img src=x onerror=alert(1)> <b>raw</b>\n";
    let html = render_html(&meta(), &[user(text)]);
    for element in [
        "<strong>bold</strong>",
        "<code>code</code>",
        "<li>one</li>",
        "<table>",
        "<td>2</td>",
        "<code class=\"language-rust\">",
    ] {
        assert!(html.contains(element), "missing {element} in {html}");
    }
    assert!(!html.contains("<img src=x"), "{html}");
    assert!(!html.contains("<b>raw"), "{html}");
    assert!(html.contains("&lt;b&gt;raw&lt;/b&gt;"));
}

#[test]
fn links_keep_only_safe_schemes_and_images_never_load() {
    let text = "[ok](https://example.org/a) [bad](javascript:alert(1)) [file](file:///etc/passwd) \
                ![pixel](https://tracker.example/p.png) ![inline](data:image/png;base64,AAAA)";
    let html = render_html(&meta(), &[user(text)]);
    assert!(
        html.contains("<a href=\"https://example.org/a\">ok</a>"),
        "{html}"
    );
    assert!(
        html.contains("<a href=\"https://tracker.example/p.png\">pixel</a>"),
        "{html}"
    );
    assert!(!html.contains("javascript:"), "{html}");
    assert!(!html.contains("file:///"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    // The text of a dropped link stays.
    assert!(html.contains("bad") && html.contains("inline"));
}

#[test]
fn tool_result_follows_its_call_once() {
    let messages = vec![
        assistant(
            vec![
                call("c1", "read", json!({ "path": "src/lib.rs" })),
                call("c2", "bash", json!({ "command": "ls" })),
            ],
            StopReason::ToolUse,
        ),
        result("c2", "bash", vec![ContentBlock::text("listing")], false),
        result("c1", "read", vec![ContentBlock::text("contents")], false),
        result("gone", "edit", vec![ContentBlock::text("leftover")], false),
    ];
    let html = render_html(&meta(), &messages);
    let at = |needle: &str| {
        assert_eq!(html.matches(needle).count(), 1, "{needle} in {html}");
        html.find(needle).unwrap_or_default()
    };
    assert!(at("&quot;src/lib.rs&quot;") < at("contents"));
    assert!(at("contents") < at("&quot;ls&quot;"));
    assert!(at("&quot;ls&quot;") < at("listing"));
    assert!(at("listing") < at("leftover"));
    assert!(html.contains("<section class=\"msg tool orphan\">"));
    // Arguments are pretty-printed.
    assert!(
        html.contains("{\n  &quot;path&quot;: &quot;src/lib.rs&quot;\n}"),
        "{html}"
    );
}

#[test]
fn a_call_without_result_says_so() {
    let html = render_html(
        &meta(),
        &[assistant(
            vec![call("c1", "bash", json!({}))],
            StopReason::Aborted,
        )],
    );
    assert!(html.contains("no result recorded"));
    assert!(html.contains("<div class=\"failure aborted\"><span class=\"label\">aborted</span>"));
}

#[test]
fn errors_are_marked() {
    let mut failed = assistant(vec![ContentBlock::text("partial")], StopReason::Error);
    if let Message::Assistant(a) = &mut failed {
        a.error_message = Some("connection reset".into());
    }
    let messages = vec![
        assistant(
            vec![call("c1", "read", json!({ "path": "x" }))],
            StopReason::ToolUse,
        ),
        result("c1", "read", vec![ContentBlock::text("ENOENT: x")], true),
        failed,
    ];
    let html = render_html(&meta(), &messages);
    assert!(html.contains(
        "<div class=\"result error\">\n<div class=\"tool-name\"><span class=\"label\">error</span> read"
    ));
    assert!(html.contains("ENOENT: x"));
    assert!(html.contains(
        "<div class=\"failure error\"><span class=\"label\">error</span> connection reset</div>"
    ));
}

#[test]
fn thinking_is_collapsed() {
    let html = render_html(
        &meta(),
        &[assistant(
            vec![thinking("let me *think*"), ContentBlock::text("done")],
            StopReason::Stop,
        )],
    );
    let details = html
        .find("<details class=\"thinking\">")
        .unwrap_or(usize::MAX);
    let thought = html.find("<em>think</em>").unwrap_or(0);
    let close = html.find("</details>").unwrap_or(0);
    assert!(details < thought && thought < close, "{html}");
    assert!(!html.contains("<details open"));
}

#[test]
fn images_embed_only_when_valid() {
    let html = render_html(
        &meta(),
        &[result(
            "c",
            "read",
            vec![
                ContentBlock::image(DATA, "image/png"),
                ContentBlock::image(DATA, "text/html"),
                ContentBlock::image("AAAA\"onerror=x", "image/png"),
                ContentBlock::image(DATA, "image/png;x=\"y\""),
            ],
            false,
        )],
    );
    assert!(html.contains(&format!("src=\"data:image/png;base64,{DATA}\"")));
    assert_eq!(html.matches("<img").count(), 1, "{html}");
    assert_eq!(html.matches("image omitted").count(), 3, "{html}");
}

#[test]
fn base64_and_mime_checks() {
    assert!(is_base64("AAAA") && is_base64("AA+/AA==") && is_base64("AAA="));
    assert!(!is_base64("") && !is_base64("====") && !is_base64("AA===") && !is_base64("A A"));
    assert!(!is_base64("AA=A"));
    assert!(is_image_mime("image/png") && is_image_mime("image/svg+xml"));
    assert!(
        !is_image_mime("image/") && !is_image_mime("text/plain") && !is_image_mime("image/png ")
    );
}

#[test]
fn header_and_totals() {
    let messages = vec![
        user("hi"),
        assistant(vec![ContentBlock::text("a")], StopReason::Stop),
        assistant(vec![call("c", "ls", json!({}))], StopReason::ToolUse),
    ];
    let html = render_html(&meta(), &messages);
    assert!(html.contains("<title>Fix the parser · nova</title>"));
    for value in [
        "0191-abc",
        "/home/me/project",
        "ollama/qwen3:8b",
        "2026-12-01T10:00:00Z",
    ] {
        assert!(html.contains(&format!("<dd>{value}</dd>")), "{value}");
    }
    assert!(html.contains("<tr><th>Total tokens</th><td>3,000</td></tr>"));
    assert!(html.contains("<tr><th>Cost</th><td>$0.0250</td></tr>"));
    assert!(html.contains("<tr><th>Tool calls</th><td>1</td></tr>"));
    assert!(html.contains("<time>2025-12-01T10:00:00Z</time>"), "{html}");
    // Nothing on the page points off it.
    assert!(!html.contains("://"), "{html}");
}

#[test]
fn unnamed_session_is_titled_by_id() {
    let meta = ExportMeta {
        session_name: None,
        ..meta()
    };
    assert!(render_html::<Message>(&meta, &[]).contains("<h1>Session 0191-abc</h1>"));
}

#[test]
fn thousands_grouping() {
    assert_eq!(group(0), "0");
    assert_eq!(group(999), "999");
    assert_eq!(group(1000), "1,000");
    assert_eq!(group(1_234_567), "1,234,567");
}
