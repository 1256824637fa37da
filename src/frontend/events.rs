//! The agent's events as lines: JSON, and while a reader is behind, a newer progress snapshot
//! (a tool's `tool_execution_update`, `queue_update`) replaces the one still queued and a user
//! `bash` command's output joins its queued delta, so a stalled reader costs one line per
//! snapshot, not one per update.

use super::writer::Line;
use crate::protocol::{Event, weigh};
use std::io::Write;

/// Whether `event` may fold into a queued line or take one in ([`Line::absorb`]): a queue
/// keeps such an event as itself, not encoded.
pub fn folds(event: &Event) -> bool {
    matches!(
        event,
        Event::ToolExecutionUpdate { .. }
            | Event::QueueUpdate { .. }
            | Event::BashExecutionUpdate { .. }
    )
}

impl Line for Event {
    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        Ok(serde_json::to_writer(out, self)?)
    }

    fn weight(&self) -> usize {
        weigh::json_len(self)
    }

    fn absorb(&mut self, newer: &mut Event) -> bool {
        match (&mut *self, &mut *newer) {
            (
                Event::ToolExecutionUpdate {
                    tool_call_id: a, ..
                },
                Event::ToolExecutionUpdate {
                    tool_call_id: b, ..
                },
            ) if a == b => {
                std::mem::swap(self, newer);
                true
            }
            (Event::QueueUpdate { .. }, Event::QueueUpdate { .. }) => {
                std::mem::swap(self, newer);
                true
            }
            (
                Event::BashExecutionUpdate { id: a, delta },
                Event::BashExecutionUpdate { id: b, delta: more },
            ) if a == b => {
                delta.push_str(more);
                true
            }
            _ => false,
        }
    }
}
