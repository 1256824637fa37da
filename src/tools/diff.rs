//! The diff `edit` reports in `details.diff`: Pi's compact line-numbered form, which clients
//! render. Changed lines are `+N text` / `-N text`, up to four context lines ` N text` surround
//! each change, and longer unchanged stretches collapse to `...`.

use similar::{ChangeTag, TextDiff};

const CONTEXT: usize = 4;

/// One run of lines with the same tag, without their newlines.
struct Part<'a> {
    tag: ChangeTag,
    lines: Vec<&'a str>,
}

fn parts<'a>(old: &'a str, new: &'a str) -> Vec<Part<'a>> {
    let diff = TextDiff::from_lines(old, new);
    let mut parts: Vec<Part<'a>> = Vec::new();
    for change in diff.iter_all_changes() {
        let line = change.value();
        let line = line.strip_suffix('\n').unwrap_or(line);
        match parts.last_mut() {
            Some(p) if p.tag == change.tag() => p.lines.push(line),
            _ => parts.push(Part {
                tag: change.tag(),
                lines: vec![line],
            }),
        }
    }
    parts
}

/// The diff text and the first changed line (1-based, in the new text).
pub fn numbered(old: &str, new: &str) -> (String, Option<usize>) {
    let parts = parts(old, new);
    let width = old
        .split('\n')
        .count()
        .max(new.split('\n').count())
        .to_string()
        .len();
    let mut out: Vec<String> = Vec::new();
    let (mut old_no, mut new_no) = (1, 1);
    let mut first_changed = None;
    let gap = format!(" {} ...", " ".repeat(width));
    let context =
        |out: &mut Vec<String>, lines: &[&str], old_no: &mut usize, new_no: &mut usize| {
            for line in lines {
                out.push(format!(" {:>width$} {line}", *old_no));
                *old_no += 1;
                *new_no += 1;
            }
        };
    for (i, part) in parts.iter().enumerate() {
        match part.tag {
            ChangeTag::Insert | ChangeTag::Delete => {
                first_changed.get_or_insert(new_no);
                for line in &part.lines {
                    if part.tag == ChangeTag::Insert {
                        out.push(format!("+{new_no:>width$} {line}"));
                        new_no += 1;
                    } else {
                        out.push(format!("-{old_no:>width$} {line}"));
                        old_no += 1;
                    }
                }
            }
            ChangeTag::Equal => {
                let before = i > 0;
                let after = i + 1 < parts.len();
                let lines = &part.lines;
                let n = lines.len();
                let (head, tail) = match (before, after) {
                    (true, true) if n <= CONTEXT * 2 => (n, 0),
                    (true, true) => (CONTEXT, CONTEXT),
                    (true, false) => (n.min(CONTEXT), 0),
                    (false, true) => (0, n.min(CONTEXT)),
                    (false, false) => (0, 0),
                };
                context(&mut out, &lines[..head], &mut old_no, &mut new_no);
                let skipped = n - head - tail;
                if skipped > 0 {
                    if before || after {
                        out.push(gap.clone());
                    }
                    old_no += skipped;
                    new_no += skipped;
                }
                context(&mut out, &lines[n - tail..], &mut old_no, &mut new_no);
            }
        }
    }
    (out.join("\n"), first_changed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn one_changed_line_with_context() {
        let old: String = (1..=12).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l7\n", "seven\n");
        let (diff, first) = numbered(&old, &new);
        let expected = "    ...\n  3 l3\n  4 l4\n  5 l5\n  6 l6\n- 7 l7\n+ 7 seven\n  8 l8\n  9 l9\n 10 l10\n 11 l11\n    ...";
        assert_eq!(diff, expected);
        assert_eq!(first, Some(7));
    }

    #[test]
    fn insertion_at_start() {
        let (diff, first) = numbered("a\nb\n", "new\na\nb\n");
        assert_eq!(diff, "+1 new\n 1 a\n 2 b");
        assert_eq!(first, Some(1));
    }
}
