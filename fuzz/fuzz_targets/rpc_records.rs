//! Arbitrary bytes on stdin must never panic the record reader or the command parser, and
//! every record must end as a command, an error response, or nothing (a blank line).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nova::rpc::parse::{Parsed, oversized_response, parse_record};
use nova::rpc::reader::{Record, RecordReader};

fuzz_target!(|data: &[u8]| {
    // A small limit so the oversized path is reached by small inputs too.
    let mut reader = RecordReader::with_limit(std::io::BufReader::with_capacity(7, data), 256);
    while let Some(record) = reader.next_record() {
        match record {
            Record::Line(line) => {
                // A trailing `\r` is not counted against the limit.
                assert!(line.len() <= 256 || (line.len() == 257 && line.ends_with(b"\r")));
                match parse_record(&line) {
                    Parsed::Error(r) => assert!(!r.success && r.error.is_some()),
                    Parsed::Blank | Parsed::Command { .. } => {}
                }
            }
            Record::Oversized { head } => {
                assert!(!oversized_response(&head).success);
            }
        }
    }
});
