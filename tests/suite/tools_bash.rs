//! The bash tool through the real binary: exit codes, timeouts, the working directory, and tail
//! truncation with the full output kept in a file.

use super::tools::{Api, nova_on, run_calls};
use crate::support::mock_llm::MockLlm;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

#[test]
fn bash_exit_codes_timeouts_and_empty_output() {
    let mock = MockLlm::start();
    let builder = nova_on(&mock, Api::Ollama, "text-model");
    let started = Instant::now();
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            (
                "fail",
                "bash",
                json!({"command": "echo out; echo err >&2; exit 3"}),
            ),
            (
                "slow",
                "bash",
                json!({"command": "echo started; sleep 30", "timeout": 1}),
            ),
            ("quiet", "bash", json!({"command": "true"})),
            ("pwd", "bash", json!({"command": "pwd"})),
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the timeout stopped the sleep"
    );
    assert_eq!(
        ran.outcome("fail").err(),
        "out\nerr\n\n\nCommand exited with code 3"
    );
    assert_eq!(
        ran.outcome("slow").err(),
        "started\n\n\nCommand timed out after 1 seconds"
    );
    assert_eq!(ran.outcome("quiet").ok(), "(no output)");
    let cwd = std::fs::canonicalize(ran.nova.cwd()).unwrap();
    assert_eq!(
        ran.outcome("pwd").ok(),
        format!("{}\n", cwd.display()),
        "runs in the session cwd"
    );
}

/// Splits a truncated bash result into the shown tail and the full-output file the notice names,
/// checking the notice reads `<prefix><path>]`.
fn shown_and_full_output<'a>(text: &'a str, prefix: &str) -> (&'a str, &'a str) {
    let (shown, notice) = text.rsplit_once("\n\n").unwrap();
    let path = notice
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{notice:?} does not read {prefix:?}<path>]"));
    (shown, path)
}

#[test]
fn bash_truncates_the_tail_and_saves_the_full_output() {
    let mock = MockLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let builder =
        nova_on(&mock, Api::OpenAi, "text-model").env("TMPDIR", tmp.path().display().to_string());
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("lines", "bash", json!({"command": "seq 1 30000"})),
            (
                "bytes",
                "bash",
                json!({"command": "for i in $(seq 1 1000); do printf '%099d\\n' $i; done"}),
            ),
        ],
    );

    // Over 2000 lines: the last 2000 are shown.
    let lines = ran.outcome("lines");
    let (shown, path) = shown_and_full_output(
        lines.ok(),
        "[Showing lines 28001-30000 of 30000. Full output: ",
    );
    let expected: String = (28001..=30000).map(|i| format!("{i}\n")).collect();
    assert_eq!(shown, expected);
    assert!(Path::new(path).starts_with(tmp.path()), "{path}");
    let full: String = (1..=30000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), full);
    assert_eq!(lines.details()["fullOutputPath"], path);
    assert_eq!(lines.details()["truncation"]["truncated"], true);
    assert_eq!(lines.details()["truncation"]["truncatedBy"], "lines");

    // Over 50 KB in fewer lines: whole lines from the end, up to 50 KB.
    let bytes = ran.outcome("bytes");
    let text = bytes.ok();
    let first: usize = text.lines().next().unwrap().parse().unwrap();
    let (shown, path) = shown_and_full_output(
        text,
        &format!("[Showing lines {first}-1000 of 1000 (50.0KB limit). Full output: "),
    );
    let expected: String = (first..=1000).map(|i| format!("{i:099}\n")).collect();
    assert_eq!(shown, expected);
    assert!(
        shown.len() <= 50 * 1024 && shown.len() > 50 * 1024 - 200,
        "{}",
        shown.len()
    );
    let full: String = (1..=1000).map(|i| format!("{i:099}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), full);
    assert_eq!(bytes.details()["truncation"]["truncatedBy"], "bytes");
}

#[test]
fn bash_counts_lines_as_a_person_would() {
    let mock = MockLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let builder =
        nova_on(&mock, Api::Ollama, "text-model").env("TMPDIR", tmp.path().display().to_string());
    let ran = run_calls(
        mock,
        builder,
        Api::Ollama,
        vec![
            ("limit", "bash", json!({"command": "seq 1 2000"})),
            ("over", "bash", json!({"command": "seq 1 2001"})),
            (
                "open",
                "bash",
                json!({"command": "seq 1 2001 | head -c -1"}),
            ),
            (
                "long",
                "bash",
                json!({"command": "head -c 60000 /dev/zero | tr '\\0' x; echo"}),
            ),
        ],
    );

    // A trailing newline ends the last line: 2000 lines fit the 2000-line limit.
    let limit = ran.outcome("limit");
    let expected: String = (1..=2000).map(|i| format!("{i}\n")).collect();
    assert_eq!(limit.ok(), expected);
    assert!(limit.details().is_null(), "{}", limit.details());

    // Whether or not the last line has its newline, 2001 lines are 2001, and the last 2000 shown.
    for id in ["over", "open"] {
        let over = ran.outcome(id);
        let (shown, _) =
            shown_and_full_output(over.ok(), "[Showing lines 2-2001 of 2001. Full output: ");
        assert!(shown.starts_with("2\n3\n"), "{id}: {shown:.20}");
        assert_eq!(over.details()["truncation"]["totalLines"], 2001, "{id}");
        assert_eq!(over.details()["truncation"]["outputLines"], 2000, "{id}");
    }

    // The length of a cut last line leaves out its newline.
    let long = ran.outcome("long");
    let (shown, _) = shown_and_full_output(
        long.ok(),
        "[Showing last 50.0KB of line 1 (line is 58.6KB). Full output: ",
    );
    assert_eq!(shown, format!("{}\n", "x".repeat(50 * 1024 - 1)));
}

#[test]
fn bash_reports_the_whole_output_to_programs_as_pi_does() {
    let mock = MockLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let builder =
        nova_on(&mock, Api::OpenAi, "text-model").env("TMPDIR", tmp.path().display().to_string());
    let ran = run_calls(
        mock,
        builder,
        Api::OpenAi,
        vec![
            ("lines", "bash", json!({"command": "seq 1 30000"})),
            (
                "big",
                "bash",
                json!({"command": "head -c 3000000 /dev/zero | tr '\\0' a; echo"}),
            ),
            ("fail", "bash", json!({"command": "echo out; exit 3"})),
            ("slow", "bash", json!({"command": "sleep 5", "timeout": 1})),
        ],
    );
    let structured = |id| ran.outcome(id).end["result"]["structuredContent"].clone();

    // The model saw the last 2,000 lines; a program gets all of them.
    let lines = structured("lines");
    let full: String = (1..=30000).map(|i| format!("{i}\n")).collect();
    assert_eq!(lines["output"], full);
    assert_eq!(lines["truncated"], false);
    assert_eq!(lines["exit_code"], 0);
    assert!(lines.get("full_output_path").is_none(), "{lines}");
    assert!(lines["wall_time_seconds"].as_f64().unwrap() >= 0.0);

    // Beyond 1 MiB: the first and last halves around what was left out, and the file's path.
    let big = structured("big");
    let output = big["output"].as_str().unwrap();
    let omitted = 3_000_001 - 1024 * 1024;
    let note = format!("\n\n[... {omitted} bytes omitted ...]\n\n");
    let (head, tail) = output.split_once(&note).unwrap();
    assert_eq!(head, "a".repeat(512 * 1024));
    assert_eq!(tail, format!("{}\n", "a".repeat(512 * 1024 - 1)));
    assert_eq!(big["truncated"], true);
    let path = big["full_output_path"].as_str().unwrap();
    assert!(Path::new(path).starts_with(tmp.path()), "{path}");

    // A failing command reports its code too; one that never exited reports nothing.
    let fail = ran.outcome("fail");
    assert!(fail.is_error());
    assert_eq!(structured("fail")["exit_code"], 3);
    assert_eq!(structured("fail")["output"], "out\n");
    assert!(structured("slow").is_null());
    // The conversation keeps what the model saw, not this.
    assert!(
        fail.sent.get("structuredContent").is_none(),
        "{}",
        fail.sent
    );
}
