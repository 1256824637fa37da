//! The OpenAI Responses SSE accumulator must give the same events and the same error however the body is
//! cut into reads, and must never panic on what a server sends; the first byte picks the flavour
//! (OpenAI's stream or the Codex backend's).
#![no_main]

mod splits;

use libfuzzer_sys::fuzz_target;
use nova::protocol::Api;
use nova::provider::openai_responses::{Accumulator, Flavour};

fuzz_target!(|data: &[u8]| {
    let Some((first, data)) = data.split_first() else {
        return;
    };
    let (api, flavour) = match first % 2 {
        0 => (Api::OpenAiResponses, Flavour::OpenAi),
        _ => (Api::OpenAiCodexResponses, Flavour::Codex),
    };
    let model = splits::model(api);
    splits::check(data, |pieces| {
        let mut acc = Accumulator::for_flavour(&model, flavour);
        let mut events = Vec::new();
        for piece in pieces {
            if let Err(e) = acc.push(piece, &mut events) {
                return (events, Some(e));
            }
        }
        let error = acc.finish(&mut events).err();
        (events, error)
    });
});
