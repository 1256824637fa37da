//! Where a one-shot run's output goes. stdout carries only the answer (print mode) or JSON
//! lines (JSON mode); stderr carries progress, and only with `--verbose`.

use crate::agent::EventSink;
use crate::protocol::{CompactionReason, Event, joined_text};
use serde::Serialize;
use serde_json::Value;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// The longest tool-call summary `--verbose` prints.
const SUMMARY_CHARS: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The final answer's text.
    Text,
    /// Every event as a JSON line, after the session header.
    Json,
}

/// The agent's event sink in print and JSON mode.
#[derive(Debug)]
pub struct Output {
    format: Format,
    verbose: bool,
    /// stdout was closed (a reader such as `head` has had enough): stop writing to it.
    closed: AtomicBool,
}

impl Output {
    pub fn new(format: Format, verbose: bool) -> Self {
        Output {
            format,
            verbose,
            closed: AtomicBool::new(false),
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn verbose(&self) -> bool {
        self.verbose
    }

    /// One JSON line on stdout (JSON mode only).
    pub fn json_line(&self, value: &impl Serialize) {
        if self.format != Format::Json {
            return;
        }
        match serde_json::to_vec(value) {
            Ok(mut line) => {
                line.push(b'\n');
                self.stdout(&line);
            }
            Err(e) => tracing::error!("cannot encode an event: {e}"),
        }
    }

    /// The final answer (print mode only).
    pub fn answer(&self, text: &str) {
        if self.format == Format::Text {
            self.stdout(format!("{text}\n").as_bytes());
        }
    }

    /// Written whole and flushed, so a reader sees each line as it happens. Blocking here, as
    /// the RPC writer does, pauses the agent while the reader is behind.
    fn stdout(&self, bytes: &[u8]) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let mut out = std::io::stdout().lock();
        if out.write_all(bytes).and_then(|()| out.flush()).is_err() {
            self.closed.store(true, Ordering::Relaxed);
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
        self.json_line(&event);
    }
}

/// A line on stderr, prefixed like nova's other messages there.
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "nova: {text}");
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
