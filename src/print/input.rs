//! The prompts of a one-shot run, built from the command line as Pi builds them: piped stdin,
//! the `@path` attachments and the first prompt argument make the first prompt; every further
//! argument is a prompt of its own, sent after the previous run ends.

use crate::attach::{self, Attached, Data};
use crate::protocol::ContentBlock;
use std::io::{IsTerminal, Read};
use std::path::Path;

/// One user message to run.
#[derive(Debug)]
pub struct Prompt {
    pub text: String,
    pub images: Vec<ContentBlock>,
}

/// Everything on stdin, trimmed, when it is not a terminal; `None` when that is empty.
pub fn piped_stdin() -> Option<String> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        return None;
    }
    let mut bytes = Vec::new();
    stdin.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The prompts for `args` (prompt texts and `@path` attachments, in any order). `Err` names a
/// file that cannot be attached, or says there is nothing to run; both are usage errors.
pub fn prompts(args: &[String], stdin: Option<String>, cwd: &Path) -> Result<Vec<Prompt>, String> {
    let mut attached = String::new();
    let mut images = Vec::new();
    let mut texts = Vec::new();
    for arg in args {
        match arg.strip_prefix('@') {
            Some(path) => attach_file(path, cwd, &mut attached, &mut images)?,
            None => texts.push(arg.clone()),
        }
    }
    let mut texts = texts.into_iter();
    let rest = format!("{attached}{}", texts.next().unwrap_or_default());
    // Pi glues stdin straight onto what follows; a blank line keeps a piped document and the
    // request after it apart.
    let first_text = match stdin {
        Some(stdin) if rest.is_empty() => stdin,
        Some(stdin) => format!("{stdin}\n\n{rest}"),
        None => rest,
    };
    if first_text.is_empty() && images.is_empty() {
        return Err("nothing to run: give a prompt, an @file, or pipe text into nova".to_owned());
    }
    let mut prompts = vec![Prompt {
        text: first_text,
        images,
    }];
    prompts.extend(texts.map(|text| Prompt {
        text,
        images: Vec::new(),
    }));
    Ok(prompts)
}

/// Adds one `@path` file: text inside a `<file name="…">` element, or an image block (through
/// the attachment policy: shrunk to what a provider takes) with an element naming it and saying
/// how it was shrunk. Empty files are skipped.
fn attach_file(
    raw: &str,
    cwd: &Path,
    text: &mut String,
    images: &mut Vec<ContentBlock>,
) -> Result<(), String> {
    let path = crate::files::path::resolve(raw, cwd);
    let shown = path.display();
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot attach @{raw} ({shown}): {e}"))?;
    if bytes.is_empty() {
        return Ok(());
    }
    if !attach::is_image(&bytes) {
        let content = String::from_utf8_lossy(&bytes);
        let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
        text.push_str(&format!("<file name=\"{shown}\">\n{content}\n</file>\n"));
        return Ok(());
    }
    let attached = attach::count(images.len() + 1)
        .and_then(|()| attach::image(Data::Bytes(bytes), None, &path, attach::Oversize::Shrink));
    let note = match attached {
        Ok(Attached { block, resized }) => {
            images.push(block);
            match resized {
                Some((original, sent)) => format!("[Image: original {original}, sent at {sent}]"),
                None => String::new(),
            }
        }
        // Like Pi: the model hears that the image could not be used, and the run goes on.
        Err(e) => e.to_string(),
    };
    text.push_str(&format!("<file name=\"{shown}\">{note}</file>\n"));
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn texts(prompts: &[Prompt]) -> Vec<&str> {
        prompts.iter().map(|p| p.text.as_str()).collect()
    }

    #[test]
    fn stdin_files_and_the_first_argument_make_the_first_prompt() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "\u{feff}alpha").unwrap();
        std::fs::write(dir.path().join("empty.txt"), "").unwrap();
        let args: Vec<String> = ["one", "@a.txt", "two", "@empty.txt"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let file = format!(
            "<file name=\"{}\">\nalpha\n</file>\n",
            dir.path().join("a.txt").display()
        );
        let p = prompts(&args, Some("piped".into()), dir.path()).unwrap();
        assert_eq!(texts(&p), [format!("piped\n\n{file}one").as_str(), "two"]);
        let p = prompts(&args, None, dir.path()).unwrap();
        assert_eq!(texts(&p), [format!("{file}one").as_str(), "two"]);
        let p = prompts(&args[..1], Some("piped".into()), dir.path()).unwrap();
        assert_eq!(texts(&p), ["piped\n\none"]);
        let p = prompts(&[], Some("only stdin".into()), dir.path()).unwrap();
        assert_eq!(texts(&p), ["only stdin"]);
    }

    #[test]
    fn missing_files_and_nothing_at_all_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let e = prompts(&["@nope.txt".into()], None, dir.path()).unwrap_err();
        assert!(e.starts_with("cannot attach @nope.txt ("), "{e}");
        let e = prompts(&["@empty".into()], None, dir.path()).unwrap_err();
        assert!(e.contains("@empty"), "{e}");
        std::fs::write(dir.path().join("empty"), "").unwrap();
        let e = prompts(&["@empty".into()], None, dir.path()).unwrap_err();
        assert!(e.starts_with("nothing to run"), "{e}");
    }
}
