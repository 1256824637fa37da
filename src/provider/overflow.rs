//! Recognising "the prompt no longer fits the model's context window" in what a server said,
//! the one place nova decides it ([`super::ProviderError::kind`] asks here). Most patterns are
//! the ones Pi collected from many servers (`pi-ai`'s `utils/overflow`); they are specific
//! enough to trust in any error text. Looser wording is trusted only where the server rejected
//! the request itself.

/// Matched against the normalised text (see [`normalise`]). `#` stands for a number (digits,
/// perhaps with thousands separators), `*` for any text.
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

/// Wording that, in a server's rejection of the request (an HTTP 400 or 413 body, an error
/// inside the stream), means the prompt was too long; too vague to trust anywhere else.
const REJECTION_PHRASES: &[&str] = &[
    "context length",
    "maximum context",
    "context window",
    "context size",
    "too many tokens",
    "prompt is too long",
    "prompt too long",
    "request too large",
    "token limit",
    "reduce the length of the messages",
];

/// Texts that read like overflow but mean "slow down" ("too many tokens per minute").
const NOT_OVERFLOW_PHRASES: &[&str] = &[
    "rate limit",
    "too many requests",
    "per minute",
    // Bedrock's throttling, quoted inside an HTTP error.
    "throttling error:",
];
const NOT_OVERFLOW_PREFIXES: &[&str] = &["service unavailable:"];

/// Whether an error text says the request was too long for the model's context window.
pub(super) fn is_overflow_text(error: &str) -> bool {
    let text = normalise(error);
    !is_throttling(&text)
        && (OVERFLOW_PATTERNS.iter().any(|p| contains_pattern(&text, p))
            || is_bodiless_rejection(&text))
}

/// Whether a server's own rejection of the request (the body of an HTTP 400 or 413, or an
/// error it reported mid-stream) says the prompt was too long.
pub(super) fn is_overflow_rejection(message: &str) -> bool {
    let text = normalise(message);
    !is_throttling(&text) && REJECTION_PHRASES.iter().any(|p| text.contains(p))
}

/// Lowercased, `_` read as a space and apostrophes dropped, so that one pattern covers
/// `context_length_exceeded` and `model's`.
fn normalise(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| !matches!(c, '\'' | '’'))
        .map(|c| if c == '_' { ' ' } else { c })
        .collect()
}

fn is_throttling(text: &str) -> bool {
    NOT_OVERFLOW_PREFIXES.iter().any(|p| text.starts_with(p))
        || NOT_OVERFLOW_PHRASES.iter().any(|p| text.contains(p))
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::provider::{ErrorKind, ProviderError};

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
        assert!(e.kind() == ErrorKind::Overflow && is_overflow_text(&e.to_string()));
        let e = ProviderError::http(400, "http://h/v1", "");
        assert!(is_overflow_text(&e.to_string()));
        let e = ProviderError::Api("the request exceeds the available context size".into());
        assert!(e.kind() == ErrorKind::Overflow && is_overflow_text(&e.to_string()));
    }
}
