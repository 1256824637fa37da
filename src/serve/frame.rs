//! How big a WebSocket frame may be. A frame over RPC mode's record limit ([`MAX_RECORD`]) is
//! answered as RPC answers an oversized line, and the connection goes on; but a frame has to be
//! read whole before it can be dropped (tungstenite cannot skip one as the line reader skips a
//! line), so past [`CEILING`], the most a connection ever buffers, the socket is closed with
//! 1009 ("message too big") instead.

use crate::frontend::parse;
use crate::frontend::reader::{MAX_RECORD, OVERSIZED_HEAD};
use crate::protocol::Response;
use axum::extract::ws::{CloseFrame, Message, close_code};

/// The largest frame (and message) a connection reads at all.
pub const CEILING: usize = 4 * MAX_RECORD;

/// The error record for `text` when it is over the record limit, as RPC mode words it (with
/// the `id` read from its start when it shows one).
pub fn oversized(text: &str) -> Option<Response> {
    let bytes = text.as_bytes();
    (bytes.len() > MAX_RECORD)
        .then(|| parse::oversized_response(&bytes[..bytes.len().min(OVERSIZED_HEAD)]))
}

/// The close frame for a read that failed, when it failed because the frame passed
/// [`CEILING`].
pub fn refusal(error: axum::Error) -> Option<Message> {
    let error = error.into_inner();
    let too_big = matches!(
        error.downcast_ref::<tokio_tungstenite::tungstenite::Error>(),
        Some(tokio_tungstenite::tungstenite::Error::Capacity(_))
    );
    too_big.then(|| {
        Message::Close(Some(CloseFrame {
            code: close_code::SIZE,
            reason: format!(
                "a frame over {} MiB cannot be read; records are limited to {} MiB",
                CEILING >> 20,
                MAX_RECORD >> 20
            )
            .into(),
        }))
    })
}
