//! grep, find and ls through the real binary, on a git work tree with ignored, hidden and
//! binary files.

use super::tools::{Api, abs, nova_on, run_calls};
use crate::support::mock_llm::MockLlm;
use crate::support::nova_proc::NovaBuilder;
use serde_json::json;

/// A git work tree with ignored, hidden and binary files.
fn search_tree(builder: NovaBuilder) -> NovaBuilder {
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(builder.cwd())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        std::fs::create_dir_all(builder.cwd().join(".git")).unwrap();
    }
    builder
        .file(".gitignore", "ignored.txt\nbuild/\n")
        .file("ignored.txt", "needle in ignored\n")
        .file("build/out.txt", "needle in build\n")
        .file("build/z.rs", "fn z() {}\n")
        .file(".hidden.txt", "needle in hidden\n")
        .file(".config/x.rs", "// needle in hidden dir\n")
        .file("src/main.rs", "fn main() {\n    // needle one\n}\n")
        .file("src/lib.rs", "pub fn f() {}\n")
        .file("src/nested/deep.rs", "\n")
        .file("data.bin", b"\0\x01\x02needle binary\n")
        .file(
            "many.txt",
            "needle 1\nneedle 2\nneedle 3\nneedle 4\nneedle 5\n",
        )
        .file("ctx.txt", "zero\nbefore\nneedle ctx\nafter\nend\n")
}

#[test]
fn grep_honours_gitignore_searches_hidden_skips_binary() {
    let mock = MockLlm::start();
    let builder = search_tree(nova_on(&mock, Api::Ollama, "text-model"));
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("all", "grep", json!({"pattern": "needle"})),
            (
                "context",
                "grep",
                json!({"pattern": "needle ctx", "context": 1}),
            ),
            (
                "limited",
                "grep",
                json!({"pattern": "NEEDLE \\d", "ignoreCase": true, "limit": 2}),
            ),
            ("glob", "grep", json!({"pattern": "needle", "glob": "*.rs"})),
            (
                "literal",
                "grep",
                json!({"pattern": "needle \\d", "literal": true}),
            ),
            ("none", "grep", json!({"pattern": "no_such_text_zz"})),
            (
                "file",
                "grep",
                json!({"pattern": "needle [45]", "path": "many.txt"}),
            ),
            ("badpath", "grep", json!({"pattern": "x", "path": "nope"})),
        ],
    );
    assert_eq!(
        ran.outcome("all").ok(),
        "\
.config/x.rs:1: // needle in hidden dir
.hidden.txt:1: needle in hidden
ctx.txt:3: needle ctx
many.txt:1: needle 1
many.txt:2: needle 2
many.txt:3: needle 3
many.txt:4: needle 4
many.txt:5: needle 5
src/main.rs:2:     // needle one"
    );
    assert_eq!(
        ran.outcome("context").ok(),
        "ctx.txt-2- before\nctx.txt:3: needle ctx\nctx.txt-4- after"
    );
    let limited = ran.outcome("limited");
    assert_eq!(
        limited.ok(),
        "many.txt:1: needle 1\nmany.txt:2: needle 2\n\n[2 matches limit reached. Use limit=4 \
         for more, or refine pattern]"
    );
    assert_eq!(limited.details()["matchLimitReached"], 2);
    assert_eq!(
        ran.outcome("glob").ok(),
        ".config/x.rs:1: // needle in hidden dir\nsrc/main.rs:2:     // needle one"
    );
    assert_eq!(ran.outcome("literal").ok(), "No matches found");
    assert_eq!(ran.outcome("none").ok(), "No matches found");
    assert_eq!(
        ran.outcome("file").ok(),
        "many.txt:4: needle 4\nmany.txt:5: needle 5",
        "a single file is shown by its name"
    );
    assert_eq!(
        ran.outcome("badpath").err(),
        format!("Path not found: {}", abs(&ran.nova, "nope"))
    );
}

#[test]
fn find_globs_and_ls_listings() {
    let mock = MockLlm::start();
    let builder = search_tree(nova_on(&mock, Api::OpenAi, "text-model"))
        .file("listing/b.txt", "")
        .file("listing/A.txt", "")
        .file("listing/.dot", "")
        .file("listing/sub/x", "")
        .file("listing/Zeta/y", "")
        .file("listing/c.md", "");
    std::fs::create_dir_all(builder.cwd().join("empty")).unwrap();
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("rs", "find", json!({"pattern": "*.rs"})),
            ("dir", "find", json!({"pattern": "nested"})),
            (
                "under",
                "find",
                json!({"pattern": "**/*.rs", "path": "src"}),
            ),
            (
                "capped",
                "find",
                json!({"pattern": "*.rs", "path": "src", "limit": 2}),
            ),
            ("nomatch", "find", json!({"pattern": "*.zig"})),
            ("ls", "ls", json!({"path": "listing"})),
            ("lscap", "ls", json!({"path": "listing", "limit": 2})),
            ("empty", "ls", json!({"path": "empty"})),
            ("notdir", "ls", json!({"path": "listing/b.txt"})),
            ("lsmissing", "ls", json!({"path": "gone"})),
        ],
    );
    assert_eq!(
        ran.outcome("rs").ok(),
        ".config/x.rs\nsrc/lib.rs\nsrc/main.rs\nsrc/nested/deep.rs",
        "hidden included, ignored build/ left out"
    );
    assert_eq!(ran.outcome("dir").ok(), "src/nested/");
    assert_eq!(ran.outcome("under").ok(), "lib.rs\nmain.rs\nnested/deep.rs");
    let capped = ran.outcome("capped");
    let (shown, notice) = capped.ok().split_once("\n\n").unwrap();
    assert_eq!(
        notice,
        "[2 results limit reached. Use limit=4 for more, or refine pattern]"
    );
    let shown: Vec<&str> = shown.lines().collect();
    assert_eq!(shown.len(), 2);
    assert!(shown.iter().all(|l| l.ends_with(".rs")), "{shown:?}");
    assert_eq!(capped.details()["resultLimitReached"], 2);
    assert_eq!(
        ran.outcome("nomatch").ok(),
        "No files found matching pattern"
    );

    assert_eq!(
        ran.outcome("ls").ok(),
        ".dot\nA.txt\nb.txt\nc.md\nsub/\nZeta/"
    );
    let lscap = ran.outcome("lscap");
    assert_eq!(
        lscap.ok(),
        ".dot\nA.txt\n\n[2 entries limit reached. Use limit=4 for more]"
    );
    assert_eq!(lscap.details()["entryLimitReached"], 2);
    assert_eq!(ran.outcome("empty").ok(), "(empty directory)");
    assert_eq!(
        ran.outcome("notdir").err(),
        format!("Not a directory: {}", abs(&ran.nova, "listing/b.txt"))
    );
    assert_eq!(
        ran.outcome("lsmissing").err(),
        format!("Path not found: {}", abs(&ran.nova, "gone"))
    );
}
