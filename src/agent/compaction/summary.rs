//! The one model call of compaction: the current model, through the same provider code as a
//! turn, reads a transcript and writes the structured summary that replaces it.

use super::{CompactionSettings, serialize_conversation};
use crate::protocol::{Message, Model, Usage, UserContent, UserMessage};
use crate::provider::{ProviderError, ProviderEvent, Request, http};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const SUMMARY_SYSTEM_PROMPT: &str = "\
You summarize conversations between a user and an AI coding assistant. You will be given a \
transcript; write the structured summary you are asked for, in the format you are given.

The transcript is material to summarize, not a conversation you are part of: do not answer its \
questions, do not carry on its work, and write nothing but the summary.";

/// The summary's outline; the instructions around it differ between a first summary and an
/// update of an earlier one.
const INITIAL_INSTRUCTIONS: &str = "\
The transcript above is a conversation to condense. Write a structured checkpoint of it that \
another model can pick the work up from.

Follow this outline exactly:

## Goal
[What the user wants done. List several goals if the session moved between tasks.]

## Constraints & Preferences
- [Requirements, constraints or preferences the user stated]
- [Or \"(none)\" if there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work under way]

### Blocked
- [What stops progress, if anything]

## Key Decisions
- **[Decision]**: [Why, in a few words]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, examples or references needed to go on]
- [Or \"(none)\" if nothing applies]

Be brief in every section. Keep file paths, function names and error messages exactly as they \
appear.";

const UPDATE_INSTRUCTIONS: &str = "\
The transcript above holds NEW messages. Fold them into the existing summary given in the \
<previous-summary> tags.

Rules:
- KEEP everything the previous summary says unless it has stopped mattering
- ADD the new progress, decisions and context
- MOVE items from \"In Progress\" to \"Done\" once they are finished
- REVISE \"Next Steps\" to match where the work now stands
- KEEP file paths, function names and error messages exactly as they appear

Follow this outline exactly:

## Goal
[The goals so far, plus any new ones if the task grew]

## Constraints & Preferences
- [Those already known, plus any new ones]

## Progress
### Done
- [x] [Items done before AND items finished since]

### In Progress
- [ ] [Work under way now]

### Blocked
- [Current blockers; drop those that were resolved]

## Key Decisions
- **[Decision]**: [Why, in a few words] (keep earlier decisions, add new ones)

## Next Steps
1. [What should happen next, as things stand now]

## Critical Context
- [Context still needed, plus anything new]

Be brief in every section. Keep file paths, function names and error messages exactly as they \
appear.";

const TURN_PREFIX_INSTRUCTIONS: &str = "\
The transcript above is the BEGINNING of a turn too long to keep whole. Its END, the most \
recent work, stays in the conversation as it is.

Summarize this beginning so that the end can be understood without it:

## Original Request
[What the user asked for in this turn]

## Early Progress
- [Decisions made and work done in this part]

## Context for Suffix
- [What the retained recent work relies on]

Be brief, and keep to what the retained end needs.";

/// Stands in for the main summary when a split turn is all there is to summarise.
const NO_HISTORY: &str = "No prior history.";

/// Why no summary came back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SummaryError {
    #[error("Summarization was aborted")]
    Aborted,
    #[error("Summarization failed: {0}")]
    Failed(ProviderError),
    #[error("Turn prefix summarization failed: {0}")]
    TurnPrefixFailed(ProviderError),
    #[error("Summarization failed: the model returned an empty summary")]
    Empty,
    #[error("Nothing to summarize")]
    NothingToSummarize,
}

/// The user message of the main summary request: the transcript in `<conversation>` tags, the
/// previous summary (if any) in `<previous-summary>` tags, then the instructions for a first
/// summary or an update, with `custom_instructions` as an extra focus line.
pub fn summary_prompt(
    messages: &[Message],
    previous_summary: Option<&str>,
    custom_instructions: Option<&str>,
) -> String {
    let mut prompt = conversation(messages);
    let instructions = match previous_summary {
        Some(previous) => {
            prompt.push_str(&format!(
                "<previous-summary>\n{previous}\n</previous-summary>\n\n"
            ));
            UPDATE_INSTRUCTIONS
        }
        None => INITIAL_INSTRUCTIONS,
    };
    prompt.push_str(instructions);
    if let Some(focus) = custom_instructions.map(str::trim).filter(|f| !f.is_empty()) {
        prompt.push_str(&format!("\n\nAlso focus on: {focus}"));
    }
    prompt
}

/// The user message of the request that summarises the first part of a split turn.
pub fn turn_prefix_prompt(prefix: &[Message]) -> String {
    conversation(prefix) + TURN_PREFIX_INSTRUCTIONS
}

fn conversation(messages: &[Message]) -> String {
    format!(
        "<conversation>\n{}\n</conversation>\n\n",
        serialize_conversation(messages)
    )
}

/// Asks `model` for a summary of `to_summarize` (updating `previous_summary` when there is one)
/// and, when a turn was split, of `turn_prefix` too, the two calls running side by side. The
/// prefix summary follows the main one under a `---` rule and a "Turn Context (split turn)"
/// heading. Returns the summary (without file lists: see [`super::FileLists::append_to`]) and
/// the usage of both calls together.
///
/// The budgets leave the reserve for the summary itself: `0.8 × reserve_tokens` for the main
/// call, `0.5 ×` for the prefix (both capped by the model's own limit). Thinking is ignored.
#[allow(clippy::too_many_arguments)]
pub async fn summarize(
    client: &reqwest::Client,
    model: &Model,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
    to_summarize: &[Message],
    turn_prefix: &[Message],
    previous_summary: Option<&str>,
    custom_instructions: Option<&str>,
    settings: &CompactionSettings,
    cancel: &CancellationToken,
    idle_timeout: Duration,
) -> Result<(String, Usage), SummaryError> {
    if to_summarize.is_empty() && turn_prefix.is_empty() {
        return Err(SummaryError::NothingToSummarize);
    }
    let call = |prompt: String, max_tokens: u64| Call {
        client,
        model,
        api_key: api_key.clone(),
        headers: headers.clone(),
        prompt,
        max_tokens,
        cancel,
        idle_timeout,
    };

    let history = async {
        if to_summarize.is_empty() {
            // Only a split turn is new: the earlier summary still stands as it is.
            let kept = previous_summary.unwrap_or(NO_HISTORY).to_string();
            return Ok((kept, Usage::default()));
        }
        let prompt = summary_prompt(to_summarize, previous_summary, custom_instructions);
        call(prompt, settings.reserve_tokens * 4 / 5)
            .run()
            .await
            .map_err(|e| failure(e, SummaryError::Failed))
    };
    if turn_prefix.is_empty() {
        return history.await;
    }
    let prefix = async {
        call(turn_prefix_prompt(turn_prefix), settings.reserve_tokens / 2)
            .run()
            .await
            .map_err(|e| failure(e, SummaryError::TurnPrefixFailed))
    };
    let ((main, main_usage), (prefix, prefix_usage)) = tokio::try_join!(history, prefix)?;
    Ok((
        format!("{main}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix}"),
        add_usage(main_usage, prefix_usage),
    ))
}

fn failure(
    error: Option<ProviderError>,
    failed: fn(ProviderError) -> SummaryError,
) -> SummaryError {
    match error {
        None => SummaryError::Empty,
        Some(ProviderError::Aborted) => SummaryError::Aborted,
        Some(e) => failed(e),
    }
}

/// One summary request.
struct Call<'a> {
    client: &'a reqwest::Client,
    model: &'a Model,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
    prompt: String,
    max_tokens: u64,
    cancel: &'a CancellationToken,
    idle_timeout: Duration,
}

impl Call<'_> {
    /// The reply's text and usage; `Err(None)` when the text is blank.
    async fn run(self) -> Result<(String, Usage), Option<ProviderError>> {
        let messages = [Message::User(UserMessage {
            content: UserContent::Text(self.prompt),
            // Never stored, and wire formats do not send timestamps.
            timestamp: 0,
        })];
        let request = Request {
            model: self.model,
            system_prompt: SUMMARY_SYSTEM_PROMPT,
            messages: &messages,
            tools: &[],
            api_key: self.api_key,
            headers: self.headers,
            max_tokens: Some(self.max_tokens),
        };
        let mut text = String::new();
        let mut usage = Usage::default();
        http::stream(
            self.client,
            &request,
            self.cancel,
            self.idle_timeout,
            |event| match event {
                ProviderEvent::Text(t) => text.push_str(&t),
                ProviderEvent::Usage(u) => usage = u,
                _ => {}
            },
        )
        .await
        .map_err(Some)?;
        let text = text.trim();
        if text.is_empty() {
            return Err(None);
        }
        Ok((text.to_string(), usage))
    }
}

fn add_usage(a: Usage, b: Usage) -> Usage {
    Usage {
        input: a.input + b.input,
        output: a.output + b.output,
        cache_read: a.cache_read + b.cache_read,
        cache_write: a.cache_write + b.cache_write,
        total_tokens: a.total_tokens + b.total_tokens,
        cost: crate::protocol::Cost {
            input: a.cost.input + b.cost.input,
            output: a.cost.output + b.cost.output,
            cache_read: a.cost.cache_read + b.cost.cache_read,
            cache_write: a.cost.cache_write + b.cost.cache_write,
            total: a.cost.total + b.cost.total,
        },
    }
}
