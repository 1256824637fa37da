//! Bounding model-facing output (DESIGN rule 8): keep whole lines from the head or the tail,
//! within a line limit and a byte limit, and say exactly what was cut.

use crate::protocol::TruncationDetails;

pub const MAX_LINES: usize = 2000;
pub const MAX_BYTES: usize = 50 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        max_lines: MAX_LINES,
        max_bytes: MAX_BYTES,
    };
}

pub use crate::protocol::TruncatedBy;

/// The kept text plus what was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub content: String,
    pub truncated: bool,
    pub truncated_by: Option<TruncatedBy>,
    pub total_lines: usize,
    pub total_bytes: usize,
    pub output_lines: usize,
    pub output_bytes: usize,
    pub last_line_partial: bool,
    pub first_line_exceeds_limit: bool,
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Truncation {
    /// What was cut, as Pi's `details.truncation` records it (without the text, which the
    /// result already carries).
    pub fn details(&self) -> TruncationDetails {
        TruncationDetails {
            first_line_exceeds_limit: self.first_line_exceeds_limit,
            last_line_partial: self.last_line_partial,
            max_bytes: self.max_bytes,
            max_lines: self.max_lines,
            output_bytes: self.output_bytes,
            output_lines: self.output_lines,
            total_bytes: self.total_bytes,
            total_lines: self.total_lines,
            truncated: self.truncated,
            truncated_by: self.truncated_by,
        }
    }

    fn untouched(content: &str, total_lines: usize, limits: Limits) -> Truncation {
        Truncation {
            content: content.to_owned(),
            truncated: false,
            truncated_by: None,
            total_lines,
            total_bytes: content.len(),
            output_lines: total_lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines: limits.max_lines,
            max_bytes: limits.max_bytes,
        }
    }
}

/// Keeps the first whole lines that fit. A first line that alone exceeds the byte limit yields
/// no content at all, so the caller can point at another way to read it.
pub fn truncate_head(content: &str, limits: Limits) -> Truncation {
    let mut head = Head::new(limits);
    for (i, line) in content.split('\n').enumerate() {
        if i > 0 {
            head.end_line();
        }
        head.push(line);
    }
    head.end_line();
    head.finish()
}

/// [`truncate_head`] over text that arrives in pieces: a file read in chunks, lines of any
/// length. It holds only what it keeps (at most the byte limit) and counts the rest.
pub struct Head {
    limits: Limits,
    /// The whole lines kept, joined with `\n`.
    content: String,
    kept_lines: usize,
    /// The line being pushed, while it may still fit.
    line: String,
    line_bytes: usize,
    lines: usize,
    total_bytes: usize,
    first_line_bytes: usize,
    /// Set by the first line that did not fit: nothing after it is kept.
    full: Option<TruncatedBy>,
}

impl Head {
    pub fn new(limits: Limits) -> Head {
        Head {
            limits,
            content: String::new(),
            kept_lines: 0,
            line: String::new(),
            line_bytes: 0,
            lines: 0,
            total_bytes: 0,
            first_line_bytes: 0,
            full: None,
        }
    }

    /// More of the current line (`text` holds no `\n`).
    pub fn push(&mut self, text: &str) {
        self.line_bytes += text.len();
        let sep = usize::from(self.lines > 0);
        if self.full.is_none()
            && self.content.len() + sep + self.line_bytes <= self.limits.max_bytes
        {
            self.line.push_str(text);
        }
    }

    /// Ends the current line (an empty one if nothing was pushed since the last end).
    pub fn end_line(&mut self) {
        let sep = usize::from(self.lines > 0);
        let cost = sep + self.line_bytes;
        if self.lines == 0 {
            self.first_line_bytes = self.line_bytes;
        }
        if self.full.is_none() {
            if self.lines >= self.limits.max_lines {
                self.full = Some(TruncatedBy::Lines);
            } else if self.content.len() + cost > self.limits.max_bytes {
                self.full = Some(TruncatedBy::Bytes);
            } else {
                if sep == 1 {
                    self.content.push('\n');
                }
                self.content.push_str(&self.line);
                self.kept_lines += 1;
            }
        }
        self.line.clear();
        self.line_bytes = 0;
        self.lines += 1;
        self.total_bytes += cost;
    }

    /// The lines ended so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// The length of the first line, once it has ended.
    pub fn first_line_bytes(&self) -> usize {
        self.first_line_bytes
    }

    /// The kept text and what was cut, for the lines ended so far.
    pub fn finish(self) -> Truncation {
        let limits = self.limits;
        let mut result = Truncation {
            output_bytes: self.content.len(),
            content: self.content,
            truncated: false,
            truncated_by: None,
            total_lines: self.lines,
            total_bytes: self.total_bytes,
            output_lines: self.kept_lines,
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines: limits.max_lines,
            max_bytes: limits.max_bytes,
        };
        if self.lines <= limits.max_lines && self.total_bytes <= limits.max_bytes {
            return result;
        }
        result.truncated = true;
        if self.first_line_bytes > limits.max_bytes {
            result.truncated_by = Some(TruncatedBy::Bytes);
            result.first_line_exceeds_limit = true;
            result.content.clear();
            result.output_lines = 0;
            result.output_bytes = 0;
            return result;
        }
        result.truncated_by = Some(self.full.unwrap_or(TruncatedBy::Lines));
        result
    }
}

/// Keeps the last whole lines that fit. Lines are counted as a person counts them: a trailing
/// newline ends the last line instead of starting an empty one, so command output such as
/// `seq 1 3` is three lines, and a kept line keeps its newline. When even the last line is too
/// long, its end is kept (cut on a char boundary) and `last_line_partial` is set.
pub fn truncate_tail(content: &str, limits: Limits) -> Truncation {
    let terminated = content.ends_with('\n');
    let lines: Vec<&str> = content
        .strip_suffix('\n')
        .unwrap_or(content)
        .split('\n')
        .collect();
    if lines.len() <= limits.max_lines && content.len() <= limits.max_bytes {
        return Truncation::untouched(content, lines.len(), limits);
    }
    let mut bytes = 0;
    let mut first_kept = lines.len();
    let mut by = TruncatedBy::Lines;
    let mut partial: Option<&str> = None;
    while first_kept > 0 && lines.len() - first_kept < limits.max_lines {
        let line = lines[first_kept - 1];
        let cost = line.len() + usize::from(first_kept < lines.len() || terminated);
        if bytes + cost > limits.max_bytes {
            by = TruncatedBy::Bytes;
            if first_kept == lines.len() {
                let last = &content[content.len() - cost..];
                partial = Some(tail_on_char_boundary(last, limits.max_bytes));
            }
            break;
        }
        bytes += cost;
        first_kept -= 1;
    }
    let (kept, output_lines) = match partial {
        Some(end) => (end.to_owned(), 1),
        None => (
            content[content.len() - bytes..].to_owned(),
            lines.len() - first_kept,
        ),
    };
    Truncation {
        output_bytes: kept.len(),
        content: kept,
        truncated: true,
        truncated_by: Some(by),
        total_lines: lines.len(),
        total_bytes: content.len(),
        output_lines,
        last_line_partial: partial.is_some(),
        first_line_exceeds_limit: false,
        max_lines: limits.max_lines,
        max_bytes: limits.max_bytes,
    }
}

/// The longest suffix of `s` that fits in `max_bytes` and starts on a char boundary.
pub fn tail_on_char_boundary(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut start = s.len() - max_bytes;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Pi's human size: `123B`, `4.5KB`, `1.2MB` (one decimal, halves rounded up as JS `toFixed`).
pub fn format_size(bytes: usize) -> String {
    const KB: usize = 1024;
    const MB: usize = 1024 * 1024;
    let tenths = |unit: usize| (bytes * 10 + unit / 2) / unit;
    if bytes < KB {
        format!("{bytes}B")
    } else if bytes < MB {
        let t = tenths(KB);
        format!("{}.{}KB", t / 10, t % 10)
    } else {
        let t = tenths(MB);
        format!("{}.{}MB", t / 10, t % 10)
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
    fn short_content_is_untouched() {
        let t = truncate_head("a\nb", Limits::DEFAULT);
        assert!(!t.truncated);
        assert_eq!(t.content, "a\nb");
        assert_eq!(t.total_lines, 2);
        assert_eq!(truncate_tail("", Limits::DEFAULT).total_lines, 1);
    }

    #[test]
    fn head_by_lines_and_by_bytes() {
        let t = truncate_head("1\n2\n3\n4\n5", SMALL);
        assert_eq!(t.content, "1\n2\n3");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!((t.total_lines, t.output_lines), (5, 3));

        let t = truncate_head("abcd\nefgh\nij", SMALL);
        assert_eq!(t.content, "abcd\nefgh");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        assert_eq!(t.output_bytes, 9);
    }

    /// The head cut over the whole text at once, as nova made it before lines were streamed.
    fn reference_head(content: &str, limits: Limits) -> Truncation {
        let lines: Vec<&str> = content.split('\n').collect();
        if lines.len() <= limits.max_lines && content.len() <= limits.max_bytes {
            return Truncation::untouched(content, lines.len(), limits);
        }
        let mut result = Truncation {
            content: String::new(),
            truncated: true,
            truncated_by: Some(TruncatedBy::Bytes),
            total_lines: lines.len(),
            total_bytes: content.len(),
            output_lines: 0,
            output_bytes: 0,
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines: limits.max_lines,
            max_bytes: limits.max_bytes,
        };
        if lines[0].len() > limits.max_bytes {
            result.first_line_exceeds_limit = true;
            return result;
        }
        let (mut bytes, mut kept, mut by) = (0, 0, TruncatedBy::Lines);
        for (i, line) in lines.iter().take(limits.max_lines).enumerate() {
            let cost = line.len() + usize::from(i > 0);
            if bytes + cost > limits.max_bytes {
                by = TruncatedBy::Bytes;
                break;
            }
            bytes += cost;
            kept += 1;
        }
        result.content = lines[..kept].join("\n");
        result.truncated_by = Some(by);
        result.output_lines = kept;
        result.output_bytes = result.content.len();
        result
    }

    #[test]
    fn head_in_pieces_cuts_as_the_whole_does() {
        let limits = Limits {
            max_lines: 4,
            max_bytes: 12,
        };
        let texts = [
            "",
            "\n",
            "abc",
            "abcdefghijkl",
            "abcdefghijklm\nx",
            "ab\ncd\nef\ngh\nij",
            "ab\ncd\nef\ngh",
            "abcde\nfghij\nk",
            "abcde\nfghijk\n",
            "a\n\n\n\n\n",
            "ééé\néé\nx",
            "abcdefghijkl\nm",
            "abcdefghijk\nm",
        ];
        for text in texts {
            let whole = reference_head(text, limits);
            assert_eq!(truncate_head(text, limits), whole, "{text:?}");
            // The same text pushed a byte-sized piece at a time where it can be split.
            let mut head = Head::new(limits);
            let mut rest = text;
            while let Some(c) = rest.chars().next() {
                match c {
                    '\n' => head.end_line(),
                    c => head.push(c.encode_utf8(&mut [0; 4])),
                }
                rest = &rest[c.len_utf8()..];
            }
            head.end_line();
            assert_eq!(head.finish(), whole, "{text:?}");
        }
        let t = truncate_head(&"y".repeat(12), limits);
        assert!(!t.truncated, "a first line of exactly the limit fits");
        assert_eq!(t.content.len(), 12);
    }

    #[test]
    fn head_first_line_too_long() {
        let t = truncate_head("abcdefghijkl\nx", SMALL);
        assert!(t.first_line_exceeds_limit);
        assert_eq!(t.content, "");
        assert_eq!(t.output_lines, 0);
    }

    #[test]
    fn tail_by_lines_and_by_bytes() {
        let t = truncate_tail("1\n2\n3\n4\n5", SMALL);
        assert_eq!(t.content, "3\n4\n5");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));

        let t = truncate_tail("ab\ncdefg\nhijk", SMALL);
        assert_eq!(t.content, "cdefg\nhijk");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        assert_eq!(t.output_lines, 2);
    }

    #[test]
    fn tail_counts_a_trailing_newline_as_the_end_of_the_last_line() {
        let t = truncate_tail("1\n2\n3\n4\n5\n", SMALL);
        assert_eq!(t.content, "3\n4\n5\n");
        assert_eq!((t.total_lines, t.output_lines), (5, 3));
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));

        let t = truncate_tail("1\n2\n3\n", SMALL);
        assert!(!t.truncated, "three lines fit a three-line limit");
        assert_eq!(t.total_lines, 3);

        // The newline of a kept line counts against the byte limit.
        let t = truncate_tail("ab\ncdefg\nhijk\n", SMALL);
        assert_eq!(t.content, "hijk\n");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        assert_eq!((t.output_lines, t.output_bytes), (1, 5));

        let t = truncate_tail("x\nabcdefghijkl\n", SMALL);
        assert!(t.last_line_partial);
        assert_eq!(t.content, "defghijkl\n");
    }

    #[test]
    fn tail_partial_last_line_cuts_on_char_boundary() {
        // "é" is two bytes; ten bytes back from the end lands inside one.
        let line = "ééééééééa"; // 17 bytes: the cut at byte 7 falls inside an "é"
        let t = truncate_tail(&format!("x\n{line}"), SMALL);
        assert!(t.last_line_partial);
        assert_eq!(t.content, "ééééa");
        assert_eq!(t.output_bytes, 9);
        assert_eq!(t.output_lines, 1);
        assert_eq!(tail_on_char_boundary("a€b", 3), "b");
        assert_eq!(tail_on_char_boundary("a€b", 4), "€b");
    }

    #[test]
    fn head_multibyte_lines_respect_byte_limit() {
        // Each line is 6 bytes (three 2-byte chars); two lines plus newline would be 13 > 10.
        let t = truncate_head("ééé\nééé\nééé", SMALL);
        assert_eq!(t.content, "ééé");
        assert!(std::str::from_utf8(t.content.as_bytes()).is_ok());
    }

    #[test]
    fn sizes_format_as_pi() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1.0KB");
        assert_eq!(format_size(1280), "1.3KB");
        assert_eq!(format_size(4608), "4.5KB");
        assert_eq!(format_size(51200), "50.0KB");
        assert_eq!(format_size(1024 * 1024), "1.0MB");
        assert_eq!(format_size(1258291), "1.2MB");
    }

    #[test]
    fn truncation_serialises_camel_case_without_content() {
        let t = truncate_head("1\n2\n3\n4", SMALL);
        let v = serde_json::to_value(t.details()).unwrap();
        assert_eq!(v["truncatedBy"], "lines");
        assert_eq!(v["totalLines"], 4);
        assert!(v.get("content").is_none());
    }
}
