//! Matching `ask`/`allow`/`deny` patterns against commands.

use super::layer::{Layer, Shown};
use super::shell;
use crate::glob::{self, Glob};

/// Which list a pattern comes from: an `allow` pattern only sees the command as it will run,
/// so that spelling a command differently cannot make it match; `ask` and `deny` patterns also
/// see it as written and by the bare name of its program (`./curl` as `curl`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum List {
    Allow,
    AskOrDeny,
}

/// An `ask`/`allow`/`deny` pattern, compiled when the rules are built.
#[derive(Debug, Clone)]
pub(super) struct Pattern {
    /// As the settings wrote it, to name it in reasons.
    written: String,
    form: Form,
}

#[derive(Debug, Clone)]
enum Form {
    /// Against the whole command, whitespace collapsed.
    Whole(Glob),
    /// `=…`: one glob per word.
    Words(Vec<Glob>),
}

impl Pattern {
    pub(super) fn new(written: &str) -> Result<Pattern, glob::Error> {
        let form = match written.strip_prefix('=') {
            Some(exact) => Form::Words(
                exact
                    .split_whitespace()
                    .map(Glob::command)
                    .collect::<Result<_, _>>()?,
            ),
            None => Form::Whole(Glob::command(&shell::collapse(written))?),
        };
        Ok(Pattern {
            written: written.to_string(),
            form,
        })
    }

    pub(super) fn written(&self) -> &str {
        &self.written
    }

    fn matches(&self, layer: &Layer, list: List) -> bool {
        let bare = (list == List::AskOrDeny).then(|| bare_name(layer));
        match &self.form {
            Form::Words(words) => {
                word_by_word(words, &layer.words) || bare.is_some_and(|b| word_by_word(words, &b))
            }
            Form::Whole(glob) => {
                glob.is_match(layer.resolved())
                    || (list == List::AskOrDeny && glob.is_match(&layer.raw))
                    || bare.is_some_and(|b| glob.is_match(joined(&b)))
            }
        }
    }
}

pub(super) fn first_match<'a>(
    patterns: &'a [Pattern],
    layer: &Layer,
    list: List,
) -> Option<&'a str> {
    patterns
        .iter()
        .find(|p| p.matches(layer, list))
        .map(Pattern::written)
}

/// The exact form: as many words as the command, each matched on its own, so `*` stays
/// within one word. A word known only at run time may be several words or none, so it matches
/// nothing.
fn word_by_word(pattern: &[Glob], words: &[Shown]) -> bool {
    pattern.len() == words.len()
        && pattern
            .iter()
            .zip(words)
            .all(|(p, w)| w.known && p.is_match(&w.text))
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
