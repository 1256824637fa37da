//! A command as the rules see it: as written, and as it will run.

use super::args::Arg;
use super::shell::{self, Word};
use super::walk::{basename, is_text};
use super::{builtin, git};

/// One simple command as the rules see it: the command as written, then each command that a
/// wrapper in it runs (`sudo X`, `env A=1 X`, `xargs X`, …), outermost first.
pub(super) struct Invocation {
    pub(super) layers: Vec<Layer>,
}

pub(super) struct Layer {
    /// As written, whitespace collapsed.
    pub(super) raw: String,
    /// As it will run, word by word: values where they are known, a command in a system
    /// directory by its name (`/usr/bin/curl` is `curl`), `git` without its global options.
    pub(super) words: Vec<Shown>,
    /// Which of `words` names the program (after any assignments).
    pub(super) name: Option<usize>,
    /// Why the built-in list flags the command this layer starts with.
    pub(super) flags: Vec<String>,
    /// Why what this layer runs cannot be seen before it runs: a program name known only at
    /// run time (`$c`, `$(…)`, `"${a[@]}"`), `eval` or `bash -c` of such text, a shell reading
    /// commands from a pipe. Flagged like `flags`, and no deny rule can be checked against it.
    pub(super) unseen: Vec<String>,
}

pub(super) struct Shown {
    pub(super) text: String,
    /// The value is known before running; otherwise `text` is the word as written.
    pub(super) known: bool,
}

impl Layer {
    /// A command known only by its text: a compound command, or one that could not be parsed.
    pub(super) fn written(text: &str, flags: Vec<String>) -> Layer {
        let words: Vec<Shown> = text
            .split_whitespace()
            .map(|w| Shown {
                text: w.to_string(),
                known: true,
            })
            .collect();
        Layer {
            raw: text.to_string(),
            name: (!words.is_empty()).then_some(0),
            words,
            flags,
            unseen: Vec::new(),
        }
    }

    pub(super) fn of(assignments: &[Word], args: &[Arg]) -> Layer {
        let raw: Vec<&str> = assignments
            .iter()
            .map(|w| w.raw.as_str())
            .chain(args.iter().map(|a| a.raw.as_str()))
            .filter(|r| !r.is_empty())
            .collect();
        let mut words: Vec<Shown> = assignments
            .iter()
            .map(|w| Shown {
                text: w.raw.clone(),
                known: w.parts.iter().all(is_text),
            })
            .collect();
        words.extend(resolve(args));
        Layer {
            raw: shell::collapse(&raw.join(" ")),
            words,
            name: (!args.is_empty()).then_some(assignments.len()),
            flags: Vec::new(),
            unseen: Vec::new(),
        }
    }

    /// The resolved command as one line.
    pub(super) fn resolved(&self) -> String {
        let texts: Vec<&str> = self.words.iter().map(|w| w.text.as_str()).collect();
        texts.join(" ")
    }
}

/// Directories whose commands are the commands of that name.
const SYSTEM_DIRS: [&str; 7] = [
    "/bin",
    "/usr/bin",
    "/usr/local/bin",
    "/sbin",
    "/usr/sbin",
    "/usr/local/sbin",
    "/opt/homebrew/bin",
];

fn resolve(args: &[Arg]) -> Vec<Shown> {
    let Some((first, rest)) = args.split_first() else {
        return Vec::new();
    };
    let name = match first.value() {
        Some(path) => {
            let normal = builtin::normalize(path);
            match normal.rsplit_once('/') {
                Some((dir, name)) if SYSTEM_DIRS.contains(&dir) => name.to_string(),
                _ => path.to_string(),
            }
        }
        None => first.text.clone(),
    };
    let rest = match basename(&name) {
        "git" => match git::subcommand(rest) {
            Ok(Some(sub)) => &rest[sub..],
            _ => rest,
        },
        _ => rest,
    };
    let mut words = vec![Shown {
        text: super::shell_word(&name),
        known: first.value().is_some(),
    }];
    words.extend(rest.iter().map(|a| match a.value() {
        Some(v) => Shown {
            text: super::shell_word(v),
            known: true,
        },
        None => Shown {
            text: a.text.clone(),
            known: false,
        },
    }));
    words
}
