//! Running a compaction inside the agent: the events, the summary call through the current
//! model, the session entry and the rebuilt conversation. What to cut and how to summarise is
//! decided in [`super::compaction`].

use super::compaction::{
    CompactionSettings, CutPoint, SummaryError, SummaryJob, SummaryRetry, estimate_tokens,
    file_lists, find_cut_point, for_window, summarize,
};
use super::{Agent, BeforeCompact};
use crate::config::ConfigError;
use crate::protocol::{CompactionReason, CompactionResult, Event, Message};
use crate::provider::estimate::prompt_tokens;
use crate::session::{Body, SessionError};
use serde_json::json;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why a compaction did not happen. `compaction_end` and the `compact` response carry its text.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("Compaction was aborted")]
    Aborted,
    #[error("No model selected to write the summary")]
    NoModel,
    #[error("Nothing to compact (session too small)")]
    NothingToCompact,
    /// The model's API key or headers could not be resolved.
    #[error(transparent)]
    Credentials(#[from] ConfigError),
    #[error(transparent)]
    Summary(SummaryError),
    #[error(transparent)]
    Session(#[from] SessionError),
    /// An extension's `session_before_compact` hook cancelled it.
    #[error("Compaction cancelled")]
    Cancelled,
    /// What an extension's `session_before_compact` hook returned cannot be recorded.
    #[error("an extension's session_before_compact hook failed: {0}")]
    Extension(String),
}

/// Compacts the conversation and reports it with `compaction_start`/`compaction_end`.
/// `will_retry` is what `compaction_end` says on success (an overflow retries the turn).
pub(super) async fn compact(
    agent: &Agent,
    cancel: &CancellationToken,
    reason: CompactionReason,
    custom_instructions: Option<&str>,
    will_retry: bool,
) -> Result<CompactionResult, CompactError> {
    agent.emit(Event::CompactionStart { reason });
    agent.state().compacting = true;
    let result = summarize_and_record(agent, cancel, reason, custom_instructions, will_retry).await;
    agent.state().compacting = false;
    let aborted = cancel.is_cancelled();
    match &result {
        Ok(r) => agent.emit(Event::CompactionEnd {
            reason,
            result: Some(r.clone()),
            aborted: false,
            will_retry,
            error_message: None,
        }),
        Err(e) => {
            let message = match reason {
                _ if aborted => CompactError::Aborted.to_string(),
                CompactionReason::Manual => format!("Compaction failed: {e}"),
                CompactionReason::Threshold => format!("Auto-compaction failed: {e}"),
                CompactionReason::Overflow => format!("Context overflow recovery failed: {e}"),
            };
            agent.emit(Event::CompactionEnd {
                reason,
                result: None,
                aborted,
                will_retry: false,
                error_message: Some(message.clone()),
            });
            // As Pi has it: a compaction an extension cancelled counts as aborted, and an
            // aborted one has no error message.
            if let Some(extensions) = agent.extensions() {
                let aborted = aborted || matches!(e, CompactError::Cancelled);
                let mut event = json!({
                    "type": "session_compact_failed",
                    "reason": reason,
                    "aborted": aborted,
                    "willRetry": false,
                    "fromExtension": matches!(e, CompactError::Extension(_)),
                });
                if !aborted {
                    event["errorMessage"] = json!(message);
                }
                extensions.session_event(event);
            }
        }
    }
    result
}

/// The entries since the last compaction (its summary left out: it is handed over as the
/// summary to update, not summarised again as conversation) and that summary.
type Compactable = (Vec<(String, Arc<Message>)>, Option<String>);

fn compactable(mut entries: Vec<(String, Arc<Message>)>) -> Compactable {
    let previous_summary = match entries.first().map(|(_, m)| &**m) {
        Some(Message::CompactionSummary(s)) => Some(s.summary.clone()),
        _ => None,
    };
    if previous_summary.is_some() {
        entries.remove(0);
    }
    (entries, previous_summary)
}

/// Where a compaction of the current conversation would cut, with the settings scaled to the
/// model's window; `None` when it could cut nothing (then an automatic one is not started).
pub(super) fn cut_point(
    entries: Vec<(String, Arc<Message>)>,
    settings: &CompactionSettings,
    context_window: u64,
) -> Option<CutPoint> {
    let (entries, _) = compactable(entries);
    find_cut_point(
        &entries,
        for_window(settings, context_window).keep_recent_tokens,
    )
}

async fn summarize_and_record(
    agent: &Agent,
    cancel: &CancellationToken,
    reason: CompactionReason,
    custom_instructions: Option<&str>,
    will_retry: bool,
) -> Result<CompactionResult, CompactError> {
    let inner = &agent.inner;
    let (model, entries, previous_details, tokens_before, tools) = {
        let state = agent.state();
        let model = state.model.clone().ok_or(CompactError::NoModel)?;
        let entries = state.session.context_entries();
        let previous_details = match entries.first() {
            Some((id, m)) if matches!(**m, Message::CompactionSummary(_)) => state
                .session
                .entries()
                .iter()
                .rev()
                .find_map(|e| match &e.body {
                    Body::Compaction { details, .. } if &e.id == id => details.clone(),
                    _ => None,
                }),
            _ => None,
        };
        // As Pi counts it, and as the threshold does: the last reply's reported usage plus an
        // estimate of what came after it.
        let tokens_before = state.context_tokens();
        let tools = state.tools.clone();
        (model, entries, previous_details, tokens_before, tools)
    };
    // Pi's estimate after a compaction counts its leading system message: the system prompt and
    // the tools.
    let prompt_tokens = prompt_tokens(&tools.system_prompt, &agent.tool_specs(&tools));
    let settings = for_window(&inner.compaction, model.context_window);
    let (entries, previous_summary) = compactable(entries);
    let cut = find_cut_point(&entries, settings.keep_recent_tokens)
        .ok_or(CompactError::NothingToCompact)?;
    let (kept_ids, messages): (Vec<String>, Vec<Arc<Message>>) = entries.into_iter().unzip();
    // Built only for a `session_before_compact` handler: it copies the whole conversation.
    let before = || {
        json!({
            "type": "session_before_compact",
            "preparation": {
                "firstKeptEntryId": cut.first_kept_id,
                "messagesToSummarize": &messages[cut.summarized()],
                "turnPrefixMessages": &messages[cut.turn_prefix()],
                "isSplitTurn": cut.turn_start.is_some(),
                "tokensBefore": tokens_before,
                "previousSummary": previous_summary,
                "settings": {
                    "enabled": agent.state().auto_compaction,
                    "reserveTokens": settings.reserve_tokens,
                    "keepRecentTokens": settings.keep_recent_tokens,
                },
            },
            "branchEntries": agent.state().session.branch_entries(),
            "customInstructions": custom_instructions,
            "reason": reason,
            "willRetry": will_retry,
        })
    };
    let hooked = match agent.extensions().and_then(|e| e.before_compact(&before)) {
        Some(hooks) => hooks.await,
        None => BeforeCompact::Summarize,
    };
    let written = match hooked {
        BeforeCompact::Cancel => return Err(CompactError::Cancelled),
        BeforeCompact::Summarize => None,
        BeforeCompact::Replace(c) if !kept_ids.contains(&c.first_kept_entry_id) => {
            return Err(CompactError::Extension(format!(
                "its compaction keeps the conversation from {}, which is not an entry the \
                 compaction could keep",
                c.first_kept_entry_id
            )));
        }
        BeforeCompact::Replace(c) => Some(c),
    };
    let (summary, first_kept_id, tokens_before, details, usage, from_extension) = match written {
        Some(c) => (
            c.summary,
            c.first_kept_entry_id,
            c.tokens_before,
            c.details,
            c.usage,
            true,
        ),
        None => {
            let job = SummaryJob {
                to_summarize: &messages[cut.summarized()],
                turn_prefix: &messages[cut.turn_prefix()],
                previous_summary: previous_summary.as_deref(),
                custom_instructions,
                reserve_tokens: settings.reserve_tokens,
            };
            let (summary, details, usage) = summarize_default(
                agent,
                cancel,
                reason,
                &model,
                &job,
                &messages[..cut.first_kept],
                previous_details.as_ref(),
            )
            .await?;
            (
                summary,
                cut.first_kept_id.clone(),
                tokens_before,
                Some(details),
                Some(usage),
                false,
            )
        }
    };

    let mut state = agent.state();
    if cancel.is_cancelled() {
        return Err(CompactError::Aborted);
    }
    state.session.append_compaction(
        &summary,
        &first_kept_id,
        tokens_before,
        details.clone(),
        usage.clone(),
        from_extension,
    )?;
    state.messages = state.session.context().messages;
    state.usage_from = state.messages.len();
    if let Some(extensions) = agent.extensions()
        && let Some(entry) = state.session.entries().last()
    {
        extensions.session_event(json!({
            "type": "session_compact",
            "compactionEntry": entry,
            "fromExtension": from_extension,
            "reason": reason,
            "willRetry": will_retry,
        }));
    }
    Ok(CompactionResult {
        summary,
        first_kept_entry_id: first_kept_id,
        tokens_before,
        estimated_tokens_after: prompt_tokens
            + state
                .messages
                .iter()
                .map(|m| estimate_tokens(m))
                .sum::<u64>(),
        usage,
        details,
    })
}

/// nova's own summary for `job`, by the model: the summary with the file lists of `compacted`
/// (what the compaction drops from the conversation), its details and the call's usage.
async fn summarize_default(
    agent: &Agent,
    cancel: &CancellationToken,
    reason: CompactionReason,
    model: &crate::protocol::Model,
    job: &SummaryJob<'_>,
    compacted: &[Arc<Message>],
    previous_details: Option<&serde_json::Value>,
) -> Result<(String, serde_json::Value, crate::protocol::Usage), CompactError> {
    let inner = &agent.inner;
    let credentials = agent
        .credentials(model)
        .await
        .map_err(CompactError::Credentials)?;
    // Pi's hooks shape the turns' requests; a summary is nova's own.
    let transport = agent.transport(credentials, None);
    let emit = |event| agent.emit(event);
    let retry = SummaryRetry {
        settings: inner.retry,
        enabled: agent.state().auto_retry,
        reason,
        emit: &emit,
    };
    let summarized = summarize(&transport, model, job, &retry, cancel).await;
    let (summary, usage) = summarized.map_err(|e| match e {
        SummaryError::Aborted => CompactError::Aborted,
        other => CompactError::Summary(other),
    })?;
    let files = file_lists(compacted.iter().map(AsRef::as_ref), previous_details);
    Ok((files.append_to(&summary), files.details(), usage))
}
