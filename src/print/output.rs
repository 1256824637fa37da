//! Where a one-shot run's output goes. stdout carries only the answer (print mode) or JSON
//! lines (JSON mode), through the one [writer](crate::frontend::writer); stderr carries
//! progress, and only with `--verbose`.

use crate::agent::EventSink;
use crate::frontend::{self, note, writer};
use crate::protocol::{CompactionReason, Event, joined_text};
use crate::session::Header;
use serde_json::Value;
use std::io::Write;
use std::pin::Pin;

/// The longest tool-call summary `--verbose` prints.
const SUMMARY_CHARS: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The final answer's text.
    Text,
    /// Every event as a JSON line, after the session header.
    Json,
}

/// A line of one-shot output.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "nearly every line is an event: boxing would allocate once more per event"
)]
pub enum Line {
    Event(Event),
    /// Written as it is: the answer's text, or the header already encoded.
    Text(String),
}

impl writer::Line for Line {
    fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Line::Event(e) => e.encode(out),
            Line::Text(text) => out.write_all(text.as_bytes()),
        }
    }

    fn weight(&self) -> usize {
        match self {
            Line::Event(e) => e.weight(),
            Line::Text(text) => text.len(),
        }
    }

    fn absorb(&mut self, newer: &mut Line) -> bool {
        match (self, newer) {
            (Line::Event(old), Line::Event(new)) => old.absorb(new),
            _ => false,
        }
    }
}

pub type Outbox = frontend::Outbox<Line>;

/// The agent's event sink in print and JSON mode.
#[derive(Debug)]
pub struct Output {
    format: Format,
    verbose: bool,
    out: Outbox,
}

impl Output {
    pub fn new(format: Format, verbose: bool, out: Outbox) -> Self {
        Output {
            format,
            verbose,
            out,
        }
    }

    /// The session header, JSON mode's first line.
    pub fn header(&self, header: &Header) {
        if self.format != Format::Json {
            return;
        }
        match serde_json::to_string(header) {
            Ok(line) => self.out.push(Line::Text(line)),
            Err(e) => tracing::error!("cannot encode the session header: {e}"),
        }
    }

    /// The final answer (print mode only).
    pub fn answer(&self, text: &str) {
        if self.format == Format::Text {
            self.out.push(Line::Text(text.to_owned()));
        }
    }
}

impl EventSink for Output {
    fn emit(&self, event: Event) {
        if let Event::SessionError { error } = &event {
            note(&format!("the session file is incomplete: {error}"));
        } else if self.verbose {
            progress(&event);
        }
        if self.format == Format::Json {
            self.out.push(Line::Event(event));
        }
    }

    fn warn(&self, line: &str) {
        note(line);
    }

    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.out.ready())
    }
}

/// The `--verbose` line for an event, if it is one a person follows a run by.
fn progress(event: &Event) {
    match event {
        Event::ToolExecutionStart {
            tool_name, args, ..
        } => note(&format!("{tool_name} {}", summary(args))),
        Event::ToolExecutionEnd {
            tool_name,
            result,
            is_error: true,
            ..
        } => {
            let text = joined_text(&result.content);
            let first = text.lines().next().unwrap_or("");
            note(&format!("{tool_name} failed: {first}"));
        }
        Event::AutoRetryStart {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        } => note(&format!(
            "{error_message}; retrying in {:.1} s ({attempt} of {max_attempts})",
            *delay_ms as f64 / 1000.0
        )),
        Event::CompactionStart { reason } => note(match reason {
            CompactionReason::Manual => "compacting the conversation",
            CompactionReason::Threshold => {
                "compacting the conversation: the context is nearly full"
            }
            CompactionReason::Overflow => {
                "compacting the conversation: it was too long for the model"
            }
        }),
        _ => {}
    }
}

/// A tool call's arguments on one line: a bash command as it is, anything else as JSON.
fn summary(args: &Value) -> String {
    let text = match args.get("command").and_then(Value::as_str) {
        Some(command) => command.to_owned(),
        None => args.to_string(),
    };
    let line = text.replace('\n', " ");
    if line.chars().count() <= SUMMARY_CHARS {
        return line;
    }
    let cut: String = line.chars().take(SUMMARY_CHARS).collect();
    format!("{cut}…")
}
