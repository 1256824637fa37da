//! The pi-messages SSE accumulator must give the same events and the same error however
//! the body is cut into reads, and must never panic on what a server sends.
#![no_main]

mod splits;

use libfuzzer_sys::fuzz_target;
use nova::protocol::Api;
use nova::provider::pi_messages::Accumulator;

fuzz_target!(|data: &[u8]| {
    let model = splits::model(Api::PiMessages);
    splits::check(data, |pieces| {
        let mut acc = Accumulator::new(&model);
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
