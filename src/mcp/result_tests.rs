#![allow(clippy::unwrap_used)]

use super::*;
use rmcp::model::{AudioContent, EmbeddedResource, ImageContent, Resource};

const SMALL: Limits = Limits {
    max_lines: 3,
    max_bytes: 20,
};

fn result(content: Vec<McpBlock>) -> CallToolResult {
    CallToolResult::success(content)
}

fn text_of(out: &ToolOutput) -> &str {
    match &out.content[0] {
        ContentBlock::Text { text, .. } => text,
        other => panic!("not text: {other:?}"),
    }
}

#[test]
fn text_image_and_resources_map_to_blocks() {
    let out = to_output(
        "fs",
        "read",
        result(vec![
            McpBlock::text("one"),
            McpBlock::Image(ImageContent::new("aGk=", "image/png")),
            McpBlock::Resource(EmbeddedResource::new(ResourceContents::text(
                "body",
                "file:///a.txt",
            ))),
            McpBlock::Resource(EmbeddedResource::new(
                ResourceContents::BlobResourceContents {
                    uri: "file:///b.bin".into(),
                    mime_type: Some("application/zip".into()),
                    blob: "AAAA".into(),
                    meta: None,
                },
            )),
            McpBlock::Audio(AudioContent::new("AAAA", "audio/wav")),
            McpBlock::ResourceLink(Resource::new("file:///c.md", "c.md")),
        ]),
        Limits::DEFAULT,
    );
    assert!(!out.is_error);
    assert_eq!(
        text_of(&out),
        "one\n[resource file:///a.txt]\nbody\n\
         [resource file:///b.bin (application/zip, 4B of base64) left out: binary data the model \
         cannot read]\n\
         [audio (audio/wav, 4B of base64) left out: the model cannot take audio]\n\
         [resource link: file:///c.md (c.md)]"
    );
    assert_eq!(out.content[1], ContentBlock::image("aGk=", "image/png"));
    assert_eq!(out.content.len(), 2);
    let details = out.details.unwrap().json();
    assert_eq!(
        (details["server"].as_str(), details["tool"].as_str()),
        (Some("fs"), Some("read"))
    );
    assert!(details.get("truncation").is_none());
}

#[test]
fn long_text_is_cut_from_the_head_and_kept_in_full() {
    let long = "l1\nl2\nl3\nl4\nl5";
    let out = to_output("s", "t", result(vec![McpBlock::text(long)]), SMALL);
    let details = out.details.clone().unwrap().json();
    let path = details["fullOutputPath"].as_str().unwrap().to_owned();
    assert_eq!(
        text_of(&out),
        format!("l1\nl2\nl3\n\n[Showing lines 1-3 of 5. Full output: {path}]")
    );
    assert_eq!(details["truncation"]["truncatedBy"], "lines");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
    std::fs::remove_file(&path).unwrap();

    let wide = "0123456789\nabcdefghij\nk";
    let out = to_output("s", "t", result(vec![McpBlock::text(wide)]), SMALL);
    let path = out.details.as_ref().unwrap().json()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        text_of(&out),
        format!("0123456789\n\n[Showing lines 1-1 of 3 (20B limit). Full output: {path}]")
    );
    std::fs::remove_file(&path).unwrap();

    let out = to_output(
        "s",
        "t",
        result(vec![McpBlock::text("x".repeat(30))]),
        SMALL,
    );
    assert!(
        text_of(&out).starts_with("[The first line alone is over the 20B limit. Full output: ")
    );
    let path = out.details.as_ref().unwrap().json()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::remove_file(path).unwrap();
}

#[test]
fn the_default_limits_are_the_usual_ones() {
    let many: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    let out = to_output(
        "s",
        "t",
        result(vec![McpBlock::text(many)]),
        Limits::DEFAULT,
    );
    assert!(text_of(&out).contains("[Showing lines 1-2000 of 3001. Full output: "));
    let path = out.details.as_ref().unwrap().json()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::remove_file(path).unwrap();
}

#[test]
fn errors_name_the_server_and_structured_content_stands_in_for_empty_text() {
    let out = to_output(
        "gh",
        "create_issue",
        CallToolResult::error(vec![McpBlock::text("rate limited")]),
        Limits::DEFAULT,
    );
    assert!(out.is_error);
    assert_eq!(
        text_of(&out),
        "MCP server gh reported an error from create_issue: rate limited"
    );

    let out = to_output(
        "s",
        "t",
        CallToolResult::structured(serde_json::json!({"sum": 3})),
        Limits::DEFAULT,
    );
    assert_eq!(out.details.unwrap().json()["structuredContent"]["sum"], 3);

    let out = to_output("s", "t", result(vec![]), Limits::DEFAULT);
    assert_eq!(text_of(&out), "(no output)");
}

#[test]
fn oversized_and_non_image_data_become_notes() {
    let huge = "A".repeat(MAX_IMAGE_BASE64 + 1);
    let out = to_output(
        "s",
        "t",
        result(vec![McpBlock::Image(ImageContent::new(huge, "image/png"))]),
        Limits::DEFAULT,
    );
    assert_eq!(out.content.len(), 1);
    assert!(text_of(&out).contains("left out: 6.0MB of base64 is over the 6.0MB limit"));
}
