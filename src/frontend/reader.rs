//! Splits stdin into records. LF is the only delimiter (U+2028/U+2029 are ordinary bytes here);
//! a record longer than [`MAX_RECORD`] is dropped as it streams past, so one oversized frame
//! costs at most the limit in memory and produces exactly one [`Record::Oversized`].

use std::io::BufRead;

/// The largest record accepted, excluding its newline (and a `\r` before it, so CRLF clients
/// get the same limit).
pub const MAX_RECORD: usize = 8 * 1024 * 1024;

/// How much of an oversized record is kept, to read its `id` from.
pub const OVERSIZED_HEAD: usize = 16 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub enum Record {
    /// A complete line, without its `\n` (a trailing `\r` is left for the parser to strip).
    Line(Vec<u8>),
    /// A line passed [`MAX_RECORD`]; the rest of it up to the next newline is being discarded.
    /// `head` is its first bytes, where the record's `id` usually is.
    Oversized { head: Vec<u8> },
}

/// Pulls records out of a byte stream with a bounded buffer.
pub struct RecordReader<R> {
    input: R,
    limit: usize,
    line: Vec<u8>,
    skipping: bool,
    done: bool,
}

impl<R: BufRead> RecordReader<R> {
    pub fn new(input: R) -> Self {
        Self::with_limit(input, MAX_RECORD)
    }

    pub fn with_limit(input: R, limit: usize) -> Self {
        RecordReader {
            input,
            limit,
            line: Vec::new(),
            skipping: false,
            done: false,
        }
    }

    /// The next record, or `None` at end of input. An unterminated last line still counts,
    /// as in Pi. Read errors end the input: stdin that cannot be read is as good as closed.
    pub fn next_record(&mut self) -> Option<Record> {
        while !self.done {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => &[],
            };
            if chunk.is_empty() {
                self.done = true;
                if !self.skipping && !self.line.is_empty() {
                    return Some(self.finish());
                }
                return None;
            }
            let (used, newline) = match memchr(chunk) {
                Some(i) => (i + 1, Some(i)),
                None => (chunk.len(), None),
            };
            let body = &chunk[..newline.unwrap_or(used)];
            let mut result = None;
            if self.skipping {
                if newline.is_some() {
                    self.skipping = false;
                }
            } else if self.line.len() + body.len() > self.limit + 1 {
                // Over even with a `\r` allowance: no need to see the line's end to know.
                let mut head = std::mem::take(&mut self.line);
                head.truncate(OVERSIZED_HEAD);
                let room = OVERSIZED_HEAD - head.len();
                head.extend_from_slice(&body[..body.len().min(room)]);
                self.skipping = newline.is_none();
                result = Some(Record::Oversized { head });
            } else {
                self.line.extend_from_slice(body);
                if newline.is_some() {
                    result = Some(self.finish());
                }
            }
            self.input.consume(used);
            if result.is_some() {
                return result;
            }
        }
        None
    }

    /// The line gathered so far as a record: one byte over the limit is allowed only when it
    /// is the trailing `\r` the parser strips.
    fn finish(&mut self) -> Record {
        let mut line = std::mem::take(&mut self.line);
        if line.len() > self.limit && !(line.len() == self.limit + 1 && line.ends_with(b"\r")) {
            line.truncate(OVERSIZED_HEAD);
            return Record::Oversized { head: line };
        }
        Record::Line(line)
    }
}

fn memchr(haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};

    /// The records of `input`, an oversized one's head cut to `limit` bytes: how much more it
    /// holds depends on how the input was buffered.
    fn records(input: &[u8], limit: usize, buf: usize) -> Vec<Record> {
        let mut r =
            RecordReader::with_limit(BufReader::with_capacity(buf, Cursor::new(input)), limit);
        std::iter::from_fn(|| r.next_record())
            .map(|record| match record {
                Record::Oversized { mut head } => {
                    assert!(head.len() > limit, "{head:?}");
                    head.truncate(limit);
                    Record::Oversized { head }
                }
                line => line,
            })
            .collect()
    }

    #[test]
    fn splits_on_lf_only_and_keeps_unterminated_tail() {
        let input = "a\u{2028}b\r\n\nlast".as_bytes();
        for buf in [1, 2, 3, 64] {
            assert_eq!(
                records(input, 100, buf),
                vec![
                    Record::Line("a\u{2028}b\r".as_bytes().to_vec()),
                    Record::Line(vec![]),
                    Record::Line(b"last".to_vec()),
                ]
            );
        }
    }

    #[test]
    fn oversized_record_is_reported_once_and_skipped() {
        let mut input = b"ok\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 50));
        input.extend(b"\nafter\n");
        for buf in [1, 4, 7, 1024] {
            assert_eq!(
                records(&input, 10, buf),
                vec![
                    Record::Line(b"ok".to_vec()),
                    Record::Oversized {
                        head: vec![b'x'; 10]
                    },
                    Record::Line(b"after".to_vec()),
                ],
                "buffer size {buf}"
            );
        }
    }

    #[test]
    fn record_at_exactly_the_limit_is_accepted() {
        let input = b"0123456789\n01234567890\n";
        assert_eq!(
            records(input, 10, 3),
            vec![
                Record::Line(b"0123456789".to_vec()),
                Record::Oversized {
                    head: b"0123456789".to_vec()
                }
            ]
        );
    }

    #[test]
    fn a_trailing_cr_does_not_count_toward_the_limit() {
        let input = b"0123456789\r\n0123456789\r\r\n0123456789x\r\n0123456789\r";
        for buf in [1, 3, 64] {
            let got = records(input, 10, buf);
            assert_eq!(
                got,
                vec![
                    Record::Line(b"0123456789\r".to_vec()),
                    Record::Oversized {
                        head: b"0123456789".to_vec()
                    },
                    Record::Oversized {
                        head: b"0123456789".to_vec()
                    },
                    Record::Line(b"0123456789\r".to_vec()),
                ],
                "buffer size {buf}"
            );
        }
    }

    #[test]
    fn oversized_unterminated_tail_yields_nothing_more() {
        let input = vec![b'y'; 40];
        assert_eq!(
            records(&input, 10, 8),
            vec![Record::Oversized {
                head: vec![b'y'; 10]
            }]
        );
    }
}
