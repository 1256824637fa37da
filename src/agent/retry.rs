//! Automatic retry of transient provider failures, as Pi 1.6 does it with its `retry` settings:
//! which failures are tried again, how long to wait first, and when to give up.
//!
//! Only [`ErrorKind::Retryable`] failures qualify (HTTP 429 and 5xx, overloaded, a refused or
//! reset connection, a stream that broke off). Refused credentials, bad requests and a context
//! that no longer fits are never retried: the same request cannot succeed (an overflow goes to
//! compaction instead).
//!
//! A reply cut off after some text or tool calls had streamed is retried too, as Pi does: the
//! failed reply stays in the session file and was shown to the client, but it leaves the
//! context (see `Agent::drop_failed_reply`) and failed replies are never sent to the model, so
//! the retry starts from the same conversation as the failed attempt.
//!
//! Unlike Pi 1.6, which ignores `Retry-After` at this level, nova waits at least as long as
//! the server asked; when that is longer than `retry.maxAgentDelayMs` it does not retry, and
//! the reply's error says so (Pi's wording for its own cap on server-requested delays).

use crate::config::RetrySettings;
use crate::provider::{ErrorKind, ProviderError};
use std::time::Duration;

/// The retries of one run: how many have been made since the last good reply.
pub(super) struct Retries {
    settings: RetrySettings,
    attempt: u32,
}

/// A retry to make: announce it (`auto_retry_start`), wait `delay`, send the turn again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Scheduled {
    pub attempt: u32,
    pub max_attempts: u32,
    pub delay: Duration,
}

impl Retries {
    pub fn new(settings: RetrySettings) -> Self {
        Retries {
            settings,
            attempt: 0,
        }
    }

    /// Ends the current retries (a reply came, or they were given up or cancelled) and returns
    /// the attempt they reached, `None` when none was under way.
    pub fn finish(&mut self) -> Option<u32> {
        let attempt = std::mem::take(&mut self.attempt);
        (attempt > 0).then_some(attempt)
    }

    /// Whether `error` will be retried: `enabled` is `set_auto_retry`'s current value. Counts
    /// the retry when it will be made.
    pub fn schedule(&mut self, enabled: bool, error: &ProviderError) -> Option<Scheduled> {
        if !enabled || self.attempt >= self.settings.max_retries {
            return None;
        }
        let delay = delay(&self.settings, self.attempt + 1, error)?;
        self.attempt += 1;
        Some(Scheduled {
            attempt: self.attempt,
            max_attempts: self.settings.max_retries,
            delay,
        })
    }
}

/// How long to wait before retry number `attempt` (from 1) after `error`, `None` when it is not
/// to be retried at all.
fn delay(settings: &RetrySettings, attempt: u32, error: &ProviderError) -> Option<Duration> {
    if error.kind() != ErrorKind::Retryable {
        return None;
    }
    let backoff = backoff(settings, attempt);
    match server_delay(error) {
        Some(asked) if asked > settings.max_delay => None,
        Some(asked) => Some(asked.max(backoff)),
        None => Some(backoff),
    }
}

/// Pi's exponential backoff: `baseDelayMs`, doubled for each retry after the first, never more
/// than `maxAgentDelayMs`.
pub(super) fn backoff(settings: &RetrySettings, attempt: u32) -> Duration {
    let factor = 1u32
        .checked_shl(attempt.saturating_sub(1))
        .unwrap_or(u32::MAX);
    settings
        .base_delay
        .saturating_mul(factor)
        .min(settings.max_delay)
}

fn server_delay(error: &ProviderError) -> Option<Duration> {
    match error {
        ProviderError::Http { retry_after, .. } => *retry_after,
        _ => None,
    }
}

/// The text a failed reply carries: the error itself, and when retrying was on but the server
/// asked for a longer wait than `maxAgentDelayMs` allows, why it was not retried.
pub(super) fn error_text(settings: &RetrySettings, enabled: bool, error: &ProviderError) -> String {
    match server_delay(error) {
        Some(asked)
            if enabled
                && settings.max_retries > 0
                && error.kind() == ErrorKind::Retryable
                && asked > settings.max_delay =>
        {
            format!(
                "Server requested {} retry delay (max: {}, retry.maxAgentDelayMs); not retried. \
                 {error}",
                seconds(asked),
                seconds(settings.max_delay)
            )
        }
        _ => error.to_string(),
    }
}

/// Seconds as Pi words them (`60s`), with a decimal when the delay is not whole.
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings(max_retries: u32) -> RetrySettings {
        RetrySettings {
            enabled: true,
            max_retries,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
        }
    }

    fn http(status: u16, retry_after: Option<u64>) -> ProviderError {
        ProviderError::http(status, "u", "busy")
            .with_retry_after(retry_after.map(Duration::from_millis))
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s = settings(9);
        let delays: Vec<_> = (1..=5).map(|a| backoff(&s, a).as_millis()).collect();
        assert_eq!(delays, [100, 200, 350, 350, 350]);
        assert_eq!(backoff(&s, 200), s.max_delay);
        let huge = RetrySettings {
            base_delay: Duration::MAX,
            max_delay: Duration::MAX,
            ..s
        };
        assert_eq!(backoff(&huge, 3), Duration::MAX);
    }

    #[test]
    fn counts_retries_until_max_retries() {
        let mut r = Retries::new(settings(2));
        let e = http(503, None);
        let first = r.schedule(true, &e).unwrap();
        assert_eq!((first.attempt, first.max_attempts), (1, 2));
        assert_eq!(first.delay, Duration::from_millis(100));
        assert_eq!(
            r.schedule(true, &e).unwrap().delay,
            Duration::from_millis(200)
        );
        assert_eq!(r.schedule(true, &e), None);
        assert_eq!(r.finish(), Some(2));
        assert_eq!(r.finish(), None);
        assert_eq!(r.schedule(true, &e).unwrap().attempt, 1);
    }

    #[test]
    fn only_transient_failures_are_retried() {
        let mut r = Retries::new(settings(3));
        assert_eq!(r.schedule(false, &http(503, None)), None);
        for e in [
            http(401, None),
            http(400, None),
            ProviderError::http(400, "u", "maximum context length is 8192 tokens"),
            ProviderError::Aborted,
        ] {
            assert_eq!(r.schedule(true, &e), None, "{e}");
        }
        assert!(r.schedule(true, &ProviderError::EndedEarly).is_some());
        assert!(r.schedule(true, &http(429, None)).is_some());
    }

    #[test]
    fn retry_after_is_a_floor_and_past_the_cap_a_refusal() {
        let mut r = Retries::new(settings(3));
        assert_eq!(
            r.schedule(true, &http(429, Some(300))).unwrap().delay,
            Duration::from_millis(300)
        );
        // Backoff (200 ms) is longer than what the server asked.
        assert_eq!(
            r.schedule(true, &http(429, Some(50))).unwrap().delay,
            Duration::from_millis(200)
        );
        let too_long = http(429, Some(60_500));
        assert_eq!(r.schedule(true, &too_long), None);
        let text = error_text(&settings(3), true, &too_long);
        assert!(
            text.starts_with("Server requested 60.5s retry delay (max: 0."),
            "{text}"
        );
        assert!(text.ends_with("HTTP 429 from u: busy"), "{text}");
        assert_eq!(
            error_text(&settings(3), false, &too_long),
            too_long.to_string()
        );
        assert_eq!(
            error_text(&settings(3), true, &http(429, Some(10))),
            "HTTP 429 from u: busy"
        );
    }
}
