//! The documentation's links hold: every relative link in README.md and docs/*.md names a file
//! of the repository that exists, and every `#anchor` names a heading of the page it points at
//! (as GitHub renders its id). The README stays a landing page.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// What one page offers to links and asks of other pages.
struct Page {
    anchors: HashSet<String>,
    links: Vec<String>,
}

/// GitHub's heading id: lower case, spaces to hyphens, punctuation dropped, repeats numbered.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn read_page(path: &Path) -> Page {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut anchors = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut links = Vec::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(&text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { level, .. }) if level <= HeadingLevel::H6 => {
                heading = Some(String::new())
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let base = slug(&h);
                    let n = seen.entry(base.clone()).or_insert(0);
                    anchors.insert(if *n == 0 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    });
                    *n += 1;
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) => links.push(dest_url.to_string()),
            _ => {}
        }
    }
    Page { anchors, links }
}

/// `base/rel` with `.` and `..` folded, or None when it climbs out of the repository.
fn join_inside(root: &Path, base: &Path, rel: &str) -> Option<PathBuf> {
    let mut parts: Vec<Component> = base.strip_prefix(root).ok()?.components().collect();
    for c in Path::new(rel).components() {
        match c {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            other => parts.push(other),
        }
    }
    Some(root.join(parts.iter().collect::<PathBuf>()))
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ has no pages");
    files.extend(docs);

    let pages: HashMap<PathBuf, Page> = files.iter().map(|f| (f.clone(), read_page(f))).collect();
    let mut broken = Vec::new();
    for (file, page) in &pages {
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        for link in &page.links {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                let dir = file.parent().unwrap_or(root);
                match join_inside(root, dir, path) {
                    Some(t) => t,
                    // Outside the repository (the shared spec beside the checkout): not ours.
                    None => continue,
                }
            };
            if !target.exists() {
                broken.push(format!("{name}: {link}: no such file"));
                continue;
            }
            if let Some(anchor) = anchor {
                let anchors = match pages.get(&target) {
                    Some(p) => p.anchors.clone(),
                    None if target.extension().is_some_and(|e| e == "md") => {
                        read_page(&target).anchors
                    }
                    None => continue,
                };
                if !anchors.contains(anchor) {
                    broken.push(format!("{name}: {link}: no heading with that id"));
                }
            }
        }
    }
    broken.sort();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_landing_page() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines; topics belong in docs/"
    );
}
