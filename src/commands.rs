//! Pi's command-line answers that need no session: `--list-models [search]` prints the models
//! nova could start with as a table, `--export <file> [output]` writes a session file as an
//! HTML page. Each writes its answer on stdout and exits.

use crate::agent::Runtime;
use crate::frontend::{fatal, note};
use crate::protocol::Model;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The table Pi prints: provider, model, context, max-out, thinking, images; sorted by
/// provider then id, keeping only the models that `search` matches.
pub fn list_models(runtime: &Runtime, search: &str) -> ExitCode {
    for warning in runtime.warnings() {
        note(&format!("warning: {warning}"));
    }
    let mut out = std::io::stdout().lock();
    let models = runtime.models();
    if models.is_empty() {
        let _ = writeln!(
            out,
            "No models available: give a provider a key (its variable, `nova auth login \
             <provider>`, or models.json)."
        );
        return ExitCode::SUCCESS;
    }
    let mut rows: Vec<&Model> = models
        .iter()
        .filter(|m| fuzzy_match(search, &format!("{} {}", m.provider, m.id)))
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "No models matching \"{search}\"");
        return ExitCode::SUCCESS;
    }
    rows.sort_by(|a, b| (&a.provider, &a.id).cmp(&(&b.provider, &b.id)));
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let table: Vec<[String; 6]> = rows
        .iter()
        .map(|m| {
            [
                m.provider.clone(),
                m.id.clone(),
                tokens(m.context_window),
                tokens(m.max_tokens),
                yes_no(m.reasoning).to_owned(),
                yes_no(m.accepts_images()).to_owned(),
            ]
        })
        .collect();
    let header = [
        "provider", "model", "context", "max-out", "thinking", "images",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&table) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        if writeln!(out, "{}", cells.join("  ").trim_end()).is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// Every word of `search` appears in `text` in order, letters in between allowed (case does not
/// matter): a person's quick filter, as Pi's is. Hand-written because it is a few lines and a
/// fuzzy-matching crate would bring a scoring model nova does not use.
fn fuzzy_match(search: &str, text: &str) -> bool {
    let text = text.to_lowercase();
    search.split_whitespace().all(|word| {
        let mut rest = text.chars();
        word.to_lowercase()
            .chars()
            .all(|c| rest.by_ref().any(|t| t == c))
    })
}

/// 200000 → `200K`, 1000000 → `1M`, 1500000 → `1.5M`.
fn tokens(n: u64) -> String {
    let scaled = |unit: u64, suffix: &str| {
        if n.is_multiple_of(unit) {
            format!("{}{suffix}", n / unit)
        } else {
            format!("{:.1}{suffix}", n as f64 / unit as f64)
        }
    };
    match n {
        1_000_000.. => scaled(1_000_000, "M"),
        1_000.. => scaled(1_000, "K"),
        _ => n.to_string(),
    }
}

/// `--export <file> [output]`: the page goes to `output`, else to `nova-session-<name>.html` in
/// the current directory; stdout names the file written.
pub async fn export(file: PathBuf, output: Option<PathBuf>) -> ExitCode {
    match crate::agent::export_file(file, output).await {
        Ok(path) => {
            let _ = writeln!(std::io::stdout(), "Exported to: {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => fatal(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_read_as_pi_prints_them() {
        assert_eq!(tokens(200_000), "200K");
        assert_eq!(tokens(1_000_000), "1M");
        assert_eq!(tokens(1_048_576), "1.0M");
        assert_eq!(tokens(128_500), "128.5K");
        assert_eq!(tokens(512), "512");
    }

    #[test]
    fn search_words_match_in_order() {
        assert!(fuzzy_match("", "openai gpt-4o"));
        assert!(fuzzy_match("oai 4o", "openai gpt-4o"));
        assert!(fuzzy_match("GPT", "openai gpt-4o"));
        assert!(!fuzzy_match("4o", "openai gpt-4"));
        assert!(!fuzzy_match("sonnet", "openai gpt-4o"));
    }
}
