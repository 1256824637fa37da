//! Streaming command output with bounded memory. Only a tail of the decoded text is kept (enough
//! for tail truncation), line and byte totals are counted as it goes, and once the output
//! outgrows the limits every raw byte also goes to a temp file so nothing is lost.

use super::truncate::{Limits, TruncatedBy, Truncation, truncate_tail};
use super::utf8::Lossy;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

pub struct Snapshot {
    pub truncation: Truncation,
    pub full_output_path: Option<PathBuf>,
}

pub struct Output {
    limits: Limits,
    decoder: Lossy,
    tail: String,
    tail_starts_line: bool,
    total_bytes: usize,
    raw_bytes: usize,
    newlines: usize,
    /// Bytes after the last newline: the line still being written.
    open_line_bytes: usize,
    /// The length of the last line a newline ended.
    ended_line_bytes: usize,
    /// Raw bytes held until the output is large enough to need the file.
    early: Vec<u8>,
    file: Option<(PathBuf, File)>,
    file_failed: bool,
    prefix: &'static str,
}

impl Output {
    pub fn new(limits: Limits, prefix: &'static str) -> Output {
        Output {
            limits,
            decoder: Lossy::default(),
            tail: String::new(),
            tail_starts_line: true,
            total_bytes: 0,
            raw_bytes: 0,
            newlines: 0,
            open_line_bytes: 0,
            ended_line_bytes: 0,
            early: Vec::new(),
            file: None,
            file_failed: false,
            prefix,
        }
    }

    /// Takes the next raw bytes; returns the text they completed (a character split across
    /// chunks comes out with the chunk that ends it).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.raw_bytes += bytes.len();
        let text = self.decoder.push(bytes);
        self.add_text(&text);
        if self.file.is_some() || self.over_limits() {
            self.open_file();
        }
        match &mut self.file {
            Some((_, f)) => {
                let _ = f.write_all(bytes);
            }
            None => self.early.extend_from_slice(bytes),
        }
        text
    }

    /// Ends the stream: a dangling partial character becomes U+FFFD.
    pub fn finish(&mut self) {
        if let Some(rest) = self.decoder.finish() {
            self.add_text(rest);
        }
        if self.over_limits() {
            self.open_file();
        }
        if let Some((_, f)) = &mut self.file {
            let _ = f.flush();
        }
    }

    /// The length of the last line, without its newline.
    pub fn last_line_bytes(&self) -> usize {
        if self.open_line_bytes > 0 || self.newlines == 0 {
            self.open_line_bytes
        } else {
            self.ended_line_bytes
        }
    }

    /// Lines as a person counts them, and as `truncate_tail` does: a trailing newline ends the
    /// last line instead of starting an empty one.
    fn total_lines(&self) -> usize {
        self.newlines + usize::from(self.open_line_bytes > 0 || self.newlines == 0)
    }

    /// The tail-truncated text so far, with totals for the whole output.
    pub fn snapshot(&mut self) -> Snapshot {
        let text = if self.tail_starts_line {
            self.tail.as_str()
        } else {
            self.tail
                .split_once('\n')
                .map_or(self.tail.as_str(), |(_, rest)| rest)
        };
        let mut t = truncate_tail(text, self.limits);
        let truncated = self.over_limits();
        t.truncated_by = match (truncated, t.truncated_by) {
            (false, _) => None,
            (true, Some(by)) => Some(by),
            (true, None) if self.total_bytes > self.limits.max_bytes => Some(TruncatedBy::Bytes),
            (true, None) => Some(TruncatedBy::Lines),
        };
        t.truncated = truncated;
        t.total_lines = self.total_lines();
        t.total_bytes = self.total_bytes;
        if truncated {
            self.open_file();
        }
        Snapshot {
            truncation: t,
            full_output_path: self.file.as_ref().map(|(p, _)| p.clone()),
        }
    }

    fn over_limits(&self) -> bool {
        self.raw_bytes > self.limits.max_bytes
            || self.total_bytes > self.limits.max_bytes
            || self.total_lines() > self.limits.max_lines
    }

    fn add_text(&mut self, text: &str) {
        self.total_bytes += text.len();
        match text.rfind('\n') {
            Some(i) => {
                self.newlines += text.matches('\n').count();
                self.ended_line_bytes = match text[..i].rfind('\n') {
                    Some(j) => i - j - 1,
                    None => self.open_line_bytes + i,
                };
                self.open_line_bytes = text.len() - i - 1;
            }
            None => self.open_line_bytes += text.len(),
        }
        self.tail.push_str(text);
        // Twice the byte limit always covers what tail truncation can show; trimming only when
        // the tail doubles again keeps the copying amortised.
        let keep = self.limits.max_bytes.saturating_mul(2).max(1);
        if self.tail.len() > keep * 2 {
            let mut start = self.tail.len() - keep;
            while !self.tail.is_char_boundary(start) {
                start += 1;
            }
            self.tail_starts_line = self.tail.as_bytes()[start - 1] == b'\n';
            self.tail.drain(..start);
        }
    }

    fn open_file(&mut self) {
        if self.file.is_some() || self.file_failed {
            return;
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let path = std::env::temp_dir().join(format!("{}-{}.log", self.prefix, &id[..16]));
        match File::create(&path) {
            Ok(mut f) => {
                let _ = f.write_all(&self.early);
                self.early = Vec::new();
                self.file = Some((path, f));
            }
            Err(e) => {
                tracing::warn!("cannot keep full output in {}: {e}", path.display());
                self.file_failed = true;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        max_lines: 3,
        max_bytes: 10,
    };

    #[test]
    fn small_output_stays_in_memory() {
        let mut o = Output::new(SMALL, "nova-test");
        o.push(b"a\nb");
        o.finish();
        let s = o.snapshot();
        assert_eq!(s.truncation.content, "a\nb");
        assert!(!s.truncation.truncated);
        assert!(s.full_output_path.is_none());
    }

    #[test]
    fn split_multibyte_chars_decode_across_chunks() {
        let mut o = Output::new(Limits::DEFAULT, "nova-test");
        let bytes = "h€llo".as_bytes();
        o.push(&bytes[..2]);
        o.push(&bytes[2..]);
        o.push(&[0xff]);
        o.finish();
        assert_eq!(o.snapshot().truncation.content, "h€llo\u{FFFD}");
    }

    #[test]
    fn large_output_is_kept_whole_in_a_file() {
        let mut o = Output::new(SMALL, "nova-test");
        let all: String = (1..=50).map(|i| format!("line{i}\n")).collect();
        for chunk in all.as_bytes().chunks(7) {
            o.push(chunk);
        }
        o.finish();
        let s = o.snapshot();
        assert!(s.truncation.truncated);
        assert_eq!(s.truncation.total_lines, 50);
        assert_eq!(s.truncation.content, "line50\n");
        let path = s.full_output_path.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), all);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn lines_are_counted_as_a_person_counts_them() {
        let count = |chunks: &[&str]| {
            let mut o = Output::new(SMALL, "nova-test");
            for c in chunks {
                o.push(c.as_bytes());
            }
            o.finish();
            let s = o.snapshot();
            if let Some(path) = s.full_output_path {
                std::fs::remove_file(path).unwrap();
            }
            (
                s.truncation.total_lines,
                s.truncation.truncated,
                o.last_line_bytes(),
            )
        };
        assert_eq!(count(&[]), (1, false, 0));
        assert_eq!(
            count(&["1\n2\n3\n"]),
            (3, false, 1),
            "at the limit, not over it"
        );
        assert_eq!(count(&["1\n2", "\n3"]), (3, false, 1));
        assert_eq!(count(&["1\n2\n3\n4\n"]), (4, true, 1));
        // The last line's length, for the notice of a cut line, ignores its newline.
        assert_eq!(count(&["ab", "cdefghijkl", "m\n"]), (1, true, 13));
        assert_eq!(count(&["x\nab", "cdefghijklm\n"]), (2, true, 13));
    }

    #[test]
    fn rolling_tail_keeps_whole_lines() {
        let limits = Limits {
            max_lines: 100,
            max_bytes: 16,
        };
        let mut o = Output::new(limits, "nova-test");
        for i in 0..100 {
            o.push(format!("{i:03}abc\n").as_bytes());
        }
        o.finish();
        let s = o.snapshot();
        assert_eq!(s.truncation.content, "098abc\n099abc\n");
        assert_eq!(s.truncation.total_bytes, 700);
        std::fs::remove_file(s.full_output_path.unwrap()).unwrap();
    }
}
