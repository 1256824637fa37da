//! Any command text must get a verdict from the bash classifier with the default rules, never a
//! panic: the gate runs on whatever the model sends, and a panic there would end the run.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nova::gate::classify::{Gate, classify};

fuzz_target!(|data: &[u8]| {
    // Lossy, so every input reaches the parser; the model's arguments are always valid UTF-8.
    let command = String::from_utf8_lossy(data);
    classify(&command, &Gate::default());
});
