//! `export_html`'s page as a browser sees it: a conversation rendered by `render_html` is opened
//! in headless Chromium and the DOM it built is checked. Chromium comes from `scripts/test.sh`.

use crate::support::nova_proc::wait_or_kill;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use nova::export::{ExportMeta, render_html};
use nova::protocol::{
    AssistantMessage, ContentBlock, Cost, Message, StopReason, ToolResultMessage, Usage,
    UserContent, UserMessage,
};
use serde_json::json;
use std::io::ErrorKind;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);
const INJECTED: &str = "<script>document.title='owned'</script>";

/// A PNG made here rather than shipped: 8-bit RGB, one stored (uncompressed) deflate block.
fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0); // filter: none
        for x in 0..width {
            raw.extend_from_slice(&pixel(x, y));
        }
    }
    assert!(raw.len() < 65_536, "one stored block holds at most 64 KiB");
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    let len = raw.len() as u16;
    let mut zlib = vec![0x78, 0x01, 0x01];
    zlib.extend_from_slice(&len.to_le_bytes());
    zlib.extend_from_slice(&(!len).to_le_bytes());
    zlib.extend_from_slice(&raw);
    zlib.extend_from_slice(&((b << 16) | a).to_be_bytes());

    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &zlib);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn usage(input: u64, output: u64, cost: f64) -> Usage {
    Usage {
        input,
        output,
        cache_read: 0,
        cache_write: 0,
        cache_write_1h: None,
        reasoning: None,
        total_tokens: input + output,
        cost: Cost {
            total: cost,
            ..Cost::default()
        },
    }
}

fn assistant(content: Vec<ContentBlock>, stop_reason: StopReason, at: i64) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        api: "openai-completions".into(),
        provider: "local".into(),
        model: "qwen3:8b".into(),
        usage: usage(2_100, 340, 0.0042),
        stop_reason,
        error_message: None,
        response_id: None,
        thinking_level: None,
        raw_stop_reason: None,
        duration_ms: None,
        timestamp: at,
    })
}

fn tool_result(id: &str, name: &str, content: Vec<ContentBlock>, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content,
        details: None,
        is_error,
        timestamp: 1_764_583_230_000,
    })
}

fn conversation(png_base64: &str) -> Vec<Message> {
    let t0 = 1_764_583_200_000;
    let mut aborted = assistant(
        vec![ContentBlock::text("Starting the full test run")],
        StopReason::Aborted,
        t0 + 60_000,
    );
    if let Message::Assistant(a) = &mut aborted {
        a.error_message = Some("Request was aborted".into());
    }
    vec![
        Message::User(UserMessage {
            content: UserContent::Text(format!(
                "Please look at **the parser** in `src/parse.rs`:\n\n\
                 - why does it panic?\n- can you fix it?\n\n{INJECTED}"
            )),
            timestamp: t0,
        }),
        assistant(
            vec![
                ContentBlock::Thinking {
                    thinking: "The user wants the panic explained first.".into(),
                    thinking_signature: None,
                    redacted: None,
                },
                ContentBlock::text("Let me read the file and the screenshot."),
                ContentBlock::ToolCall {
                    id: "call_read".into(),
                    name: "read".into(),
                    arguments: json!({"path": "src/parse.rs", "offset": 40}),
                    thought_signature: None,
                },
                ContentBlock::ToolCall {
                    id: "call_shot".into(),
                    name: "read".into(),
                    arguments: json!({"path": "shot.png"}),
                    thought_signature: None,
                },
            ],
            StopReason::ToolUse,
            t0 + 10_000,
        ),
        tool_result(
            "call_read",
            "read",
            vec![ContentBlock::text("ENOENT: no such file src/parse.rs")],
            true,
        ),
        tool_result(
            "call_shot",
            "read",
            vec![
                ContentBlock::text("Read image file [image/png]"),
                ContentBlock::image(png_base64, "image/png"),
            ],
            false,
        ),
        assistant(
            vec![ContentBlock::text(format!(
                "The file is missing. A table:\n\n| step | state |\n|---|---|\n| read | *failed* |\n\n{INJECTED}"
            ))],
            StopReason::Stop,
            t0 + 40_000,
        ),
        aborted,
    ]
}

/// The DOM Chromium built from the page at `path`, serialised; `None`, said on stderr, when
/// Chromium is not installed.
// Skipping rather than failing lets the suite run where Chromium cannot be installed; the
// message (shown with --nocapture) says what went unchecked. scripts/test.sh installs it, so CI
// still renders the page.
#[allow(clippy::print_stderr)]
fn dump_dom(path: &Path) -> Option<String> {
    let profile = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("dom"), dir.path().join("stderr"));
    let spawned = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", path.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            eprintln!(
                "skipping: chromium is not installed, so the exported page is not rendered; \
                 scripts/test.sh installs Debian's chromium package"
            );
            return None;
        }
        Err(e) => panic!("cannot start chromium: {e}"),
    };
    let status = wait_or_kill(&mut child, CHROMIUM_TIMEOUT, "chromium", &err_path);
    let dom = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        status.success() && dom.contains("</html>"),
        "chromium failed ({status}); stderr:\n{}",
        std::fs::read_to_string(&err_path).unwrap_or_default()
    );
    Some(dom)
}

/// The text between `start` and the next `end` after it.
fn between<'a>(dom: &'a str, start: &str, end: &str) -> &'a str {
    let from = dom
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {dom}"))
        + start.len();
    let len = dom[from..]
        .find(end)
        .unwrap_or_else(|| panic!("no {end} after {start}"));
    &dom[from..from + len]
}

#[test]
fn the_exported_page_renders_in_chromium() {
    let image = png(24, 16, |x, y| {
        if (x / 4 + y / 4) % 2 == 0 {
            [0x09, 0x69, 0xda]
        } else {
            [0xff, 0xff, 0xff]
        }
    });
    let image = STANDARD.encode(image);
    let meta = ExportMeta {
        session_id: "019a6f2e-7c41-7d2e-9d0b-4f3c2a1b0e9d".into(),
        session_name: Some(format!("Parser panic {INJECTED}")),
        cwd: "/home/dev/parser".into(),
        created: "2025-12-01T10:00:00Z".into(),
        model: Some("local/qwen3:8b".into()),
    };
    let html = render_html(&meta, &conversation(&image));
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("session.html");
    std::fs::write(&page, &html).unwrap();

    let Some(dom) = dump_dom(&page) else {
        return;
    };

    // Markdown became elements.
    for element in [
        "<strong>the parser</strong>",
        "<code>src/parse.rs</code>",
        "<li>why does it panic?</li>",
        "<td><em>failed</em></td>",
    ] {
        assert!(dom.contains(element), "missing {element} in {dom}");
    }
    // The thinking is collapsed.
    let thinking = between(&dom, "<details class=\"thinking\">", "</details>");
    assert!(
        thinking.contains("The user wants the panic explained first."),
        "{thinking}"
    );
    // Tool calls show their name and arguments, each followed by its result.
    let call = between(&dom, "<div class=\"tool\">", "<div class=\"result");
    assert!(call.contains("read"), "{call}");
    assert!(call.contains("\"src/parse.rs\""), "{call}");
    let error = between(&dom, "<div class=\"result error\">", "</pre>");
    assert!(
        error.contains("<span class=\"label\">error</span>"),
        "{error}"
    );
    assert!(
        error.contains("ENOENT: no such file src/parse.rs"),
        "{error}"
    );
    assert!(
        dom.contains(&format!("src=\"data:image/png;base64,{image}\"")),
        "no inline image in {dom}"
    );
    let aborted = between(&dom, "<div class=\"failure aborted\">", "</div>");
    assert!(aborted.contains("Request was aborted"), "{aborted}");
    // Injected markup stayed text: no script element, and the title was never changed.
    assert!(!dom.to_ascii_lowercase().contains("<script"), "{dom}");
    assert!(dom.contains("&lt;script&gt;document.title='owned'&lt;/script&gt;"));
    assert!(!dom.contains("<title>owned</title>"));
    // Usage totals: three replies of 2,440 tokens.
    assert!(dom.contains("<td>7,320</td>"), "{dom}");
    assert!(dom.contains("<td>$0.0126</td>"), "{dom}");
}
