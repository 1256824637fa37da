//! Between nova's types and ACP's: what a prompt's content blocks become, how a tool call is
//! shown to an editor (title, kind, locations, a diff for edits, the todo list it keeps as a
//! plan), and why a turn ended.

use crate::attach;
use crate::protocol::{
    AssistantMessage, ContentBlock, StopReason as NovaStop, ToolDetails, ToolResultPayload,
};
use agent_client_protocol::v1::schema as acp;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A prompt as the agent takes it: the text (resources written into it) and the images.
pub struct Input {
    pub text: String,
    pub images: Vec<ContentBlock>,
}

/// Reads a prompt's blocks: text, images (through the one attachment policy), links to
/// resources (named in the text, for the tools to open) and embedded resources (their text
/// given inline, an embedded image attached). An `Err` names the first block nova cannot take.
pub fn input(blocks: Vec<acp::ContentBlock>) -> Result<Input, String> {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for (i, block) in blocks.into_iter().enumerate() {
        match block {
            acp::ContentBlock::Text(t) => parts.push(t.text),
            acp::ContentBlock::Image(image) => {
                images.push(attach_image(image.data, &image.mime_type, i)?);
            }
            acp::ContentBlock::ResourceLink(link) => {
                parts.push(format!("[{}]({})", link.name, link.uri));
            }
            acp::ContentBlock::Resource(embedded) => match embedded.resource {
                acp::EmbeddedResourceResource::TextResourceContents(r) => {
                    parts.push(format!(
                        "<context uri=\"{}\">\n{}\n</context>",
                        r.uri, r.text
                    ));
                }
                acp::EmbeddedResourceResource::BlobResourceContents(r) => {
                    match r.mime_type.as_deref() {
                        Some(mime) if mime.starts_with("image/") => {
                            images.push(attach_image(r.blob, mime, i)?);
                        }
                        _ => {
                            return Err(format!(
                                "prompt[{i}]: the binary resource {} is not an image, and nova \
                                 takes only text and images",
                                r.uri
                            ));
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "prompt[{i}]: an embedded resource of an unknown kind"
                    ));
                }
            },
            acp::ContentBlock::Audio(_) => {
                return Err(format!("prompt[{i}]: nova does not take audio"));
            }
            _ => return Err(format!("prompt[{i}]: a content block of an unknown kind")),
        }
    }
    attach::count(images.len()).map_err(|e| format!("prompt: {e}"))?;
    Ok(Input {
        text: parts.join("\n\n"),
        images,
    })
}

fn attach_image(data: String, mime: &str, index: usize) -> Result<ContentBlock, String> {
    let name = format!("prompt[{index}]");
    attach::image(
        attach::Data::Base64(data),
        Some(mime),
        Path::new(&name),
        attach::Oversize::Refuse,
    )
    .map(|a| a.block)
    .map_err(|e| format!("{name}: {e}"))
}

/// What a turn that ran to its end says about why: the last reply's stop reason, or
/// `cancelled` when the client cancelled it. An `Err` is a reply that failed, with its message.
pub fn stop_reason(
    last: Option<&AssistantMessage>,
    cancelled: bool,
) -> Result<acp::StopReason, String> {
    if cancelled {
        return Ok(acp::StopReason::Cancelled);
    }
    let Some(reply) = last else {
        return Ok(acp::StopReason::EndTurn);
    };
    if matches!(
        reply.raw_stop_reason.as_deref(),
        Some("refusal" | "content_filter")
    ) {
        return Ok(acp::StopReason::Refusal);
    }
    match reply.stop_reason {
        NovaStop::Stop | NovaStop::Pending => Ok(acp::StopReason::EndTurn),
        NovaStop::Length => Ok(acp::StopReason::MaxTokens),
        // The run stopped while the model still wanted tools: the turn limit.
        NovaStop::ToolUse => Ok(acp::StopReason::MaxTurnRequests),
        NovaStop::Aborted => Ok(acp::StopReason::Cancelled),
        NovaStop::Error => Err(reply
            .error_message
            .clone()
            .unwrap_or_else(|| "the model's reply failed".to_owned())),
    }
}

/// How an editor shows one call.
pub struct Shown {
    pub title: String,
    pub kind: acp::ToolKind,
    pub locations: Vec<acp::ToolCallLocation>,
}

/// The title, kind and locations of a call of `name` with `args`; paths are made absolute
/// against the session's cwd, as ACP wants them.
pub fn shown(name: &str, args: &Value, cwd: &Path) -> Shown {
    let text = |key: &str| args.get(key).and_then(Value::as_str);
    let path = text("path").map(|p| absolute(cwd, p));
    let kind = match name {
        "read" | "ls" | "view_image" | "zoom" => acp::ToolKind::Read,
        "write" | "edit" => acp::ToolKind::Edit,
        "bash" => acp::ToolKind::Execute,
        "grep" | "find" => acp::ToolKind::Search,
        _ => acp::ToolKind::Other,
    };
    let shown_path = path.as_ref().map(|p| p.display().to_string());
    let title = match (name, text("command"), text("pattern"), &shown_path) {
        ("bash", Some(command), _, _) => command.to_owned(),
        ("grep" | "find", _, Some(pattern), Some(p)) => format!("{name} {pattern} in {p}"),
        ("grep" | "find", _, Some(pattern), None) => format!("{name} {pattern}"),
        (_, _, _, Some(p)) => format!("{name} {p}"),
        _ => name.to_owned(),
    };
    let line = args
        .get("offset")
        .and_then(Value::as_u64)
        .and_then(|l| u32::try_from(l).ok());
    let locations = path
        .map(|p| vec![acp::ToolCallLocation::new(p).line(line)])
        .unwrap_or_default();
    Shown {
        title,
        kind,
        locations,
    }
}

/// The file and first changed line (1-based) of an `edit` that succeeded, from its details.
pub fn edited_at(
    name: &str,
    args: &Value,
    result: &ToolResultPayload,
    cwd: &Path,
) -> Option<acp::ToolCallLocation> {
    if name != "edit" {
        return None;
    }
    let path = absolute(cwd, args.get("path")?.as_str()?);
    let Some(ToolDetails::Edit(details)) = &result.details else {
        return None;
    };
    let line = u32::try_from(details.first_changed_line?).ok()?;
    Some(acp::ToolCallLocation::new(path).line(line))
}

/// A successful `write` or `edit` as diffs: the whole new file for a write, each replaced
/// passage for an edit.
pub fn diffs(name: &str, args: &Value, cwd: &Path) -> Vec<acp::ToolCallContent> {
    let Some(path) = args.get("path").and_then(Value::as_str) else {
        return Vec::new();
    };
    let path = absolute(cwd, path);
    match name {
        "write" => args
            .get("content")
            .and_then(Value::as_str)
            .map(|content| vec![acp::ToolCallContent::Diff(acp::Diff::new(&path, content))])
            .unwrap_or_default(),
        "edit" => {
            let pair = |e: &Value| {
                let old = e.get("oldText").and_then(Value::as_str)?;
                let new = e.get("newText").and_then(Value::as_str)?;
                Some(acp::ToolCallContent::Diff(
                    acp::Diff::new(&path, new).old_text(old.to_owned()),
                ))
            };
            match args.get("edits").and_then(Value::as_array) {
                Some(edits) => edits.iter().filter_map(pair).collect(),
                None => pair(args).into_iter().collect(),
            }
        }
        _ => Vec::new(),
    }
}

/// A tool result's content as ACP content: its text and images.
pub fn content(blocks: &[ContentBlock]) -> Vec<acp::ToolCallContent> {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(acp::ContentBlock::from(text.clone())),
            ContentBlock::Image { data, mime_type } => Some(acp::ContentBlock::Image(
                acp::ImageContent::new(data.clone(), mime_type.clone()),
            )),
            _ => None,
        })
        .map(|b| acp::ToolCallContent::Content(acp::Content::new(b)))
        .collect()
}

/// The plan a tool's result keeps, when it keeps a todo list: nova has no todo tool of its own
/// (nor has Pi), so this reads the list wherever a tool that keeps one puts it — `todos` in the
/// details of an extension's tool (the shape of Pi's example `todo` extension: `text` and
/// `done`), or in an MCP tool's structured content (`content`/`text`, `status` or `done`,
/// optional `priority`). A list with an entry of any other shape is no plan: half a list would
/// mislead more than none.
pub fn plan(details: Option<&ToolDetails>) -> Option<acp::Plan> {
    let todos = match details? {
        ToolDetails::Other(value) => value.get("todos")?,
        ToolDetails::Mcp(mcp) => mcp.structured_content.as_ref()?.get("todos")?,
        _ => return None,
    };
    let entries = todos
        .as_array()?
        .iter()
        .map(plan_entry)
        .collect::<Option<Vec<_>>>()?;
    Some(acp::Plan::new(entries))
}

fn plan_entry(todo: &Value) -> Option<acp::PlanEntry> {
    let content = todo.get("content").or_else(|| todo.get("text"))?.as_str()?;
    let status = match (todo.get("status"), todo.get("done")) {
        (Some(status), _) => match status.as_str()? {
            "pending" => acp::PlanEntryStatus::Pending,
            "in_progress" => acp::PlanEntryStatus::InProgress,
            "completed" => acp::PlanEntryStatus::Completed,
            _ => return None,
        },
        (None, Some(Value::Bool(true))) => acp::PlanEntryStatus::Completed,
        (None, Some(Value::Bool(false))) => acp::PlanEntryStatus::Pending,
        _ => return None,
    };
    let priority = match todo.get("priority").map(Value::as_str) {
        None => acp::PlanEntryPriority::Medium,
        Some(Some("high")) => acp::PlanEntryPriority::High,
        Some(Some("medium")) => acp::PlanEntryPriority::Medium,
        Some(Some("low")) => acp::PlanEntryPriority::Low,
        Some(_) => return None,
    };
    Some(acp::PlanEntry::new(content, priority, status))
}

fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_are_titled_and_located_against_the_cwd() {
        let cwd = Path::new("/work");
        let read = shown("read", &json!({"path": "src/a.rs", "offset": 10}), cwd);
        assert_eq!(read.title, "read /work/src/a.rs");
        assert_eq!(read.kind, acp::ToolKind::Read);
        assert_eq!(read.locations[0].path, Path::new("/work/src/a.rs"));
        assert_eq!(read.locations[0].line, Some(10));
        let bash = shown("bash", &json!({"command": "cargo test"}), cwd);
        assert_eq!(
            (bash.title.as_str(), bash.kind),
            ("cargo test", acp::ToolKind::Execute)
        );
        assert!(bash.locations.is_empty());
        let grep = shown("grep", &json!({"pattern": "fn main"}), cwd);
        assert_eq!(
            (grep.title.as_str(), grep.kind),
            ("grep fn main", acp::ToolKind::Search)
        );
    }

    #[test]
    fn edits_become_one_diff_per_passage() {
        let args = json!({"path": "a.txt", "edits": [
            {"oldText": "a", "newText": "b"}, {"oldText": "c", "newText": "d"}]});
        let diffs = diffs("edit", &args, Path::new("/w"));
        assert_eq!(diffs.len(), 2);
        let acp::ToolCallContent::Diff(d) = &diffs[1] else {
            panic!("{diffs:?}")
        };
        assert_eq!(d.path, Path::new("/w/a.txt"));
        assert_eq!(
            (d.old_text.as_deref(), d.new_text.as_str()),
            (Some("c"), "d")
        );
    }

    #[test]
    fn resources_are_written_into_the_text_and_audio_is_refused() {
        let link =
            acp::ContentBlock::ResourceLink(acp::ResourceLink::new("a.rs", "file:///w/a.rs"));
        let embedded = acp::ContentBlock::Resource(acp::EmbeddedResource::new(
            acp::EmbeddedResourceResource::TextResourceContents(acp::TextResourceContents::new(
                "fn a() {}",
                "file:///w/a.rs",
            )),
        ));
        let input = input(vec!["look".into(), link, embedded]).unwrap();
        assert_eq!(
            input.text,
            "look\n\n[a.rs](file:///w/a.rs)\n\n<context uri=\"file:///w/a.rs\">\nfn a() {}\n</context>"
        );
        let audio = acp::ContentBlock::Audio(acp::AudioContent::new("AAAA", "audio/wav"));
        assert_eq!(
            input_err(vec!["x".into(), audio]),
            "prompt[1]: nova does not take audio"
        );
    }

    #[test]
    fn todo_lists_become_plans_and_anything_else_does_not() {
        let pi_extension = ToolDetails::Other(json!({"action": "toggle", "nextId": 3, "todos": [
            {"id": 1, "text": "read the code", "done": true},
            {"id": 2, "text": "fix the bug", "done": false},
        ]}));
        let plan = plan(Some(&pi_extension)).unwrap();
        let shown: Vec<_> = plan
            .entries
            .iter()
            .map(|e| (e.content.as_str(), e.status.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                ("read the code", acp::PlanEntryStatus::Completed),
                ("fix the bug", acp::PlanEntryStatus::Pending)
            ]
        );
        let other = |v: Value| ToolDetails::Other(v);
        let step = json!({"content": "test it", "status": "in_progress", "priority": "high"});
        let plan = super::plan(Some(&other(json!({"todos": [step]})))).unwrap();
        assert_eq!(plan.entries[0].priority, acp::PlanEntryPriority::High);
        assert_eq!(plan.entries[0].status, acp::PlanEntryStatus::InProgress);
        for not_a_plan in [
            json!({"todos": "read the code"}),
            json!({"todos": [{"text": "a", "done": true}, {"text": "b"}]}),
            json!({"todos": [{"content": "a", "status": "someday"}]}),
            json!({"todos": [{"content": 7, "done": false}]}),
            json!({"diff": "+a"}),
        ] {
            assert!(
                super::plan(Some(&other(not_a_plan.clone()))).is_none(),
                "{not_a_plan}"
            );
        }
        assert!(super::plan(Some(&ToolDetails::none())).is_none());
        assert!(super::plan(None).is_none());
    }

    fn input_err(blocks: Vec<acp::ContentBlock>) -> String {
        match input(blocks) {
            Err(e) => e,
            Ok(_) => panic!("accepted"),
        }
    }
}
