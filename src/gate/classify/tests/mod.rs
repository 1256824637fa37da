#![allow(clippy::unwrap_used)]

mod disguised;
mod table;
mod unseen;

use super::*;
use disguised::DISGUISED;
use serde_json::json;
use table::FLAGGED;

/// The tests write rules as the settings do; each check compiles them as loading settings does.
fn classify(command: &str, rules: &Rules) -> Verdict {
    super::classify(command, &Gate::new(rules).unwrap())
}

#[test]
fn the_built_in_list() {
    let rules = Rules::default();
    let mut wrong = Vec::new();
    for (command, flagged) in FLAGGED.iter().chain(DISGUISED) {
        let verdict = classify(command, &rules);
        if matches!(verdict, Verdict::Ask { .. }) != *flagged {
            wrong.push(format!("{command:?}: {verdict:?}"));
        }
    }
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
    assert!(FLAGGED.len() + DISGUISED.len() >= 300);
}

fn rules(value: Value) -> Rules {
    Rules::from_settings(Some(&value)).unwrap()
}

#[derive(Debug, PartialEq)]
enum V {
    Run,
    Ask,
    Deny(&'static str),
    Unchecked,
}

fn verdict(command: &str, rules: &Rules) -> V {
    match classify(command, rules) {
        Verdict::Run => V::Run,
        Verdict::Ask { .. } => V::Ask,
        Verdict::Unchecked { .. } => V::Unchecked,
        Verdict::Deny { rule } => V::Deny(
            [
                "rm -rf *",
                "*git push*",
                "curl *",
                "sudo rm *",
                "echo unterminated*",
                "git push*",
                "=curl *",
            ]
            .into_iter()
            .find(|r| *r == rule)
            .unwrap_or_else(|| panic!("denied by an unexpected rule: {rule}")),
        ),
    }
}

#[test]
fn rules_from_settings() {
    let cases: &[(Value, &str, V)] = &[
        // deny beats allow, and reaches into substitutions and wrappers
        (
            json!({"deny": ["rm -rf *"], "allow": ["rm -rf *"]}),
            "rm -rf target",
            V::Deny("rm -rf *"),
        ),
        (
            json!({"deny": ["rm -rf *"]}),
            "echo $(rm   -rf  x)",
            V::Deny("rm -rf *"),
        ),
        (
            json!({"deny": ["rm -rf *"]}),
            "sudo rm -rf x",
            V::Deny("rm -rf *"),
        ),
        (
            json!({"deny": ["rm -rf *"]}),
            "bash -c 'rm -rf x'",
            V::Deny("rm -rf *"),
        ),
        (
            json!({"deny": ["*git push*"]}),
            "cd x && git push",
            V::Deny("*git push*"),
        ),
        (
            json!({"deny": ["curl *"], "mode": "never"}),
            "curl x",
            V::Deny("curl *"),
        ),
        (
            json!({"deny": ["sudo rm *"], "mode": "always"}),
            "sudo rm a",
            V::Deny("sudo rm *"),
        ),
        (
            json!({"deny": ["echo unterminated*"]}),
            "echo unterminated '",
            V::Deny("echo unterminated*"),
        ),
        (json!({"deny": ["rm -rf *"]}), "echo 'rm -rf x'", V::Run),
        // allow exempts a built-in, only for the command it matches
        (json!({"allow": ["rm -rf target"]}), "rm -rf target", V::Run),
        (
            json!({"allow": ["rm -rf target"]}),
            "rm  -rf\ttarget",
            V::Run,
        ),
        (json!({"allow": ["rm -rf target"]}), "rm -rf src", V::Ask),
        (
            json!({"allow": ["rm -rf target"]}),
            "cd x && rm -rf target && ls",
            V::Run,
        ),
        (
            json!({"allow": ["rm -rf target"]}),
            "rm -rf target; git reset --hard",
            V::Ask,
        ),
        (
            json!({"allow": ["rm -rf target"]}),
            "FOO=1 rm -rf target",
            V::Run,
        ),
        (
            json!({"allow": ["git push -f origin ?"]}),
            "git push -f origin x",
            V::Run,
        ),
        (
            json!({"allow": ["git push -f origin ?"]}),
            "git push -f origin xy",
            V::Ask,
        ),
        (
            json!({"allow": ["sudo apt-get *"]}),
            "sudo apt-get install jq",
            V::Run,
        ),
        (
            json!({"allow": ["apt-get *"]}),
            "sudo apt-get install jq",
            V::Ask,
        ),
        (json!({"allow": ["echo *"]}), "echo $(rm -rf x)", V::Ask),
        (
            json!({"allow": ["bash -c *"]}),
            "bash -c 'rm -rf x'",
            V::Ask,
        ),
        // rules see the command as it will run, however it is spelled
        (
            json!({"deny": ["curl *"]}),
            "/usr/bin/curl x",
            V::Deny("curl *"),
        ),
        (json!({"deny": ["curl *"]}), "\"curl\" x", V::Deny("curl *")),
        (json!({"deny": ["curl *"]}), "c\\url x", V::Deny("curl *")),
        (json!({"deny": ["curl *"]}), "$'curl' x", V::Deny("curl *")),
        (json!({"deny": ["curl *"]}), "{curl,x}", V::Deny("curl *")),
        (
            json!({"deny": ["curl *"]}),
            "./bin/curl x",
            V::Deny("curl *"),
        ),
        (
            json!({"deny": ["curl *"]}),
            "env -i curl x",
            V::Deny("curl *"),
        ),
        (
            json!({"deny": ["curl *"]}),
            "alias c=curl; c x",
            V::Deny("curl *"),
        ),
        (
            json!({"deny": ["git push*"]}),
            "git -C . push",
            V::Deny("git push*"),
        ),
        (
            json!({"deny": ["git push*"]}),
            "git --no-pager -c user.name=x push origin",
            V::Deny("git push*"),
        ),
        (
            json!({"deny": ["git push*"]}),
            "git --git-dir=.git --work-tree . push",
            V::Deny("git push*"),
        ),
        (json!({"deny": ["git push*"]}), "git -C . pull", V::Run),
        (
            json!({"allow": ["rm -rf target"]}),
            "r\\m -rf 'target'",
            V::Run,
        ),
        (
            json!({"allow": ["rm -rf target"]}),
            "/usr/bin/rm -rf target",
            V::Run,
        ),
        (
            json!({"allow": ["rm -rf target"]}),
            "{rm,-rf,target}",
            V::Run,
        ),
        (
            json!({"allow": ["rm -rf target"]}),
            "/tmp/x/rm -rf target",
            V::Ask,
        ),
        (json!({"allow": ["rm -rf target"]}), "rm -rf $T", V::Ask),
        (
            json!({"allow": ["git push -f"]}),
            "git -C . push -f",
            V::Run,
        ),
        (json!({"ask": ["npm *"]}), "/usr/local/bin/npm test", V::Ask),
        // the exact form: `=` compares word by word, and `*` stays within one word
        (
            json!({"allow": ["=rm -rf target"]}),
            "rm -rf target",
            V::Run,
        ),
        (
            json!({"allow": ["=rm -rf target"]}),
            "rm  -rf 'target'",
            V::Run,
        ),
        (
            json!({"allow": ["=rm -rf target"]}),
            "rm -rf target /",
            V::Ask,
        ),
        (json!({"allow": ["=rm -rf *"]}), "rm -rf build", V::Run),
        (json!({"allow": ["=rm -rf *"]}), "rm -rf build /", V::Ask),
        (json!({"allow": ["rm -rf *"]}), "rm -rf build /", V::Run),
        (json!({"allow": ["=rm -rf *"]}), "rm -rf \"$d\"", V::Ask),
        (json!({"allow": ["=rm -rf *"]}), "rm -rf 'a b'", V::Run),
        (
            json!({"allow": ["=git push -f origin feature-*"]}),
            "git push -f origin feature-x",
            V::Run,
        ),
        (
            json!({"allow": ["=git push -f origin feature-*"]}),
            "git push -f origin feature-x main",
            V::Ask,
        ),
        (json!({"ask": ["=npm publish"]}), "npm publish", V::Ask),
        (
            json!({"ask": ["=npm publish"]}),
            "npm publish --dry-run",
            V::Run,
        ),
        (
            json!({"deny": ["=curl *"]}),
            "/usr/bin/curl x",
            V::Deny("=curl *"),
        ),
        (json!({"deny": ["=curl *"]}), "curl x y", V::Run),
        // ask adds to the list; allow exempts from it
        (
            json!({"ask": ["cargo publish*"]}),
            "cargo publish --dry-run",
            V::Ask,
        ),
        (json!({"ask": ["cargo publish*"]}), "cargo build", V::Run),
        (json!({"ask": ["npm *"]}), "cd web && npm install", V::Ask),
        (
            json!({"ask": ["npm *"], "allow": ["npm test"]}),
            "npm test",
            V::Run,
        ),
        (json!({"ask": ["*"]}), "ls", V::Ask),
        // modes
        (json!({"mode": "always"}), "ls", V::Ask),
        (json!({"mode": "always"}), "", V::Ask),
        (
            json!({"mode": "always", "allow": ["ls*", "cargo *"]}),
            "ls -la",
            V::Run,
        ),
        (
            json!({"mode": "always", "allow": ["cargo *"]}),
            "RUST_LOG=1 cargo test",
            V::Run,
        ),
        (
            json!({"mode": "always", "allow": ["cargo *"]}),
            "cargo test && ls",
            V::Ask,
        ),
        (json!({"mode": "never"}), "rm -rf /", V::Run),
        (json!({"mode": "never"}), "echo 'unterminated", V::Run),
        (json!({"mode": "never", "ask": ["ls"]}), "ls", V::Run),
        (json!({"mode": "flagged"}), "ls", V::Run),
        (json!({}), "git push --force", V::Ask),
    ];
    for (settings, command, expected) in cases {
        let rules = rules(settings.clone());
        assert_eq!(
            verdict(command, &rules),
            *expected,
            "{command:?} with {settings}"
        );
    }
}

#[test]
fn reasons_name_the_pattern_and_the_command() {
    let rules = Rules::default();
    let Verdict::Ask { reason } = classify("ls && git push -f origin main", &rules) else {
        panic!("not flagged");
    };
    assert!(reason.contains("force push"), "{reason}");
    assert!(reason.contains("`git push -f origin main`"), "{reason}");
    let Verdict::Ask { reason } = classify("echo 'oops", &rules) else {
        panic!("not flagged");
    };
    assert!(reason.contains("could not parse"), "{reason}");
    assert!(reason.contains("single quote"), "{reason}");
    let rules = Rules {
        ask: vec!["npm *".into()],
        ..Rules::default()
    };
    let Verdict::Ask { reason } = classify("npm   publish", &rules) else {
        panic!("not flagged");
    };
    assert_eq!(reason, "the ask rule `npm *` in `npm publish`");
}

#[test]
fn settings_errors_name_the_bad_key() {
    assert_eq!(Rules::from_settings(None).unwrap(), Rules::default());
    assert_eq!(
        Rules::from_settings(Some(&Value::Null)).unwrap(),
        Rules::default()
    );
    let parsed = rules(json!({"mode": "never", "ask": ["a"], "allow": ["b"], "deny": ["c"]}));
    assert_eq!(parsed.mode, Mode::Never);
    assert_eq!(
        (parsed.ask, parsed.allow, parsed.deny),
        (vec!["a".into()], vec!["b".into()], vec!["c".into()])
    );
    for (value, key) in [
        (json!({"mode": "sometimes"}), "permissions.bash.mode"),
        (json!({"mode": 1}), "permissions.bash.mode"),
        (json!({"allow": "ls"}), "permissions.bash.allow"),
        (json!({"deny": ["ok", 3]}), "permissions.bash.deny[1]"),
        (json!({"ask": [null]}), "permissions.bash.ask[0]"),
        (json!({"denny": []}), "permissions.bash.denny"),
        (json!(["ls"]), "permissions.bash"),
    ] {
        let error = Rules::from_settings(Some(&value)).unwrap_err();
        assert!(error.starts_with(key), "{value}: {error}");
    }
}

#[test]
fn glob_patterns() {
    for (pattern, text, matches) in [
        ("*", "", true),
        ("*", "anything at all", true),
        ("ls", "ls", true),
        ("ls", "ls -la", false),
        ("ls*", "ls -la", true),
        ("?s", "ls", true),
        ("?s", "s", false),
        ("git * --force", "git push origin --force", true),
        ("git * --force", "git push --force origin", false),
        ("*a*b*c", "xaybzc", true),
        ("*a*b*c", "xaybzcd", false),
        ("a**b", "ab", true),
    ] {
        assert_eq!(
            crate::glob::Glob::command(pattern).unwrap().is_match(text),
            matches,
            "{pattern:?} on {text:?}"
        );
    }
}

#[test]
fn brackets_braces_and_backslashes_in_patterns_are_text() {
    let rules = rules(json!({"deny": ["echo [ab]*", "ls {a,b}", "printf \\n*"]}));
    let denied = |command| match classify(command, &rules) {
        Verdict::Deny { rule } => Some(rule),
        _ => None,
    };
    assert_eq!(denied("echo [ab] x").as_deref(), Some("echo [ab]*"));
    assert_eq!(denied("echo a x"), None);
    assert_eq!(denied("ls {a,b}").as_deref(), Some("ls {a,b}"));
    assert_eq!(denied("ls a"), None);
    assert_eq!(denied("printf \\n").as_deref(), Some("printf \\n*"));
    assert_eq!(denied("printf n"), None);
}

/// A small deterministic generator: no dependency, same cases on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn never_panics_on_arbitrary_input() {
    const PIECES: &[&str] = &[
        " ",
        "\t",
        "\n",
        ";",
        ";;",
        "&",
        "&&",
        "|",
        "||",
        "|&",
        "(",
        ")",
        "((",
        "))",
        "{",
        "}",
        "{ ",
        " }",
        "$(",
        "${",
        "$((",
        "`",
        "'",
        "\"",
        "\\",
        "$'",
        "$\"",
        "<",
        ">",
        "<<",
        "<<-",
        "<<<",
        ">&",
        "&>",
        "2>",
        "<(",
        ">(",
        "#",
        "=",
        "a=",
        "x=(",
        "EOF",
        "\nEOF\n",
        "rm",
        " -rf ",
        "sudo",
        "bash -c ",
        "eval ",
        "xargs ",
        "env ",
        "curl x",
        "sh",
        "case ",
        " in ",
        "esac",
        "if ",
        "then",
        "fi",
        "for ",
        "do",
        "done",
        "function ",
        "[[",
        "]]",
        "!",
        "@(",
        "*",
        "?",
        "é",
        "\u{0}",
        "\r",
        "-",
        "--",
        "/dev/sda",
        ":",
        "git push -f",
    ];
    let rules = Rules::default();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = rng.next() % 24;
        let command: String = (0..len)
            .map(|_| PIECES[(rng.next() % PIECES.len() as u64) as usize])
            .collect();
        let _ = classify(&command, &rules);
    }
    for deep in [
        "(".repeat(10_000),
        "$(".repeat(10_000),
        "${".repeat(10_000),
        "`".repeat(10_001),
        "{ ".repeat(10_000),
        "$((".repeat(10_000),
        "bash -c \"bash -c 'eval \\\"".repeat(200),
        "@(".repeat(10_000),
        "\"$(".repeat(10_000),
    ] {
        let verdict = classify(&deep, &rules);
        assert!(matches!(verdict, Verdict::Ask { .. }), "{verdict:?}");
    }
}

#[test]
fn never_panics_on_expansions_and_wrappers() {
    const PIECES: &[&str] = &[
        " ",
        ";",
        "\n",
        "|",
        "&&",
        "'",
        "\"",
        "{",
        "}",
        ",",
        "..",
        "1",
        "a",
        "[",
        "]",
        "!",
        "*",
        "?",
        "$x",
        "$@",
        "\"$@\"",
        "${a[@]}",
        "$((",
        "))",
        "$'\\u",
        "$'\\x",
        "$'\\c",
        "\\",
        "-",
        "--",
        "-1",
        "-rf",
        "--rec",
        "=",
        "kill ",
        "rm ",
        "git ",
        "git -c ",
        "-C",
        "push ",
        "alias x=",
        "x ",
        "hash -p ",
        "BASH_ALIASES[x]=",
        "xargs ",
        "-I{} ",
        "-i",
        "parallel ",
        ":::",
        "watch ",
        "-x ",
        "env ",
        "-u",
        "-S",
        "timeout ",
        "-s",
        "nice ",
        "-n",
        "taskset ",
        "chrt ",
        "flock ",
        "-c ",
        "sg ",
        "su ",
        "script ",
        "busybox ",
        "setarch ",
        "systemctl ",
        "start ",
        "isolate ",
        "reboot",
        ".target",
        "telinit ",
        "/dev/",
        "/proc/",
        "../",
        "//",
        "sda",
        "source ",
        ". ",
        "bash ",
        "<(",
        ")",
        "<&",
        "3",
        "0<&",
        "exec ",
        "find ",
        "-exec ",
        "\\;",
        "+",
        "tee ",
        "> ",
        "curl -o ",
        "busctl ",
        "PowerOff",
        "~",
        "$[",
        "/proc/self/exe ",
    ];
    let rules = Rules::default();
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    for _ in 0..5_000 {
        let len = rng.next() % 24;
        let command: String = (0..len)
            .map(|_| PIECES[(rng.next() % PIECES.len() as u64) as usize])
            .collect();
        let _ = classify(&command, &rules);
    }
    for deep in [
        "{a,".repeat(5_000),
        "{".repeat(10_000),
        "{1..1000000000}".into(),
        "{a,b}".repeat(200),
        "alias x=x; ".repeat(100) + "x",
        "alias a=b b=a; a".into(),
        "[".repeat(10_000),
        "*".repeat(10_000) + "x",
    ] {
        let _ = classify(&deep, &rules);
    }
}
