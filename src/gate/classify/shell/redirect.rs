//! Redirections, and the here-document bodies they announce.

use super::{HereDoc, ParseError, Parser, Piece, Redirect, RedirectKind, err};

impl Parser<'_> {
    pub(super) fn redirect(&mut self) -> Result<Option<Redirect>, ParseError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let fd = self.slice(start, self.pos).parse::<u32>().ok();
        let has_fd = self.pos > start;
        const OPS: [(&str, RedirectKind); 13] = [
            ("&>>", RedirectKind::Write),
            ("&>", RedirectKind::Write),
            ("<<<", RedirectKind::HereString),
            ("<<-", RedirectKind::HereDoc),
            ("<<", RedirectKind::HereDoc),
            ("<>", RedirectKind::Write),
            ("<&", RedirectKind::DuplicateInput),
            ("<", RedirectKind::Read),
            (">>", RedirectKind::Write),
            (">|", RedirectKind::Write),
            (">&", RedirectKind::DuplicateOutput),
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
        let duplicate = matches!(
            kind,
            RedirectKind::DuplicateInput | RedirectKind::DuplicateOutput
        );
        let literal = target
            .parts
            .iter()
            .all(|p| matches!(p, super::Part::Text { .. }));
        if duplicate
            && literal
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
        Ok(Some(Redirect { fd, kind, target }))
    }

    pub(super) fn read_heredocs(&mut self) -> Result<(), ParseError> {
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
}
