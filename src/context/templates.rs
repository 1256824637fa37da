//! Prompt templates: Markdown files whose text a `/name args` message stands for. The name is
//! the file name without `.md`; the description is the frontmatter's `description`, else the
//! body's first non-empty line (cut at 60 characters). Only a directory's own `.md` files are
//! templates, not those in its subdirectories.

use super::frontmatter::Document;
use super::resources::{Found, Location};
use super::template_args;
use crate::protocol::SourceInfo;
use std::path::Path;

/// How much of the first line a description taken from it keeps.
const DESCRIPTION_CHARS: usize = 60;

#[derive(Debug, Clone)]
pub struct Template {
    pub name: String,
    pub description: String,
    /// The text `/name` stands for, with its placeholders.
    pub body: String,
    pub info: SourceInfo,
}

/// The templates in `path` (a directory, or one file), in file-name order.
pub(super) fn load(path: &Path, location: &Location, found: &mut Found<Template>) {
    if path.is_file() {
        if is_markdown(path) {
            load_file(path, location, found);
        } else {
            found.warn(path, "not a Markdown file; not loaded as a prompt template");
        }
        return;
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) => {
            if !matches!(location, Location::Auto { .. }) {
                found.warn(path, &format!("cannot list it: {e}; no templates loaded"));
            }
            return;
        }
    };
    let mut files: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_markdown(p) && p.is_file())
        .collect();
    files.sort();
    for file in files {
        load_file(&file, location, found);
    }
}

fn is_markdown(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "md")
}

fn load_file(path: &Path, location: &Location, found: &mut Found<Template>) {
    let doc = match crate::files::safe_open::read_to_string(path)
        .map_err(|e| format!("cannot read it: {e}"))
        .and_then(|text| Document::parse(&text))
    {
        Ok(doc) => doc,
        Err(e) => return found.warn(path, &format!("{e}; not loaded")),
    };
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let description = match doc.str("description").filter(|d| !d.is_empty()) {
        Some(d) => d.to_owned(),
        None => first_line_summary(&doc.body),
    };
    found.add(
        name.clone(),
        path,
        Template {
            name,
            description,
            info: location.source_info(path),
            body: doc.body,
        },
    );
}

fn first_line_summary(body: &str) -> String {
    let Some(line) = body.split('\n').find(|l| !l.trim().is_empty()) else {
        return String::new();
    };
    let mut summary: String = line.chars().take(DESCRIPTION_CHARS).collect();
    if line.chars().count() > DESCRIPTION_CHARS {
        summary.push_str("...");
    }
    summary
}

/// `/name args` → the template's text with the arguments filled in; `None` when `text` names
/// no template.
pub fn expand(text: &str, templates: &[Template]) -> Option<String> {
    let command = text.strip_prefix('/')?;
    let end = command.find(char::is_whitespace).unwrap_or(command.len());
    let (name, args) = command.split_at(end);
    if name.is_empty() {
        return None;
    }
    let template = templates.iter().find(|t| t.name == name)?;
    let args = template_args::split(args.trim_start());
    Some(template_args::substitute(&template.body, &args))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::SourceScope;

    fn load_dir(dir: &Path) -> (Vec<Template>, Vec<String>) {
        let mut found = Found::new("prompt template");
        let location = Location::Auto {
            scope: SourceScope::Project,
            base: dir.to_path_buf(),
        };
        load(dir, &location, &mut found);
        found.into_parts()
    }

    #[test]
    fn names_descriptions_and_bodies() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("review.md"),
            "---\ndescription: Review staged changes\n---\nReview $1.\n",
        )
        .unwrap();
        let long = "x".repeat(70);
        std::fs::write(d.join("fix.md"), format!("\n\n{long}\nFix $@\n")).unwrap();
        std::fs::write(d.join("notes.txt"), "not a template").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/deep.md"), "not searched").unwrap();
        let (templates, warnings) = load_dir(d);
        assert!(warnings.is_empty(), "{warnings:?}");
        let names: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fix", "review"]);
        assert_eq!(templates[0].description, format!("{}...", &long[..60]));
        assert_eq!(templates[0].body, format!("\n\n{long}\nFix $@\n"));
        assert_eq!(templates[1].description, "Review staged changes");
        assert_eq!(templates[1].body, "Review $1.");
    }

    #[test]
    fn expansion_needs_a_known_name_at_the_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("r.md"), "---\n---\n[$1] [${@:2}]").unwrap();
        let (templates, _) = load_dir(dir.path());
        assert_eq!(expand("/r", &templates).unwrap(), "[] []");
        assert_eq!(expand("/r\n a 'b c' d", &templates).unwrap(), "[a] [b c d]");
        assert_eq!(expand("/rx a", &templates), None);
        assert_eq!(expand("/ r", &templates), None);
        assert_eq!(expand("r a", &templates), None);
    }
}
