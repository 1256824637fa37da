//! Skills: instructions the model loads on demand. Each is a Markdown file with a `name` and a
//! `description` in its frontmatter; the system prompt lists them, and `/skill:name rest` in a
//! user message puts one's body into the message (both as Pi does, so skills written for Pi
//! work unchanged).
//!
//! In a skills directory every top-level `.md` file is a skill, and below it every `SKILL.md`;
//! a directory holding a `SKILL.md` is one skill and is not searched further (its other files
//! are the skill's scripts and references). Dot-entries and `node_modules` are skipped and
//! `.gitignore`, `.ignore` and `.fdignore` are honoured.

use super::frontmatter::Document;
use super::resources::{Found, Location};
use crate::protocol::SourceInfo;
use ignore::WalkBuilder;
use std::path::{Path, PathBuf};

/// The Agent Skills specification's limits.
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 1024;

#[derive(Debug, Clone)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The skill's Markdown file.
    pub path: PathBuf,
    /// Its directory: the skill's relative references start there.
    pub base_dir: PathBuf,
    /// `disable-model-invocation: true`: only `/skill:name` brings it in, the model is not told.
    pub hidden: bool,
    pub info: SourceInfo,
}

/// Every skill under `path` (a directory, or one file), in file-name order.
pub(super) fn load(path: &Path, location: &Location, found: &mut Found<Skill>) {
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "md") {
            load_file(path, true, location, found);
        } else {
            found.warn(path, "not a Markdown file; not loaded as a skill");
        }
        return;
    }
    if !path.is_dir() {
        if !matches!(location, Location::Auto { .. }) {
            found.warn(path, "no such file or directory; no skills loaded from it");
        }
        return;
    }
    if path.join("SKILL.md").is_file() {
        return load_file(&path.join("SKILL.md"), true, location, found);
    }
    let walk = WalkBuilder::new(path)
        .hidden(true)
        .parents(false)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .add_custom_ignore_filename(".fdignore")
        .follow_links(true)
        .sort_by_file_name(Ord::cmp)
        // A directory that is itself a skill holds that skill's material, not more skills.
        .filter_entry(|e| {
            e.file_name() != "node_modules"
                && (e.depth() < 2
                    || e.file_name() == "SKILL.md"
                    || !e.path().parent().is_some_and(is_skill_dir))
        })
        .build();
    for entry in walk.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let file = entry.path();
        if entry.depth() == 1 && file.extension().is_some_and(|e| e == "md") {
            load_file(file, false, location, found);
        } else if entry.depth() > 1 && entry.file_name() == "SKILL.md" {
            load_file(file, true, location, found);
        }
    }
}

fn is_skill_dir(dir: &Path) -> bool {
    dir.join("SKILL.md").is_file()
}

/// A `declared` file is meant to be a skill, so what is wrong with it is reported; any other
/// Markdown file in a skills directory is a skill only if it has a description.
fn load_file(path: &Path, declared: bool, location: &Location, found: &mut Found<Skill>) {
    let text = match crate::files::safe_open::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return found.warn(path, &format!("cannot read it: {e}")),
    };
    let doc = match Document::parse(&text) {
        Ok(d) => d,
        Err(e) if declared => return found.warn(path, &format!("{e}; not loaded")),
        Err(_) => return,
    };
    let description = doc.str("description").filter(|d| !d.trim().is_empty());
    let Some(description) = description else {
        if declared {
            found.warn(path, "the frontmatter has no description; not loaded");
        }
        return;
    };
    if description.chars().count() > MAX_DESCRIPTION {
        found.warn(
            path,
            &format!("the description is longer than {MAX_DESCRIPTION} characters"),
        );
    }
    let base_dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let name = doc
        .str("name")
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| {
            base_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    if let Some(problem) = name_problem(&name) {
        found.warn(path, &format!("skill name \"{name}\" {problem}"));
    }
    found.add(
        name.clone(),
        path,
        Skill {
            description: description.to_owned(),
            hidden: doc.is_true("disable-model-invocation"),
            info: location.source_info(path),
            path: path.to_path_buf(),
            base_dir,
            name,
        },
    );
}

/// What breaks the specification's naming rule; such a skill still loads, as in Pi.
fn name_problem(name: &str) -> Option<String> {
    if name.chars().count() > MAX_NAME {
        return Some(format!("is longer than {MAX_NAME} characters"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Some("should use only a-z, 0-9 and hyphens".to_owned());
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Some("should not start or end with a hyphen or have two in a row".to_owned());
    }
    None
}

/// The system prompt's list of the skills the model may load itself, or `None` when there are
/// none. The list is the Agent Skills format (`<available_skills>`), which models are trained on.
pub fn prompt_block(skills: &[Skill]) -> Option<String> {
    let visible: Vec<&Skill> = skills.iter().filter(|s| !s.hidden).collect();
    if visible.is_empty() {
        return None;
    }
    let mut out = String::from(
        "# Skills\n\nThese skills hold instructions for particular kinds of work. When a task \
         matches a skill's description, read its file with the read tool before you start, and \
         follow it. Paths in a skill are relative to the directory its file is in; use absolute \
         paths in tool calls.\n\n<available_skills>\n",
    );
    for skill in visible {
        out.push_str(&format!(
            "  <skill>\n    <name>{}</name>\n    <description>{}</description>\n    \
             <location>{}</location>\n  </skill>\n",
            escape_xml(&skill.name),
            escape_xml(&skill.description),
            escape_xml(&skill.path.to_string_lossy()),
        ));
    }
    out.push_str("</available_skills>");
    Some(out)
}

fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// `/skill:name rest` → the skill's body in Pi's `<skill>` element, `rest` after a blank line.
/// `None` when `text` is no skill command or names no known skill. The file is read now, so an
/// edited skill takes effect without a restart; an unreadable one is reported and the text
/// goes to the model as it is.
pub fn expand(text: &str, skills: &[Skill]) -> Option<String> {
    let command = text.strip_prefix("/skill:")?;
    let (name, rest) = command.split_once(' ').unwrap_or((command, ""));
    let skill = skills.iter().find(|s| s.name == name)?;
    let body = match crate::files::safe_open::read_to_string(&skill.path)
        .map_err(|e| e.to_string())
        .and_then(|text| Document::parse(&text))
    {
        Ok(doc) => doc.body,
        Err(e) => {
            tracing::warn!("skill {}: {e}", skill.path.display());
            return None;
        }
    };
    let mut out = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
        skill.name,
        skill.path.display(),
        skill.base_dir.display(),
        body.trim()
    );
    let rest = rest.trim();
    if !rest.is_empty() {
        out.push_str("\n\n");
        out.push_str(rest);
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::SourceScope;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn skill_md(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo {name}.\n")
    }

    fn load_dir(dir: &Path) -> (Vec<Skill>, Vec<String>) {
        let mut found = Found::new("skill");
        let location = Location::Auto {
            scope: SourceScope::User,
            base: dir.to_path_buf(),
        };
        load(dir, &location, &mut found);
        found.into_parts()
    }

    #[test]
    fn root_markdown_files_and_nested_skill_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &d.join("top.md"),
            "---\nname: top\ndescription: A top-level file\n---\nTop",
        );
        write(
            &d.join("notes.md"),
            "No frontmatter: not a skill, and not reported",
        );
        write(&d.join("a/b/SKILL.md"), &skill_md("deep", "Deep one"));
        write(
            &d.join("a/b/c/SKILL.md"),
            &skill_md("inner", "Inside a skill"),
        );
        write(
            &d.join("a/b/other.md"),
            &skill_md("other", "Material, not a skill"),
        );
        write(
            &d.join("a/README.md"),
            &skill_md("readme", "Only SKILL.md counts below the root"),
        );
        write(
            &d.join(".hidden/SKILL.md"),
            &skill_md("hidden", "Dot dirs are skipped"),
        );
        write(
            &d.join("node_modules/x/SKILL.md"),
            &skill_md("nm", "Skipped"),
        );
        write(&d.join("ignored/SKILL.md"), &skill_md("ign", "Ignored"));
        write(&d.join(".gitignore"), "ignored/\n");
        let (skills, warnings) = load_dir(d);
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["deep", "top"]);
        assert!(warnings.is_empty(), "{warnings:?}");
        let top = &skills[1];
        assert_eq!(top.base_dir, d);
        assert_eq!(top.description, "A top-level file");
    }

    #[test]
    fn a_directory_with_skill_md_is_one_skill() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("SKILL.md"), &skill_md("solo", "Alone"));
        write(
            &dir.path().join("extra.md"),
            &skill_md("extra", "Not loaded"),
        );
        let (skills, _) = load_dir(dir.path());
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].name, "solo");
    }

    #[test]
    fn problems_are_reported_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(&d.join("nodesc/SKILL.md"), "---\nname: nodesc\n---\nbody");
        write(&d.join("badyaml/SKILL.md"), "---\nname: [x\n---\nbody");
        write(
            &d.join("Bad_Name/SKILL.md"),
            "---\ndescription: Named by its directory\n---\n",
        );
        write(
            &d.join("hid/SKILL.md"),
            "---\ndescription: d\ndisable-model-invocation: true\n---\n",
        );
        let (skills, warnings) = load_dir(d);
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Bad_Name", "hid"]);
        assert!(skills[1].hidden);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        let joined = warnings.join("\n");
        for needle in [
            "nodesc/SKILL.md: the frontmatter has no description; not loaded",
            "badyaml/SKILL.md: invalid frontmatter",
            "Bad_Name/SKILL.md: skill name \"Bad_Name\" should use only a-z, 0-9 and hyphens",
        ] {
            assert!(joined.contains(needle), "{needle} missing:\n{joined}");
        }
    }

    #[test]
    fn name_rules() {
        assert_eq!(name_problem("pdf-tools-2"), None);
        assert!(name_problem("-x").is_some());
        assert!(name_problem("a--b").is_some());
        assert!(name_problem(&"a".repeat(65)).is_some());
    }

    #[test]
    fn prompt_block_escapes_and_leaves_out_hidden_skills() {
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join("a/SKILL.md"),
            &skill_md("a", "Use <this> & \"that\""),
        );
        write(
            &dir.path().join("b/SKILL.md"),
            "---\nname: b\ndescription: secret\ndisable-model-invocation: true\n---\n",
        );
        let (skills, _) = load_dir(dir.path());
        let block = prompt_block(&skills).unwrap();
        assert!(
            block.contains("<description>Use &lt;this&gt; &amp; &quot;that&quot;</description>")
        );
        assert!(block.contains(&format!(
            "<location>{}</location>",
            dir.path().join("a/SKILL.md").display()
        )));
        assert!(!block.contains("secret"));
        assert_eq!(prompt_block(&skills[1..]), None);
    }

    #[test]
    fn expansion_is_pis_skill_element() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pdf/SKILL.md");
        write(&file, &skill_md("pdf", "PDFs"));
        let (skills, _) = load_dir(dir.path());
        let head = format!(
            "<skill name=\"pdf\" location=\"{}\">\nReferences are relative to {}.\n\n\
             # pdf\n\nDo pdf.\n</skill>",
            file.display(),
            dir.path().join("pdf").display()
        );
        assert_eq!(expand("/skill:pdf", &skills).unwrap(), head);
        assert_eq!(
            expand("/skill:pdf   read a.pdf\n  ", &skills).unwrap(),
            format!("{head}\n\nread a.pdf")
        );
        assert_eq!(expand("/skill:nope x", &skills), None);
        assert_eq!(expand("/skill:pdf\nx", &skills), None);
        assert_eq!(expand("please /skill:pdf", &skills), None);
    }
}
