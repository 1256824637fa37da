//! What a name glob could still match once a name's start is known, so that an MCP rule naming
//! no tool of a server whose tools are unknown can be told apart from a typo. globset cannot
//! answer this; this reads the same syntax as [`Glob::name`](super::Glob::name) and errs
//! towards yes.

/// One element of a glob, as `globset` reads it.
#[derive(Debug, Clone)]
enum Token {
    Char(char),
    /// `?`
    One,
    /// `*` (and `**`: names hold no separators)
    Any,
    /// `[…]`: ranges, and whether the class is negated.
    Class(Vec<(char, char)>, bool),
}

/// The most alternatives `{a,b}` may expand into before [`could_start_with`] gives up (and
/// answers yes).
const MAX_ALTERNATIVES: usize = 256;

/// Whether some name that starts with `prefix` matches `pattern`. Unsure answers are yes.
pub fn could_start_with(pattern: &str, prefix: &str) -> bool {
    let Some(alternatives) = expand(&pattern.chars().collect::<Vec<_>>()) else {
        return true;
    };
    alternatives.iter().any(|tokens| {
        // The positions in `tokens` the prefix read so far may have led to.
        let mut states = closure(tokens, vec![0]);
        for c in prefix.chars() {
            let next = states
                .iter()
                .filter_map(|&at| match tokens.get(at)? {
                    Token::Any => Some(at),
                    token if accepts(token, c) => Some(at + 1),
                    _ => None,
                })
                .collect();
            states = closure(tokens, next);
            if states.is_empty() {
                return false;
            }
        }
        true
    })
}

/// `states` and every position a `*` lets them skip to.
fn closure(tokens: &[Token], mut states: Vec<usize>) -> Vec<usize> {
    let mut i = 0;
    while i < states.len() {
        let at = states[i];
        if matches!(tokens.get(at), Some(Token::Any)) && !states.contains(&(at + 1)) {
            states.push(at + 1);
        }
        i += 1;
    }
    states.sort_unstable();
    states.dedup();
    states
}

fn accepts(token: &Token, c: char) -> bool {
    match token {
        Token::Char(t) => *t == c,
        Token::One | Token::Any => true,
        Token::Class(ranges, negated) => ranges.iter().any(|&(a, b)| a <= c && c <= b) != *negated,
    }
}

/// `pattern` as flat token lists, one per alternative of its `{…}`; `None` past
/// [`MAX_ALTERNATIVES`] or on a pattern this reader does not follow.
fn expand(pattern: &[char]) -> Option<Vec<Vec<Token>>> {
    let mut out: Vec<Vec<Token>> = vec![Vec::new()];
    let mut i = 0;
    while i < pattern.len() {
        let c = pattern[i];
        let pieces: Vec<Vec<Token>> = match c {
            '\\' => {
                i += 1;
                vec![vec![Token::Char(*pattern.get(i)?)]]
            }
            '?' => vec![vec![Token::One]],
            '*' => vec![vec![Token::Any]],
            '[' => {
                let (class, end) = class(pattern, i)?;
                i = end;
                vec![vec![class]]
            }
            '{' => {
                let end = closing(pattern, i)?;
                let mut alternatives = Vec::new();
                for part in split_top(&pattern[i + 1..end]) {
                    alternatives.extend(expand(part)?);
                }
                i = end;
                alternatives
            }
            c => vec![vec![Token::Char(c)]],
        };
        if out.len() * pieces.len() > MAX_ALTERNATIVES {
            return None;
        }
        out = out
            .iter()
            .flat_map(|head| {
                pieces.iter().map(move |piece| {
                    let mut joined = head.clone();
                    joined.extend(piece.iter().cloned());
                    joined
                })
            })
            .collect();
        i += 1;
    }
    Some(out)
}

/// `[…]` starting at `start`: the class and the index of its `]`.
fn class(pattern: &[char], start: usize) -> Option<(Token, usize)> {
    let mut i = start + 1;
    let negated = matches!(pattern.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    // A `]` first in the class is a member.
    let first = i;
    while let Some(&c) = pattern.get(i) {
        if c == ']' && i > first {
            return Some((Token::Class(ranges, negated), i));
        }
        match (pattern.get(i + 1), pattern.get(i + 2)) {
            (Some('-'), Some(&end)) if end != ']' => {
                ranges.push((c, end));
                i += 3;
            }
            _ => {
                ranges.push((c, c));
                i += 1;
            }
        }
    }
    None
}

/// The index of the `}` closing the `{` at `start`.
fn closing(pattern: &[char], start: usize) -> Option<usize> {
    let mut depth = 0;
    let mut i = start;
    while i < pattern.len() {
        match pattern[i] {
            '\\' => i += 1,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The parts of a `{…}` body between its top-level commas.
fn split_top(body: &[char]) -> Vec<&[char]> {
    let mut parts = Vec::new();
    let (mut depth, mut from, mut i) = (0, 0, 0);
    while i < body.len() {
        match body[i] {
            '\\' => i += 1,
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[from..i]);
                from = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&body[from.min(body.len())..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn could_start_with_follows_globsets_syntax() {
        for (pattern, prefix, could) in [
            ("mcp__gh__*", "mcp__gh__", true),
            ("mcp__gh__*", "mcp__fs__", false),
            ("mcp__*", "mcp__fs__", true),
            ("*__delete", "mcp__fs__", true),
            ("mcp__g?__x", "mcp__gh__", true),
            ("mcp__[a-g]h__x", "mcp__gh__", true),
            ("mcp__[!g]h__x", "mcp__gh__", false),
            ("mcp__{fs,gh}__x", "mcp__gh__", true),
            ("mcp__{fs,{hub,gh}}__x", "mcp__gh__", true),
            ("mcp__{fs,docs}__x", "mcp__gh__", false),
            ("mcp__g\\h__x", "mcp__gh__", true),
            ("mcp__gh", "mcp__gh__", false),
            ("mcp__gh__", "mcp__gh__", true),
            ("mcp__{", "mcp__gh__", true),
        ] {
            assert_eq!(
                could_start_with(pattern, prefix),
                could,
                "{pattern} {prefix}"
            );
        }
    }
}
