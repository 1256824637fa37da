//! read, write and edit through the real binary, on real temp trees and generated images.

use super::tools::{Api, abs, gradient, nova_on, png, run_calls, run_turns, size_of};
use crate::support::mock_llm::MockLlm;
use image::ImageFormat;
use serde_json::json;
use std::io::Cursor;

#[test]
fn read_text_with_offsets_limits_and_notices() {
    let mock = MockLlm::start();
    let lines: Vec<String> = (1..=2500).map(|i| format!("line {i}")).collect();
    let builder = nova_on(&mock, Api::OpenAi, "text-model").file("notes.txt", lines.join("\n"));
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            (
                "window",
                "read",
                json!({"path": "notes.txt", "offset": 2, "limit": 3}),
            ),
            ("whole", "read", json!({"path": "notes.txt"})),
            ("tail", "read", json!({"path": "notes.txt", "offset": 2498})),
            ("at", "read", json!({"path": "@notes.txt", "limit": "1"})),
            ("past", "read", json!({"path": "notes.txt", "offset": 3000})),
            ("missing", "read", json!({"path": "missing.txt"})),
        ],
    );
    assert_eq!(
        ran.outcome("window").ok(),
        "line 2\nline 3\nline 4\n\n[2496 more lines in file. Use offset=5 to continue.]"
    );

    let whole = ran.outcome("whole");
    let text = whole.ok();
    assert!(text.starts_with("line 1\nline 2\n"), "{text}");
    assert!(
        text.ends_with(
            "\nline 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"
        ),
        "{}",
        &text[text.len() - 200..]
    );
    assert_eq!(whole.details()["truncation"]["truncatedBy"], "lines");

    // Pi 1.6 hands programs the text the model was shown; a failed read has none.
    assert_eq!(whole.end["result"]["structuredContent"], text);
    assert!(
        ran.outcome("past").end["result"]
            .get("structuredContent")
            .is_none()
    );

    assert_eq!(ran.outcome("tail").ok(), "line 2498\nline 2499\nline 2500");
    assert_eq!(
        ran.outcome("at").ok(),
        "line 1\n\n[2499 more lines in file. Use offset=2 to continue.]"
    );
    assert_eq!(
        ran.outcome("past").err(),
        "Offset 3000 is beyond end of file (2500 lines total)"
    );
    assert_eq!(
        ran.outcome("missing").err(),
        format!(
            "ENOENT: no such file or directory, access '{}'",
            abs(&ran.nova, "missing.txt")
        )
    );
}

#[test]
fn read_an_image_gives_text_then_the_image() {
    let mock = MockLlm::start();
    let bytes = png(64, 48);
    let jpeg = {
        let mut out = Vec::new();
        gradient(40, 30)
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Jpeg)
            .unwrap();
        out
    };
    // Detected by content, not by name.
    let builder = nova_on(&mock, Api::Ollama, "vision-model")
        .file("shot.bin", &bytes)
        .file("photo.png", &jpeg)
        .file("wide.png", png(3000, 1000));
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("r", "read", json!({"path": "shot.bin"})),
            ("jpeg", "read", json!({"path": "photo.png"})),
            ("wide", "read", json!({"path": "wide.png"})),
        ],
    );
    let out = ran.outcome("r");
    assert_eq!(out.image("image/png"), bytes, "a small PNG is sent as is");
    assert_eq!(out.text(), "Read image file [image/png]");
    assert_eq!(out.sent["content"], "Read image file [image/png]");
    assert_eq!(out.sent["images"], json!([out.image_data()]));

    // And an image with its note, as Pi 1.6 hands programs a read image.
    assert_eq!(
        out.end["result"]["structuredContent"],
        json!({"type": "image", "data": out.image_data(), "mimeType": "image/png",
               "note": "Read image file [image/png]"})
    );

    let out = ran.outcome("jpeg");
    assert_eq!(out.image("image/jpeg"), jpeg);
    assert_eq!(out.text(), "Read image file [image/jpeg]");

    let out = ran.outcome("wide");
    let (w, h) = size_of(&out.image("image/png"));
    assert_eq!(w, 2000);
    assert!(h == 666 || h == 667, "{w}x{h}");
    assert_eq!(
        out.text(),
        format!(
            "Read image file [image/png]\n[Image: original 3000x1000, displayed at {w}x{h}. \
             Multiply coordinates by 1.50 to map to original image.]"
        )
    );
    assert_eq!(out.sent["images"], json!([out.image_data()]));
}

#[test]
fn write_creates_directories_and_overwrites() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "text-model").file("old.txt", "old contents\n");
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            (
                "new",
                "write",
                json!({"path": "deep/er/new.txt", "content": "hello\nworld\n"}),
            ),
            (
                "over",
                "write",
                json!({"path": "old.txt", "content": "new"}),
            ),
        ],
    );
    assert_eq!(
        ran.outcome("new").ok(),
        "Successfully wrote 12 bytes to deep/er/new.txt"
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("deep/er/new.txt")).unwrap(),
        "hello\nworld\n"
    );
    assert_eq!(
        ran.outcome("over").ok(),
        "Successfully wrote 3 bytes to old.txt"
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("old.txt")).unwrap(),
        "new"
    );
}

#[test]
fn edit_single_and_multiple_replacements_with_diffs_and_errors() {
    let mock = MockLlm::start();
    let original = "fn a() {}\nfn b() {}\nfn b() {}\nfn c() {}\n";
    let builder = nova_on(&mock, Api::OpenAi, "text-model")
        .file("src/lib.rs", original)
        .file("quotes.txt", "let s = \u{201c}hi\u{201d};   \nnext\n")
        .file("dos.txt", "one\r\ntwo\r\nthree\r\n");
    let ran = run_turns(
        mock,
        builder,
        Api::OpenAi,
        vec![
            vec![(
                "single",
                "edit",
                json!({"path": "src/lib.rs", "oldText": "fn a() {}", "newText": "fn a2() {}"}),
            )],
            vec![(
                "multi",
                "edit",
                json!({"path": "src/lib.rs", "edits": [
                    {"oldText": "fn c() {}", "newText": "fn c2() {}"},
                    {"oldText": "fn a2() {}", "newText": "fn a3() {}\n// added"},
                ]}),
            )],
            vec![
                (
                    "absent",
                    "edit",
                    json!({"path": "src/lib.rs", "oldText": "fn zzz() {}", "newText": "x"}),
                ),
                (
                    "twice",
                    "edit",
                    json!({"path": "src/lib.rs", "oldText": "fn b() {}", "newText": "x"}),
                ),
                (
                    "second",
                    "edit",
                    json!({"path": "src/lib.rs", "edits": [
                        {"oldText": "fn a3() {}", "newText": "x"},
                        {"oldText": "nowhere", "newText": "y"},
                    ]}),
                ),
                (
                    "fuzzy",
                    "edit",
                    json!({"path": "quotes.txt", "oldText": "let s = \"hi\";", "newText": "let s = \"ho\";"}),
                ),
                (
                    "crlf",
                    "edit",
                    json!({"path": "dos.txt", "oldText": "two\nthree", "newText": "2\n3"}),
                ),
                (
                    "nofile",
                    "edit",
                    json!({"path": "nope.rs", "oldText": "a", "newText": "b"}),
                ),
            ],
        ],
    );
    let file = ran.nova.cwd().join("src/lib.rs");

    let single = ran.outcome("single");
    assert_eq!(
        single.ok(),
        "Successfully replaced 1 block(s) in src/lib.rs."
    );
    assert_eq!(single.details()["firstChangedLine"], 1);
    let diff = single.details()["diff"].as_str().unwrap();
    assert!(
        diff.contains("-1 fn a() {}") && diff.contains("+1 fn a2() {}"),
        "{diff}"
    );

    let multi = ran.outcome("multi");
    assert_eq!(
        multi.ok(),
        "Successfully replaced 2 block(s) in src/lib.rs."
    );
    assert_eq!(multi.details()["firstChangedLine"], 1);
    let diff = multi.details()["diff"].as_str().unwrap();
    for line in [
        "-1 fn a2() {}",
        "+1 fn a3() {}",
        "+2 // added",
        "-4 fn c() {}",
        "+5 fn c2() {}",
    ] {
        assert!(diff.contains(line), "{line:?} in\n{diff}");
    }

    let after = "fn a3() {}\n// added\nfn b() {}\nfn b() {}\nfn c2() {}\n";
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after);
    assert_eq!(
        ran.outcome("absent").err(),
        "Could not find the exact text in src/lib.rs. The old text must match exactly including \
         all whitespace and newlines."
    );
    assert_eq!(
        ran.outcome("twice").err(),
        "Found 2 occurrences of the text in src/lib.rs. The text must be unique. Please provide \
         more context to make it unique."
    );
    assert!(
        ran.outcome("second")
            .err()
            .starts_with("Could not find edits[1] in src/lib.rs."),
        "{}",
        ran.outcome("second").end
    );
    assert_eq!(ran.outcome("nofile").err(), "File not found: nope.rs");
    assert_eq!(
        ran.outcome("fuzzy").ok(),
        "Successfully replaced 1 block(s) in quotes.txt."
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("quotes.txt")).unwrap(),
        "let s = \"ho\";\nnext\n",
        "a fuzzy match writes the file back normalised"
    );
    assert_eq!(
        ran.outcome("crlf").ok(),
        "Successfully replaced 1 block(s) in dos.txt."
    );
    assert_eq!(
        std::fs::read_to_string(ran.nova.cwd().join("dos.txt")).unwrap(),
        "one\r\n2\r\n3\r\n",
        "CRLF line endings are kept"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        after,
        "failed edits change nothing, not even the first of several"
    );
}
