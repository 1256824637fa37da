//! Extensions' custom messages (Pi's `pi.sendMessage`): part of the conversation like the
//! user's, delivered as Pi delivers them. While a run streams they are steered or queued as a
//! follow-up (or, with `triggerTurn: false`, held until the turn ends, so they never fall
//! between a tool call and its result); while idle they start a run (`triggerTurn: true`) or are
//! only recorded; `nextTurn` ones wait for the next prompt.

use super::{Agent, CommandError, PendingRun, Prompted, State};
use crate::protocol::{CustomMessage, Event, Message};

/// Pi's `deliverAs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Deliver {
    #[default]
    Steer,
    FollowUp,
    NextTurn,
}

impl Agent {
    /// Delivers an extension's message; a run it starts is returned for the caller to start.
    pub fn send_custom(
        &self,
        message: CustomMessage,
        deliver: Deliver,
        trigger_turn: Option<bool>,
    ) -> Result<Option<PendingRun>, CommandError> {
        let message = Message::Custom(message);
        let mut state = self.state();
        if deliver == Deliver::NextTurn {
            state.next_turn.push(message);
            return Ok(None);
        }
        let streaming = state.run.is_some();
        if streaming && trigger_turn != Some(false) {
            match deliver {
                Deliver::FollowUp => state.queue.push_follow_up(message)?,
                _ => state.queue.push_steer(message)?,
            }
            return Ok(None);
        }
        if trigger_turn == Some(true) {
            return match self.start_or_queue(&mut state, message, None)? {
                Prompted::Started(run) => Ok(Some(run)),
                Prompted::Queued => Ok(None),
            };
        }
        if streaming {
            state.held_custom.push(message);
        } else {
            self.record(&mut state, message);
        }
        Ok(None)
    }

    /// Records the messages held back during the turn that just ended.
    pub(super) fn flush_held_custom(&self, state: &mut State) {
        for message in std::mem::take(&mut state.held_custom) {
            self.record(state, message);
        }
    }

    /// Adds `message` to the conversation and announces it, as a delivered one is.
    fn record(&self, state: &mut State, message: Message) {
        self.store(state, message.clone());
        self.emit(Event::MessageStart {
            message: message.clone(),
        });
        self.emit(Event::MessageEnd { message });
    }
}
