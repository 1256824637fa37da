//! Words turned into the arguments a command will receive, as far as they can be known before
//! the command runs.
//!
//! Bash expands a word in a fixed order: braces (`{rm,-rf,x}` is three words), then parameters
//! and substitutions, then word splitting of the unquoted results, then pathname expansion of
//! unquoted `*`, `?` and `[…]`. Brace expansion needs nothing from run time, so it is done here
//! exactly. What the other steps produce is described by a pattern instead: `"$x"` is any one
//! word, `$x` any number of words, `-*` any word starting with `-`. The rules then ask "could
//! this argument be `-rf`?" rather than "is it?".

use super::shell::{Expansion, Part, Word};

/// Brace expansion beyond this many words is not followed: the word is treated as unknown.
const MAX_WORDS: usize = 1024;

/// Nor is a word with more unquoted `{` than this.
const MAX_BRACES: usize = 64;

/// One argument as the command will receive it.
#[derive(Debug, Clone)]
pub(super) struct Arg {
    /// The word it came from, as written; empty on the further words one word expands into.
    pub(super) raw: String,
    /// How rules and messages show it: the value when known, the word as written otherwise.
    pub(super) text: String,
    /// The exact value, when nothing in it waits for run time.
    pub(super) known: Option<String>,
    /// May become any number of arguments: an unquoted expansion is split into words, and
    /// `"$@"`, `"${a[@]}"` are as many words as the list holds.
    pub(super) splits: bool,
    /// Pathname expansion may replace it with the names of existing files.
    pub(super) glob: bool,
    /// A `<( )` process substitution: the command gets a `/dev/fd/N` path to another command's
    /// output.
    pub(super) pipe: bool,
    pattern: Vec<Atom>,
}

/// What one stretch of an argument may be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Atom {
    Char(char),
    /// Any run of characters: an expansion, or `*`.
    Any,
    /// `?`
    One,
    /// `[…]`: the listed characters and ranges, or (negated) any other character.
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
    /// One or more digits: `$$`, `$!`, `$#`, `$?`, the `N` of `/dev/fd/N`.
    Digits,
}

impl Arg {
    /// An argument nothing is known about, such as the input `xargs` adds.
    pub(super) fn unknown(text: &str) -> Arg {
        Arg {
            raw: String::new(),
            text: text.into(),
            known: None,
            splits: true,
            glob: false,
            pipe: false,
            pattern: vec![Atom::Any],
        }
    }

    /// This word with its value left to run time, as when `xargs -I {}` fills input into it.
    pub(super) fn filled_in(&self) -> Arg {
        Arg {
            raw: self.raw.clone(),
            text: self.text.clone(),
            splits: false,
            ..Arg::unknown("")
        }
    }

    /// An argument whose value the gate already has: an option's attached value, a word of a
    /// git alias.
    pub(super) fn literal(text: &str) -> Arg {
        Arg {
            raw: text.into(),
            text: text.into(),
            known: Some(text.into()),
            splits: false,
            glob: false,
            pipe: false,
            pattern: text.chars().map(Atom::Char).collect(),
        }
    }

    /// A glob pattern given to a command that matches it itself (`systemctl start 'reboot*'`).
    pub(super) fn pattern(text: &str) -> Arg {
        let tokens: Vec<Token> = text
            .chars()
            .map(|c| Token::Char { c, quoted: false })
            .collect();
        arg(&tokens)
    }

    pub(super) fn value(&self) -> Option<&str> {
        self.known.as_deref()
    }

    pub(super) fn is(&self, value: &str) -> bool {
        self.value() == Some(value)
    }

    /// Whether the command could receive `value` from this word (as one of its arguments, when
    /// the word may split).
    pub(super) fn could_be(&self, value: &str) -> bool {
        if self.splits {
            return true;
        }
        let text: Vec<char> = value.chars().collect();
        matches(&self.pattern, &text)
    }

    /// Whether the command could receive an argument starting with `prefix` from this word:
    /// `"$f"` could start with `-`, `./"$f"` could not.
    pub(super) fn could_start(&self, prefix: &str) -> bool {
        if self.splits {
            return true;
        }
        let text: Vec<char> = prefix.chars().collect();
        let mut reachable = start(&text);
        for atom in &self.pattern {
            if reachable[text.len()] || (*atom == Atom::Any && reachable.contains(&true)) {
                return true;
            }
            reachable = step(atom, &reachable, &text);
        }
        reachable[text.len()]
    }
}

/// The arguments `words` become.
pub(super) fn expand(words: &[Word]) -> Vec<Arg> {
    words.iter().flat_map(expand_word).collect()
}

pub(super) fn expand_word(word: &Word) -> Vec<Arg> {
    let tokens = tokens(&word.parts);
    if tokens.is_empty() {
        // `""` or `''`: one empty argument.
        return vec![Arg {
            raw: word.raw.clone(),
            ..Arg::literal("")
        }];
    }
    let mut budget = MAX_WORDS;
    let braces_in_word = tokens.iter().filter(|t| is_structure(t, '{')).count();
    // Beyond this many braces the expansion is not worth the time (or the stack) to follow.
    let expanded = if braces_in_word > MAX_BRACES {
        None
    } else {
        braces(&tokens, &mut budget)
    };
    let Some(expanded) = expanded else {
        return vec![Arg {
            raw: word.raw.clone(),
            ..Arg::unknown(&word.raw)
        }];
    };
    let mut args: Vec<Arg> = expanded
        .iter()
        // An empty word made by brace expansion disappears, as bash drops it.
        .filter(|tokens| !tokens.is_empty())
        .map(|tokens| arg(tokens))
        .collect();
    if let Some(first) = args.first_mut() {
        first.raw = word.raw.clone();
    }
    args
}

/// A word as brace expansion sees it: only unquoted `{`, `,` and `}` can be structure.
#[derive(Debug, Clone)]
enum Token {
    Char {
        c: char,
        quoted: bool,
    },
    Param {
        name: String,
        quoted: bool,
    },
    Expansion {
        source: String,
        quoted: bool,
        kind: Expansion,
    },
}

fn tokens(parts: &[Part]) -> Vec<Token> {
    let mut tokens = Vec::new();
    for part in parts {
        match part {
            Part::Text { text, quoted } => {
                tokens.extend(text.chars().map(|c| Token::Char { c, quoted: *quoted }))
            }
            Part::Param { name, quoted } => tokens.push(Token::Param {
                name: name.clone(),
                quoted: *quoted,
            }),
            Part::Expansion {
                source,
                quoted,
                kind,
            } => tokens.push(Token::Expansion {
                source: source.clone(),
                quoted: *quoted,
                kind: *kind,
            }),
        }
    }
    tokens
}

fn is_structure(token: &Token, wanted: char) -> bool {
    matches!(token, Token::Char { c, quoted: false } if *c == wanted)
}

/// Every word brace expansion makes of `tokens`, or `None` past the budget.
fn braces(tokens: &[Token], budget: &mut usize) -> Option<Vec<Vec<Token>>> {
    for open in (0..tokens.len()).filter(|&i| is_structure(&tokens[i], '{')) {
        let Some((close, alternatives)) = brace_body(tokens, open) else {
            continue;
        };
        let alternatives = alternatives?;
        let prefix = &tokens[..open];
        let suffixes = braces(&tokens[close + 1..], budget)?;
        let mut words = Vec::new();
        for alternative in alternatives {
            for middle in braces(&alternative, budget)? {
                for suffix in &suffixes {
                    *budget = budget.checked_sub(1)?;
                    let mut word = prefix.to_vec();
                    word.extend(middle.iter().cloned());
                    word.extend(suffix.iter().cloned());
                    words.push(word);
                }
            }
        }
        return Some(words);
    }
    Some(vec![tokens.to_vec()])
}

/// Alternatives, or `None` for a sequence too long to follow.
type Alternatives = Option<Vec<Vec<Token>>>;

/// For the `{` at `open`, the matching `}` and the alternatives between them, if they form a
/// brace expansion: a comma list (`{a,b}`) or a sequence (`{1..5}`, `{a..e}`, `{0..10..2}`).
fn brace_body(tokens: &[Token], open: usize) -> Option<(usize, Alternatives)> {
    let mut depth = 0usize;
    let mut commas = Vec::new();
    for (i, token) in tokens.iter().enumerate().skip(open + 1) {
        if is_structure(token, '{') {
            depth += 1;
        } else if is_structure(token, '}') {
            if depth == 0 {
                let body = &tokens[open + 1..i];
                if commas.is_empty() {
                    return sequence(body).map(|items| (i, items));
                }
                let mut alternatives = Vec::new();
                let mut start = open + 1;
                for &comma in commas.iter().chain([&i]) {
                    alternatives.push(tokens[start..comma].to_vec());
                    start = comma + 1;
                }
                return Some((i, Some(alternatives)));
            }
            depth -= 1;
        } else if depth == 0 && is_structure(token, ',') {
            commas.push(i);
        }
    }
    None
}

/// `None`: not a sequence; `Some(None)`: a sequence of more than [`MAX_WORDS`].
fn sequence(body: &[Token]) -> Option<Alternatives> {
    let text: String = body
        .iter()
        .map(|t| match t {
            Token::Char { c, quoted: false } => Some(*c),
            _ => None,
        })
        .collect::<Option<String>>()?;
    let fields: Vec<&str> = text.split("..").collect();
    let (from, to, step) = match fields.as_slice() {
        [from, to] => (*from, *to, None),
        [from, to, step] => (*from, *to, Some(step.parse::<i64>().ok()?)),
        _ => return None,
    };
    let step = step.unwrap_or(1).unsigned_abs().max(1);
    let items: Vec<String> = if let (Ok(a), Ok(b)) = (from.parse::<i64>(), to.parse::<i64>()) {
        let width = [from, to]
            .iter()
            .filter(|f| f.trim_start_matches('-').starts_with('0') && f.len() > 1)
            .map(|f| f.len())
            .max()
            .unwrap_or(0);
        let count = a.abs_diff(b) / step + 1;
        if count > MAX_WORDS as u64 {
            return Some(None);
        }
        let forward = a <= b;
        (0..count)
            .map(|k| {
                let offset = i64::try_from(k * step).unwrap_or(i64::MAX);
                let n = if forward { a + offset } else { a - offset };
                format!("{n:0width$}")
            })
            .collect()
    } else {
        let (a, b) = (single_char(from)?, single_char(to)?);
        let (lo, hi) = (a.min(b), a.max(b));
        let mut chars: Vec<char> = (lo..=hi).step_by(usize::try_from(step).ok()?).collect();
        if a > b {
            chars.reverse();
        }
        chars.into_iter().map(String::from).collect()
    };
    Some(Some(
        items
            .iter()
            .map(|item| {
                item.chars()
                    .map(|c| Token::Char { c, quoted: true })
                    .collect()
            })
            .collect(),
    ))
}

fn single_char(text: &str) -> Option<char> {
    let mut chars = text.chars();
    let c = chars.next().filter(char::is_ascii_alphabetic)?;
    chars.next().is_none().then_some(c)
}

/// The argument one brace-expanded word becomes.
fn arg(tokens: &[Token]) -> Arg {
    let mut text = String::new();
    let mut pattern = Vec::new();
    let mut splits = false;
    let mut glob = false;
    let mut pipe = false;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Char { c, quoted: true } => {
                text.push(*c);
                pattern.push(Atom::Char(*c));
            }
            Token::Char { c, quoted: false } => {
                text.push(*c);
                match c {
                    '*' => {
                        glob = true;
                        pattern.push(Atom::Any);
                    }
                    '?' => {
                        glob = true;
                        pattern.push(Atom::One);
                    }
                    '[' => match class(&tokens[i + 1..]) {
                        Some((atom, used)) => {
                            glob = true;
                            pattern.push(atom);
                            for token in &tokens[i + 1..i + 1 + used] {
                                if let Token::Char { c, .. } = token {
                                    text.push(*c);
                                }
                            }
                            i += used;
                        }
                        None => pattern.push(Atom::Char('[')),
                    },
                    _ => pattern.push(Atom::Char(*c)),
                }
            }
            Token::Param { name, quoted } => {
                text.push_str(&param_text(name, tokens.get(i + 1)));
                let numeric = matches!(name.as_str(), "$" | "!" | "#" | "?");
                pattern.push(if numeric { Atom::Digits } else { Atom::Any });
                splits |= (!quoted && !numeric) || name == "@";
            }
            Token::Expansion {
                source,
                quoted,
                kind,
            } => {
                text.push_str(source);
                if *kind == Expansion::Process {
                    pipe = true;
                    pattern.extend("/dev/fd/".chars().map(Atom::Char));
                    pattern.push(Atom::Digits);
                } else if prints_pids(source) {
                    // However many words it makes, each is a process ID.
                    pattern.push(Atom::Digits);
                } else {
                    pattern.push(Atom::Any);
                    splits |= !quoted || lists_all(source);
                }
            }
        }
        i += 1;
    }
    // An extended glob (`@(a|b)`, `!(x)`) is beyond these patterns: it may be any name.
    let extglob = tokens.windows(2).any(|pair| {
        matches!(
            pair,
            [
                Token::Char {
                    c: '@' | '!' | '*' | '+' | '?',
                    quoted: false
                },
                Token::Char {
                    c: '(',
                    quoted: false
                }
            ]
        )
    });
    if extglob {
        glob = true;
        pattern = vec![Atom::Any];
    }
    pattern.dedup_by(|a, b| *a == Atom::Any && *b == Atom::Any);
    let known = (!glob && !splits && pattern.iter().all(|a| matches!(a, Atom::Char(_))))
        .then(|| text.clone());
    Arg {
        raw: String::new(),
        text,
        known,
        splits,
        glob,
        pipe,
        pattern,
    }
}

fn param_text(name: &str, next: Option<&Token>) -> String {
    let joins_name =
        matches!(next, Some(Token::Char { c, .. }) if c.is_ascii_alphanumeric() || *c == '_');
    if joins_name {
        format!("${{{name}}}")
    } else {
        format!("${name}")
    }
}

/// `$(pgrep x)`, `$(pidof x)`, `$(lsof -t …)`, `$(jobs -p)`: substitutions that print nothing
/// but process IDs, which is what makes `kill $(pgrep server)` an ordinary command.
fn prints_pids(source: &str) -> bool {
    let inner = source
        .strip_prefix("$(")
        .and_then(|s| s.strip_suffix(')'))
        .or_else(|| source.strip_prefix('`').and_then(|s| s.strip_suffix('`')));
    let Some(inner) = inner.filter(|i| !i.contains(|c: char| ";&|<>$`(){}\\'\"\n".contains(c)))
    else {
        return false;
    };
    let words: Vec<&str> = inner.split_whitespace().collect();
    let option = |wanted: &[char]| {
        words[1..]
            .iter()
            .any(|w| w.starts_with('-') && !w.starts_with("--") && w.contains(wanted))
    };
    match words.first() {
        Some(&"pgrep") => {
            !option(&['l', 'a', 'd'])
                && !words
                    .iter()
                    .any(|w| w.starts_with("--list") || w.starts_with("--delim"))
        }
        Some(&"pidof") => !option(&['d']),
        Some(&"lsof") => option(&['t']),
        Some(&"jobs") => words.get(1) == Some(&"-p") && words.len() == 2,
        _ => false,
    }
}

/// `"${a[@]}"`, `"${!prefix@}"`: as many words as the list holds, even inside quotes.
fn lists_all(source: &str) -> bool {
    source.starts_with("${") && (source.contains("[@]") || source.ends_with("@}"))
}

/// A bracket expression after `[`: the atom and how many tokens it took, closing `]` included.
fn class(tokens: &[Token]) -> Option<(Atom, usize)> {
    // No real bracket expression is this long; past it, the `[` is taken for a glob of
    // anything rather than scanned to the end of every long word.
    const MAX_CLASS: usize = 256;
    let chars: Vec<char> = tokens
        .iter()
        .take(MAX_CLASS)
        .map_while(|t| match t {
            Token::Char { c, .. } => Some(*c),
            _ => None,
        })
        .collect();
    let mut i = 0;
    let negated = matches!(chars.first(), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let first = i;
    while let Some(&c) = chars.get(i) {
        if c == ']' && i > first {
            return Some((Atom::Class { negated, items }, i + 1));
        }
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&e| e != ']') {
            items.push((c, chars[i + 2]));
            i += 3;
        } else {
            items.push((c, c));
            i += 1;
        }
    }
    (chars.len() == MAX_CLASS).then_some((Atom::Any, 0))
}

fn matches(pattern: &[Atom], text: &[char]) -> bool {
    let reachable = pattern
        .iter()
        .fold(start(text), |reachable, atom| step(atom, &reachable, text));
    reachable[text.len()]
}

/// `reachable[j]`: the atoms so far can stand for exactly `text[..j]`; before any, only `j = 0`.
fn start(text: &[char]) -> Vec<bool> {
    let mut reachable = vec![false; text.len() + 1];
    reachable[0] = true;
    reachable
}

fn step(atom: &Atom, reachable: &[bool], text: &[char]) -> Vec<bool> {
    let mut next = vec![false; text.len() + 1];
    for j in (0..=text.len()).filter(|&j| reachable[j]) {
        match atom {
            Atom::Any => next[j..].iter_mut().for_each(|r| *r = true),
            Atom::Digits => {
                let run = text[j..].iter().take_while(|c| c.is_ascii_digit()).count();
                for k in 1..=run {
                    next[j + k] = true;
                }
            }
            _ if j < text.len() && single(atom, text[j]) => next[j + 1] = true,
            _ => {}
        }
    }
    next
}

fn single(atom: &Atom, c: char) -> bool {
    match atom {
        Atom::Char(a) => *a == c,
        Atom::One => true,
        Atom::Class { negated, items } => {
            items.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) != *negated
        }
        Atom::Any | Atom::Digits => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::shell;
    use super::*;

    fn args(command: &str) -> Vec<Arg> {
        let script = shell::parse(command, 0).unwrap();
        let shell::Command::Simple(simple) = &script.pipelines[0].commands[0] else {
            panic!("not a simple command");
        };
        expand(&simple.words)
    }

    fn texts(command: &str) -> Vec<String> {
        args(command).into_iter().map(|a| a.text).collect()
    }

    #[test]
    fn braces_expand_as_bash_does() {
        for (command, words) in [
            ("{rm,-rf,x}", vec!["rm", "-rf", "x"]),
            ("ls {a,b}", vec!["ls", "a", "b"]),
            ("x{a,b}y", vec!["xay", "xby"]),
            ("{a,b}{1,2}", vec!["a1", "a2", "b1", "b2"]),
            ("{a,{b,c}}", vec!["a", "b", "c"]),
            ("{a{b,c}}", vec!["{ab}", "{ac}"]),
            ("r{m,} -rf", vec!["rm", "r", "-rf"]),
            ("{x}", vec!["{x}"]),
            ("{}", vec!["{}"]),
            ("'{a,b}'", vec!["{a,b}"]),
            ("\\{a,b}", vec!["{a,b}"]),
            ("{a,b", vec!["{a,b"]),
            ("{1..3}", vec!["1", "2", "3"]),
            ("{3..1}", vec!["3", "2", "1"]),
            ("{01..03}", vec!["01", "02", "03"]),
            ("{0..6..3}", vec!["0", "3", "6"]),
            ("{a..c}", vec!["a", "b", "c"]),
            ("{a,}", vec!["a"]),
            ("\"\"", vec![""]),
            ("{$x,y}", vec!["$x", "y"]),
        ] {
            assert_eq!(texts(command), words, "{command}");
        }
        let huge = args("{1..9}{1..9}{1..9}{1..9}");
        assert_eq!(huge.len(), 1);
        assert!(huge[0].known.is_none() && huge[0].splits);
    }

    #[test]
    fn what_an_argument_could_be() {
        for (command, value, could) in [
            ("rm", "rm", true),
            ("rm", "rf", false),
            ("'$x'", "-rf", false),
            ("\"$x\"", "-rf", true),
            ("./\"$x\"", "-rf", false),
            ("$x", "-rf", true),
            ("x$y", "-rf", true),
            ("\"$@\"", "-rf", true),
            ("\"${a[@]}\"", "-rf", true),
            ("\"${a[0]}\"", "-rf", true),
            ("$!", "-1", false),
            ("$!", "42", true),
            ("$((-1))", "-1", true),
            ("r?", "rm", true),
            ("r[m]", "rm", true),
            ("r[!m]", "rm", false),
            ("r[a-z]", "rm", true),
            ("-*", "-rf", true),
            ("*.o", "-rf", false),
            ("*", "-rf", true),
            ("@(rm|ls)", "rm", true),
            ("<(ls)", "/dev/fd/63", true),
            ("~/x", "-rf", false),
            ("~/x", "~/x", true),
            ("[", "[", true),
        ] {
            let arg = &args(command)[0];
            assert_eq!(arg.could_be(value), could, "{command} as {value}");
        }
    }

    #[test]
    fn escapes_resolve_to_the_name_bash_runs() {
        for command in [
            "c\\url",
            "'curl'",
            "\"curl\"",
            "$'curl'",
            "$'\\x63url'",
            "$'\\u0063url'",
            "$'\\143url'",
            "cu''rl",
        ] {
            assert_eq!(args(command)[0].value(), Some("curl"), "{command}");
        }
        assert_eq!(args("$'\\cA'")[0].value(), Some("\u{1}"));
    }
}
