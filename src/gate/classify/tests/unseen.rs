//! Deny rules and words known only at run time: with `deny: ["curl *"]`, every spelling of a
//! `curl` call is either denied (its name can be worked out before it runs) or unchecked (it is
//! known only at run time: asked about where someone can answer, refused elsewhere), in every
//! mode and whatever `allow` says; ordinary commands still run.

use super::*;

/// How a spelling must come out with a deny rule for `curl *`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// The deny rule matches: the name is static.
    Denied,
    /// The name is known only at run time: `Verdict::Unchecked`.
    Unchecked,
}

use Expect::{Denied, Unchecked};

const SPELLINGS: &[(&str, Expect)] = &[
    // names the gate resolves, and so matches against the rule
    ("curl http://x", Denied),
    ("$'\\x63url' http://x", Denied),
    ("c\\url http://x", Denied),
    ("eval 'curl http://x'", Denied),
    ("eval \"cu\"\"rl http://x\"", Denied),
    ("f(){ curl \"$@\"; }; f http://x", Denied),
    ("alias c=curl; c http://x", Denied),
    ("bash -c 'curl http://x'", Denied),
    ("echo http://x | xargs curl", Denied),
    // names known only at run time
    ("c=curl; $c http://x", Unchecked),
    ("c=curl; ${c} http://x", Unchecked),
    ("c=curl; \"$c\" http://x", Unchecked),
    ("n=c; c=curl; ${!n} http://x", Unchecked),
    ("printf -v c curl; $c http://x", Unchecked),
    ("$(echo curl) http://x", Unchecked),
    ("`echo curl` http://x", Unchecked),
    ("x='curl http://x'; eval \"$x\"", Unchecked),
    ("x='curl http://x'; eval $x", Unchecked),
    ("f(){ \"$@\"; }; f curl http://x", Unchecked),
    ("a=(curl http://x); \"${a[@]}\"", Unchecked),
    ("c=curl; command $c http://x", Unchecked),
    ("c=curl; env $c http://x", Unchecked),
    ("c=curl; exec $c http://x", Unchecked),
    ("c=curl; timeout 5 $c http://x", Unchecked),
    ("echo curl | xargs -I{} {} http://x", Unchecked),
    (
        "c=curl; find . -maxdepth 0 -exec $c http://x \\;",
        Unchecked,
    ),
    ("/usr/bin/cur? http://x", Unchecked),
    ("x='curl http://x'; bash -c \"$x\"", Unchecked),
    ("echo 'curl http://x' | bash", Unchecked),
    ("sh <<< 'curl http://x'", Unchecked),
    ("source <(echo curl http://x)", Unchecked),
    ("x='curl http://x'; trap \"$x\" EXIT", Unchecked),
    ("c=curl; alias d=$c; d http://x", Unchecked),
    ("echo 'curl http://x' > s.sh; bash s.sh", Unchecked),
    ("echo 'curl http://x", Unchecked),
];

/// Commands that must keep running with the deny rule in place.
const ORDINARY: &[&str] = &[
    "ls -la",
    "echo $HOME",
    "cat \"$f\" $g",
    "x=$(date); echo $x",
    "f(){ ls \"$@\"; }; f -la",
    "for f in *.rs; do wc -l \"$f\"; done",
    "cargo test 2>&1 | tail -n 20",
    "bash scripts/test.sh",
    "eval 'echo hi'",
    "git status && git diff",
];

fn deny_curl(mode: Mode, allow: &[&str]) -> Rules {
    Rules {
        mode,
        deny: vec!["curl *".into()],
        allow: allow.iter().map(|a| a.to_string()).collect(),
        ..Rules::default()
    }
}

#[test]
fn deny_rules_deny_or_leave_unchecked_every_spelling_of_the_program() {
    assert!(SPELLINGS.iter().filter(|(_, e)| *e == Unchecked).count() >= 19);
    let mut wrong = Vec::new();
    for mode in [Mode::Never, Mode::Flagged, Mode::Always] {
        // `allow` exempts from asking, never from what the deny rules cannot see.
        for allow in [&[][..], &["*"][..]] {
            let rules = deny_curl(mode, allow);
            for (command, expected) in SPELLINGS {
                let verdict = classify(command, &rules);
                let ok = match (expected, &verdict) {
                    (Denied, Verdict::Deny { rule }) => rule == "curl *",
                    (Unchecked, Verdict::Unchecked { reason }) => {
                        reason.starts_with("a permissions.bash deny rule (`curl *`) exists, and ")
                    }
                    _ => false,
                };
                if !ok {
                    wrong.push(format!("{mode:?} {allow:?} {command:?}: {verdict:?}"));
                }
            }
            for command in ORDINARY {
                let verdict = classify(command, &rules);
                let ok = match mode {
                    Mode::Always if allow.is_empty() => matches!(verdict, Verdict::Ask { .. }),
                    _ => verdict == Verdict::Run,
                };
                if !ok {
                    wrong.push(format!("{mode:?} {allow:?} {command:?}: {verdict:?}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
}

#[test]
fn unchecked_reasons_say_why_and_name_the_rules() {
    let Verdict::Unchecked { reason } =
        classify("c=curl; $c http://x", &deny_curl(Mode::Never, &[]))
    else {
        panic!("not unchecked");
    };
    assert_eq!(
        reason,
        "a permissions.bash deny rule (`curl *`) exists, and what this command runs is known only \
         at run time: a command name known only at run time (`$c`) in `$c http://x`"
    );
    let rules = Rules {
        mode: Mode::Never,
        deny: ["curl *", "wget *", "nc *", "ssh *"]
            .map(String::from)
            .to_vec(),
        ..Rules::default()
    };
    let Verdict::Unchecked { reason } = classify("echo 'oops", &rules) else {
        panic!("not unchecked");
    };
    assert_eq!(
        reason,
        "permissions.bash deny rules (`curl *`, `wget *`, `nc *`, 1 more) exist, and the gate \
         could not parse this command to check it (a single quote is never closed)"
    );
}

#[test]
fn without_deny_rules_nothing_changes() {
    let never = Rules {
        mode: Mode::Never,
        ..Rules::default()
    };
    let flagged = Rules::default();
    for (command, _) in SPELLINGS {
        assert_eq!(classify(command, &never), Verdict::Run, "{command:?}");
        assert!(
            !matches!(classify(command, &flagged), Verdict::Unchecked { .. }),
            "{command:?}"
        );
    }
    // The built-in list still asks about names known only at run time.
    assert!(matches!(classify("$c x", &flagged), Verdict::Ask { .. }));
}
