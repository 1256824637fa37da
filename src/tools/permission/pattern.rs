//! Matching `ask`/`allow`/`deny` patterns against commands.

use super::layer::{Layer, Shown};
use super::shell;

/// Which list a pattern comes from: an `allow` pattern only sees the command as it will run,
/// so that spelling a command differently cannot make it match; `ask` and `deny` patterns also
/// see it as written and by the bare name of its program (`./curl` as `curl`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum List {
    Allow,
    AskOrDeny,
}

pub(super) fn first_match<'a>(
    patterns: &'a [String],
    layer: &Layer,
    list: List,
) -> Option<&'a str> {
    patterns
        .iter()
        .map(String::as_str)
        .find(|p| matches(p, layer, list))
}

fn matches(pattern: &str, layer: &Layer, list: List) -> bool {
    let bare = (list == List::AskOrDeny).then(|| bare_name(layer));
    if let Some(exact) = pattern.strip_prefix('=') {
        let words: Vec<&str> = exact.split_whitespace().collect();
        return word_by_word(&words, &layer.words)
            || bare.is_some_and(|b| word_by_word(&words, &b));
    }
    let pattern = shell::collapse(pattern);
    glob_match(&pattern, &layer.resolved())
        || (list == List::AskOrDeny && glob_match(&pattern, &layer.raw))
        || bare.is_some_and(|b| glob_match(&pattern, &joined(&b)))
}

/// The exact form: as many words as the command, each matched on its own, so `*` stays
/// within one word. A word known only at run time may be several words or none, so it matches
/// nothing.
fn word_by_word(pattern: &[&str], words: &[Shown]) -> bool {
    pattern.len() == words.len()
        && pattern
            .iter()
            .zip(words)
            .all(|(p, w)| w.known && glob_match(p, &w.text))
}

/// The layer's words with the command named by the last part of its path.
fn bare_name(layer: &Layer) -> Vec<Shown> {
    layer
        .words
        .iter()
        .enumerate()
        .map(|(i, w)| Shown {
            text: if Some(i) == layer.name {
                w.text.rsplit('/').next().unwrap_or(&w.text).to_string()
            } else {
                w.text.clone()
            },
            known: w.known,
        })
        .collect()
}

fn joined(words: &[Shown]) -> String {
    let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    texts.join(" ")
}

/// `*` is any run of characters (spaces included), `?` one character; the whole text must match.
pub(super) fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently stands up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == '*')
}
