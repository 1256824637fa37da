//! A tool result's `details`: what the model is not shown but a client may want (an edit's
//! diff, what was cut from an output and where the whole of it is). Typed for the tools nova
//! has; JSON from anywhere else (a session written by another version, a foreign tool) is kept
//! as it came.
//!
//! Field order is alphabetical on purpose: these objects used to be built as `serde_json` maps,
//! which sort their keys, and the bytes on the wire and in session files stay the same.

use super::ContentBlock;
use serde::{Deserialize, Deserializer, Serialize, de::DeserializeOwned};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ToolDetails {
    Edit(EditDetails),
    Mcp(McpDetails),
    Output(OutputDetails),
    /// Details nova does not model, kept whole so they are written back unchanged.
    Other(Value),
}

impl ToolDetails {
    /// The details of a tool that reports none: Pi records `{}`.
    pub fn none() -> ToolDetails {
        ToolDetails::Output(OutputDetails::default())
    }

    /// The details as JSON, for tests that look at what the wire shows.
    #[cfg(test)]
    pub fn json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// `edit`: the change as numbered diff lines, and where it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditDetails {
    pub diff: String,
    pub first_changed_line: Option<usize>,
}

/// An MCP tool's call: which server and tool answered, its structured result, and what was cut
/// from its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<TruncationDetails>,
}

/// `bash`, `read`, `grep`, `find` and `ls`: what was left out of the output the model saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputDetails {
    /// `ls` stopped at this many entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_limit_reached: Option<usize>,
    /// The full-output file holds only the first this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_cut: Option<usize>,
    /// Where the whole output is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// `grep` shortened some lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_truncated: Option<bool>,
    /// `grep` stopped at this many matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_limit_reached: Option<usize>,
    /// `find` stopped at this many results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_limit_reached: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<TruncationDetails>,
}

impl OutputDetails {
    /// `None` when there is nothing to say, as Pi leaves `details` out then.
    pub fn or_none(self) -> Option<ToolDetails> {
        (self != OutputDetails::default()).then_some(ToolDetails::Output(self))
    }
}

/// Which limit cut an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum TruncatedBy {
    Lines,
    Bytes,
}

/// Pi's `details.truncation`: how much there was, how much was kept, and the limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TruncationDetails {
    pub first_line_exceeds_limit: bool,
    pub last_line_partial: bool,
    pub max_bytes: usize,
    pub max_lines: usize,
    pub output_bytes: usize,
    pub output_lines: usize,
    pub total_bytes: usize,
    pub total_lines: usize,
    pub truncated: bool,
    pub truncated_by: Option<TruncatedBy>,
}

/// A typed reading is kept only when it writes back exactly the JSON it came from, so details
/// survive a session's load and save unchanged whoever wrote them (a `null` where nova leaves
/// a field out, a float where it writes an integer, a field it does not know).
impl From<Value> for ToolDetails {
    fn from(value: Value) -> ToolDetails {
        fn exactly<T: DeserializeOwned + Serialize>(value: &Value) -> Option<T> {
            let typed = T::deserialize(value).ok()?;
            (serde_json::to_value(&typed).ok()? == *value).then_some(typed)
        }
        if let Some(edit) = exactly(&value) {
            ToolDetails::Edit(edit)
        } else if let Some(mcp) = exactly(&value) {
            ToolDetails::Mcp(mcp)
        } else if let Some(output) = exactly(&value) {
            ToolDetails::Output(output)
        } else {
            ToolDetails::Other(value)
        }
    }
}

impl<'de> Deserialize<'de> for ToolDetails {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ToolDetails, D::Error> {
        Value::deserialize(deserializer).map(ToolDetails::from)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn details_read_back_write_the_same_bytes() {
        let lines = json!({"firstLineExceedsLimit": false, "lastLinePartial": false,
            "maxBytes": 51200, "maxLines": 2000, "outputBytes": 10, "outputLines": 2000,
            "totalBytes": 99, "totalLines": 3000, "truncated": true, "truncatedBy": "lines"});
        let cases = [
            (json!({"diff": "+1 a", "firstChangedLine": 1}), "Edit"),
            (json!({"diff": "", "firstChangedLine": null}), "Edit"),
            (
                json!({"fullOutputPath": "/tmp/x", "truncation": lines}),
                "Output",
            ),
            (json!({"matchLimitReached": 4}), "Output"),
            (json!({}), "Output"),
            (
                json!({"server": "s", "structuredContent": {"a": 1}, "tool": "t"}),
                "Mcp",
            ),
            (json!({"diff": "x"}), "Other"),
            (json!({"matchLimitReached": 4.0}), "Other"),
            (json!({"fullOutputPath": null}), "Other"),
            (json!({"truncation": {"truncated": true}}), "Other"),
            (json!("text"), "Other"),
        ];
        for (value, kind) in cases {
            let text = value.to_string();
            let details: ToolDetails = serde_json::from_str(&text).unwrap();
            assert!(
                format!("{details:?}").starts_with(kind),
                "{text}: {details:?}"
            );
            assert_eq!(serde_json::to_string(&details).unwrap(), text);
        }
    }
}

/// A finished call's `structuredContent` (Pi 1.6): what a tool produced, for programs rather
/// than the model. Only `bash` and `read` report one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum StructuredContent {
    Command(CommandOutcome),
    /// `read` of a text file: the text the model was shown.
    Text(String),
    Image(ReadImage),
}

impl StructuredContent {
    /// What `read` reports beside `content`, as Pi builds it: the image with the text block as
    /// its note, or the text alone.
    pub fn read(content: &[ContentBlock]) -> StructuredContent {
        let text = content
            .iter()
            .find_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .unwrap_or_default()
            .to_owned();
        let image = content.iter().find_map(|b| match b {
            ContentBlock::Image { data, mime_type } => Some((data, mime_type)),
            _ => None,
        });
        match image {
            Some((data, mime_type)) => StructuredContent::Image(ReadImage {
                kind: ImageTag::Image,
                data: data.clone(),
                mime_type: mime_type.clone(),
                note: text,
            }),
            None => StructuredContent::Text(text),
        }
    }
}

/// `read` of an image: the image as the model got it and the note that went with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReadImage {
    #[serde(rename = "type")]
    pub kind: ImageTag,
    pub data: String,
    pub mime_type: String,
    pub note: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ImageTag {
    Image,
}

/// What a command produced, for programs rather than the model (Pi 1.6's `structuredContent` of
/// `bash`): the whole output where the model sees only its tail, up to
/// [`COMMAND_OUTPUT_MAX_BYTES`] (beyond that its first and last halves around a note of what was
/// left out), the exit code and the wall time. Pi's field names.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandOutcome {
    pub output: String,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    pub exit_code: i32,
    pub wall_time_seconds: f64,
}

/// How much of a command's output [`CommandOutcome`] carries, as Pi 1.6 caps it.
pub const COMMAND_OUTPUT_MAX_BYTES: usize = 1024 * 1024;
