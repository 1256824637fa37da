//! Overflow that no error reported. An error that says the prompt was too long is recognised
//! where it arises, by `ProviderError::kind`.

use crate::protocol::{AssistantMessage, StopReason};

/// Overflow without an error: a server that accepted a prompt larger than the window (it
/// reports more input than fits), or one that cut the prompt to the window and then had no room
/// to answer (stopped for length with no output).
pub fn is_silent_overflow(reply: &AssistantMessage, context_window: u64) -> bool {
    if context_window == 0 {
        return false;
    }
    // Anthropic counts cached and newly cached prompt tokens apart from `input`.
    let input = reply.usage.input + reply.usage.cache_read + reply.usage.cache_write;
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
