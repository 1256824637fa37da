//! Messages waiting for delivery into a run: steering (after the current tool batch) and
//! follow-ups (when the agent would otherwise stop).
//!
//! Both queues together are bounded ([`MAX_MESSAGES`], [`MAX_BYTES`]), since a client may send
//! commands far faster than a run takes them. Every change is announced by a `queue_update`
//! carrying every queued text, so each text is kept once as an `Arc<str>` that all those events
//! share: an event costs a pointer per queued message, never a copy of the texts.
//!
//! An extension's custom messages wait in the same queues, in order with the user's (Pi keeps
//! one queue for both), but `queue_update` lists only the user's texts, as Pi's does.

use crate::protocol::{ContentBlock, Event, Message, QueueMode, UserContent};
use std::collections::VecDeque;
use std::sync::Arc;

/// The most messages waiting across both queues.
pub const MAX_MESSAGES: usize = 1000;
/// The most content (text and image data, in bytes) waiting across both queues.
pub const MAX_BYTES: usize = 32 * 1024 * 1024;

/// Why a message was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueFull {
    #[error(
        "{MAX_MESSAGES} messages are already waiting, the most the steering and follow-up \
         queues hold together"
    )]
    Messages,
    #[error(
        "the queued messages would hold {} bytes, over the {} MiB the steering and follow-up \
         queues hold together ({queued} bytes waiting, this message {adding})",
        queued + adding,
        MAX_BYTES / (1024 * 1024)
    )]
    Bytes { queued: usize, adding: usize },
}

#[derive(Debug)]
struct Queued {
    message: Message,
    /// The text `queue_update` shows, computed once and shared by every event; `None` for an
    /// extension's message, which it does not show.
    text: Option<Arc<str>>,
    bytes: usize,
}

#[derive(Debug, Default)]
pub struct Queue {
    steering: VecDeque<Queued>,
    follow_up: VecDeque<Queued>,
    /// Content bytes across both queues.
    bytes: usize,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
}

impl Queue {
    pub fn new(steering_mode: QueueMode, follow_up_mode: QueueMode) -> Self {
        Queue {
            steering_mode,
            follow_up_mode,
            ..Queue::default()
        }
    }

    pub fn push_steer(&mut self, message: impl Into<Message>) -> Result<(), QueueFull> {
        let queued = self.admit(message.into())?;
        self.steering.push_back(queued);
        Ok(())
    }

    pub fn push_follow_up(&mut self, message: impl Into<Message>) -> Result<(), QueueFull> {
        let queued = self.admit(message.into())?;
        self.follow_up.push_back(queued);
        Ok(())
    }

    /// Checks the limits for one more message and accounts for it.
    fn admit(&mut self, message: Message) -> Result<Queued, QueueFull> {
        if self.steering.len() + self.follow_up.len() >= MAX_MESSAGES {
            return Err(QueueFull::Messages);
        }
        // Only the user's and the extensions' messages are ever queued.
        let (bytes, text) = match &message {
            Message::User(u) => (content_bytes(&u.content), Some(u.content.joined_text())),
            Message::Custom(c) => (content_bytes(&c.content), None),
            _ => (0, None),
        };
        if self.bytes + bytes > MAX_BYTES {
            return Err(QueueFull::Bytes {
                queued: self.bytes,
                adding: bytes,
            });
        }
        self.bytes += bytes;
        Ok(Queued {
            text: text.map(Arc::from),
            message,
            bytes,
        })
    }

    pub fn has_steering(&self) -> bool {
        !self.steering.is_empty()
    }

    pub fn take_steering(&mut self) -> Vec<Message> {
        let taken = take(&mut self.steering, self.steering_mode);
        self.release(taken)
    }

    pub fn take_follow_up(&mut self) -> Vec<Message> {
        let taken = take(&mut self.follow_up, self.follow_up_mode);
        self.release(taken)
    }

    fn release(&mut self, taken: Vec<Queued>) -> Vec<Message> {
        taken
            .into_iter()
            .map(|q| {
                self.bytes -= q.bytes;
                q.message
            })
            .collect()
    }

    /// Empties both queues; true when a message `queue_update` shows was dropped.
    pub fn clear(&mut self) -> bool {
        let had = self.pending() > 0;
        self.steering.clear();
        self.follow_up.clear();
        self.bytes = 0;
        had
    }

    /// The queued texts, steering then follow-ups.
    pub fn texts(&self) -> (Vec<Arc<str>>, Vec<Arc<str>>) {
        (texts(&self.steering), texts(&self.follow_up))
    }

    /// The user's messages waiting (an extension's are not counted, as in Pi).
    pub fn pending(&self) -> usize {
        let shown = |q: &VecDeque<Queued>| q.iter().filter(|m| m.text.is_some()).count();
        shown(&self.steering) + shown(&self.follow_up)
    }

    /// The `queue_update` event describing the queue as it is now.
    pub fn update_event(&self) -> Event {
        let (steering, follow_up) = self.texts();
        Event::QueueUpdate {
            steering,
            follow_up,
            pending_message_count: self.pending(),
        }
    }
}

fn content_bytes(content: &UserContent) -> usize {
    match content {
        UserContent::Text(t) => t.len(),
        UserContent::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text, .. } => text.len(),
                ContentBlock::Image { data, mime_type } => data.len() + mime_type.len(),
                ContentBlock::Thinking { thinking, .. } => thinking.len(),
                ContentBlock::ToolCall { arguments, .. } => arguments.to_string().len(),
            })
            .sum(),
    }
}

fn texts(queue: &VecDeque<Queued>) -> Vec<Arc<str>> {
    queue.iter().filter_map(|q| q.text.clone()).collect()
}

fn take(queue: &mut VecDeque<Queued>, mode: QueueMode) -> Vec<Queued> {
    match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn msg(t: &str) -> Message {
        Message::User(crate::protocol::UserMessage {
            content: UserContent::Text(t.into()),
            timestamp: 0,
        })
    }

    #[test]
    fn modes_control_how_many_are_delivered() {
        let mut q = Queue::new(QueueMode::OneAtATime, QueueMode::All);
        q.push_steer(msg("s1")).unwrap();
        q.push_steer(msg("s2")).unwrap();
        q.push_follow_up(msg("f1")).unwrap();
        q.push_follow_up(msg("f2")).unwrap();
        assert_eq!(
            q.update_event(),
            Event::QueueUpdate {
                steering: vec!["s1".into(), "s2".into()],
                follow_up: vec!["f1".into(), "f2".into()],
                pending_message_count: 4
            }
        );
        assert_eq!(q.take_steering(), vec![msg("s1")]);
        assert_eq!(q.take_follow_up(), vec![msg("f1"), msg("f2")]);
        assert_eq!((q.pending(), q.bytes), (1, 2));
        assert!(q.clear());
        assert!(!q.clear());
        assert_eq!(q.bytes, 0);
    }

    #[test]
    fn both_queues_share_the_limits() {
        let mut q = Queue::default();
        for i in 0..MAX_MESSAGES {
            if i % 2 == 0 {
                q.push_steer(msg("s")).unwrap();
            } else {
                q.push_follow_up(msg("f")).unwrap();
            }
        }
        assert_eq!(q.push_follow_up(msg("f")), Err(QueueFull::Messages));
        assert_eq!(q.push_steer(msg("s")), Err(QueueFull::Messages));
        q.take_steering();
        q.push_follow_up(msg("f")).unwrap();

        let mut q = Queue::default();
        let big = "x".repeat(MAX_BYTES / 2);
        q.push_follow_up(msg(&big)).unwrap();
        q.push_steer(msg(&big)).unwrap();
        let full = q.push_follow_up(msg("y")).unwrap_err();
        assert_eq!(
            full,
            QueueFull::Bytes {
                queued: MAX_BYTES,
                adding: 1
            }
        );
        assert!(full.to_string().contains("over the 32 MiB"), "{full}");
        q.take_follow_up();
        q.push_follow_up(msg("y")).unwrap();
    }
}
