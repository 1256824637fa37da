//! `export_html`: one conversation as one self-contained HTML page.
//!
//! The page must open anywhere, offline, years later, and the conversation in it is untrusted
//! (model output, tool output, file contents). So everything is decided here, at export time:
//! Markdown is rendered in Rust with raw HTML escaped, images are embedded as `data:` URLs only
//! after their MIME type and base64 text are checked, the page carries no script, and a
//! Content-Security-Policy forbids any fetch or script even if something slipped through.

use crate::protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolResultMessage, Usage,
};
use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};
use serde_json::Value;
use std::collections::HashSet;
use std::time::{Duration, UNIX_EPOCH};

/// What the page header says about the session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExportMeta {
    pub session_id: String,
    pub session_name: Option<String>,
    pub cwd: String,
    /// When the session started, ISO 8601 (the session header's `timestamp`).
    pub created: String,
    /// The current model, e.g. `provider/model-id`.
    pub model: Option<String>,
}

/// Inline images only, inline styles only, nothing from the network and no script at all.
const CSP: &str = "default-src 'none'; img-src data:; style-src 'unsafe-inline'";

const STYLE: &str = include_str!("page.css");

/// The whole page for `messages`, in order, with each tool result shown under the call it answers.
pub fn render_html<M: AsRef<Message>>(meta: &ExportMeta, messages: &[M]) -> String {
    let title = match &meta.session_name {
        Some(name) => name.clone(),
        None => format!("Session {}", meta.session_id),
    };
    let mut out = String::with_capacity(16 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"
    ));
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!("<title>{} · nova</title>\n", escape(&title)));
    out.push_str(&format!("<style>\n{STYLE}</style>\n</head>\n<body>\n"));
    render_header(&mut out, meta, &title);

    out.push_str("<main>\n");
    let mut shown = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        match message.as_ref() {
            Message::User(user) => {
                out.push_str("<section class=\"msg user\">\n");
                role_line(&mut out, "User", None, user.timestamp);
                render_blocks(&mut out, &user.content.blocks(), render_markdown);
                out.push_str("</section>\n");
            }
            Message::Assistant(assistant) => render_assistant(
                &mut out,
                assistant,
                &messages[index + 1..],
                index + 1,
                &mut shown,
            ),
            Message::CompactionSummary(summary) => {
                out.push_str("<section class=\"msg summary\">\n");
                role_line(
                    &mut out,
                    "Summary of earlier conversation",
                    None,
                    summary.timestamp,
                );
                out.push_str("<details>\n<summary>Compacted context</summary>\n");
                render_markdown(&mut out, &summary.summary);
                out.push_str("</details>\n</section>\n");
            }
            Message::Custom(custom) => {
                out.push_str("<section class=\"msg user\">\n");
                role_line(
                    &mut out,
                    "Extension",
                    Some(&escape(&custom.custom_type)),
                    custom.timestamp,
                );
                render_blocks(&mut out, &custom.content.blocks(), render_markdown);
                out.push_str("</section>\n");
            }
            Message::BashExecution(bash) => {
                out.push_str("<section class=\"msg user\">\n");
                role_line(
                    &mut out,
                    "User ran",
                    Some(&escape(&bash.command)),
                    bash.timestamp,
                );
                render_preformatted(&mut out, &bash.output);
                if bash.cancelled {
                    out.push_str("<div class=\"notice\">command cancelled</div>\n");
                } else if let Some(code) = bash.exit_code.filter(|c| *c != 0) {
                    out.push_str(&format!(
                        "<div class=\"notice\">exited with code {code}</div>\n"
                    ));
                }
                out.push_str("</section>\n");
            }
            Message::ToolResult(result) => {
                // A result whose call is not in the export (cut by compaction, say) still shows.
                if !shown.contains(&index) {
                    out.push_str("<section class=\"msg tool orphan\">\n");
                    render_tool_result(&mut out, result);
                    out.push_str("</section>\n");
                }
            }
        }
    }
    out.push_str("</main>\n");
    render_totals(&mut out, messages);
    out.push_str("</body>\n</html>\n");
    out
}

fn render_header(out: &mut String, meta: &ExportMeta, title: &str) {
    out.push_str("<header>\n");
    out.push_str(&format!("<h1>{}</h1>\n<dl>\n", escape(title)));
    let mut row = |label: &str, value: &str| {
        out.push_str(&format!("<dt>{label}</dt><dd>{}</dd>\n", escape(value)));
    };
    row("Session", &meta.session_id);
    row("Directory", &meta.cwd);
    if let Some(model) = &meta.model {
        row("Model", model);
    }
    row("Created", &meta.created);
    out.push_str("</dl>\n</header>\n");
}

/// The label line above a message; `detail` is already escaped.
fn role_line(out: &mut String, role: &str, detail: Option<&str>, timestamp: i64) {
    out.push_str(&format!("<div class=\"role\"><span>{role}</span>"));
    if let Some(detail) = detail {
        out.push_str(&format!(" <span class=\"detail\">{detail}</span>"));
    }
    if let Some(time) = format_timestamp(timestamp) {
        out.push_str(&format!("<time>{time}</time>"));
    }
    out.push_str("</div>\n");
}

/// `later` are the messages after this one, `offset` the index of the first of them; results
/// shown under their call are recorded in `shown` so they are not repeated on their own.
fn render_assistant<M: AsRef<Message>>(
    out: &mut String,
    message: &AssistantMessage,
    later: &[M],
    offset: usize,
    shown: &mut HashSet<usize>,
) {
    out.push_str("<section class=\"msg assistant\">\n");
    let model = escape(&format!("{}/{}", message.provider, message.model));
    role_line(out, "Assistant", Some(&model), message.timestamp);
    for block in &message.content {
        match block {
            ContentBlock::Text { text, .. } => render_markdown(out, text),
            ContentBlock::Thinking {
                thinking, redacted, ..
            } => render_thinking(out, thinking, redacted.unwrap_or(false)),
            ContentBlock::Image { data, mime_type } => render_image(out, data, mime_type),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                out.push_str("<div class=\"tool\">\n");
                out.push_str(&format!(
                    "<div class=\"tool-name\"><span class=\"label\">tool call</span> {}</div>\n",
                    escape(name)
                ));
                out.push_str(&format!(
                    "<pre class=\"args\">{}</pre>\n",
                    escape(&pretty_json(arguments))
                ));
                let answer = later
                    .iter()
                    .enumerate()
                    .find_map(|(i, m)| match m.as_ref() {
                        Message::ToolResult(r)
                            if r.tool_call_id == *id && !shown.contains(&(offset + i)) =>
                        {
                            Some((offset + i, r))
                        }
                        _ => None,
                    });
                match answer {
                    Some((index, result)) => {
                        shown.insert(index);
                        render_tool_result(out, result);
                    }
                    None => out.push_str("<div class=\"no-result\">no result recorded</div>\n"),
                }
                out.push_str("</div>\n");
            }
        }
    }
    match message.stop_reason {
        StopReason::Error | StopReason::Aborted => {
            let (class, label) = if message.stop_reason == StopReason::Error {
                ("error", "error")
            } else {
                ("aborted", "aborted")
            };
            let text = message.error_message.as_deref().unwrap_or("");
            out.push_str(&format!(
                "<div class=\"failure {class}\"><span class=\"label\">{label}</span> {}</div>\n",
                escape(text)
            ));
        }
        StopReason::Length => out
            .push_str("<div class=\"notice\">The reply stopped at the output token limit.</div>\n"),
        StopReason::Pending | StopReason::Stop | StopReason::ToolUse => {}
    }
    out.push_str("</section>\n");
}

fn render_thinking(out: &mut String, thinking: &str, redacted: bool) {
    if redacted {
        out.push_str(
            "<div class=\"thinking redacted\">Thinking (redacted by the provider)</div>\n",
        );
    } else if !thinking.trim().is_empty() {
        out.push_str("<details class=\"thinking\"><summary>Thinking</summary>\n");
        render_markdown(out, thinking);
        out.push_str("</details>\n");
    }
}

fn render_tool_result(out: &mut String, result: &ToolResultMessage) {
    let (class, label) = if result.is_error {
        ("result error", "error")
    } else {
        ("result", "result")
    };
    out.push_str(&format!(
        "<div class=\"{class}\">\n<div class=\"tool-name\"><span class=\"label\">{label}</span> {}",
        escape(&result.tool_name)
    ));
    if let Some(time) = format_timestamp(result.timestamp) {
        out.push_str(&format!("<time>{time}</time>"));
    }
    out.push_str("</div>\n");
    render_blocks(out, &result.content, render_preformatted);
    out.push_str("</div>\n");
}

/// User and tool-result content; `render_text` decides how text blocks look (user text is
/// Markdown, tool output is shown exactly as written).
fn render_blocks(out: &mut String, blocks: &[ContentBlock], render_text: fn(&mut String, &str)) {
    for block in blocks {
        match block {
            ContentBlock::Text { text, .. } => render_text(out, text),
            ContentBlock::Image { data, mime_type } => render_image(out, data, mime_type),
            ContentBlock::Thinking { thinking, .. } => render_thinking(out, thinking, false),
            ContentBlock::ToolCall { name, .. } => out.push_str(&format!(
                "<div class=\"notice\">tool call {}</div>\n",
                escape(name)
            )),
        }
    }
}

fn render_preformatted(out: &mut String, text: &str) {
    out.push_str(&format!("<pre class=\"text\">{}</pre>\n", escape(text)));
}

fn render_image(out: &mut String, data: &str, mime_type: &str) {
    if is_image_mime(mime_type) && is_base64(data) {
        out.push_str(&format!(
            "<img class=\"image\" alt=\"{mime}\" src=\"data:{mime};base64,{data}\">\n",
            mime = escape(mime_type)
        ));
    } else {
        out.push_str(&format!(
            "<div class=\"notice\">image omitted: not a valid base64 image ({})</div>\n",
            escape(mime_type)
        ));
    }
}

/// `image/<subtype>` with a plain token as subtype, so the value cannot end the attribute or
/// smuggle parameters into the `data:` URL.
fn is_image_mime(mime: &str) -> bool {
    mime.strip_prefix("image/").is_some_and(|sub| {
        !sub.is_empty()
            && sub
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
    })
}

fn is_base64(data: &str) -> bool {
    let body = data.trim_end_matches('=');
    !body.is_empty()
        && data.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

fn render_markdown(out: &mut String, text: &str) {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // Images become links (the page fetches nothing), links keep only harmless schemes, and raw
    // HTML is shown as text: the conversation may contain anything.
    let mut dropped = Vec::new();
    let events = Parser::new_ext(text, options).filter_map(|event| match event {
        Event::Html(html) | Event::InlineHtml(html) => Some(Event::Text(html)),
        Event::Start(Tag::Link {
            dest_url, title, ..
        })
        | Event::Start(Tag::Image {
            dest_url, title, ..
        }) => {
            let safe = is_safe_url(&dest_url);
            dropped.push(!safe);
            safe.then(|| link(dest_url, title))
        }
        Event::End(TagEnd::Link) | Event::End(TagEnd::Image) => {
            let was_dropped = dropped.pop().unwrap_or(false);
            (!was_dropped).then_some(Event::End(TagEnd::Link))
        }
        other => Some(other),
    });
    out.push_str("<div class=\"markdown\">\n");
    pulldown_cmark::html::push_html(out, events);
    out.push_str("</div>\n");
}

fn link<'a>(dest_url: CowStr<'a>, title: CowStr<'a>) -> Event<'a> {
    Event::Start(Tag::Link {
        link_type: LinkType::Inline,
        dest_url,
        title,
        id: CowStr::Borrowed(""),
    })
}

/// Web and mail links and in-page anchors; never `javascript:`, `data:` or `file:`.
fn is_safe_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:", "#"]
        .iter()
        .any(|prefix| lower.starts_with(prefix))
}

fn render_totals<M: AsRef<Message>>(out: &mut String, messages: &[M]) {
    let mut total = Usage::default();
    let (mut replies, mut calls) = (0u64, 0u64);
    for message in messages {
        if let Message::Assistant(a) = message.as_ref() {
            replies += 1;
            calls += a.tool_calls().count() as u64;
            let u = &a.usage;
            total.input += u.input;
            total.output += u.output;
            total.cache_read += u.cache_read;
            total.cache_write += u.cache_write;
            total.total_tokens += u.total_tokens;
            total.cost.total += u.cost.total;
        }
    }
    out.push_str("<footer>\n<h2>Usage</h2>\n<table class=\"usage\">\n");
    let rows = [
        ("Messages", group(messages.len() as u64)),
        ("Assistant replies", group(replies)),
        ("Tool calls", group(calls)),
        ("Input tokens", group(total.input)),
        ("Output tokens", group(total.output)),
        ("Cache read tokens", group(total.cache_read)),
        ("Cache write tokens", group(total.cache_write)),
        ("Total tokens", group(total.total_tokens)),
        ("Cost", format!("${:.4}", total.cost.total)),
    ];
    for (label, value) in rows {
        out.push_str(&format!("<tr><th>{label}</th><td>{value}</td></tr>\n"));
    }
    out.push_str("</table>\n<p class=\"generator\">Exported by nova</p>\n</footer>\n");
}

/// `1234567` as `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    grouped
}

fn pretty_json(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Milliseconds since the epoch as UTC RFC 3339; `None` for the zero or negative stamps of
/// messages that never had one.
fn format_timestamp(ms: i64) -> Option<String> {
    let ms = u64::try_from(ms).ok().filter(|&ms| ms > 0)?;
    let time = UNIX_EPOCH.checked_add(Duration::from_millis(ms))?;
    Some(humantime::format_rfc3339_seconds(time).to_string())
}

/// Text for element content and double-quoted attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests;
