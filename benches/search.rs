//! Times the `grep` and `find` tools on a generated tree of 50,000+ files, next to `rg` and `fd`
//! when they are installed. Run with `cargo bench --bench search` (or `scripts/bench-search.sh`,
//! which installs them first). Prints a table of medians; the target is within 1.5x of `rg`.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use nova::protocol::joined_text;
use nova::tools::{Tool, ToolContext};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const TOP_DIRS: usize = 50;
const SUB_DIRS: usize = 20;
const FILES_PER_DIR: usize = 50;
const RUNS: usize = 7;
const RARE: &str = "NEEDLE_7f3a";

/// 50 × 20 × 50 = 50,000 searched files of 20–80 lines of code-like text, plus ignored ones
/// (a `target/` tree and `*.tmp` files) that both tools must skip, and a few hidden files.
fn generate(root: &Path) -> usize {
    std::fs::create_dir(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n*.tmp\n").unwrap();
    let mut count = 0;
    for top in 0..TOP_DIRS {
        for sub in 0..SUB_DIRS {
            let dir = root.join(format!("crate_{top:02}/src/mod_{sub:02}"));
            std::fs::create_dir_all(&dir).unwrap();
            for file in 0..FILES_PER_DIR {
                let id = (top * SUB_DIRS + sub) * FILES_PER_DIR + file;
                let ext = ["rs", "ts", "py", "md", "txt"][id % 5];
                std::fs::write(dir.join(format!("file_{id}.{ext}")), body(id)).unwrap();
                count += 1;
            }
        }
        let target = root.join(format!("crate_{top:02}/target"));
        std::fs::create_dir_all(&target).unwrap();
        for i in 0..20 {
            std::fs::write(target.join(format!("out_{i}.rs")), body(i + 7)).unwrap();
        }
        std::fs::write(root.join(format!("crate_{top:02}/scratch.tmp")), body(3)).unwrap();
        std::fs::write(root.join(format!("crate_{top:02}/.env")), body(top)).unwrap();
    }
    count
}

fn body(id: usize) -> String {
    let lines = 20 + id % 61;
    let mut s = String::new();
    for l in 0..lines {
        match (id + l) % 4 {
            0 => s.push_str(&format!("fn handle_{l}(x: u32) -> u32 {{ x * {id} }}\n")),
            1 => s.push_str(&format!(
                "    // comment {id} on line {l} with some prose in it\n"
            )),
            2 => s.push_str(&format!("    let value_{l} = compute({id}, \"{l}\");\n")),
            _ => s.push_str("}\n"),
        }
    }
    if id.is_multiple_of(997) {
        s.push_str(&format!("const MARK: &str = \"{RARE}\";\n"));
    }
    s
}

/// A name, the tool call, and the program and arguments it is compared with.
type Case<'a> = (&'a str, Tool, Value, Option<(&'a str, Vec<&'a str>)>);

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn time_tool(
    rt: &tokio::runtime::Runtime,
    tool: Tool,
    root: &Path,
    args: Value,
) -> (Duration, String) {
    let ctx = ToolContext {
        cwd: root.to_path_buf(),
        cancel: CancellationToken::new(),
        on_update: Arc::new(|_| {}),
        sandbox: Arc::new(nova::sandbox::Sandbox::off()),
        outputs: Arc::default(),
        write_target: None,
        editor: None,
        terminal: None,
        call_id: String::new(),
        env: Default::default(),
    };
    let mut summary = String::new();
    let mut times = Vec::new();
    for run in 0..=RUNS {
        let start = Instant::now();
        let out = rt.block_on(tool.execute(args.clone(), ctx.clone()));
        let elapsed = start.elapsed();
        assert!(!out.is_error, "{}", joined_text(&out.content));
        // The first run warms the page cache for everyone.
        if run > 0 {
            times.push(elapsed);
        }
        let text = joined_text(&out.content);
        summary = format!("{} lines", text.lines().count());
    }
    (median(times), summary)
}

/// `None` when the program is not installed. Output is piped and read, as a consumer would:
/// `rg` notices when stdout is /dev/null and stops at the first match.
fn time_command(program: &str, args: &[&str]) -> Option<(Duration, String)> {
    Command::new(program).arg("--version").output().ok()?;
    let mut times = Vec::new();
    let mut summary = String::new();
    for run in 0..=RUNS {
        let start = Instant::now();
        let out = Command::new(program).args(args).output().ok()?;
        let elapsed = start.elapsed();
        if run > 0 {
            times.push(elapsed);
        }
        summary = format!(
            "{} lines",
            out.stdout.iter().filter(|&&b| b == b'\n').count()
        );
    }
    Some((median(times), summary))
}

fn fd_program() -> Option<&'static str> {
    ["fd", "fdfind"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok())
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let start = Instant::now();
    let files = generate(root);
    println!(
        "tree: {files} searched files (+ ignored and hidden ones) in {:.1}s at {}; median of {RUNS} runs\n",
        start.elapsed().as_secs_f64(),
        root.display()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let root_s = root.to_str().unwrap();
    let fd = fd_program();

    let common = r"fn handle_\d+";
    let cases: Vec<Case> = vec![
        (
            "grep rare literal",
            Tool::Grep,
            json!({"pattern": RARE, "limit": 1000}),
            Some(("rg", vec!["-n", "--hidden", RARE, root_s])),
        ),
        (
            "grep regex, all matches",
            Tool::Grep,
            json!({"pattern": common, "limit": 10_000_000}),
            Some(("rg", vec!["-n", "--hidden", common, root_s])),
        ),
        (
            "grep regex, limit 100 (default)",
            Tool::Grep,
            json!({"pattern": common}),
            Some(("rg", vec!["-n", "--hidden", common, root_s])),
        ),
        (
            "grep -i, glob *.rs",
            Tool::Grep,
            json!({"pattern": "COMPUTE", "ignoreCase": true, "glob": "*.rs", "limit": 10_000_000}),
            Some((
                "rg",
                vec!["-n", "--hidden", "-i", "-g", "*.rs", "COMPUTE", root_s],
            )),
        ),
        (
            "find *.rs, all results",
            Tool::Find,
            json!({"pattern": "*.rs", "limit": 10_000_000}),
            fd.map(|p| (p, vec!["--glob", "--hidden", "*.rs", root_s])),
        ),
        (
            "find *.rs, limit 1000 (default)",
            Tool::Find,
            json!({"pattern": "*.rs"}),
            fd.map(|p| (p, vec!["--glob", "--hidden", "*.rs", root_s])),
        ),
        (
            "find rare name",
            Tool::Find,
            json!({"pattern": "file_4242.*"}),
            fd.map(|p| (p, vec!["--glob", "--hidden", "file_4242.*", root_s])),
        ),
    ];

    println!(
        "{:<34} {:>10} {:>14} {:>10} {:>14} {:>7}",
        "case", "nova ms", "nova output", "other ms", "other output", "ratio"
    );
    for (name, tool, args, other) in cases {
        let (nova, nova_out) = time_tool(&rt, tool, root, args);
        let other = other.and_then(|(program, args)| {
            time_command(program, &args).map(|(t, out)| (program, t, out))
        });
        match other {
            Some((program, t, out)) => println!(
                "{name:<34} {:>10} {nova_out:>14} {:>10} {out:>14} {:>6.2}x",
                ms(nova),
                format!("{program} {}", ms(t)),
                nova.as_secs_f64() / t.as_secs_f64()
            ),
            None => println!(
                "{name:<34} {:>10} {nova_out:>14} {:>10} {:>14} {:>7}",
                ms(nova),
                "-",
                "(not installed)",
                "-"
            ),
        }
    }
}
