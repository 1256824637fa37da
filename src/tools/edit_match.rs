//! Locating and applying `edit` replacements. All edits are matched against the original text
//! (never against each other's results), each must match exactly once, and they must not
//! overlap; then all are applied together or none is.
//!
//! When a model's `oldText` differs from the file only in trailing spaces, smart quotes, dashes
//! or odd spaces, an exact match fails; the fuzzy fallback compares both sides after
//! [`normalize`]. As in Pi, a fuzzy match makes the whole result use the normalised text.

use unicode_normalization::UnicodeNormalization;

pub struct Edit {
    pub old_text: String,
    pub new_text: String,
}

pub fn to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// NFKC, per-line trailing whitespace dropped, typographic quotes, dashes and spaces made ASCII.
pub fn normalize(text: &str) -> String {
    let nfkc: String = text.nfkc().collect();
    let trimmed: Vec<&str> = nfkc.split('\n').map(str::trim_end).collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// Where `old` sits in `content`: exactly if possible, else in normalised space. The flag says
/// whether the position refers to `normalize(content)`.
fn find(content: &str, old: &str) -> Option<(usize, usize, bool)> {
    if let Some(i) = content.find(old) {
        return Some((i, old.len(), false));
    }
    let fuzzy_old = normalize(old);
    normalize(content)
        .find(&fuzzy_old)
        .map(|i| (i, fuzzy_old.len(), true))
}

fn not_found(path: &str, index: usize, total: usize) -> String {
    if total == 1 {
        format!(
            "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
        )
    } else {
        format!(
            "Could not find edits[{index}] in {path}. The oldText must match exactly including all whitespace and newlines."
        )
    }
}

fn ambiguous(path: &str, index: usize, total: usize, count: usize) -> String {
    if total == 1 {
        format!(
            "Found {count} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
        )
    } else {
        format!(
            "Found {count} occurrences of edits[{index}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
        )
    }
}

/// Applies `edits` to LF-only `content`. Returns the text the edits were matched in (the
/// normalised form after a fuzzy match) and the edited text; `path` is only for messages.
pub fn apply(content: &str, edits: &[Edit], path: &str) -> Result<(String, String), String> {
    let total = edits.len();
    let edits: Vec<Edit> = edits
        .iter()
        .map(|e| Edit {
            old_text: to_lf(&e.old_text),
            new_text: to_lf(&e.new_text),
        })
        .collect();
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(if total == 1 {
                format!("oldText must not be empty in {path}.")
            } else {
                format!("edits[{i}].oldText must not be empty in {path}.")
            });
        }
    }
    let any_fuzzy = edits
        .iter()
        .any(|e| find(content, &e.old_text).is_some_and(|(_, _, fuzzy)| fuzzy));
    let base = if any_fuzzy {
        normalize(content)
    } else {
        content.to_owned()
    };
    let fuzzy_base = normalize(&base);

    let mut spans = Vec::with_capacity(total);
    for (i, e) in edits.iter().enumerate() {
        let (start, len, _) = find(&base, &e.old_text).ok_or_else(|| not_found(path, i, total))?;
        let count = fuzzy_base.matches(normalize(&e.old_text).as_str()).count();
        if count > 1 {
            return Err(ambiguous(path, i, total, count));
        }
        spans.push((start, len, i));
    }
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((a_start, a_len, a), (b_start, _, b)) = (pair[0], pair[1]);
        if a_start + a_len > b_start {
            return Err(format!(
                "edits[{a}] and edits[{b}] overlap in {path}. Merge them into one edit or target disjoint regions."
            ));
        }
    }
    let mut out = String::with_capacity(base.len());
    let mut at = 0;
    for &(start, len, i) in &spans {
        out.push_str(&base[at..start]);
        out.push_str(&edits[i].new_text);
        at = start + len;
    }
    out.push_str(&base[at..]);
    if out == base {
        return Err(if total == 1 {
            format!(
                "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
            )
        } else {
            format!("No changes made to {path}. The replacements produced identical content.")
        });
    }
    Ok((base, out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn e(old: &str, new: &str) -> Edit {
        Edit {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    #[test]
    fn exact_single_and_multiple() {
        let (_, out) = apply("a\nb\nc\n", &[e("b", "B")], "f").unwrap();
        assert_eq!(out, "a\nB\nc\n");
        let (_, out) = apply("a\nb\nc\n", &[e("c", "C"), e("a", "A")], "f").unwrap();
        assert_eq!(out, "A\nb\nC\n");
    }

    #[test]
    fn edits_match_the_original_not_each_other() {
        // The second edit's text only exists after the first is applied: that must not match.
        let err = apply("x = 1\n", &[e("x", "y"), e("y = 1", "z")], "f").unwrap_err();
        assert!(err.starts_with("Could not find edits[1] in f."), "{err}");
    }

    #[test]
    fn fuzzy_match_normalises_quotes_dashes_and_trailing_space() {
        let content = "say(\u{201C}hi\u{201D}) \u{2014} ok   \nnext\n";
        let (base, out) = apply(content, &[e("say(\"hi\") - ok\n", "said\n")], "f").unwrap();
        assert_eq!(base, "say(\"hi\") - ok\nnext\n");
        assert_eq!(out, "said\nnext\n");
    }

    #[test]
    fn errors_use_pi_texts() {
        assert_eq!(
            apply("abc", &[e("zzz", "y")], "f.txt").unwrap_err(),
            "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and newlines."
        );
        assert_eq!(
            apply("ab ab ab", &[e("ab", "y")], "f.txt").unwrap_err(),
            "Found 3 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique."
        );
        assert_eq!(
            apply("x ab ab", &[e("x", "y"), e("ab", "z")], "f").unwrap_err(),
            "Found 2 occurrences of edits[1] in f. Each oldText must be unique. Please provide more context to make it unique."
        );
        assert_eq!(
            apply("abcdef", &[e("cde", "1"), e("abc", "2")], "f").unwrap_err(),
            "edits[1] and edits[0] overlap in f. Merge them into one edit or target disjoint regions."
        );
        assert!(
            apply("abc", &[e("b", "b")], "f")
                .unwrap_err()
                .starts_with("No changes made to f. The replacement produced identical content.")
        );
        assert_eq!(
            apply("abc", &[e("", "b")], "f").unwrap_err(),
            "oldText must not be empty in f."
        );
    }

    #[test]
    fn crlf_in_edit_text_is_normalised() {
        let (_, out) = apply("a\nb\n", &[e("a\r\nb", "x\r\ny")], "f").unwrap();
        assert_eq!(out, "x\ny\n");
    }
}
