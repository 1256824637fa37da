//! Words: quoting, escapes, parameter and arithmetic expansions, and substitutions.

use super::{Expansion, ParseError, Parser, Piece, Stop, Word, err, parse};

impl Parser<'_> {
    pub(super) fn word(&mut self) -> Result<Word, ParseError> {
        let start = self.pos;
        let mut piece = Piece::default();
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b')' => break,
                b'<' | b'>' if self.peek_at(1) == Some(b'(') => {
                    let sub_start = self.pos;
                    self.pos += 2;
                    let script = self.list(Stop::Paren)?;
                    self.pos += 1;
                    piece.subs.push(script);
                    let source = self.s[sub_start..self.pos].to_vec();
                    piece.expansion(&source, false, Expansion::Process);
                }
                b'<' | b'>' => break,
                b'(' => {
                    let extglob =
                        matches!(piece.value.last(), Some(b'@' | b'!' | b'*' | b'+' | b'?'));
                    let array = piece.value.ends_with(b"=") && assignment_name(&piece.value);
                    if !(extglob || array) {
                        break;
                    }
                    self.balanced(&mut piece)?;
                }
                b'\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'\n') => self.pos += 1,
                        Some(next) => {
                            piece.text(&[next], true);
                            self.pos += 1;
                        }
                        None => piece.text(b"\\", false),
                    }
                }
                b'\'' => {
                    self.pos += 1;
                    let Some(len) = self.s[self.pos..].iter().position(|&c| c == b'\'') else {
                        return err("a single quote is never closed");
                    };
                    piece.text(&self.s[self.pos..self.pos + len], true);
                    self.pos += len + 1;
                }
                b'"' => {
                    self.pos += 1;
                    // `""` is an argument of its own, even though it holds no text.
                    piece.text(b"", true);
                    self.double_quoted(&mut piece, false)?;
                }
                b'`' => self.backquoted(&mut piece, false)?,
                b'$' => self.dollar(&mut piece, false)?,
                _ => {
                    piece.text(&[c], false);
                    self.pos += 1;
                }
            }
        }
        Ok(Word {
            raw: self.slice(start, self.pos).to_string(),
            value: String::from_utf8_lossy(&piece.value).into_owned(),
            parts: piece.parts(),
            subs: piece.subs,
        })
    }

    /// `( … )` inside a word (an array value, an extended glob), kept as written.
    pub(super) fn balanced(&mut self, piece: &mut Piece) -> Result<(), ParseError> {
        self.nested(|p| {
            let start = p.pos;
            p.pos += 1;
            let mut open = 1usize;
            let mut scratch = Piece::default();
            while open > 0 {
                match p.peek() {
                    None => return err("a `(` is never closed"),
                    Some(b'(') => {
                        open += 1;
                        p.pos += 1;
                    }
                    Some(b')') => {
                        open -= 1;
                        p.pos += 1;
                    }
                    Some(b'\\') => p.pos += 2,
                    Some(b'\'') => {
                        p.pos += 1;
                        let Some(len) = p.s[p.pos..].iter().position(|&c| c == b'\'') else {
                            return err("a single quote is never closed");
                        };
                        p.pos += len + 1;
                    }
                    Some(b'"') => {
                        p.pos += 1;
                        p.double_quoted(&mut scratch, false)?;
                    }
                    Some(b'`') => p.backquoted(&mut scratch, false)?,
                    Some(b'$') => p.dollar(&mut scratch, false)?,
                    Some(_) => p.pos += 1,
                }
            }
            p.pos = p.pos.min(p.s.len());
            let source = p.s[start..p.pos].to_vec();
            // Quoting inside is kept as written, so the text is only exact when nothing in it
            // expands; otherwise the whole group is as unknown as any expansion.
            if scratch.expands() {
                piece.expansion(&source, false, Expansion::Other);
            } else {
                piece.text(&source, false);
            }
            piece.subs.extend(scratch.subs);
            Ok(())
        })
    }

    /// After an opening `"`, or a here-document body (`heredoc`: runs to the end, `"` is plain).
    pub(super) fn double_quoted(
        &mut self,
        piece: &mut Piece,
        heredoc: bool,
    ) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                None if heredoc => return Ok(()),
                None => return err("a double quote is never closed"),
                Some(b'"') if !heredoc => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => match self.peek_at(1) {
                    Some(b'\n') => self.pos += 2,
                    Some(c @ (b'$' | b'`' | b'\\')) => {
                        piece.text(&[c], true);
                        self.pos += 2;
                    }
                    Some(b'"') if !heredoc => {
                        piece.text(b"\"", true);
                        self.pos += 2;
                    }
                    _ => {
                        piece.text(b"\\", true);
                        self.pos += 1;
                    }
                },
                Some(b'$') => self.dollar(piece, true)?,
                Some(b'`') => self.backquoted(piece, true)?,
                Some(c) => {
                    piece.text(&[c], true);
                    self.pos += 1;
                }
            }
        }
    }

    pub(super) fn backquoted(
        &mut self,
        piece: &mut Piece,
        in_double: bool,
    ) -> Result<(), ParseError> {
        let start = self.pos;
        self.pos += 1;
        let mut inner = Vec::new();
        loop {
            match self.peek() {
                None => return err("a backquote is never closed"),
                Some(b'`') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => match self.peek_at(1) {
                    Some(c @ (b'$' | b'`' | b'\\')) => {
                        inner.push(c);
                        self.pos += 2;
                    }
                    Some(b'"') if in_double => {
                        inner.push(b'"');
                        self.pos += 2;
                    }
                    _ => {
                        inner.push(b'\\');
                        self.pos += 1;
                    }
                },
                Some(c) => {
                    inner.push(c);
                    self.pos += 1;
                }
            }
        }
        let inner = String::from_utf8_lossy(&inner).into_owned();
        piece.subs.push(parse(&inner, self.depth + 1)?);
        let source = self.s[start..self.pos].to_vec();
        piece.expansion(&source, in_double, Expansion::Other);
        Ok(())
    }

    pub(super) fn dollar(&mut self, piece: &mut Piece, in_double: bool) -> Result<(), ParseError> {
        self.nested(|p| {
            let start = p.pos;
            p.pos += 1;
            let name_start = p.pos;
            match p.peek() {
                Some(b'(') => {
                    p.pos += 1;
                    if p.peek() == Some(b'(') && p.closes_as_arithmetic(p.pos + 1) {
                        p.pos += 1;
                        let mut scratch = Piece::default();
                        p.arithmetic(&mut scratch)?;
                        piece.subs.extend(scratch.subs);
                    } else {
                        let script = p.list(Stop::Paren)?;
                        p.pos += 1;
                        piece.subs.push(script);
                    }
                }
                Some(b'{') => {
                    p.pos += 1;
                    return p.parameter(piece, start, in_double);
                }
                // `$[ … ]`: bash's old spelling of `$(( … ))`.
                Some(b'[') => {
                    p.pos += 1;
                    let mut scratch = Piece::default();
                    p.old_arithmetic(&mut scratch)?;
                    piece.subs.extend(scratch.subs);
                }
                Some(b'\'') if !in_double => {
                    p.pos += 1;
                    return p.ansi_c(piece);
                }
                Some(b'"') if !in_double => {
                    p.pos += 1;
                    piece.text(b"", true);
                    return p.double_quoted(piece, false);
                }
                Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                    while p
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                    {
                        p.pos += 1;
                    }
                    let name = p.slice(name_start, p.pos).to_string();
                    piece.param(&p.s[start..p.pos], name, in_double);
                    return Ok(());
                }
                Some(b'0'..=b'9' | b'?' | b'$' | b'#' | b'@' | b'*' | b'!' | b'-') => {
                    p.pos += 1;
                    let name = p.slice(name_start, p.pos).to_string();
                    piece.param(&p.s[start..p.pos], name, in_double);
                    return Ok(());
                }
                _ => {
                    piece.text(b"$", in_double);
                    return Ok(());
                }
            }
            let source = p.s[start..p.pos.min(p.s.len())].to_vec();
            piece.expansion(&source, in_double, Expansion::Other);
            Ok(())
        })
    }

    /// After `${` (the `$` at `start`), up to and including the matching `}`.
    pub(super) fn parameter(
        &mut self,
        piece: &mut Piece,
        start: usize,
        in_double: bool,
    ) -> Result<(), ParseError> {
        let mut scratch = Piece::default();
        loop {
            match self.peek() {
                None => return err("a `${` is never closed"),
                Some(b'}') => {
                    self.pos += 1;
                    piece.subs.extend(scratch.subs);
                    let source = &self.s[start..self.pos];
                    let inner = self.slice(start + 2, self.pos - 1);
                    if is_parameter_name(inner) {
                        piece.param(source, inner.to_string(), in_double);
                    } else {
                        piece.expansion(source, in_double, Expansion::Other);
                    }
                    return Ok(());
                }
                Some(b'\\') => self.pos += 2,
                Some(b'\'') if !in_double => {
                    self.pos += 1;
                    let Some(len) = self.s[self.pos..].iter().position(|&c| c == b'\'') else {
                        return err("a single quote is never closed");
                    };
                    self.pos += len + 1;
                }
                Some(b'"') => {
                    self.pos += 1;
                    self.double_quoted(&mut scratch, false)?;
                }
                Some(b'$') => self.dollar(&mut scratch, in_double)?,
                Some(b'`') => self.backquoted(&mut scratch, in_double)?,
                Some(_) => self.pos += 1,
            }
        }
    }

    /// Whether the `((` before `from` ends with `))`, as arithmetic, rather than being
    /// `$( (subshell) … )`. A look-ahead, because parsing one way then the other would take
    /// exponential time on nested input.
    pub(super) fn closes_as_arithmetic(&self, from: usize) -> bool {
        let mut open = 0usize;
        let mut i = from;
        while let Some(&c) = self.s.get(i) {
            match c {
                b'(' => open += 1,
                b')' if open == 0 => return self.s.get(i + 1) == Some(&b')'),
                b')' => open -= 1,
                b'\\' => i += 1,
                _ => {}
            }
            i += 1;
        }
        false
    }

    /// After `((` or `$((`, up to and including the closing `))`.
    pub(super) fn arithmetic(&mut self, piece: &mut Piece) -> Result<(), ParseError> {
        let mut open = 0usize;
        loop {
            match self.peek() {
                None => return err("a `((` is never closed"),
                Some(b'(') => {
                    open += 1;
                    self.pos += 1;
                }
                Some(b')') if open == 0 => {
                    if self.peek_at(1) != Some(b')') {
                        return err("a `((` is closed by a single `)`");
                    }
                    self.pos += 2;
                    return Ok(());
                }
                Some(b')') => {
                    open -= 1;
                    self.pos += 1;
                }
                Some(b'\\') => self.pos += 2,
                Some(b'\'') => return err("a quote inside `(( ))`"),
                Some(b'"') => {
                    self.pos += 1;
                    self.double_quoted(piece, false)?;
                }
                Some(b'$') => self.dollar(piece, true)?,
                Some(b'`') => self.backquoted(piece, true)?,
                Some(_) => self.pos += 1,
            }
        }
    }

    /// After `$[`, up to and including the matching `]`.
    pub(super) fn old_arithmetic(&mut self, piece: &mut Piece) -> Result<(), ParseError> {
        let mut open = 0usize;
        loop {
            match self.peek() {
                None => return err("a `$[` is never closed"),
                Some(b'[') => {
                    open += 1;
                    self.pos += 1;
                }
                Some(b']') if open == 0 => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b']') => {
                    open -= 1;
                    self.pos += 1;
                }
                Some(b'\\') => self.pos += 2,
                Some(b'\'') => return err("a quote inside `$[ ]`"),
                Some(b'"') => {
                    self.pos += 1;
                    self.double_quoted(piece, false)?;
                }
                Some(b'$') => self.dollar(piece, true)?,
                Some(b'`') => self.backquoted(piece, true)?,
                Some(_) => self.pos += 1,
            }
        }
    }

    /// After `$'`: bash's C-style escapes, so `$'rm\x20x'` and `$'\u0072m'` read as bash runs them.
    pub(super) fn ansi_c(&mut self, piece: &mut Piece) -> Result<(), ParseError> {
        let mut text = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return err("a `$'` quote is never closed");
            };
            self.pos += 1;
            match c {
                b'\'' => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return err("a `$'` quote is never closed");
                    };
                    self.pos += 1;
                    let simple = match e {
                        b'n' => Some(b'\n'),
                        b't' => Some(b'\t'),
                        b'r' => Some(b'\r'),
                        b'a' => Some(7),
                        b'b' => Some(8),
                        b'e' | b'E' => Some(27),
                        b'f' => Some(12),
                        b'v' => Some(11),
                        b'\\' | b'\'' | b'"' | b'?' => Some(e),
                        _ => None,
                    };
                    let numeric = match e {
                        b'x' => Some((16, 2)),
                        b'u' => Some((16, 4)),
                        b'U' => Some((16, 8)),
                        b'0'..=b'7' => {
                            self.pos -= 1;
                            Some((8, 3))
                        }
                        _ => None,
                    };
                    if let Some(byte) = simple {
                        text.push(byte);
                    } else if let Some((radix, max)) = numeric {
                        let digits_start = self.pos;
                        while self.pos - digits_start < max
                            && self.peek().is_some_and(|d| char::from(d).is_digit(radix))
                        {
                            self.pos += 1;
                        }
                        let digits = self.slice(digits_start, self.pos);
                        match u32::from_str_radix(digits, radix) {
                            Ok(code) if matches!(e, b'u' | b'U') => {
                                let c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
                                text.extend_from_slice(c.to_string().as_bytes());
                            }
                            Ok(code) => text.push((code & 0xff) as u8),
                            Err(_) => text.extend_from_slice(&[b'\\', e]),
                        }
                    } else if e == b'c' {
                        // `\cX` is the control character of X.
                        if let Some(x) = self.peek() {
                            self.pos += 1;
                            text.push(x.to_ascii_uppercase() ^ 0x40);
                        }
                    } else {
                        text.extend_from_slice(&[b'\\', e]);
                    }
                }
                _ => text.push(c),
            }
        }
        piece.text(&text, true);
        Ok(())
    }
}

fn is_parameter_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match bytes {
        [b'?' | b'$' | b'#' | b'@' | b'*' | b'!' | b'-'] => true,
        _ if bytes.iter().all(u8::is_ascii_digit) => !bytes.is_empty(),
        [first, rest @ ..] => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        }
        [] => false,
    }
}

pub(super) fn assignment_name(value: &[u8]) -> bool {
    let name = value.strip_suffix(b"=").unwrap_or(value);
    let name = name.strip_suffix(b"+").unwrap_or(name);
    matches!(name.first(), Some(c) if c.is_ascii_alphabetic() || *c == b'_')
        && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}
