//! Messages waiting for delivery into a run: steering (after the current tool batch) and
//! follow-ups (when the agent would otherwise stop).

use crate::protocol::{Event, QueueMode, UserMessage};
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct Queue {
    steering: VecDeque<UserMessage>,
    follow_up: VecDeque<UserMessage>,
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

    pub fn push_steer(&mut self, message: UserMessage) {
        self.steering.push_back(message);
    }

    pub fn push_follow_up(&mut self, message: UserMessage) {
        self.follow_up.push_back(message);
    }

    pub fn has_steering(&self) -> bool {
        !self.steering.is_empty()
    }

    pub fn take_steering(&mut self) -> Vec<UserMessage> {
        take(&mut self.steering, self.steering_mode)
    }

    pub fn take_follow_up(&mut self) -> Vec<UserMessage> {
        take(&mut self.follow_up, self.follow_up_mode)
    }

    /// Empties both queues; true when anything was dropped.
    pub fn clear(&mut self) -> bool {
        let had = self.pending() > 0;
        self.steering.clear();
        self.follow_up.clear();
        had
    }

    /// The queued texts, steering then follow-ups.
    pub fn texts(&self) -> (Vec<String>, Vec<String>) {
        (texts(&self.steering), texts(&self.follow_up))
    }

    pub fn pending(&self) -> usize {
        self.steering.len() + self.follow_up.len()
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

fn texts(queue: &VecDeque<UserMessage>) -> Vec<String> {
    queue.iter().map(|m| m.content.joined_text()).collect()
}

fn take(queue: &mut VecDeque<UserMessage>, mode: QueueMode) -> Vec<UserMessage> {
    match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::UserContent;

    fn msg(t: &str) -> UserMessage {
        UserMessage {
            content: UserContent::Text(t.into()),
            timestamp: 0,
        }
    }

    #[test]
    fn modes_control_how_many_are_delivered() {
        let mut q = Queue::new(QueueMode::OneAtATime, QueueMode::All);
        q.push_steer(msg("s1"));
        q.push_steer(msg("s2"));
        q.push_follow_up(msg("f1"));
        q.push_follow_up(msg("f2"));
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
        assert_eq!(q.pending(), 1);
        assert!(q.clear());
        assert!(!q.clear());
    }
}
