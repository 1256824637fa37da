//! Framing shared by the wire formats: a bounded line splitter (NDJSON) and an SSE decoder on top.
//!
//! Hand-written rather than taken from `eventsource-stream` or `LinesCodec` because the
//! accumulators need a synchronous `push(&[u8])` API (so tests can feed a captured stream split
//! at every byte boundary without a runtime or a `Stream` adapter), and because a line must have
//! a hard length bound: a server that never sends a newline must cost an error, not all memory.

use super::ProviderError;

/// Longest line accepted. Large enough for a tool call carrying a whole file in one chunk.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Splits a byte stream into lines ended by `\n`, `\r\n` or a lone `\r` (all three are legal in
/// SSE; NDJSON servers only use the first two). Line endings are not part of the yielded lines.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    /// The last byte seen was a `\r` ending a line, so a `\n` arriving next belongs to it. Kept
    /// across pushes because a `\r\n` pair may be split between two chunks.
    after_cr: bool,
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        LineSplitter {
            buf: Vec::new(),
            max,
            after_cr: false,
        }
    }

    /// Feeds bytes; returns every line completed by them.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<Vec<String>, ProviderError> {
        let mut lines = Vec::new();
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(pos) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.append(&bytes[..pos])?;
            lines.push(take_line(&mut self.buf));
            let ended_by_cr = bytes[pos] == b'\r';
            bytes = &bytes[pos + 1..];
            if ended_by_cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.append(bytes)?;
        Ok(lines)
    }

    /// The unterminated last line, if any: servers often omit the final newline.
    pub fn finish(mut self) -> Option<String> {
        (!self.buf.is_empty()).then(|| take_line(&mut self.buf))
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), ProviderError> {
        if self.buf.len() + bytes.len() > self.max {
            return Err(ProviderError::LineTooLong { limit: self.max });
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
}

/// Takes the buffered line, decoding invalid UTF-8 lossily (as SSE requires) instead of failing:
/// a bad byte in one text delta should not lose the whole reply.
fn take_line(buf: &mut Vec<u8>) -> String {
    let bytes = std::mem::take(buf);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name; empty when the server gave none (the spec's default, "message").
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Decodes `text/event-stream` per the WHATWG rules that matter for LLM APIs: `event:` names,
/// multi-line `data:`, `:` comments (keep-alives), blank-line dispatch. `id:` and `retry:` are
/// ignored because nova never reconnects a stream.
#[derive(Debug)]
pub struct SseDecoder {
    lines: LineSplitter,
    event: String,
    data: Option<String>,
    at_start: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder {
            lines: LineSplitter::new(MAX_LINE_BYTES),
            event: String::new(),
            data: None,
            at_start: true,
        }
    }
}

impl SseDecoder {
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, ProviderError> {
        let lines = self.lines.push(bytes)?;
        let mut events = Vec::new();
        for line in lines {
            self.line(line, &mut events)?;
        }
        Ok(events)
    }

    /// Flushes a pending event even without its closing blank line, unlike the browser rule:
    /// some servers end with `data: [DONE]\n` and close.
    pub fn finish(mut self) -> Result<Vec<SseEvent>, ProviderError> {
        let mut events = Vec::new();
        let rest = std::mem::replace(&mut self.lines, LineSplitter::new(0)).finish();
        if let Some(line) = rest {
            self.line(line, &mut events)?;
        }
        self.dispatch(&mut events);
        Ok(events)
    }

    fn line(&mut self, mut line: String, events: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        if self.at_start {
            self.at_start = false;
            if let Some(rest) = line.strip_prefix('\u{feff}') {
                line = rest.to_string();
            }
        }
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => match &mut self.data {
                Some(data) => {
                    if data.len() + value.len() >= MAX_LINE_BYTES {
                        return Err(ProviderError::LineTooLong {
                            limit: MAX_LINE_BYTES,
                        });
                    }
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if let Some(data) = self.data.take() {
            events.push(SseEvent { event, data });
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn split_lines(input: &[u8], cuts: &[usize]) -> Vec<String> {
        let mut s = LineSplitter::new(1024);
        let mut out = Vec::new();
        let mut prev = 0;
        for &c in cuts.iter().chain([input.len()].iter()) {
            out.extend(s.push(&input[prev..c]).unwrap());
            prev = c;
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn line_endings_at_any_split() {
        let input = "a\r\nb\nc\rd\r\r\né\nlast".as_bytes();
        let want = ["a", "b", "c", "d", "", "é", "last"];
        for i in 0..=input.len() {
            for j in i..=input.len() {
                assert_eq!(split_lines(input, &[i, j]), want, "cuts {i} {j}");
            }
        }
    }

    #[test]
    fn line_bound() {
        let mut s = LineSplitter::new(8);
        assert_eq!(s.push(b"12345678\n").unwrap(), ["12345678"]);
        assert!(s.push(b"1234").unwrap().is_empty());
        assert_eq!(
            s.push(b"56789").unwrap_err(),
            ProviderError::LineTooLong { limit: 8 }
        );
    }

    #[test]
    fn sse_fields() {
        let input = "\u{feff}: keep-alive\r\n\r\nevent: error\r\ndata: {\"a\":\r\ndata:1}\r\nid: 7\r\n\r\ndata\n\ndata: x\nretry: 5\n\n\n\ndata: tail";
        let want = vec![
            SseEvent {
                event: "error".into(),
                data: "{\"a\":\n1}".into(),
            },
            SseEvent {
                event: String::new(),
                data: String::new(),
            },
            SseEvent {
                event: String::new(),
                data: "x".into(),
            },
            SseEvent {
                event: String::new(),
                data: "tail".into(),
            },
        ];
        for i in 0..=input.len() {
            let mut d = SseDecoder::default();
            let mut got = d.push(&input.as_bytes()[..i]).unwrap();
            got.extend(d.push(&input.as_bytes()[i..]).unwrap());
            got.extend(d.finish().unwrap());
            assert_eq!(got, want, "split at {i}");
        }
    }
}
