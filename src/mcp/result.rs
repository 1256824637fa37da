//! An MCP `CallToolResult` → nova's tool output. Text blocks (and the text of embedded text
//! resources) are joined into one text, bounded like every model-facing output (2000 lines or
//! 50 KB from the head, the full text kept in a temp file named in the notice); images follow it
//! as image blocks; what the model cannot take (audio, binary resources, links) becomes a short
//! note. A result the server marks `isError` stays an error result, naming the server.

use crate::protocol::{ContentBlock, McpDetails, ToolDetails};
use crate::tools::ToolOutput;
use crate::tools::truncate::{Limits, TruncatedBy, format_size, truncate_head};
use rmcp::model::{CallToolResult, ContentBlock as McpBlock, ResourceContents};
use std::path::PathBuf;

const UNKNOWN: &str = "[a content block of a kind nova does not know was left out]";

/// Base64 image data beyond this is left out (as the read tool's images are bounded).
const MAX_IMAGE_BASE64: usize = 6 * 1024 * 1024;

pub fn to_output(server: &str, tool: &str, result: CallToolResult, limits: Limits) -> ToolOutput {
    let mut texts: Vec<String> = Vec::new();
    let mut images: Vec<ContentBlock> = Vec::new();
    for block in result.content {
        match block {
            McpBlock::Text(t) => texts.push(t.text),
            McpBlock::Image(i) => image(i.data, i.mime_type, "image", &mut texts, &mut images),
            McpBlock::Audio(a) => texts.push(format!(
                "[audio ({}, {} of base64) left out: the model cannot take audio]",
                a.mime_type,
                format_size(a.data.len())
            )),
            McpBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    texts.push(format!("[resource {uri}]\n{text}"));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => {
                    let mime = mime_type.unwrap_or_else(|| "application/octet-stream".into());
                    image(
                        blob,
                        mime,
                        &format!("resource {uri}"),
                        &mut texts,
                        &mut images,
                    );
                }
                _ => texts.push(UNKNOWN.into()),
            },
            McpBlock::ResourceLink(link) => {
                let mime = link.mime_type.map(|m| format!(", {m}")).unwrap_or_default();
                texts.push(format!(
                    "[resource link: {} ({}{mime})]",
                    link.uri, link.name
                ));
            }
            _ => texts.push(UNKNOWN.into()),
        }
    }
    let mut details = McpDetails {
        full_output_path: None,
        server: server.to_owned(),
        structured_content: None,
        tool: tool.to_owned(),
        truncation: None,
    };
    if texts.is_empty() && images.is_empty() {
        texts.push(match &result.structured_content {
            Some(v) => v.to_string(),
            None => "(no output)".to_owned(),
        });
    }
    details.structured_content = result.structured_content;
    let text = bounded(texts.join("\n"), limits, &mut details);
    let is_error = result.is_error == Some(true);
    let text = if is_error {
        format!("MCP server {server} reported an error from {tool}: {text}")
    } else {
        text
    };
    let mut content = vec![ContentBlock::text(text)];
    content.extend(images);
    ToolOutput {
        content,
        details: Some(ToolDetails::Mcp(details)),
        is_error,
        structured: None,
    }
}

/// An image block when the data is an image the model can take, else a note in the text.
fn image(
    data: String,
    mime: String,
    what: &str,
    texts: &mut Vec<String>,
    images: &mut Vec<ContentBlock>,
) {
    if !mime.starts_with("image/") {
        texts.push(format!(
            "[{what} ({mime}, {} of base64) left out: binary data the model cannot read]",
            format_size(data.len())
        ));
    } else if data.len() > MAX_IMAGE_BASE64 {
        texts.push(format!(
            "[{what} ({mime}) left out: {} of base64 is over the {} limit]",
            format_size(data.len()),
            format_size(MAX_IMAGE_BASE64)
        ));
    } else {
        images.push(ContentBlock::image(data, mime));
    }
}

/// Head-truncates `text`; when it was cut, the full text goes to a temp file and a notice says
/// what is shown and where the rest is.
fn bounded(text: String, limits: Limits, details: &mut McpDetails) -> String {
    let t = truncate_head(&text, limits);
    if !t.truncated {
        return text;
    }
    let full = match keep_full(&text) {
        Some(path) => {
            let shown = path.display().to_string();
            details.full_output_path = Some(shown.clone());
            format!(". Full output: {shown}")
        }
        None => String::new(),
    };
    details.truncation = Some(t.details());
    let notice = if t.first_line_exceeds_limit {
        format!(
            "[The first line alone is over the {} limit{full}]",
            format_size(limits.max_bytes)
        )
    } else if t.truncated_by == Some(TruncatedBy::Lines) {
        format!(
            "[Showing lines 1-{} of {}{full}]",
            t.output_lines, t.total_lines
        )
    } else {
        format!(
            "[Showing lines 1-{} of {} ({} limit){full}]",
            t.output_lines,
            t.total_lines,
            format_size(limits.max_bytes)
        )
    };
    if t.content.is_empty() {
        notice
    } else {
        format!("{}\n\n{notice}", t.content)
    }
}

fn keep_full(text: &str) -> Option<PathBuf> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let path = std::env::temp_dir().join(format!("nova-mcp-{}.txt", &id[..16]));
    match std::fs::write(&path, text) {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!("cannot keep the full MCP result in {}: {e}", path.display());
            None
        }
    }
}

#[cfg(test)]
#[path = "result_tests.rs"]
mod tests;
