//! What can go wrong talking to a model, as data: each variant's text names the problem well
//! enough for a user to act on it, and [`ProviderError::kind`] tells the agent what to do
//! about it (compact, retry, or neither).

use super::overflow;
use std::time::Duration;

/// How much of an error body is kept: enough to read the server's explanation, not so much that
/// an HTML error page floods the conversation.
const BODY_LIMIT_CHARS: usize = 2000;
/// How much of a bad stream line is quoted.
const LINE_QUOTE_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("could not set up the HTTP client: {0}")]
    ClientSetup(String),
    /// The request could not even be built: a malformed base URL or header.
    #[error("invalid request to {url}: {message}")]
    InvalidRequest { url: String, message: String },
    #[error("HTTP {status} from {url}: {body}")]
    Http {
        status: u16,
        url: String,
        body: String,
        /// The server's `Retry-After`, when it said how long to wait.
        retry_after: Option<Duration>,
    },
    #[error("connection refused by {url}{}", hint_suffix(.hint))]
    ConnectionRefused { url: String, hint: Option<String> },
    #[error("connection error talking to {url}: {message}")]
    Connection { url: String, message: String },
    #[error("stream from {url} was cut mid-way: {message}")]
    StreamCut { url: String, message: String },
    #[error("stream ended early: the server closed it before the reply was complete")]
    EndedEarly,
    #[error("invalid JSON in stream ({message}): {line}")]
    InvalidJson { line: String, message: String },
    #[error("stream line longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("no data from {url} for {}", seconds(*.after))]
    IdleTimeout { url: String, after: Duration },
    /// An error the provider reported inside an otherwise healthy stream.
    #[error("provider error: {0}")]
    Api(String),
    #[error("the provider's content filter stopped the reply")]
    ContentFilter,
    /// Pi's wording, so clients see the same `errorMessage` for an abort.
    #[error("Request was aborted")]
    Aborted,
}

fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// Cuts `s` to at most `max` chars on a char boundary, marking the cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}… [cut]", &s[..i]),
        None => s.to_string(),
    }
}

/// Phrases in a provider-reported error that mean trying again later may work.
const TRANSIENT_PHRASES: &[&str] = &[
    "overloaded",
    "rate limit",
    "too many requests",
    "service unavailable",
    "server error",
    "internal error",
    "temporarily",
    "try again",
    // Anthropic's error types, named in its error events.
    "overloaded_error",
    "rate_limit_error",
    "(api_error)",
    // OpenAI's error codes, named in Responses error events.
    "server_error",
    "rate_limit_exceeded",
    // Google's error statuses, named after a Gemini stream's error message.
    "(resource_exhausted)",
    "(unavailable)",
    "(internal)",
    "(deadline_exceeded)",
    // Bedrock's throttling exception, as its errors are worded.
    "throttling error",
];

/// Phrases in a server's answer that mean the credentials were refused.
const AUTH_PHRASES: &[&str] = &[
    "invalid api key",
    "invalid_api_key",
    "incorrect api key",
    "unauthorized",
    "authentication_error",
    "permission_error",
    // Google answers a bad key with a 400 naming it.
    "api key not valid",
    "api_key_invalid",
    // AWS refusing a signature's keys.
    "security token included in the request is invalid",
    "the request signature we calculated does not match",
];

/// What the agent should make of an error: each kind has its own remedy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The prompt no longer fits the model's context window: compact, then retry.
    Overflow,
    /// The same request may succeed if sent again after a pause (see `retry_after`).
    Retryable,
    /// The provider refused the credentials; retrying cannot help, fixing the key can.
    Auth,
    Other,
}

impl ProviderError {
    /// Builds an HTTP error, keeping only the start of a long body.
    pub fn http(status: u16, url: &str, body: &str) -> Self {
        ProviderError::Http {
            status,
            url: url.to_string(),
            body: cut(body.trim(), BODY_LIMIT_CHARS),
            retry_after: None,
        }
    }

    /// The same error carrying the delay the server asked for, when it is an HTTP error.
    pub fn with_retry_after(mut self, after: Option<Duration>) -> Self {
        if let ProviderError::Http { retry_after, .. } = &mut self {
            *retry_after = after;
        }
        self
    }

    /// Builds an invalid-JSON error quoting the start of the offending line.
    pub fn invalid_json(line: &str, err: &serde_json::Error) -> Self {
        ProviderError::InvalidJson {
            line: cut(line, LINE_QUOTE_CHARS),
            message: err.to_string(),
        }
    }

    /// What this error calls for. Overflow comes first: sending the same request again, however
    /// transient the server's wording, cannot make it fit.
    pub fn kind(&self) -> ErrorKind {
        if self.is_overflow() {
            ErrorKind::Overflow
        } else if self.is_auth() {
            ErrorKind::Auth
        } else if self.is_transient() {
            ErrorKind::Retryable
        } else {
            ErrorKind::Other
        }
    }

    fn is_overflow(&self) -> bool {
        let rejection = match self {
            ProviderError::Http {
                status: 400 | 413,
                body,
                ..
            } => Some(body),
            ProviderError::Api(message) => Some(message),
            _ => None,
        };
        rejection.is_some_and(|text| overflow::is_overflow_rejection(text))
            || overflow::is_overflow_text(&self.to_string())
    }

    fn is_auth(&self) -> bool {
        match self {
            ProviderError::Http {
                status: 401 | 403, ..
            } => true,
            ProviderError::Http {
                status: 400..=499,
                body,
                ..
            } => contains_any(body, AUTH_PHRASES),
            ProviderError::Api(message) => contains_any(message, AUTH_PHRASES),
            _ => false,
        }
    }

    fn is_transient(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                matches!(status, 408 | 409 | 425 | 429 | 500..=599)
            }
            ProviderError::ConnectionRefused { .. }
            | ProviderError::Connection { .. }
            | ProviderError::StreamCut { .. }
            | ProviderError::EndedEarly
            | ProviderError::IdleTimeout { .. } => true,
            ProviderError::Api(message) => contains_any(message, TRANSIENT_PHRASES),
            ProviderError::ClientSetup(_)
            | ProviderError::InvalidRequest { .. }
            | ProviderError::InvalidJson { .. }
            | ProviderError::LineTooLong { .. }
            | ProviderError::ContentFilter
            | ProviderError::Aborted => false,
        }
    }
}

fn contains_any(text: &str, phrases: &[&str]) -> bool {
    let lower = text.to_lowercase();
    phrases.iter().any(|p| lower.contains(p))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn texts_name_the_problem() {
        let e = ProviderError::http(500, "http://h/x", &"é".repeat(3000));
        let text = e.to_string();
        assert!(text.starts_with("HTTP 500 from http://h/x: éé"));
        assert!(text.ends_with("… [cut]"));
        assert!(text.chars().count() < 2100);

        let e = ProviderError::ConnectionRefused {
            url: "http://127.0.0.1:1/api/chat".into(),
            hint: Some("is Ollama running?".into()),
        };
        assert_eq!(
            e.to_string(),
            "connection refused by http://127.0.0.1:1/api/chat (is Ollama running?)"
        );
        let e = ProviderError::IdleTimeout {
            url: "u".into(),
            after: Duration::from_millis(300),
        };
        assert_eq!(e.to_string(), "no data from u for 0.3 s");
        let e = ProviderError::IdleTimeout {
            url: "u".into(),
            after: Duration::from_secs(120),
        };
        assert_eq!(e.to_string(), "no data from u for 120 s");
        let bad = serde_json::from_str::<serde_json::Value>("{oops").unwrap_err();
        let e = ProviderError::invalid_json("{oops", &bad);
        assert!(e.to_string().ends_with(": {oops"), "{e}");
    }

    #[test]
    fn policy() {
        use ErrorKind::*;
        let overflow = ProviderError::http(
            400,
            "u",
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#,
        );
        assert_eq!(overflow.kind(), Overflow);
        assert_eq!(
            ProviderError::http(413, "u", "prompt is too long: 300000 tokens").kind(),
            Overflow
        );
        assert_ne!(
            ProviderError::http(500, "u", "context length").kind(),
            Overflow
        );
        assert_ne!(
            ProviderError::http(400, "u", "rate limit: too many tokens").kind(),
            Overflow
        );
        assert_eq!(
            ProviderError::Api("the request exceeds the available context size".into()).kind(),
            Overflow
        );

        assert_eq!(ProviderError::http(503, "u", "busy").kind(), Retryable);
        assert_eq!(ProviderError::http(429, "u", "slow down").kind(), Retryable);
        assert_ne!(
            ProviderError::http(404, "u", "model not found").kind(),
            Retryable
        );
        assert_eq!(ProviderError::EndedEarly.kind(), Retryable);
        assert_eq!(ProviderError::Api("Overloaded".into()).kind(), Retryable);
        assert_ne!(
            ProviderError::Api("bad tool schema".into()).kind(),
            Retryable
        );
        assert_ne!(ProviderError::Aborted.kind(), Retryable);
    }

    #[test]
    fn refused_credentials_are_auth_errors() {
        for e in [
            ProviderError::http(401, "u", ""),
            ProviderError::http(403, "u", "forbidden"),
            ProviderError::http(400, "u", r#"{"error":{"code":"invalid_api_key"}}"#),
            ProviderError::Api("Incorrect API key provided".into()),
            ProviderError::Api("Unauthorized".into()),
        ] {
            assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
        }
        assert_eq!(
            ProviderError::http(404, "u", "model not found").kind(),
            ErrorKind::Other
        );
        assert_eq!(ProviderError::Aborted.kind(), ErrorKind::Other);
    }
}
