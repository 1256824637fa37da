//! The one model call of compaction: the current model, through the same provider code as a
//! turn, reads a transcript and writes the structured summary that replaces it.

use super::super::retry::Retries;
use super::serialize_conversation;
use crate::config::RetrySettings;
use crate::protocol::{
    CompactionReason, Event, Message, Model, SummarySource, Usage, UserContent, UserMessage,
};
use crate::provider::http::{self, Transport};
use crate::provider::{ProviderError, ProviderEvent, Request, SessionId};
use std::sync::Arc;
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
pub fn summary_prompt<M: AsRef<Message>>(
    messages: &[M],
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
pub fn turn_prefix_prompt<M: AsRef<Message>>(prefix: &[M]) -> String {
    conversation(prefix) + TURN_PREFIX_INSTRUCTIONS
}

fn conversation<M: AsRef<Message>>(messages: &[M]) -> String {
    format!(
        "<conversation>\n{}\n</conversation>\n\n",
        serialize_conversation(messages)
    )
}

/// What one compaction asks the model to summarise.
#[derive(Debug, Clone, Copy)]
pub struct SummaryJob<'a> {
    pub to_summarize: &'a [Arc<Message>],
    /// The start of a turn too long to keep whole (empty when no turn was split).
    pub turn_prefix: &'a [Arc<Message>],
    /// The summary of an earlier compaction, which this one updates.
    pub previous_summary: Option<&'a str>,
    /// The `compact` command's focus.
    pub custom_instructions: Option<&'a str>,
    /// `compaction.reserveTokens`: the room kept free for the summary.
    pub reserve_tokens: u64,
}

/// Asks `model` for a summary of `job.to_summarize` (updating `job.previous_summary` when there
/// is one) and, when a turn was split, of `job.turn_prefix` too, the two calls running side by
/// side through `transport`, as a turn's request would. The prefix summary follows the main one
/// under a `---` rule and a "Turn Context (split turn)" heading. Returns the summary (without
/// file lists: see [`super::FileLists::append_to`]) and the usage of both calls together.
///
/// The budgets leave the reserve for the summary itself: `0.8 × reserve_tokens` for the main
/// call, `0.5 ×` for the prefix (both capped by the model's own limit). Thinking is ignored.
pub async fn summarize(
    transport: &Transport<'_>,
    model: &Model,
    job: &SummaryJob<'_>,
    retry: &SummaryRetry<'_>,
    cancel: &CancellationToken,
) -> Result<(String, Usage), SummaryError> {
    if job.to_summarize.is_empty() && job.turn_prefix.is_empty() {
        return Err(SummaryError::NothingToSummarize);
    }
    let call =
        |prompt, max_tokens| ask_retrying(transport, model, prompt, max_tokens, retry, cancel);

    let history = async {
        if job.to_summarize.is_empty() {
            // Only a split turn is new: the earlier summary still stands as it is.
            let kept = job.previous_summary.unwrap_or(NO_HISTORY).to_string();
            return Ok((kept, Usage::default()));
        }
        let prompt = summary_prompt(
            job.to_summarize,
            job.previous_summary,
            job.custom_instructions,
        );
        call(prompt, job.reserve_tokens * 4 / 5)
            .await
            .map_err(|e| failure(e, SummaryError::Failed))
    };
    if job.turn_prefix.is_empty() {
        return history.await;
    }
    let prefix = async {
        call(turn_prefix_prompt(job.turn_prefix), job.reserve_tokens / 2)
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

/// How a summary request is tried again after a transient failure, as Pi 1.6 retries them: with
/// the `retry` settings of a turn, each retry announced to `emit` (`summarization_retry_*`).
pub struct SummaryRetry<'a> {
    pub settings: RetrySettings,
    /// `set_auto_retry`'s current value.
    pub enabled: bool,
    /// Why the compaction runs, as the announcement of each new attempt says.
    pub reason: CompactionReason,
    pub emit: &'a (dyn Fn(Event) + Send + Sync),
}

impl SummaryRetry<'_> {
    /// One that never retries, for callers without a client to tell.
    #[cfg(test)]
    pub(crate) fn never() -> SummaryRetry<'static> {
        SummaryRetry {
            settings: RetrySettings {
                max_retries: 0,
                ..RetrySettings::default()
            },
            enabled: false,
            reason: CompactionReason::Manual,
            emit: &|_| {},
        }
    }
}

/// [`ask`], tried again while it fails transiently and retries are left. Once any retry was
/// made, `summarization_retry_finished` closes them, however they ended.
async fn ask_retrying(
    transport: &Transport<'_>,
    model: &Model,
    prompt: String,
    max_tokens: u64,
    retry: &SummaryRetry<'_>,
    cancel: &CancellationToken,
) -> Result<(String, Usage), Option<ProviderError>> {
    let mut retries = Retries::new(retry.settings);
    // Pi routes a summary by an id of its own, kept across its retries, and caches nothing.
    let route = uuid::Uuid::now_v7().to_string();
    let session_id = SessionId {
        id: &route,
        cache: false,
    };
    let result = loop {
        let result = ask(
            transport,
            model,
            prompt.clone(),
            max_tokens,
            session_id,
            cancel,
        )
        .await;
        let scheduled = match &result {
            Err(Some(error)) => retries
                .schedule(retry.enabled, error)
                .map(|scheduled| (scheduled, error.to_string())),
            _ => None,
        };
        let Some((scheduled, error_message)) = scheduled else {
            break result;
        };
        (retry.emit)(Event::SummarizationRetryScheduled {
            attempt: scheduled.attempt,
            max_attempts: scheduled.max_attempts,
            delay_ms: scheduled.delay.as_millis().try_into().unwrap_or(u64::MAX),
            error_message,
        });
        tokio::select! {
            () = cancel.cancelled() => break Err(Some(ProviderError::Aborted)),
            () = tokio::time::sleep(scheduled.delay) => {}
        }
        (retry.emit)(Event::SummarizationRetryAttemptStart {
            source: SummarySource::Compaction,
            reason: retry.reason,
        });
    };
    if retries.finish().is_some() {
        (retry.emit)(Event::SummarizationRetryFinished);
    }
    result
}

/// One summary request: `prompt` as the only user message, under the summariser's system
/// prompt. The reply's text and usage; `Err(None)` when the text is blank.
async fn ask(
    transport: &Transport<'_>,
    model: &Model,
    prompt: String,
    max_tokens: u64,
    session_id: SessionId<'_>,
    cancel: &CancellationToken,
) -> Result<(String, Usage), Option<ProviderError>> {
    let messages = [Arc::new(Message::User(UserMessage {
        content: UserContent::Text(prompt),
        // Never stored, and wire formats do not send timestamps.
        timestamp: 0,
    }))];
    let request = Request {
        model,
        system_prompt: SUMMARY_SYSTEM_PROMPT,
        messages: &messages,
        tools: &[],
        max_tokens: Some(max_tokens),
        thinking: None,
        session_id: Some(session_id),
    };
    let mut text = String::new();
    let mut usage = Usage::default();
    http::stream(transport, &request, cancel, |event| match event {
        ProviderEvent::Text(t) => text.push_str(&t),
        ProviderEvent::Usage(u) => usage = u,
        _ => {}
    })
    .await
    .map_err(Some)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(None);
    }
    Ok((text.to_string(), usage))
}

/// A count only some replies report: known when either one knew it.
fn add_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    (a.is_some() || b.is_some()).then(|| a.unwrap_or(0) + b.unwrap_or(0))
}

fn add_usage(a: Usage, b: Usage) -> Usage {
    Usage {
        input: a.input + b.input,
        output: a.output + b.output,
        cache_read: a.cache_read + b.cache_read,
        cache_write: a.cache_write + b.cache_write,
        cache_write_1h: add_known(a.cache_write_1h, b.cache_write_1h),
        reasoning: add_known(a.reasoning, b.reasoning),
        total_tokens: a.total_tokens + b.total_tokens,
        cost: crate::protocol::Cost {
            input: a.cost.input + b.cost.input,
            output: a.cost.output + b.cost.output,
            cache_read: a.cost.cache_read + b.cost.cache_read,
            cache_write: a.cost.cache_write + b.cost.cache_write,
            total: a.cost.total + b.cost.total,
            total_from_provider: a.cost.total_from_provider.or(b.cost.total_from_provider),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::agent::compaction::CompactionSettings;
    use crate::agent::compaction::tests::{assistant, call, result, text, user};
    use crate::provider::http::tests::read_request;
    use crate::provider::prepare::tests::model;
    use serde_json::{Value, json};
    use std::sync::Mutex;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    /// How the fake Ollama answers one request.
    enum Reply {
        /// A streamed reply: thinking first, then this text in two pieces.
        Summary(&'static str),
        Status(u16, &'static str),
        Stall,
    }

    /// A fake Ollama on 127.0.0.1 answering every `/api/chat` request with `reply(body)`.
    /// Returns the base URL and the request bodies received so far.
    async fn serve(reply: fn(&Value) -> Reply) -> (String, Arc<Mutex<Vec<Value>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        tokio::spawn(async move {
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                let seen = seen.clone();
                tokio::spawn(async move { answer(socket, reply, &seen).await });
            }
        });
        (base, bodies)
    }

    async fn answer(mut socket: TcpStream, reply: fn(&Value) -> Reply, seen: &Mutex<Vec<Value>>) {
        let request = read_request(&mut socket).await;
        let (head, body) = request.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("POST /api/chat HTTP/1.1"), "{head}");
        let body: Value = serde_json::from_str(body).unwrap();
        let answer = reply(&body);
        seen.lock().unwrap().push(body);
        let (status, body) = match answer {
            Reply::Summary(summary) => {
                let (a, b) = summary.split_at(summary.len() / 2);
                let lines = [
                    json!({"message": {"role": "assistant", "thinking": "Let me think."}, "done": false}),
                    json!({"message": {"role": "assistant", "content": a}, "done": false}),
                    json!({"message": {"role": "assistant", "content": b}, "done": false}),
                    json!({"message": {"role": "assistant", "content": ""}, "done": true,
                           "done_reason": "stop", "prompt_eval_count": 100, "eval_count": 20}),
                ];
                let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
                (200, body)
            }
            Reply::Status(status, body) => (status, body.to_string()),
            Reply::Stall => {
                tokio::time::sleep(Duration::from_secs(10)).await;
                return;
            }
        };
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = socket.write_all(response.as_bytes()).await;
    }

    fn prompt_of(body: &Value) -> &str {
        body["messages"][1]["content"].as_str().unwrap()
    }

    fn is_prefix_request(body: &Value) -> bool {
        prompt_of(body).contains("BEGINNING of a turn")
    }

    async fn run(
        base: &str,
        to_summarize: &[Message],
        turn_prefix: &[Message],
        previous: Option<&str>,
        focus: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<(String, Usage), SummaryError> {
        let model = Model {
            base_url: base.to_string(),
            ..model("ollama", false)
        };
        let client = http::SharedClient::default();
        let warnings = crate::warnings::Warnings::default();
        let transport = Transport {
            client: &client,
            idle_timeout: Duration::from_secs(5),
            api_key: None,
            headers: vec![],
            route: None,
            warnings: &warnings,
            hooks: None,
        };
        let shared = |messages: &[Message]| -> Vec<Arc<Message>> {
            messages.iter().cloned().map(Arc::new).collect()
        };
        let (to_summarize, turn_prefix) = (shared(to_summarize), shared(turn_prefix));
        let job = SummaryJob {
            to_summarize: &to_summarize,
            turn_prefix: &turn_prefix,
            previous_summary: previous,
            custom_instructions: focus,
            reserve_tokens: CompactionSettings::default().reserve_tokens,
        };
        summarize(&transport, &model, &job, &SummaryRetry::never(), cancel).await
    }

    fn history() -> Vec<Message> {
        vec![
            user("Fix the parser"),
            assistant(vec![
                text("Reading it."),
                call("c1", "read", json!({"path": "src/parse.rs"})),
            ]),
            result("c1", "fn parse() {}"),
        ]
    }

    #[tokio::test]
    async fn split_turn_update_with_focus() {
        let (base, bodies) = serve(|body| {
            Reply::Summary(if is_prefix_request(body) {
                "## Original Request\nAdd tests"
            } else {
                "## Goal\nFix the parser"
            })
        })
        .await;
        let prefix = vec![
            user("Now add tests"),
            assistant(vec![text("Writing tests.")]),
        ];
        let (summary, usage) = run(
            &base,
            &history(),
            &prefix,
            Some("## Goal\nEarlier goal"),
            Some("the parser bugs"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            summary,
            "## Goal\nFix the parser\n\n---\n\n**Turn Context (split turn):**\n\n\
             ## Original Request\nAdd tests"
        );
        assert_eq!(
            (usage.input, usage.output, usage.total_tokens),
            (200, 40, 240)
        );

        let bodies = bodies.lock().unwrap();
        assert_eq!(bodies.len(), 2);
        let main = bodies.iter().find(|b| !is_prefix_request(b)).unwrap();
        assert_eq!(main["messages"][0]["content"], SUMMARY_SYSTEM_PROMPT);
        assert_eq!(main["messages"].as_array().unwrap().len(), 2);
        assert!(main.get("tools").is_none());
        assert_eq!(main["options"]["num_predict"], 13107);
        let prompt = prompt_of(main);
        assert!(prompt.starts_with(&format!(
            "<conversation>\n{}\n</conversation>\n\n",
            serialize_conversation(&history())
        )));
        assert!(prompt.contains("[Assistant tool calls]: read(path=\"src/parse.rs\")"));
        assert!(prompt.contains("<previous-summary>\n## Goal\nEarlier goal\n</previous-summary>"));
        assert!(prompt.contains(UPDATE_INSTRUCTIONS));
        assert!(prompt.ends_with("\n\nAlso focus on: the parser bugs"));

        let prefix_body = bodies.iter().find(|b| is_prefix_request(b)).unwrap();
        assert_eq!(prefix_body["options"]["num_predict"], 8192);
        let prompt = prompt_of(prefix_body);
        assert_eq!(prompt, turn_prefix_prompt(&prefix));
        assert!(prompt.contains("[User]: Now add tests\n\n[Assistant]: Writing tests."));
        assert!(!prompt.contains("Earlier goal") && !prompt.contains("parser bugs"));
    }

    #[tokio::test]
    async fn first_summary() {
        let (base, bodies) = serve(|_| Reply::Summary("  ## Goal\nFix the parser\n")).await;
        let (summary, usage) = run(
            &base,
            &history(),
            &[],
            None,
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        // Thinking is left out, surrounding blank space trimmed.
        assert_eq!(summary, "## Goal\nFix the parser");
        assert_eq!(usage.total_tokens, 120);
        let bodies = bodies.lock().unwrap();
        assert_eq!(bodies.len(), 1);
        let prompt = prompt_of(&bodies[0]);
        assert!(prompt.ends_with(INITIAL_INSTRUCTIONS), "{prompt}");
        assert!(!prompt.contains("<previous-summary>"));
    }

    #[tokio::test]
    async fn only_a_split_turn_keeps_the_previous_summary() {
        let (base, bodies) = serve(|_| Reply::Summary("Prefix")).await;
        let prefix = [user("Go"), assistant(vec![text("Going.")])];
        let cancel = CancellationToken::new();
        let (summary, _) = run(&base, &[], &prefix, Some("Old"), None, &cancel)
            .await
            .unwrap();
        assert_eq!(
            summary,
            "Old\n\n---\n\n**Turn Context (split turn):**\n\nPrefix"
        );
        let (summary, _) = run(&base, &[], &prefix, None, None, &cancel).await.unwrap();
        assert!(summary.starts_with("No prior history.\n\n---\n\n"));
        assert_eq!(bodies.lock().unwrap().len(), 2);
        assert_eq!(
            run(&base, &[], &[], None, None, &cancel).await,
            Err(SummaryError::NothingToSummarize)
        );
    }

    #[tokio::test]
    async fn provider_errors_are_reported() {
        let (base, _) = serve(|_| Reply::Status(500, "{\"error\":\"model exploded\"}")).await;
        let cancel = CancellationToken::new();
        let err = run(&base, &history(), &[], None, None, &cancel)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            SummaryError::Failed(ProviderError::Http { status: 500, .. })
        ));
        assert_eq!(
            err.to_string(),
            format!(
                "Summarization failed: HTTP 500 from {base}/api/chat: {{\"error\":\"model exploded\"}}"
            )
        );

        let (base, _) = serve(|body| {
            if is_prefix_request(body) {
                Reply::Status(400, "prompt is too long")
            } else {
                Reply::Summary("Main")
            }
        })
        .await;
        let err = run(&base, &history(), &history(), None, None, &cancel)
            .await
            .unwrap_err();
        let SummaryError::TurnPrefixFailed(inner) = &err else {
            panic!("{err:?}")
        };
        assert_eq!(inner.kind(), crate::provider::ErrorKind::Overflow);
        assert!(
            err.to_string()
                .starts_with("Turn prefix summarization failed: HTTP 400")
        );

        let (base, _) = serve(|_| Reply::Summary("")).await;
        assert_eq!(
            run(&base, &history(), &[], None, None, &cancel).await,
            Err(SummaryError::Empty)
        );
    }

    #[tokio::test]
    async fn abort_stops_the_call() {
        let (base, _) = serve(|_| Reply::Stall).await;
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.cancel();
        });
        let started = std::time::Instant::now();
        let prefix = [user("Go")];
        let result = run(&base, &history(), &prefix, None, None, &cancel).await;
        assert_eq!(result, Err(SummaryError::Aborted));
        assert!(started.elapsed() < Duration::from_secs(3));
        // Already cancelled: aborted before anything is sent.
        let result = run(&base, &history(), &[], None, None, &cancel).await;
        assert_eq!(result, Err(SummaryError::Aborted));
    }
}
