//! Streaming command output with bounded memory. Only a tail of the decoded text is kept (enough
//! for tail truncation), line and byte totals are counted as it goes, and once the output
//! outgrows the limits the raw bytes also go to a temp file, up to [`MAX_FILE_BYTES`], so the
//! model can page through what it was not shown. The files belong to the session
//! ([`OutputFiles`]): a new session or nova's exit removes them.

use super::truncate::{Limits, TruncatedBy, Truncation, truncate_tail};
use super::utf8::Lossy;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// The most of one command's output kept in its file: the first 16 MiB. That is over 300 reads of
/// 50 KB, more than a model pages through, and 128 calls of one reply stay within 2 GiB of a
/// temp dir that may be memory (tmpfs).
pub const MAX_FILE_BYTES: usize = 16 * 1024 * 1024;

/// The full-output files of one session, removed by [`OutputFiles::clear`] (a new session) and
/// when the last holder drops them (nova exits). A nova killed by SIGKILL leaves them behind.
#[derive(Default)]
pub struct OutputFiles {
    paths: Mutex<Vec<PathBuf>>,
}

impl OutputFiles {
    fn add(&self, path: PathBuf) {
        self.paths
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(path);
    }

    /// Removes every file kept so far.
    pub fn clear(&self) {
        let paths = std::mem::take(&mut *self.paths.lock().unwrap_or_else(PoisonError::into_inner));
        for path in paths {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for OutputFiles {
    fn drop(&mut self) {
        self.clear();
    }
}

pub struct Snapshot {
    pub truncation: Truncation,
    pub full_output_path: Option<PathBuf>,
    /// The file holds only the first [`MAX_FILE_BYTES`] of the output.
    pub full_output_cut: bool,
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
    /// Raw bytes written to the file, at most [`MAX_FILE_BYTES`].
    file_bytes: usize,
    prefix: &'static str,
    outputs: Arc<OutputFiles>,
}

impl Output {
    pub fn new(limits: Limits, prefix: &'static str, outputs: Arc<OutputFiles>) -> Output {
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
            file_bytes: 0,
            prefix,
            outputs,
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
                let room = MAX_FILE_BYTES - self.file_bytes;
                let written = &bytes[..bytes.len().min(room)];
                let _ = f.write_all(written);
                self.file_bytes += written.len();
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
            full_output_cut: self.raw_bytes > self.file_bytes,
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
                // The limits are far below MAX_FILE_BYTES, so what waited here fits.
                let _ = f.write_all(&self.early);
                self.file_bytes = self.early.len();
                self.early = Vec::new();
                self.outputs.add(path.clone());
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
        let mut o = Output::new(SMALL, "nova-test", Arc::default());
        o.push(b"a\nb");
        o.finish();
        let s = o.snapshot();
        assert_eq!(s.truncation.content, "a\nb");
        assert!(!s.truncation.truncated);
        assert!(s.full_output_path.is_none());
    }

    #[test]
    fn split_multibyte_chars_decode_across_chunks() {
        let mut o = Output::new(Limits::DEFAULT, "nova-test", Arc::default());
        let bytes = "h€llo".as_bytes();
        o.push(&bytes[..2]);
        o.push(&bytes[2..]);
        o.push(&[0xff]);
        o.finish();
        assert_eq!(o.snapshot().truncation.content, "h€llo\u{FFFD}");
    }

    #[test]
    fn large_output_is_kept_whole_in_a_file() {
        let mut o = Output::new(SMALL, "nova-test", Arc::default());
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
            let mut o = Output::new(SMALL, "nova-test", Arc::default());
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
        let mut o = Output::new(limits, "nova-test", Arc::default());
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
