//! `nova import pi`: a Pi user's agent dir brought into nova's by the real binary, with HOME,
//! `PI_CODING_AGENT_DIR` and `NOVA_AGENT_DIR` pointed at temporary directories. Nothing nova
//! already has is overwritten, credentials come only with `--auth` (private, nova's own entry
//! winning), `--dry-run` writes nothing, and the imported setup works.

use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A home with a Pi agent dir in it; nova's agent dir is named but not created.
struct Homes {
    home: tempfile::TempDir,
    /// Whether the Pi dir is named by `PI_CODING_AGENT_DIR` rather than found at `~/.pi/agent`.
    pi_env: bool,
}

impl Homes {
    fn new(pi_env: bool) -> Self {
        Homes {
            home: tempfile::tempdir().unwrap(),
            pi_env,
        }
    }

    fn pi(&self) -> PathBuf {
        if self.pi_env {
            self.home.path().join("elsewhere").join("pi-agent")
        } else {
            self.home.path().join(".pi").join("agent")
        }
    }

    fn nova(&self) -> PathBuf {
        self.home.path().join("nova-agent")
    }

    /// Runs `nova <args>`: exit code and stderr.
    fn run(&self, args: &[&str]) -> (Option<i32>, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nova"));
        cmd.args(args)
            .env("HOME", self.home.path())
            .env("NOVA_AGENT_DIR", self.nova())
            .env_remove("PI_CODING_AGENT_DIR")
            .current_dir(self.home.path());
        if self.pi_env {
            cmd.env("PI_CODING_AGENT_DIR", self.pi());
        }
        let out = cmd.output().unwrap();
        assert!(out.stdout.is_empty(), "{out:?}");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A Pi agent dir with one of everything nova imports.
    fn fill_pi(&self) {
        let pi = self.pi();
        write(
            &pi.join("models.json"),
            &json!({"providers": {"local": {"baseUrl": "http://127.0.0.1:9/v1",
                "api": "openai-completions", "apiKey": "none",
                "models": [{"id": "m1"}]}}})
            .to_string(),
        );
        // An unknown key, a skill listed relative to Pi's dir outside what is copied, and one
        // inside it.
        write(
            &pi.join("settings.json"),
            &json!({"theme": "dark", "piOnly": {"nested": [1, 2]},
                    "skills": ["./mine", "skills/review"]})
            .to_string(),
        );
        write(
            &pi.join("trust.json"),
            &json!({"/somewhere/project": true}).to_string(),
        );
        write(&pi.join("AGENTS.md"), "global rules from pi\n");
        write(
            &pi.join("skills/review/SKILL.md"),
            "---\nname: review\ndescription: Review a change\n---\nLook closely.\n",
        );
        let script = pi.join("skills/review/run.sh");
        write(&script, "#!/bin/sh\necho hi\n");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("run.sh", pi.join("skills/review/alias.sh")).unwrap();
        write(
            &pi.join("mine/SKILL.md"),
            "---\nname: mine\ndescription: Listed by settings\n---\nMine.\n",
        );
        write(
            &pi.join("prompts/fix.md"),
            "---\ndescription: Fix it\n---\nFix $1\n",
        );
        write(
            &pi.join("extensions/hello.ts"),
            "export default function () {}\n",
        );
        write(
            &pi.join("auth.json"),
            &json!({"openai": {"type": "api_key", "key": "sk-pi-openai-secret"},
                    "anthropic": {"type": "oauth", "access": "at-pi-secret",
                                  "refresh": "rt-pi-secret", "expires": 1}})
            .to_string(),
        );
    }
}

/// Every file and entry comes over as Pi had it (the unknown settings key kept, a relative
/// path made absolute so it still names Pi's file, a script still executable, a symlink still
/// a symlink), auth.json stays behind without `--auth`, nova then loads the skills and the
/// template, and a second run changes nothing and says why for each item.
#[test]
fn import_copies_everything_once() {
    let homes = Homes::new(false);
    homes.fill_pi();
    let (pi, nova) = (homes.pi(), homes.nova());
    let (code, stderr) = homes.run(&["import", "pi"]);
    assert_eq!(code, Some(0), "{stderr}");
    for file in [
        "models.json",
        "trust.json",
        "AGENTS.md",
        "skills/review/SKILL.md",
        "skills/review/run.sh",
        "prompts/fix.md",
        "extensions/hello.ts",
    ] {
        assert_eq!(read(&nova.join(file)), read(&pi.join(file)), "{file}");
        assert!(stderr.contains("copied"), "{stderr}");
    }
    assert_eq!(mode(&nova.join("skills/review/run.sh")), 0o755);
    assert_eq!(
        std::fs::read_link(nova.join("skills/review/alias.sh")).unwrap(),
        Path::new("run.sh")
    );
    let settings: Value = serde_json::from_str(&read(&nova.join("settings.json"))).unwrap();
    assert_eq!(settings["theme"], "dark");
    assert_eq!(settings["piOnly"], json!({"nested": [1, 2]}));
    let mine = Path::new(settings["skills"][0].as_str().unwrap());
    assert_eq!(
        mine.canonicalize().unwrap(),
        pi.join("mine").canonicalize().unwrap()
    );
    assert_eq!(settings["skills"][1], "skills/review");
    assert!(!nova.join("auth.json").exists());
    assert!(
        stderr.contains("skipped auth.json: credentials are imported only with --auth"),
        "{stderr}"
    );
    assert!(
        stderr.contains("imported 7 item(s)") && stderr.contains("skipped 1"),
        "{stderr}"
    );
    assert!(!stderr.contains("secret"), "{stderr}");

    // What was imported is what nova now uses (the extension is not loaded: that would
    // install the extension host).
    let cwd = tempfile::tempdir().unwrap();
    let mut session = Nova::builder()
        .dirs(&nova, cwd.path())
        .args(["--no-extensions"])
        .spawn();
    let answer = session.request_ok(json!({"type": "get_commands"}));
    let names: Vec<&str> = answer["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for name in ["fix", "skill:review", "skill:mine"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    drop(session);

    let before = read(&nova.join("settings.json"));
    let (code, again) = homes.run(&["import", "pi"]);
    assert_eq!(code, Some(0), "{again}");
    assert!(!again.contains("copied"), "{again}");
    for what in [
        "models.json",
        "settings.json",
        "trust.json",
        "AGENTS.md",
        "skills/review",
        "prompts/fix.md",
        "extensions/hello.ts",
        "auth.json",
    ] {
        assert!(
            again.contains(&format!("skipped {what}: ")),
            "{what}: {again}"
        );
    }
    assert!(again.contains("imported 0 item(s)"), "{again}");
    assert_eq!(read(&nova.join("settings.json")), before);
}

/// A file or entry nova already has is kept as it is, and the rest still comes over.
#[test]
fn novas_own_files_are_left_alone() {
    let homes = Homes::new(true);
    homes.fill_pi();
    let nova = homes.nova();
    write(
        &nova.join("settings.json"),
        "{\"defaultModel\": \"mine\"}\n",
    );
    write(&nova.join("skills/review/SKILL.md"), "nova's own review\n");
    let (code, stderr) = homes.run(&["import", "pi"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        read(&nova.join("settings.json")),
        "{\"defaultModel\": \"mine\"}\n"
    );
    assert_eq!(
        read(&nova.join("skills/review/SKILL.md")),
        "nova's own review\n"
    );
    assert!(!nova.join("skills/review/run.sh").exists());
    assert!(
        stderr.contains(&format!(
            "skipped settings.json: nova already has {}",
            nova.join("settings.json").display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("skipped skills/review: nova already has"),
        "{stderr}"
    );
    assert_eq!(
        read(&nova.join("prompts/fix.md")),
        read(&homes.pi().join("prompts/fix.md"))
    );
}

/// `--auth` adds Pi's credentials for the providers nova has none for, in a private file,
/// keeps nova's own, warns that an OAuth login is now shared, and echoes no secret.
#[test]
fn auth_comes_only_when_asked_private_and_second() {
    let homes = Homes::new(true);
    homes.fill_pi();
    std::fs::set_permissions(
        homes.pi().join("auth.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let nova = homes.nova();
    write(
        &nova.join("auth.json"),
        &json!({"openai": {"type": "api_key", "key": "sk-nova-own"}}).to_string(),
    );
    let (code, stderr) = homes.run(&["import", "pi", "--auth"]);
    assert_eq!(code, Some(0), "{stderr}");
    let auth: Value = serde_json::from_str(&read(&nova.join("auth.json"))).unwrap();
    assert_eq!(auth["openai"]["key"], "sk-nova-own");
    assert_eq!(auth["anthropic"]["refresh"], "rt-pi-secret");
    assert_eq!(mode(&nova.join("auth.json")), 0o600);
    assert!(
        stderr.contains("skipped the auth.json entry of openai: nova already has a credential"),
        "{stderr}"
    );
    assert!(
        stderr.contains("copied the auth.json entry of anthropic (an OAuth login"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("secret") && !stderr.contains("sk-"),
        "{stderr}"
    );

    // With no auth.json of nova's yet, the new one is private too.
    let fresh = Homes::new(false);
    write(
        &fresh.pi().join("auth.json"),
        &json!({"groq": {"type": "api_key", "key": "gsk-x"}}).to_string(),
    );
    let (code, stderr) = fresh.run(&["import", "pi", "--auth"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(mode(&fresh.nova().join("auth.json")), 0o600);
    let auth: Value = serde_json::from_str(&read(&fresh.nova().join("auth.json"))).unwrap();
    assert_eq!(auth["groq"]["key"], "gsk-x");
}

/// `--dry-run` says what it would copy and writes nothing, not even nova's dir.
#[test]
fn dry_run_writes_nothing() {
    let homes = Homes::new(false);
    homes.fill_pi();
    let (code, stderr) = homes.run(&["import", "pi", "--auth", "--dry-run"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!homes.nova().exists(), "{stderr}");
    for what in [
        "models.json",
        "skills/review",
        "the auth.json entry of openai",
    ] {
        assert!(stderr.contains(&format!("would copy {what}")), "{stderr}");
    }
    assert!(stderr.contains("--dry-run: nothing written"), "{stderr}");
}

/// A missing Pi dir, or a malformed command, is a clear error that writes nothing.
#[test]
fn bad_requests_are_clear_errors() {
    let homes = Homes::new(true);
    let (code, stderr) = homes.run(&["import", "pi"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "there is no Pi agent dir at {}",
            homes.pi().display()
        )),
        "{stderr}"
    );
    for (args, says) in [
        (&["import"][..], "say what to import from"),
        (&["import", "claude"][..], "not from `claude`"),
        (
            &["import", "pi", "--force"][..],
            "`--force` is not an option",
        ),
    ] {
        let (code, stderr) = homes.run(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert!(!homes.nova().exists());
}
