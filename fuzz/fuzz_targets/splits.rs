//! Shared by the provider accumulator targets: how a fuzz input becomes a body and the points
//! to cut it at, and what "the same events" means when tool call ids are invented at random.

use nova::protocol::{Api, Model, ModelCost};
use nova::provider::{ProviderError, ProviderEvent};

/// What feeding a body produced: its events, and the error that ended it, if any.
pub type Outcome = (Vec<ProviderEvent>, Option<ProviderError>);

/// The input's first byte says how many cuts follow (0–7), each a little-endian `u16` taken
/// modulo the body's length; the rest is the body. Keeping the cuts in the input lets the
/// fuzzer steer them toward the bytes that matter, such as the middle of a `\r\n` or a UTF-8
/// sequence.
pub fn body_and_cuts(data: &[u8]) -> (&[u8], Vec<usize>) {
    let Some((&count, rest)) = data.split_first() else {
        return (data, Vec::new());
    };
    let header = usize::from(count % 8) * 2;
    if rest.len() < header {
        return (rest, Vec::new());
    }
    let (cuts, body) = rest.split_at(header);
    let mut cuts: Vec<usize> = cuts
        .chunks_exact(2)
        .map(|pair| usize::from(u16::from_le_bytes([pair[0], pair[1]])) % (body.len() + 1))
        .collect();
    cuts.sort_unstable();
    (body, cuts)
}

/// The body as the pieces between `cuts` (sorted), empty pieces included: a read may return
/// nothing.
pub fn pieces<'a>(body: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for &cut in cuts {
        pieces.push(&body[start..cut]);
        start = cut;
    }
    pieces.push(&body[start..]);
    pieces
}

/// Feeds `body` whole, in the pieces the input asks for, and byte by byte, and checks that
/// all three agree. `run` builds a fresh accumulator and feeds it the pieces.
pub fn check(data: &[u8], run: impl Fn(&[&[u8]]) -> Outcome) {
    let (body, cuts) = body_and_cuts(data);
    let whole = normalised(run(&[body]));
    let split = normalised(run(&pieces(body, &cuts)));
    assert_eq!(split, whole, "cut at {cuts:?}");
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(normalised(run(&bytes)), whole, "byte by byte");
}

/// Each accumulator invents ids for calls the server left without one, as
/// `call_<12 random hex digits>_<index>`, so two runs differ there and only there. Only the
/// public constructor (random prefix) is reachable from here, hence the rewrite.
fn normalised((mut events, error): Outcome) -> Outcome {
    for event in &mut events {
        if let ProviderEvent::ToolCall {
            index,
            id: Some(id),
            ..
        } = event
            && is_invented(id, *index)
        {
            *id = format!("call_<invented>_{index}");
        }
    }
    (events, error)
}

fn is_invented(id: &str, index: usize) -> bool {
    let Some(rest) = id.strip_prefix("call_") else {
        return false;
    };
    let Some((prefix, tail)) = rest.split_at_checked(12) else {
        return false;
    };
    prefix
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && tail == format!("_{index}")
}

/// A model with prices, so the usage arithmetic runs on whatever counts the body claims.
pub fn model(api: Api) -> Model {
    Model {
        id: "fuzz-model".into(),
        name: "Fuzz model".into(),
        api,
        provider: "fuzz".into(),
        base_url: "http://127.0.0.1:1".into(),
        reasoning: true,
        input: vec!["text".into()],
        cost: ModelCost {
            input: 1.0,
            output: 2.0,
            cache_read: 0.5,
            cache_write: 1.25,
        },
        context_window: 128_000,
        max_tokens: 8_192,
        thinking_level_map: None,
        compat: None,
        load: Default::default(),
    }
}
