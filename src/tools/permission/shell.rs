//! A bash parser just deep enough to find every command a string would run.
//!
//! Hand-written on purpose. On crates.io, `shell-words` splits one command's words but knows no
//! operators or substitutions; `conch-parser` has been unmaintained since 2017; `yash-syntax` is
//! GPL-3 (nova is MIT) and async-first; `brush-parser` is maintained and complete, but it pulls in
//! `peg`, `bon`, `cached` and their trees, leaves each word as raw text that needs a second parse
//! to find its substitutions, and builds an execution AST of dozens of node types. The gate needs
//! less and needs it strictly: each simple command with its words unquoted, the scripts inside
//! substitutions, the redirections, and an error (never a guess) for anything it cannot follow.
//!
//! Keywords are handled loosely: `if`/`then`/`do`/`done`/… in command position only separate
//! commands, since the gate must look at every branch anyway. Syntax bash would reject is
//! sometimes accepted here; that is harmless, because every command found is still inspected.

use std::fmt;

/// Deeper nesting is refused rather than risking the stack; no real command line gets close.
const MAX_DEPTH: usize = 64;

#[derive(Debug, Default)]
pub(super) struct Script {
    pub(super) pipelines: Vec<Pipeline>,
}

#[derive(Debug, Default)]
pub(super) struct Pipeline {
    pub(super) commands: Vec<Command>,
}

#[derive(Debug)]
pub(super) enum Command {
    Simple(Simple),
    /// `( … )`, `{ …; }`, `case`, `(( … ))`: what runs inside, and redirections applying to it all.
    Compound {
        text: String,
        body: Script,
        redirects: Vec<Redirect>,
    },
    Function {
        text: String,
        name: String,
        body: Box<Command>,
    },
}

#[derive(Debug)]
pub(super) struct Simple {
    /// The source text, whitespace collapsed: what `ask`/`allow`/`deny` patterns see.
    pub(super) text: String,
    pub(super) words: Vec<Word>,
    pub(super) redirects: Vec<Redirect>,
}

#[derive(Debug, Default)]
pub(super) struct Word {
    pub(super) raw: String,
    /// After quote removal; expansions stay as written, since their values are unknown here.
    pub(super) value: String,
    /// Holds a parameter expansion or a substitution, so its run-time value is not `value`.
    pub(super) dynamic: bool,
    /// Scripts of `$( )`, backticks, `<( )` and `>( )` inside the word.
    pub(super) subs: Vec<Script>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirectKind {
    Read,
    Write,
    Duplicate,
    HereDoc,
    HereString,
}

#[derive(Debug)]
pub(super) struct Redirect {
    pub(super) kind: RedirectKind,
    pub(super) target: Word,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(message.into()))
}

pub(super) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Parses `src` as a bash script; `depth` counts the scripts it is nested in (`bash -c`, backticks).
pub(super) fn parse(src: &str, depth: usize) -> Result<Script, ParseError> {
    if depth > MAX_DEPTH {
        return err("the command is nested too deeply");
    }
    let mut parser = Parser {
        src,
        s: src.as_bytes(),
        pos: 0,
        depth,
        pending: Vec::new(),
        detached: Vec::new(),
    };
    let mut script = parser.list(Stop::End)?;
    script
        .pipelines
        .extend(parser.detached.into_iter().map(wrap));
    Ok(script)
}

fn wrap(body: Script) -> Pipeline {
    Pipeline {
        commands: vec![Command::Compound {
            text: String::new(),
            body,
            redirects: Vec::new(),
        }],
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    End,
    Paren,
    Brace,
    CaseItem,
}

#[derive(Default)]
struct Piece {
    value: Vec<u8>,
    dynamic: bool,
    subs: Vec<Script>,
}

impl Piece {
    fn absorb(&mut self, other: Piece) {
        self.dynamic |= other.dynamic;
        self.subs.extend(other.subs);
    }
}

struct HereDoc {
    delimiter: Vec<u8>,
    strip_tabs: bool,
    expand: bool,
}

struct Parser<'a> {
    src: &'a str,
    s: &'a [u8],
    pos: usize,
    depth: usize,
    /// Here-documents whose bodies start at the next newline.
    pending: Vec<HereDoc>,
    /// Substitutions found in here-document bodies: they run, but belong to no word.
    detached: Vec<Script>,
}

const RESERVED: [&str; 21] = [
    "{", "}", "!", "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "case",
    "esac", "for", "select", "function", "[[", "]]", "time", "coproc",
];

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<u8> {
        self.s.get(self.pos + n).copied()
    }

    fn starts_with(&self, text: &str) -> bool {
        self.s
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(text.as_bytes()))
    }

    fn slice(&self, start: usize, end: usize) -> &str {
        self.src.get(start..end).unwrap_or("")
    }

    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        if self.depth >= MAX_DEPTH {
            return err("the command is nested too deeply");
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn delimits(&self, at: usize) -> bool {
        matches!(
            self.s.get(at),
            None | Some(b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>')
        )
    }

    /// The reserved word at the cursor, if the next token is exactly one.
    fn reserved(&self) -> Option<&'static str> {
        RESERVED
            .into_iter()
            .find(|w| self.starts_with(w) && self.delimits(self.pos + w.len()))
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'\\') if self.peek_at(1) == Some(b'\n') => self.pos += 2,
                Some(b'#') => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn skip_space_and_newlines(&mut self) -> Result<(), ParseError> {
        loop {
            self.skip_blanks();
            if self.peek() != Some(b'\n') {
                return Ok(());
            }
            self.pos += 1;
            self.read_heredocs()?;
        }
    }

    fn at_stop(&self, stop: Stop) -> bool {
        match stop {
            Stop::End => self.pos >= self.s.len(),
            Stop::Paren => self.peek() == Some(b')'),
            Stop::Brace => self.reserved() == Some("}"),
            Stop::CaseItem => {
                self.starts_with(";;") || self.starts_with(";&") || self.reserved() == Some("esac")
            }
        }
    }

    fn list(&mut self, stop: Stop) -> Result<Script, ParseError> {
        self.nested(|p| {
            let mut script = Script::default();
            let mut need_more = None;
            loop {
                p.skip_space_and_newlines()?;
                if p.at_stop(stop) || p.peek().is_none() {
                    if let Some(op) = need_more {
                        return err(format!("`{op}` with nothing after it"));
                    }
                    if p.at_stop(stop) {
                        return Ok(script);
                    }
                    return err(match stop {
                        Stop::Paren => "a `(` is never closed",
                        Stop::Brace => "a `{` is never closed",
                        _ => "a `case` is never closed with `esac`",
                    });
                }
                let pipeline = p.pipeline()?;
                if pipeline.commands.is_empty() && need_more.is_some() {
                    return err("an operator with no command after it");
                }
                need_more = None;
                if !pipeline.commands.is_empty() {
                    script.pipelines.push(pipeline);
                }
                p.skip_blanks();
                match p.peek() {
                    None | Some(b'\n') => {}
                    Some(b';') if matches!(p.peek_at(1), Some(b';' | b'&')) => {
                        if stop != Stop::CaseItem {
                            return err("`;;` outside a `case`");
                        }
                    }
                    Some(b';') => p.pos += 1,
                    Some(b'&') if p.peek_at(1) == Some(b'&') => {
                        p.pos += 2;
                        need_more = Some("&&");
                    }
                    Some(b'|') if p.peek_at(1) == Some(b'|') => {
                        p.pos += 2;
                        need_more = Some("||");
                    }
                    Some(b'&') => p.pos += 1,
                    Some(_) if p.at_stop(stop) => {}
                    Some(c) => return err(format!("unexpected `{}`", char::from(c))),
                }
            }
        })
    }

    fn pipeline(&mut self) -> Result<Pipeline, ParseError> {
        let mut pipeline = Pipeline::default();
        loop {
            self.skip_blanks();
            if let Some(command) = self.command()? {
                pipeline.commands.push(command);
            } else if !pipeline.commands.is_empty() {
                return err("`|` with nothing after it");
            }
            self.skip_blanks();
            if self.starts_with("||") {
                return Ok(pipeline);
            }
            if self.starts_with("|&") {
                self.pos += 2;
            } else if self.peek() == Some(b'|') {
                self.pos += 1;
            } else {
                return Ok(pipeline);
            }
            if pipeline.commands.is_empty() {
                return err("`|` with nothing before it");
            }
            self.skip_space_and_newlines()?;
        }
    }

    fn command(&mut self) -> Result<Option<Command>, ParseError> {
        self.nested(|p| {
            loop {
                p.skip_blanks();
                let start = p.pos;
                if p.peek() == Some(b'(') {
                    let body = if p.peek_at(1) == Some(b'(') && p.closes_as_arithmetic(p.pos + 2) {
                        p.pos += 2;
                        let mut piece = Piece::default();
                        p.arithmetic(&mut piece)?;
                        Script {
                            pipelines: piece.subs.into_iter().map(wrap).collect(),
                        }
                    } else {
                        p.pos += 1;
                        let body = p.list(Stop::Paren)?;
                        p.pos += 1;
                        body
                    };
                    return p.compound(start, body).map(Some);
                }
                match p.reserved() {
                    Some(
                        w @ ("!" | "if" | "then" | "elif" | "else" | "do" | "while" | "until"
                        | "coproc"),
                    ) => p.pos += w.len(),
                    Some("time") => {
                        p.pos += 4;
                        p.skip_blanks();
                        if p.starts_with("-p") && p.delimits(p.pos + 2) {
                            p.pos += 2;
                        }
                    }
                    Some(w @ ("fi" | "done" | "esac")) => {
                        p.pos += w.len();
                        return p.compound(start, Script::default()).map(Some);
                    }
                    Some("{") => {
                        p.pos += 1;
                        let body = p.list(Stop::Brace)?;
                        p.pos += 1;
                        return p.compound(start, body).map(Some);
                    }
                    Some("case") => return p.case_clause(start).map(Some),
                    Some("[[") => return p.test_clause(start).map(Some),
                    Some("function") => {
                        p.pos += "function".len();
                        p.skip_blanks();
                        let name = p.word()?;
                        if name.raw.is_empty() {
                            return err("`function` without a name");
                        }
                        p.skip_blanks();
                        if p.peek() == Some(b'(') {
                            p.pos += 1;
                            p.skip_blanks();
                            if p.peek() != Some(b')') {
                                return err("`function name(` without `)`");
                            }
                            p.pos += 1;
                        }
                        return p.function_body(start, name.value).map(Some);
                    }
                    Some(w @ ("for" | "select")) => {
                        let after = p.pos + w.len();
                        let mut probe = after;
                        while matches!(p.s.get(probe), Some(b' ' | b'\t')) {
                            probe += 1;
                        }
                        if p.s.get(probe..probe + 2) == Some(&b"(("[..]) {
                            p.pos = probe + 2;
                            let mut piece = Piece::default();
                            p.arithmetic(&mut piece)?;
                            let body = Script {
                                pipelines: piece.subs.into_iter().map(wrap).collect(),
                            };
                            return p.compound(start, body).map(Some);
                        }
                        return p.simple();
                    }
                    _ => return p.simple(),
                }
            }
        })
    }

    fn compound(&mut self, start: usize, body: Script) -> Result<Command, ParseError> {
        let mut redirects = Vec::new();
        loop {
            self.skip_blanks();
            match self.redirect()? {
                Some(r) => redirects.push(r),
                None => break,
            }
        }
        Ok(Command::Compound {
            text: collapse(self.slice(start, self.pos)),
            body,
            redirects,
        })
    }

    fn function_body(&mut self, start: usize, name: String) -> Result<Command, ParseError> {
        self.skip_space_and_newlines()?;
        let Some(body) = self.command()? else {
            return err(format!("function `{name}` has no body"));
        };
        Ok(Command::Function {
            text: collapse(self.slice(start, self.pos)),
            name,
            body: Box::new(body),
        })
    }

    fn case_clause(&mut self, start: usize) -> Result<Command, ParseError> {
        self.pos += "case".len();
        self.skip_blanks();
        let subject = self.word()?;
        let mut body = Script {
            pipelines: subject.subs.into_iter().map(wrap).collect(),
        };
        self.skip_space_and_newlines()?;
        if !(self.starts_with("in") && self.delimits(self.pos + 2)) {
            return err("`case` without `in`");
        }
        self.pos += 2;
        loop {
            self.skip_space_and_newlines()?;
            if self.reserved() == Some("esac") {
                self.pos += 4;
                break;
            }
            if self.peek().is_none() {
                return err("a `case` is never closed with `esac`");
            }
            if self.peek() == Some(b'(') {
                self.pos += 1;
            }
            loop {
                self.skip_blanks();
                let pattern = self.word()?;
                body.pipelines.extend(pattern.subs.into_iter().map(wrap));
                self.skip_blanks();
                match self.peek() {
                    Some(b'|') => self.pos += 1,
                    Some(b')') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return err("a `case` pattern without `)`"),
                }
            }
            let item = self.list(Stop::CaseItem)?;
            body.pipelines.extend(item.pipelines);
            for terminator in [";;&", ";;", ";&"] {
                if self.starts_with(terminator) {
                    self.pos += terminator.len();
                    break;
                }
            }
        }
        self.compound(start, body)
    }

    /// `[[ … ]]`: operators inside are plain words, so `&&`, `<` or `(` must not split it.
    fn test_clause(&mut self, start: usize) -> Result<Command, ParseError> {
        self.pos += 2;
        let mut words = vec![Word {
            raw: "[[".into(),
            value: "[[".into(),
            ..Word::default()
        }];
        loop {
            self.skip_space_and_newlines()?;
            if self.reserved() == Some("]]") {
                self.pos += 2;
                break;
            }
            let Some(c) = self.peek() else {
                return err("a `[[` is never closed with `]]`");
            };
            let word = self.word()?;
            if word.raw.is_empty() {
                self.pos += 1;
                let text = char::from(c).to_string();
                words.push(Word {
                    raw: text.clone(),
                    value: text,
                    ..Word::default()
                });
            } else {
                words.push(word);
            }
        }
        Ok(Command::Simple(Simple {
            text: collapse(self.slice(start, self.pos)),
            words,
            redirects: Vec::new(),
        }))
    }

    fn simple(&mut self) -> Result<Option<Command>, ParseError> {
        let start = self.pos;
        let mut end = start;
        let mut words: Vec<Word> = Vec::new();
        let mut redirects = Vec::new();
        loop {
            self.skip_blanks();
            if let Some(r) = self.redirect()? {
                redirects.push(r);
                end = self.pos;
                continue;
            }
            match self.peek() {
                None | Some(b'\n' | b';' | b'&' | b'|' | b')') => break,
                Some(b'(') => {
                    if let [name] = words.as_slice()
                        && redirects.is_empty()
                    {
                        self.pos += 1;
                        self.skip_blanks();
                        if self.peek() != Some(b')') {
                            return err("unexpected `(`");
                        }
                        self.pos += 1;
                        let name = name.value.clone();
                        return self.function_body(start, name).map(Some);
                    }
                    return err("unexpected `(`");
                }
                Some(_) => {}
            }
            let word = self.word()?;
            if word.raw.is_empty() {
                return err("unexpected character");
            }
            words.push(word);
            end = self.pos;
        }
        if words.is_empty() && redirects.is_empty() {
            return Ok(None);
        }
        Ok(Some(Command::Simple(Simple {
            text: collapse(self.slice(start, end)),
            words,
            redirects,
        })))
    }

    fn redirect(&mut self) -> Result<Option<Redirect>, ParseError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let has_fd = self.pos > start;
        const OPS: [(&str, RedirectKind); 13] = [
            ("&>>", RedirectKind::Write),
            ("&>", RedirectKind::Write),
            ("<<<", RedirectKind::HereString),
            ("<<-", RedirectKind::HereDoc),
            ("<<", RedirectKind::HereDoc),
            ("<>", RedirectKind::Write),
            ("<&", RedirectKind::Duplicate),
            ("<", RedirectKind::Read),
            (">>", RedirectKind::Write),
            (">|", RedirectKind::Write),
            (">&", RedirectKind::Duplicate),
            (">", RedirectKind::Write),
            ("", RedirectKind::Read),
        ];
        let found = OPS.into_iter().find(|(op, _)| {
            !op.is_empty() && self.starts_with(op) && !(has_fd && op.starts_with('&'))
        });
        let Some((op, mut kind)) = found else {
            self.pos = start;
            return Ok(None);
        };
        // `<(` and `>(` start a process substitution, which is a word.
        if matches!(op, "<" | ">") && self.peek_at(1) == Some(b'(') {
            self.pos = start;
            return Ok(None);
        }
        self.pos += op.len();
        self.skip_blanks();
        let target = self.word()?;
        if target.raw.is_empty() {
            return err(format!("`{op}` without a target"));
        }
        if kind == RedirectKind::Duplicate
            && !target
                .value
                .trim_end_matches('-')
                .bytes()
                .all(|c| c.is_ascii_digit())
        {
            // `>& file` sends both output streams to a file.
            kind = if op == ">&" {
                RedirectKind::Write
            } else {
                RedirectKind::Read
            };
        }
        if kind == RedirectKind::HereDoc {
            self.pending.push(HereDoc {
                delimiter: target.value.clone().into_bytes(),
                strip_tabs: op == "<<-",
                expand: !target.raw.contains(['\'', '"', '\\']),
            });
        }
        Ok(Some(Redirect { kind, target }))
    }

    fn read_heredocs(&mut self) -> Result<(), ParseError> {
        for doc in std::mem::take(&mut self.pending) {
            let body_start = self.pos;
            let mut body_end = self.s.len();
            while self.pos < self.s.len() {
                let line_end = self.s[self.pos..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(self.s.len(), |n| self.pos + n);
                let mut line = &self.s[self.pos..line_end];
                if doc.strip_tabs {
                    while let [b'\t', rest @ ..] = line {
                        line = rest;
                    }
                }
                let at = self.pos;
                self.pos = (line_end + 1).min(self.s.len());
                if line == doc.delimiter.as_slice() {
                    body_end = at;
                    break;
                }
            }
            if doc.expand {
                let body = self.slice(body_start, body_end);
                let mut inner = Parser {
                    src: body,
                    s: body.as_bytes(),
                    pos: 0,
                    depth: self.depth + 1,
                    pending: Vec::new(),
                    detached: Vec::new(),
                };
                let mut piece = Piece::default();
                inner.double_quoted(&mut piece, true)?;
                self.detached.extend(piece.subs);
            }
        }
        Ok(())
    }

    fn word(&mut self) -> Result<Word, ParseError> {
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
                    piece.dynamic = true;
                    piece.value.extend_from_slice(&self.s[sub_start..self.pos]);
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
                            piece.value.push(next);
                            self.pos += 1;
                        }
                        None => piece.value.push(b'\\'),
                    }
                }
                b'\'' => {
                    self.pos += 1;
                    let Some(len) = self.s[self.pos..].iter().position(|&c| c == b'\'') else {
                        return err("a single quote is never closed");
                    };
                    piece
                        .value
                        .extend_from_slice(&self.s[self.pos..self.pos + len]);
                    self.pos += len + 1;
                }
                b'"' => {
                    self.pos += 1;
                    self.double_quoted(&mut piece, false)?;
                }
                b'`' => self.backquoted(&mut piece, false)?,
                b'$' => self.dollar(&mut piece, false)?,
                _ => {
                    piece.value.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(Word {
            raw: self.slice(start, self.pos).to_string(),
            value: String::from_utf8_lossy(&piece.value).into_owned(),
            dynamic: piece.dynamic,
            subs: piece.subs,
        })
    }

    /// `( … )` inside a word (an array value, an extended glob), kept as written.
    fn balanced(&mut self, piece: &mut Piece) -> Result<(), ParseError> {
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
            piece.value.extend_from_slice(&p.s[start..p.pos]);
            piece.absorb(scratch);
            Ok(())
        })
    }

    /// After an opening `"`, or a here-document body (`heredoc`: runs to the end, `"` is plain).
    fn double_quoted(&mut self, piece: &mut Piece, heredoc: bool) -> Result<(), ParseError> {
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
                        piece.value.push(c);
                        self.pos += 2;
                    }
                    Some(b'"') if !heredoc => {
                        piece.value.push(b'"');
                        self.pos += 2;
                    }
                    _ => {
                        piece.value.push(b'\\');
                        self.pos += 1;
                    }
                },
                Some(b'$') => self.dollar(piece, true)?,
                Some(b'`') => self.backquoted(piece, true)?,
                Some(c) => {
                    piece.value.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn backquoted(&mut self, piece: &mut Piece, in_double: bool) -> Result<(), ParseError> {
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
        piece.dynamic = true;
        piece.value.extend_from_slice(&self.s[start..self.pos]);
        Ok(())
    }

    fn dollar(&mut self, piece: &mut Piece, in_double: bool) -> Result<(), ParseError> {
        self.nested(|p| {
            let start = p.pos;
            p.pos += 1;
            match p.peek() {
                Some(b'(') => {
                    p.pos += 1;
                    if p.peek() == Some(b'(') && p.closes_as_arithmetic(p.pos + 1) {
                        p.pos += 1;
                        p.arithmetic(piece)?;
                    } else {
                        let script = p.list(Stop::Paren)?;
                        p.pos += 1;
                        piece.subs.push(script);
                    }
                }
                Some(b'{') => {
                    p.pos += 1;
                    p.parameter(piece, in_double)?;
                }
                Some(b'\'') if !in_double => {
                    p.pos += 1;
                    return p.ansi_c(piece);
                }
                Some(b'"') if !in_double => {
                    p.pos += 1;
                    return p.double_quoted(piece, false);
                }
                Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                    while p
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                    {
                        p.pos += 1;
                    }
                }
                Some(b'0'..=b'9' | b'?' | b'$' | b'#' | b'@' | b'*' | b'!' | b'-') => p.pos += 1,
                _ => {
                    piece.value.push(b'$');
                    return Ok(());
                }
            }
            piece.dynamic = true;
            piece
                .value
                .extend_from_slice(&p.s[start..p.pos.min(p.s.len())]);
            Ok(())
        })
    }

    /// After `${`, up to and including the matching `}`.
    fn parameter(&mut self, piece: &mut Piece, in_double: bool) -> Result<(), ParseError> {
        let mut scratch = Piece::default();
        loop {
            match self.peek() {
                None => return err("a `${` is never closed"),
                Some(b'}') => {
                    self.pos += 1;
                    piece.absorb(scratch);
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
    fn closes_as_arithmetic(&self, from: usize) -> bool {
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
    fn arithmetic(&mut self, piece: &mut Piece) -> Result<(), ParseError> {
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

    /// After `$'`: bash's C-style escapes, so `$'rm\x20x'` is read as bash would run it.
    fn ansi_c(&mut self, piece: &mut Piece) -> Result<(), ParseError> {
        loop {
            let Some(c) = self.peek() else {
                return err("a `$'` quote is never closed");
            };
            self.pos += 1;
            match c {
                b'\'' => return Ok(()),
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
                    if let Some(byte) = simple {
                        piece.value.push(byte);
                    } else if e == b'x' || e.is_ascii_digit() {
                        let (radix, max) = if e == b'x' { (16, 2) } else { (8, 3) };
                        let mut digits = String::new();
                        if e != b'x' {
                            digits.push(char::from(e));
                        }
                        while digits.len() < max
                            && self.peek().is_some_and(|d| char::from(d).is_digit(radix))
                        {
                            digits.push(char::from(self.peek().unwrap_or(b'0')));
                            self.pos += 1;
                        }
                        let value = u32::from_str_radix(&digits, radix).unwrap_or(0);
                        piece.value.push((value & 0xff) as u8);
                    } else {
                        piece.value.extend_from_slice(&[b'\\', e]);
                    }
                }
                _ => piece.value.push(c),
            }
        }
    }
}

fn assignment_name(value: &[u8]) -> bool {
    let name = value.strip_suffix(b"=").unwrap_or(value);
    let name = name.strip_suffix(b"+").unwrap_or(name);
    matches!(name.first(), Some(c) if c.is_ascii_alphabetic() || *c == b'_')
        && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}
