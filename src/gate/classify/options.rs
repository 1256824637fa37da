//! Reading options the way the commands themselves do: getopt's short clusters and attached
//! values, and GNU's long options, which may be abbreviated to any unambiguous prefix
//! (`rm --rec` is `rm --recursive`).

use super::args::Arg;

/// Which options of a command take a value, in getopt's terms.
pub(super) struct Getopt {
    /// Short options; a letter followed by `:` takes a value (attached or in the next word), by
    /// `::` an optional value that must be attached.
    pub(super) short: &'static str,
    /// Long options that take a value: `--name value` or `--name=value`.
    pub(super) long: &'static [&'static str],
}

impl Getopt {
    /// Where the operands start in `args`: after the options, stopping at the first operand as
    /// wrappers do (`nice -n 5 rm -rf x`: the `-rf` belongs to `rm`). `--` is consumed. `Err`
    /// when an argument known only at run time could be an option, so the start is unknown.
    pub(super) fn operands(&self, args: &[Arg]) -> Result<usize, String> {
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let Some(value) = arg.value() else {
                if arg.could_start("-") {
                    return Err(format!("options known only at run time (`{}`)", arg.text));
                }
                return Ok(i);
            };
            if value == "--" {
                return Ok(i + 1);
            }
            if !value.starts_with('-') || value == "-" {
                return Ok(i);
            }
            i += 1 + usize::from(self.takes_next(value));
        }
        // An option missing its value at the very end leaves no operands.
        Ok(i.min(args.len()))
    }

    /// Whether option word `option` leaves its value to the next word.
    pub(super) fn takes_next(&self, option: &str) -> bool {
        if let Some(long) = option.strip_prefix("--") {
            return !long.contains('=')
                && !long.is_empty()
                && self.long.iter().any(|l| l.starts_with(long));
        }
        let letters: Vec<char> = option.chars().skip(1).collect();
        for (at, letter) in letters.iter().enumerate() {
            match self.arity(*letter) {
                Arity::Required => return at + 1 == letters.len(),
                Arity::Optional => return false,
                Arity::Flag => {}
            }
        }
        false
    }

    fn arity(&self, letter: char) -> Arity {
        let spec: Vec<char> = self.short.chars().collect();
        let Some(at) = spec.iter().position(|&c| c == letter && c != ':') else {
            return Arity::Flag;
        };
        match (spec.get(at + 1), spec.get(at + 2)) {
            (Some(':'), Some(':')) => Arity::Optional,
            (Some(':'), _) => Arity::Required,
            _ => Arity::Flag,
        }
    }

    /// The value given to option `-short`/`--long` among the options before the operands.
    pub(super) fn value(&self, args: &[Arg], short: char, long: &str) -> Option<Arg> {
        let end = self.operands(args).unwrap_or(args.len());
        let mut i = 0;
        while i < end {
            let Some(option) = args[i].value() else {
                i += 1;
                continue;
            };
            if let Some(name) = option.strip_prefix("--") {
                let (name, attached) = match name.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (name, None),
                };
                if !name.is_empty() && !long.is_empty() && long.starts_with(name) {
                    return match attached {
                        Some(value) => Some(Arg::literal(value)),
                        None => args.get(i + 1).cloned(),
                    };
                }
            } else if let Some(letters) = option.strip_prefix('-') {
                for (at, letter) in letters.char_indices() {
                    if letter == short {
                        let rest = &letters[at + letter.len_utf8()..];
                        return if rest.is_empty() {
                            args.get(i + 1).cloned()
                        } else {
                            Some(Arg::literal(rest))
                        };
                    }
                    if self.arity(letter) != Arity::Flag {
                        break;
                    }
                }
            }
            i += 1 + usize::from(self.takes_next(option));
        }
        None
    }

    /// The value of `-short`/`--long` wherever it stands before `--`, for commands that take
    /// options after their operands too (`su user -c 'cmd'`, `su -lc 'cmd'`).
    /// `short` or `long` (empty) may be missing.
    pub(super) fn anywhere(args: &[Arg], short: Option<char>, long: &str) -> Option<Arg> {
        for (i, arg) in args.iter().enumerate() {
            let Some(value) = arg.value() else { continue };
            if value == "--" {
                return None;
            }
            if let Some(name) = value.strip_prefix("--") {
                match name.split_once('=') {
                    _ if long.is_empty() => {}
                    Some((name, attached)) if name == long => return Some(Arg::literal(attached)),
                    None if name == long => return args.get(i + 1).cloned(),
                    _ => {}
                }
            } else if let Some(letters) = value.strip_prefix('-')
                && let Some(short) = short
                && let Some(at) = letters.find(short)
            {
                let rest = &letters[at + short.len_utf8()..];
                return if rest.is_empty() {
                    args.get(i + 1).cloned()
                } else {
                    Some(Arg::literal(rest))
                };
            }
        }
        None
    }

    /// Whether option `-short`/`--long` (`long` empty: there is none) is among the options
    /// before the operands.
    pub(super) fn has(&self, args: &[Arg], short: char, long: &str) -> bool {
        let end = self.operands(args).unwrap_or(args.len());
        let mut i = 0;
        while i < end {
            let Some(option) = args[i].value() else {
                i += 1;
                continue;
            };
            if let Some(name) = option.strip_prefix("--") {
                let name = name.split_once('=').map_or(name, |(n, _)| n);
                if !name.is_empty() && !long.is_empty() && long.starts_with(name) {
                    return true;
                }
            } else if let Some(letters) = option.strip_prefix('-') {
                for letter in letters.chars() {
                    if letter == short {
                        return true;
                    }
                    if self.arity(letter) != Arity::Flag {
                        break;
                    }
                }
            }
            i += 1 + usize::from(self.takes_next(option));
        }
        false
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    Required,
    Optional,
}

/// Options that get a command flagged.
pub(super) struct Dangerous {
    /// Short options that flag the command, alone or in a cluster (`-rf`).
    pub(super) short: &'static str,
    /// Long options (without `--`) that flag it, abbreviated or not.
    pub(super) long: &'static [&'static str],
    /// The command's other short options, which may share a cluster with a dangerous one: they
    /// shape the spellings tried against arguments known only at run time.
    pub(super) others: &'static str,
}

impl Dangerous {
    /// Whether the option word `option` is one of these, in any spelling.
    pub(super) fn matches(&self, option: &str) -> bool {
        if let Some(long) = option.strip_prefix("--") {
            let name = long.split_once('=').map_or(long, |(n, _)| n);
            return !name.is_empty() && self.long.iter().any(|l| l.starts_with(name));
        }
        option.len() > 1
            && option
                .strip_prefix('-')
                .is_some_and(|letters| letters.contains(|c| self.short.contains(c)))
    }

    /// Spellings an argument known only at run time is tried against.
    fn spellings(&self) -> Vec<String> {
        let mut spellings = Vec::new();
        for d in self.short.chars() {
            spellings.push(format!("-{d}"));
            for o in self.others.chars().chain(self.short.chars()) {
                spellings.push(format!("-{o}{d}"));
                spellings.push(format!("-{d}{o}"));
            }
        }
        for long in self.long {
            for end in 1..=long.len() {
                if long.is_char_boundary(end) {
                    spellings.push(format!("--{}", &long[..end]));
                }
            }
            spellings.push(format!("--{long}="));
        }
        spellings
    }

    /// Whether any option among `args` (those before `--`) is, or could turn out to be, one of
    /// these: an argument known only at run time counts when one of the spellings fits it.
    pub(super) fn any(&self, args: &[Arg]) -> Option<String> {
        let mut spellings = None;
        for arg in args {
            match arg.value() {
                Some("--") => return None,
                Some(value) if value.starts_with('-') && self.matches(value) => {
                    return Some(format!("`{value}`"));
                }
                Some(_) => {}
                None => {
                    let spellings = spellings.get_or_insert_with(|| self.spellings());
                    if spellings.iter().any(|s| arg.could_be(s)) {
                        return Some(format!("`{}` (known only at run time)", arg.text));
                    }
                }
            }
        }
        None
    }
}
