//! The YAML block that may open a skill or prompt-template file:
//!
//! ```text
//! ---
//! name: pdf-tools
//! description: Extract text from PDF files.
//! ---
//! The body.
//! ```
//!
//! Split as Pi splits it, so a file means the same to both: line endings and a BOM are
//! normalised first, the block runs from the opening `---` to the next line that starts with
//! `---`, and the body after a block is trimmed (without a block it is the whole text).

use yaml_rust2::{Yaml, YamlLoader};

/// A file's frontmatter fields and its body.
#[derive(Debug)]
pub struct Document {
    fields: Yaml,
    pub body: String,
}

impl Document {
    /// `Err` when the block is not valid YAML.
    pub fn parse(text: &str) -> Result<Document, String> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let Some((yaml, body)) = split(&text) else {
            return Ok(Document {
                fields: Yaml::Null,
                body: text,
            });
        };
        let docs =
            YamlLoader::load_from_str(yaml).map_err(|e| format!("invalid frontmatter: {e}"))?;
        Ok(Document {
            fields: docs.into_iter().next().unwrap_or(Yaml::Null),
            body: body.trim().to_owned(),
        })
    }

    /// A string field; anything else (absent, a number, a list) counts as absent.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.fields[key].as_str()
    }

    /// True only for a YAML boolean `true`.
    pub fn is_true(&self, key: &str) -> bool {
        self.fields[key].as_bool() == Some(true)
    }
}

/// The YAML between the fences and the text after them, or `None` without a closed block.
fn split(text: &str) -> Option<(&str, &str)> {
    if !text.starts_with("---") {
        return None;
    }
    let end = 3 + text[3..].find("\n---")?;
    let yaml = text.get(4..end).unwrap_or("");
    Some((yaml, &text[end + 4..]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_trimmed_body() {
        let doc = Document::parse(
            "\u{feff}---\r\nname: pdf\r\ndescription: Read PDFs\r\nx: 3\r\n\
             disable-model-invocation: true\r\n---\r\n\r\nBody line\r\n\r\n",
        )
        .unwrap();
        assert_eq!(doc.str("name"), Some("pdf"));
        assert_eq!(doc.str("description"), Some("Read PDFs"));
        assert_eq!(doc.str("x"), None);
        assert_eq!(doc.str("missing"), None);
        assert!(doc.is_true("disable-model-invocation"));
        assert!(!doc.is_true("name"));
        assert_eq!(doc.body, "Body line");
    }

    #[test]
    fn without_a_closed_block_the_whole_text_is_the_body() {
        let doc = Document::parse("Just text\n").unwrap();
        assert_eq!(doc.body, "Just text\n");
        assert_eq!(doc.str("name"), None);
        let doc = Document::parse("---\nname: x\nno end\n").unwrap();
        assert_eq!(doc.body, "---\nname: x\nno end\n");
        let doc = Document::parse("---\n---\nbody").unwrap();
        assert_eq!(doc.body, "body");
    }

    #[test]
    fn invalid_yaml_is_an_error() {
        let e = Document::parse("---\nname: [unclosed\n---\nbody").unwrap_err();
        assert!(e.starts_with("invalid frontmatter"), "{e}");
    }
}
