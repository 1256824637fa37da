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

mod redirect;
mod word;

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
    /// Ended by `&`: bash runs it in the background.
    pub(super) background: bool,
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
    /// The word piece by piece, with what bash's later expansions will do to each piece.
    pub(super) parts: Vec<Part>,
    /// Scripts of `$( )`, backticks, `<( )` and `>( )` inside the word.
    pub(super) subs: Vec<Script>,
}

impl Word {
    /// An operator inside `[[ ]]`, which is a word there but never expands.
    fn literal(text: &str) -> Word {
        Word {
            raw: text.into(),
            value: text.into(),
            parts: vec![Part::Text {
                text: text.into(),
                quoted: true,
            }],
            subs: Vec::new(),
        }
    }
}

/// A stretch of a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Part {
    /// Text after quote removal. Unquoted text still goes through brace and pathname expansion;
    /// quoted (or escaped) text reaches the command as it is.
    Text { text: String, quoted: bool },
    /// `$name` or `${name}`, also the special ones (`$1`, `$@`, `$#`, …).
    Param { name: String, quoted: bool },
    /// Any other expansion, as written.
    Expansion {
        source: String,
        quoted: bool,
        kind: Expansion,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expansion {
    /// `<( )` or `>( )`: the command receives a `/dev/fd/N` path to a pipe.
    Process,
    /// `$( )`, backquotes, `$(( ))`, `${x:-y}`, …
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirectKind {
    Read,
    Write,
    /// `<&N`: read from another descriptor.
    DuplicateInput,
    /// `>&N`
    DuplicateOutput,
    HereDoc,
    HereString,
}

#[derive(Debug)]
pub(super) struct Redirect {
    /// The descriptor written before the operator (`3<<<x`); none means the operator's default.
    pub(super) fd: Option<u32>,
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
        background: false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    End,
    Paren,
    Brace,
    CaseItem,
}

/// A word being read: its parts so far, with text kept as bytes until the word is complete,
/// since `$'\xNN'` escapes may produce bytes that are only valid UTF-8 together.
#[derive(Default)]
struct Piece {
    value: Vec<u8>,
    parts: Vec<PiecePart>,
    subs: Vec<Script>,
}

enum PiecePart {
    Text(Vec<u8>, bool),
    Done(Part),
}

impl Piece {
    fn text(&mut self, bytes: &[u8], quoted: bool) {
        self.value.extend_from_slice(bytes);
        match self.parts.last_mut() {
            Some(PiecePart::Text(text, q)) if *q == quoted => text.extend_from_slice(bytes),
            _ => self.parts.push(PiecePart::Text(bytes.to_vec(), quoted)),
        }
    }

    fn param(&mut self, source: &[u8], name: String, quoted: bool) {
        self.value.extend_from_slice(source);
        self.parts
            .push(PiecePart::Done(Part::Param { name, quoted }));
    }

    fn expansion(&mut self, source: &[u8], quoted: bool, kind: Expansion) {
        self.value.extend_from_slice(source);
        self.parts.push(PiecePart::Done(Part::Expansion {
            source: String::from_utf8_lossy(source).into_owned(),
            quoted,
            kind,
        }));
    }

    fn expands(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, PiecePart::Done(_)))
    }

    fn parts(&mut self) -> Vec<Part> {
        std::mem::take(&mut self.parts)
            .into_iter()
            .map(|part| match part {
                PiecePart::Text(text, quoted) => Part::Text {
                    text: String::from_utf8_lossy(&text).into_owned(),
                    quoted,
                },
                PiecePart::Done(part) => part,
            })
            .collect()
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
                    Some(b'&') => {
                        p.pos += 1;
                        if let Some(last) = script.pipelines.last_mut() {
                            last.background = true;
                        }
                    }
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
        let mut words = vec![Word::literal("[[")];
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
                words.push(Word::literal(&char::from(c).to_string()));
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
}
