//! Recognising "the prompt no longer fits" in a provider's error text, with the patterns Pi
//! collected from many servers (`pi-ai`'s `utils/overflow`). This complements
//! `ProviderError::is_context_overflow`, which only sees errors nova classified itself: the
//! agent also meets overflow as the `errorMessage` text of a stored reply.

use crate::protocol::{AssistantMessage, StopReason};

/// Matched against the error text lowercased, with `_` read as a space and apostrophes dropped
/// (so one pattern covers `context_length_exceeded` and `model's`). `#` stands for a number
/// (digits, perhaps with thousands separators), `*` for any text.
const OVERFLOW_PATTERNS: &[&str] = &[
    "prompt is too long",
    "request too large",
    "input is too long for requested model",
    "exceeds the context window",
    "exceeds maximum context length of #",
    "exceeds the maximum context length of #",
    "exceeds models maximum context length of #",
    "exceeds the models maximum context length of #",
    "input token count*exceeds the maximum",
    "maximum prompt length is #",
    "reduce the length of the messages",
    "maximum context length is # token",
    "input (# tokens) is longer than the models context length (# tokens)",
    "exceeds the limit of #",
    "exceeds the available context size",
    "greater than the context length",
    "context window exceeds limit",
    "exceeded model token limit",
    "too large for model with # maximum context length",
    "model context window exceeded",
    "prompt too long; exceeded context length",
    "prompt too long; exceeded max context length",
    "context length exceeded",
    "too many tokens",
    "token limit exceeded",
];

/// Texts that match an overflow pattern but mean "slow down" ("too many tokens per minute").
const NOT_OVERFLOW_PATTERNS: &[&str] = &["rate limit", "too many requests"];
const NOT_OVERFLOW_PREFIXES: &[&str] = &["throttling error:", "service unavailable:"];

/// Whether an error text says the request was too long for the model's context window.
pub fn is_overflow_text(error: &str) -> bool {
    let text: String = error
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| !matches!(c, '\'' | '’'))
        .map(|c| if c == '_' { ' ' } else { c })
        .collect();
    if NOT_OVERFLOW_PREFIXES.iter().any(|p| text.starts_with(p))
        || NOT_OVERFLOW_PATTERNS.iter().any(|p| text.contains(p))
    {
        return false;
    }
    OVERFLOW_PATTERNS.iter().any(|p| contains_pattern(&text, p)) || is_bodiless_rejection(&text)
}

/// Some servers (Cerebras) answer an oversized request with a bare 400 or 413: pi-ai words that
/// "400 status code (no body)", nova's provider layer "HTTP 400 from <url>: " with nothing after.
fn is_bodiless_rejection(text: &str) -> bool {
    let pi_style = ["400", "413"].iter().any(|status| {
        text.strip_prefix(status)
            .map(|rest| rest.trim_start())
            .map(|rest| {
                rest.strip_prefix("status code")
                    .unwrap_or(rest)
                    .trim_start()
            })
            .is_some_and(|rest| rest.starts_with("(no body)"))
    });
    let nova_style = (text.starts_with("http 400 from ") || text.starts_with("http 413 from "))
        && text.ends_with(':');
    pi_style || nova_style
}

fn contains_pattern(text: &str, pattern: &str) -> bool {
    text.char_indices()
        .any(|(start, _)| matches_at(&text[start..], pattern))
}

/// Whether `text` starts with something `pattern` matches.
fn matches_at(text: &str, pattern: &str) -> bool {
    match pattern.chars().next() {
        None => true,
        Some('*') => text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .any(|i| matches_at(&text[i..], &pattern[1..])),
        Some('#') => {
            let digits = text
                .find(|c: char| !(c.is_ascii_digit() || c == ','))
                .unwrap_or(text.len());
            text[..digits].chars().any(|c| c.is_ascii_digit())
                && matches_at(&text[digits..], &pattern[1..])
        }
        Some(_) => {
            let literal_end = pattern.find(['*', '#']).unwrap_or(pattern.len());
            text.strip_prefix(&pattern[..literal_end])
                .is_some_and(|rest| matches_at(rest, &pattern[literal_end..]))
        }
    }
}

/// Overflow without an error: a server that accepted a prompt larger than the window (it
/// reports more input than fits), or one that cut the prompt to the window and then had no room
/// to answer (stopped for length with no output).
pub fn is_silent_overflow(reply: &AssistantMessage, context_window: u64) -> bool {
    if context_window == 0 {
        return false;
    }
    let input = reply.usage.input + reply.usage.cache_read;
    match reply.stop_reason {
        StopReason::Stop => input > context_window,
        StopReason::Length => reply.usage.output == 0 && input * 100 >= context_window * 99,
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::agent::compaction::tests::assistant;
    use crate::protocol::{Message, Usage};
    use crate::provider::ProviderError;

    #[test]
    fn provider_texts_that_mean_overflow() {
        for text in [
            "prompt is too long: 213462 tokens > 200000 maximum",
            r#"413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#,
            "Input is too long for requested model.",
            "Your input exceeds the context window of this model",
            "Requested token count exceeds the model's maximum context length of 131,072 tokens",
            "This request exceeds maximum context length of 8192 tokens",
            "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
            "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
            "Please reduce the length of the messages or completion",
            "This endpoint's maximum context length is 4096 tokens. However, you requested about 9000",
            "The input (9000 tokens) is longer than the model's context length (4096 tokens).",
            "prompt token count of 140000 exceeds the limit of 128000",
            "the request exceeds the available context size, try increasing it",
            "tokens to keep from the initial prompt is greater than the context length",
            "invalid params, context window exceeds limit",
            "Your request exceeded model token limit: 262144 (requested: 300000)",
            "Prompt contains 40000 tokens, too large for model with 32768 maximum context length",
            "finish_reason: model_context_window_exceeded",
            "prompt too long; exceeded max context length by 1200 tokens",
            "prompt too long; exceeded context length by 5 tokens",
            "error code: context_length_exceeded",
            "Context length exceeded",
            "Too many tokens in request",
            "Token limit exceeded",
            "400 status code (no body)",
            "413 (no body)",
            "HTTP 413 from http://127.0.0.1:9/v1/chat/completions: ",
        ] {
            assert!(is_overflow_text(text), "{text}");
        }
    }

    #[test]
    fn texts_that_do_not() {
        for text in [
            "ThrottlingException: Too many tokens, please wait before trying again. (rate limit)",
            "Throttling error: Too many tokens, please wait",
            "Service unavailable: context length exceeded",
            "429 Too Many Requests: too many tokens per minute",
            "maximum context length is large",
            "HTTP 400 from http://h/api/chat: model not found",
            "HTTP 500 from http://h/api/chat:",
            "500 status code (no body)",
            "connection refused",
            "",
        ] {
            assert!(!is_overflow_text(text), "{text}");
        }
    }

    #[test]
    fn nova_errors_read_the_same_either_way() {
        let e = ProviderError::http(
            400,
            "http://h/v1",
            "This model's maximum context length is 8192 tokens",
        );
        assert!(e.is_context_overflow() && is_overflow_text(&e.to_string()));
        let e = ProviderError::http(400, "http://h/v1", "");
        assert!(is_overflow_text(&e.to_string()));
        let e = ProviderError::Api("the request exceeds the available context size".into());
        assert!(e.is_context_overflow() && is_overflow_text(&e.to_string()));
    }

    #[test]
    fn silent_overflow() {
        let reply = |stop, input, cache_read, output| {
            let Message::Assistant(a) = assistant(vec![]) else {
                unreachable!()
            };
            AssistantMessage {
                stop_reason: stop,
                usage: Usage {
                    input,
                    cache_read,
                    output,
                    ..Usage::default()
                },
                ..a
            }
        };
        assert!(is_silent_overflow(
            &reply(StopReason::Stop, 7000, 2000, 10),
            8192
        ));
        assert!(!is_silent_overflow(
            &reply(StopReason::Stop, 7000, 1000, 10),
            8192
        ));
        assert!(is_silent_overflow(
            &reply(StopReason::Length, 8192, 0, 0),
            8192
        ));
        assert!(!is_silent_overflow(
            &reply(StopReason::Length, 8192, 0, 5),
            8192
        ));
        assert!(!is_silent_overflow(
            &reply(StopReason::Length, 4000, 0, 0),
            8192
        ));
        assert!(!is_silent_overflow(
            &reply(StopReason::Error, 90000, 0, 0),
            8192
        ));
        assert!(!is_silent_overflow(
            &reply(StopReason::Stop, 90000, 0, 0),
            0
        ));
    }
}
