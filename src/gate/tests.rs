#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sandbox::resolve_for_write;
use std::path::PathBuf;

/// A workspace with a git repository, an agent dir and a directory outside both, all real.
struct World {
    _dir: tempfile::TempDir,
    cwd: PathBuf,
    outside: PathBuf,
    sandbox: Sandbox,
    rules: classify::Gate,
    memory: Memory,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let cwd = base.join("work");
        let agent = base.join("agent");
        std::fs::create_dir_all(cwd.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(&agent).unwrap();
        let sandbox = Sandbox::workspace(&cwd, &agent);
        World {
            _dir: dir,
            cwd,
            // Outside every writable root (the cwd and the temp dirs); a write there is checked,
            // never made.
            outside: PathBuf::from("/nonexistent-nova-test/home"),
            sandbox,
            rules: classify::Gate::default(),
            memory: Memory::default(),
        }
    }

    fn decide(&self, approval: Approval, request: &Request) -> Decision {
        decide(
            request,
            &Session {
                approval,
                bash: &self.rules,
                sandbox: &self.sandbox,
                memory: &self.memory,
            },
        )
    }

    fn bash(&self, approval: Approval, command: &str, unsandboxed: bool) -> Decision {
        self.decide(
            approval,
            &Request::Bash {
                command,
                unsandboxed,
            },
        )
    }

    fn write(&self, approval: Approval, path: &Path) -> Decision {
        let target = resolve_for_write(path);
        self.decide(approval, &Request::Write { target: &target })
    }

    /// Answers "always" `approved` for what `decision` asked.
    fn always(&mut self, decision: Decision, approved: bool) {
        let Decision::Ask(question) = decision else {
            panic!("expected a question, got {decision:?}");
        };
        let class = question.class.expect("the question can be answered always");
        self.memory.remember(&class, approved);
    }
}

fn asks(decision: &Decision) -> bool {
    matches!(decision, Decision::Ask(_))
}

fn class_of(decision: &Decision) -> Option<Class> {
    match decision {
        Decision::Ask(q) => q.class.clone(),
        _ => None,
    }
}

#[test]
fn always_allowing_a_flagged_command_covers_that_command_and_nothing_more() {
    let mut w = World::new();
    let first = w.bash(Approval::Auto, "rm -rf build", false);
    assert_eq!(class_of(&first).unwrap().label(), "`rm -rf build`");
    w.always(first, true);
    assert!(matches!(
        w.bash(Approval::Auto, "rm -rf build", false),
        Decision::Run
    ));
    // Also inside a longer command whose other parts do not ask.
    assert!(matches!(
        w.bash(Approval::Auto, "echo start && rm -rf build", false),
        Decision::Run
    ));
    for other in [
        "rm -rf build2",
        "rm -rf build /",
        "rm -rf build; sudo reboot",
        "rm -rf build > /dev/sda",
        "rm -rf $DIR",
    ] {
        assert!(asks(&w.bash(Approval::Auto, other, false)), "{other}");
    }
    // Leaving the sandbox is an escalation: it asks, and cannot be answered "always".
    let out = w.bash(Approval::Auto, "rm -rf build", true);
    assert!(asks(&out) && class_of(&out).is_none(), "{out:?}");
    let plain = w.bash(Approval::Auto, "ls", true);
    assert!(asks(&plain) && class_of(&plain).is_none(), "{plain:?}");
}

#[test]
fn a_command_known_only_at_run_time_cannot_be_answered_always() {
    let w = World::new();
    let d = w.bash(Approval::Auto, "rm -rf \"$TARGET\"", false);
    assert!(asks(&d) && class_of(&d).is_none(), "{d:?}");
    let d = w.bash(Approval::Auto, "rm -rf build; $CMD", false);
    assert!(asks(&d) && class_of(&d).is_none(), "{d:?}");
}

#[test]
fn always_rejecting_refuses_the_same_command_without_asking() {
    let mut w = World::new();
    let first = w.bash(Approval::Auto, "git push --force", false);
    w.always(first, false);
    assert!(matches!(
        w.bash(Approval::Auto, "git push --force", false),
        Decision::Refuse(Refusal::Remembered)
    ));
    assert!(asks(&w.bash(
        Approval::Auto,
        "git push --force origin",
        false
    )));
}

#[test]
fn deny_rules_win_over_a_remembered_answer() {
    let mut w = World::new();
    let first = w.bash(Approval::Auto, "rm -rf build", false);
    w.always(first, true);
    w.rules = classify::Gate::new(&classify::Rules {
        deny: vec!["rm *".into()],
        ..classify::Rules::default()
    })
    .unwrap();
    assert!(matches!(
        w.bash(Approval::Auto, "rm -rf build", false),
        Decision::Refuse(Refusal::Denied { .. })
    ));
}

#[test]
fn always_allowing_a_write_covers_its_root_but_never_protected_paths_or_outside() {
    let mut w = World::new();
    let notes = w.cwd.join("notes.txt");
    let first = w.write(Approval::Ask, &notes);
    assert_eq!(class_of(&first).unwrap(), Class::WritesUnder(w.cwd.clone()));
    w.always(first, true);
    assert!(matches!(
        w.write(Approval::Ask, &w.cwd.join("src/lib.rs")),
        Decision::Run
    ));
    for escalation in [
        w.cwd.join(".git/hooks/pre-commit"),
        w.cwd.join(".git/config"),
        w.cwd.join(".nova/settings.json"),
        w.outside.join(".profile"),
    ] {
        let d = w.write(Approval::Ask, &escalation);
        assert!(
            asks(&d) && class_of(&d).is_none(),
            "{}: {d:?}",
            escalation.display()
        );
    }
}

#[test]
fn read_only_refuses_every_change_and_every_mcp_call() {
    let w = World::new();
    let mcp = Request::Tool {
        source: Source::Mcp,
        name: "mcp__fs__write_file",
        args: "{}",
        rules: Verdict::Run,
    };
    for request in [
        Request::Bash {
            command: "ls",
            unsandboxed: false,
        },
        Request::Write {
            target: &w.cwd.join("a.txt"),
        },
        mcp,
    ] {
        assert!(
            matches!(
                w.decide(Approval::ReadOnly, &request),
                Decision::Refuse(Refusal::ReadOnly)
            ),
            "{request:?}"
        );
    }
    assert!(matches!(
        w.decide(Approval::ReadOnly, &Request::Read),
        Decision::Run
    ));
}

#[test]
fn ask_mode_asks_before_every_mcp_call_and_remembers_per_tool() {
    let mut w = World::new();
    let call = |name| Request::Tool {
        source: Source::Mcp,
        name,
        args: "{}",
        rules: Verdict::Run,
    };
    assert!(matches!(
        w.decide(Approval::Auto, &call("mcp__fs__write_file")),
        Decision::Run
    ));
    let first = w.decide(Approval::Ask, &call("mcp__fs__write_file"));
    w.always(first, true);
    assert!(matches!(
        w.decide(Approval::Ask, &call("mcp__fs__write_file")),
        Decision::Run
    ));
    assert!(asks(&w.decide(Approval::Ask, &call("mcp__fs__move_file"))));
}

#[test]
fn the_users_own_command_only_meets_the_deny_rules() {
    let mut w = World::new();
    let user = |command| Request::UserBash { command };
    assert!(matches!(
        w.decide(Approval::ReadOnly, &user("rm -rf build")),
        Decision::Run
    ));
    w.rules = classify::Gate::new(&classify::Rules {
        deny: vec!["curl *".into()],
        ..classify::Rules::default()
    })
    .unwrap();
    assert!(matches!(
        w.decide(Approval::Auto, &user("curl x")),
        Decision::Refuse(Refusal::Denied { .. })
    ));
    assert!(matches!(
        w.decide(Approval::Auto, &user("$c x")),
        Decision::Refuse(Refusal::Unchecked { .. })
    ));
}

#[test]
fn the_memory_keeps_a_bounded_number_of_answers() {
    let mut memory = Memory::default();
    for i in 0..2000 {
        memory.remember(
            &Class::Tool {
                name: format!("t{i}"),
                reason: "r".into(),
            },
            true,
        );
    }
    let first = Class::Tool {
        name: "t0".into(),
        reason: "r".into(),
    };
    let last = Class::Tool {
        name: "t1999".into(),
        reason: "r".into(),
    };
    assert_eq!(memory.recall(&first), None);
    assert_eq!(memory.recall(&last), Some(true));
}
