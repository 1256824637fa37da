//! Commands that run another command: `sudo X`, `nice -n 5 X`, `xargs X`, `watch 'X'`, …
//!
//! Each wrapper's own options are skipped the way it reads them (including those that take a
//! value, so `timeout -s KILL 5 rm` runs `rm`, not `KILL`), and so are the operands it takes
//! before the command (`timeout`'s duration, `chroot`'s new root, `taskset`'s mask).

use super::args::Arg;
use super::options::Getopt;

/// What a wrapper runs.
pub(super) enum Runs {
    /// Not a wrapper, or one that runs no command this time (`env` alone, `taskset -p`).
    Nothing,
    /// The command starting at this index of the wrapper's arguments.
    Command(usize),
    /// A command whose arguments the wrapper completes at run time (`xargs`, `parallel`): the
    /// command and its arguments as far as they can be known.
    WithInput(Vec<Arg>),
    /// A shell script: `watch 'a; b'`, `flock x -c 'a'`, `su -c 'a'`.
    Script(String),
    /// Where the command starts, or what it is, cannot be known before running.
    Unknown(String),
}

struct Wrapper {
    names: &'static [&'static str],
    options: Getopt,
    /// Operands before the command: `timeout`'s duration, `chroot`'s new root, …
    operands: usize,
    /// Options under which the wrapper acts on something else and runs no command.
    no_command: &'static [(char, &'static str)],
}

const fn wrapper(names: &'static [&'static str], short: &'static str) -> Wrapper {
    Wrapper {
        names,
        options: Getopt { short, long: &[] },
        operands: 0,
        no_command: &[],
    }
}

const WRAPPERS: &[Wrapper] = &[
    wrapper(
        &[
            "nohup",
            "builtin",
            "eatmydata",
            "catchsegv",
            "firejail",
            "valgrind",
        ],
        "",
    ),
    wrapper(&["setsid"], "cfw"),
    wrapper(&["exec"], "cla:"),
    wrapper(&["unbuffer"], "p"),
    wrapper(&["proxychains", "proxychains4"], "qf:"),
    Wrapper {
        options: Getopt {
            short: "af:o:pqv",
            long: &["format", "output"],
        },
        ..wrapper(&["time"], "")
    },
    Wrapper {
        options: Getopt {
            short: "n:",
            long: &["adjustment"],
        },
        ..wrapper(&["nice"], "")
    },
    Wrapper {
        options: Getopt {
            short: "s:k:fpv",
            long: &["signal", "kill-after"],
        },
        operands: 1,
        ..wrapper(&["timeout"], "")
    },
    Wrapper {
        options: Getopt {
            short: "i:o:e:",
            long: &["input", "output", "error"],
        },
        ..wrapper(&["stdbuf"], "")
    },
    Wrapper {
        options: Getopt {
            short: "AbEeHiKklnPSsVvg:u:h::p:C:D:r:t:T:U:R:",
            long: &[
                "group",
                "user",
                "host",
                "prompt",
                "close-from",
                "chdir",
                "role",
                "type",
                "command-timeout",
                "other-user",
                "chroot",
            ],
        },
        no_command: &[
            ('e', "edit"),
            ('l', "list"),
            ('v', "validate"),
            ('K', "remove-timestamp"),
            ('V', "version"),
        ],
        ..wrapper(&["sudo"], "")
    },
    Wrapper {
        no_command: &[('L', "")],
        ..wrapper(&["doas"], "a:C:Lnsu:")
    },
    Wrapper {
        options: Getopt {
            short: "u:g:D:",
            long: &[
                "user",
                "group",
                "chdir",
                "nice",
                "property",
                "slice",
                "unit",
                "description",
                "setenv",
                "machine",
            ],
        },
        ..wrapper(&["run0"], "")
    },
    Wrapper {
        options: Getopt {
            short: "",
            long: &["user"],
        },
        ..wrapper(&["pkexec"], "")
    },
    Wrapper {
        options: Getopt {
            short: "c:n:p:P:u:t",
            long: &["class", "classdata", "pid", "pgid", "uid"],
        },
        no_command: &[('p', "pid"), ('P', "pgid"), ('u', "uid")],
        ..wrapper(&["ionice"], "")
    },
    Wrapper {
        operands: 1,
        no_command: &[('p', "pid")],
        ..wrapper(&["taskset"], "acp")
    },
    Wrapper {
        options: Getopt {
            short: "abdefimopRrvT:P:D:",
            long: &["sched-runtime", "sched-period", "sched-deadline"],
        },
        operands: 1,
        no_command: &[('p', "pid"), ('m', "max")],
        ..wrapper(&["chrt"], "")
    },
    Wrapper {
        options: Getopt {
            short: "d",
            long: &[
                "reuid",
                "regid",
                "ruid",
                "euid",
                "rgid",
                "egid",
                "groups",
                "inh-caps",
                "ambient-caps",
                "bounding-set",
                "securebits",
                "pdeathsig",
                "selinux-label",
                "apparmor-profile",
                "landlock-access",
                "landlock-rule",
                "seccomp-filter",
            ],
        },
        no_command: &[('d', "dump")],
        ..wrapper(&["setpriv"], "")
    },
    Wrapper {
        options: Getopt {
            short: "a:Ab:cCdDe:E:fFhiI:kno:O:p:P:qrs:S:tTu:U:vVwxX:yzZ",
            long: &[
                "output",
                "trace",
                "signal",
                "attach",
                "user",
                "string-limit",
                "env",
                "trace-path",
                "summary-sort-by",
            ],
        },
        ..wrapper(&["strace"], "")
    },
    Wrapper {
        options: Getopt {
            short: "a:A:b:cCD:e:F:fhiL:l:n:o:p:rs:StTu:Vw:x:",
            long: &["output", "library", "config", "indent", "align"],
        },
        ..wrapper(&["ltrace"], "")
    },
    Wrapper {
        options: Getopt {
            short: "",
            long: &["userspec", "groups"],
        },
        operands: 1,
        ..wrapper(&["chroot"], "")
    },
    Wrapper {
        options: Getopt {
            short: "at:m::u::i::n::p::C::U::T::S:G:r::w::W:eFZ",
            long: &["target", "setuid", "setgid", "wdns", "env"],
        },
        ..wrapper(&["nsenter"], "")
    },
    Wrapper {
        options: Getopt {
            short: "cfhVmuinpCTUrR:w:S:G:l",
            long: &[
                "root",
                "wd",
                "setuid",
                "setgid",
                "propagation",
                "setgroups",
                "map-user",
                "map-group",
                "map-users",
                "map-groups",
                "monotonic",
                "boottime",
                "load-interp",
            ],
        },
        ..wrapper(&["unshare"], "")
    },
    Wrapper {
        options: Getopt {
            short: "l:s:i:ub:",
            long: &["lib", "faked", "save-file", "load-file", "fd-base"],
        },
        ..wrapper(&["fakeroot"], "")
    },
    Wrapper {
        options: Getopt {
            short: "",
            long: &["config-file", "dbus-daemon"],
        },
        ..wrapper(&["dbus-run-session"], "")
    },
    Wrapper {
        options: Getopt {
            short: "u:p:a:P:diq",
            long: &["user", "pass", "address", "port"],
        },
        ..wrapper(&["torsocks"], "")
    },
    Wrapper {
        operands: 1,
        ..wrapper(&["faketime"], "mf")
    },
    Wrapper {
        options: Getopt {
            short: "p:u:E:H:M:dGqrStP",
            long: &[
                "property",
                "unit",
                "setenv",
                "host",
                "machine",
                "uid",
                "gid",
                "nice",
                "working-directory",
                "slice",
                "description",
                "service-type",
                "on-active",
                "on-boot",
                "on-startup",
                "on-unit-active",
                "on-unit-inactive",
                "on-calendar",
                "timer-property",
                "path-property",
                "socket-property",
            ],
        },
        ..wrapper(&["systemd-run"], "")
    },
    Wrapper {
        options: Getopt {
            short: "pvV",
            long: &[],
        },
        no_command: &[('v', ""), ('V', "")],
        ..wrapper(&["command"], "")
    },
];

const XARGS: Getopt = Getopt {
    short: "0a:d:E:e::I:i::L:l::n:P:prs:txo",
    long: &[
        "arg-file",
        "delimiter",
        "max-args",
        "max-procs",
        "max-chars",
        "process-slot-var",
    ],
};

const PARALLEL: Getopt = Getopt {
    short: "0a:C:d:E:e::I:i::j:kL:l::mn:N:P:qrS:s:tuvXx",
    long: &[
        "arg-file",
        "colsep",
        "delimiter",
        "eof",
        "replace",
        "jobs",
        "max-lines",
        "max-args",
        "max-replace-args",
        "max-procs",
        "sshlogin",
        "sshloginfile",
        "max-chars",
        "results",
        "joblog",
        "tmpdir",
        "workdir",
        "timeout",
        "retries",
        "delay",
        "env",
        "basefile",
        "tag-string",
        "tagstring",
        "memfree",
        "load",
        "nice",
        "halt",
        "return",
        "transferfile",
        "arg-sep",
        "arg-file-sep",
    ],
};

const WATCH: Getopt = Getopt {
    short: "bced::ghn:pq:rtwxv",
    long: &["interval", "equexit"],
};

const FLOCK: Getopt = Getopt {
    short: "sexnoFuw:E:",
    long: &["timeout", "wait", "conflict-exit-code"],
};

const SETARCH: Getopt = Getopt {
    short: "vRFLXBIST3",
    long: &[],
};

const ENV: Getopt = Getopt {
    short: "iu:C:S:0v",
    long: &["unset", "chdir", "split-string"],
};

/// What `name`, run with `args`, runs in turn.
pub(super) fn runs(name: &str, args: &[Arg]) -> Runs {
    if let Some(wrapper) = WRAPPERS.iter().find(|w| w.names.contains(&name)) {
        return generic(wrapper, args);
    }
    match name {
        "env" => match ENV.value(args, 'S', "split-string") {
            Some(script) => script_of(&[script]),
            None => command_at(ENV.operands(args)).within(args),
        },
        "busybox" | "toybox" => match args.first() {
            Some(applet) if applet.could_start("-") && !applet.is("-") => {
                if applet.value().is_some() {
                    Runs::Nothing
                } else {
                    Runs::Unknown(format!(
                        "an applet known only at run time (`{}`)",
                        applet.text
                    ))
                }
            }
            Some(_) => Runs::Command(0),
            None => Runs::Nothing,
        },
        "xargs" => match XARGS.operands(args) {
            Ok(at) if at < args.len() => Runs::WithInput(xargs_command(args, at)),
            Ok(_) => Runs::Nothing,
            Err(e) => Runs::Unknown(e),
        },
        "parallel" => parallel(args),
        "watch" => match WATCH.operands(args) {
            Ok(at) if at >= args.len() => Runs::Nothing,
            Ok(at) if WATCH.has(args, 'x', "exec") => Runs::Command(at),
            Ok(at) => script_of(&args[at..]),
            Err(e) => Runs::Unknown(e),
        },
        "flock" => flock(args),
        "setarch" | "linux32" | "linux64" => {
            let skip = usize::from(name == "setarch");
            let rest = args.get(skip..).unwrap_or_default();
            command_at(SETARCH.operands(rest).map(|at| at + skip)).within(args)
        }
        "su" | "runuser" | "script" => match Getopt::anywhere(args, Some('c'), "command") {
            Some(script) => script_of(&[script]),
            None if name == "runuser" && Getopt::anywhere(args, Some('u'), "user").is_some() => {
                let getopt = Getopt {
                    short: "fg:G:lmpPs:u:w:",
                    long: &[
                        "group",
                        "supp-group",
                        "shell",
                        "user",
                        "whitelist-environment",
                    ],
                };
                command_at(getopt.operands(args)).within(args)
            }
            None => Runs::Nothing,
        },
        "tar" | "gtar" | "bsdtar" | "rsync" | "scp" | "sftp" | "ssh" | "zip" => {
            match option_program(name, args) {
                Some(program) => script_of(&[program]),
                None => Runs::Nothing,
            }
        }
        "sg" => {
            let mut rest = args;
            if rest.first().is_some_and(|a| a.is("-")) {
                rest = &rest[1..];
            }
            // The group, then an optional `-c`, then the command, which `sg` hands to `sh -c`.
            rest = rest.get(1..).unwrap_or_default();
            if rest.first().is_some_and(|a| a.is("-c")) {
                rest = &rest[1..];
            }
            if rest.is_empty() {
                Runs::Nothing
            } else {
                script_of(rest)
            }
        }
        _ => Runs::Nothing,
    }
}

/// `xargs CMD ARGS`: input lines are appended to ARGS, or with `-I R` (`-i`, `--replace`) put
/// wherever R appears, making those arguments unknown.
fn xargs_command(args: &[Arg], at: usize) -> Vec<Arg> {
    let mut replace = XARGS
        .value(args, 'I', "")
        .map(|r| r.value().map(str::to_string));
    for option in args[..at].iter().filter_map(Arg::value) {
        let attached = if let Some(rest) = option.strip_prefix("--replace") {
            Some(rest.strip_prefix('=').unwrap_or(""))
        } else if !option.starts_with("--") {
            option
                .strip_prefix('-')
                .and_then(|letters| letters.split_once('i'))
                .map(|(_, rest)| rest)
        } else {
            None
        };
        if let Some(attached) = attached {
            let string = if attached.is_empty() { "{}" } else { attached };
            replace = Some(Some(string.to_string()));
        }
    }
    let command = &args[at..];
    match replace {
        None => [command, &[Arg::unknown("{input}")]].concat(),
        Some(Some(string)) => command
            .iter()
            .map(|a| match a.value() {
                Some(v) if v.contains(&string) => a.filled_in(),
                _ => a.clone(),
            })
            .collect(),
        // The replacement string itself is known only at run time: any argument may hold it.
        Some(None) => command.iter().map(Arg::filled_in).collect(),
    }
}

/// The command some tools run locally when an option names one: `tar --to-command`,
/// `tar -I`, `rsync -e`, `ssh -o ProxyCommand=…`, `scp -S`, `zip -TT`, ….
fn option_program(name: &str, args: &[Arg]) -> Option<Arg> {
    let value = |short: Option<char>, long: &str| Getopt::anywhere(args, short, long);
    match name {
        "tar" | "gtar" | "bsdtar" => value(Some('I'), "use-compress-program")
            .or_else(|| value(Some('F'), "info-script"))
            .or_else(|| value(None, "to-command"))
            .or_else(|| value(None, "new-volume-script"))
            .or_else(|| {
                let action = value(None, "checkpoint-action")?;
                match action.value() {
                    Some(v) => v.strip_prefix("exec=").map(Arg::literal),
                    None => Some(action),
                }
            }),
        "rsync" => value(Some('e'), "rsh"),
        "scp" | "sftp" => value(Some('S'), "").or_else(|| ssh_command(args)),
        "ssh" => ssh_command(args),
        "zip" => value(None, "unzip-command").or_else(|| {
            let at = args.iter().position(|a| a.is("-TT"))?;
            args.get(at + 1).cloned()
        }),
        _ => None,
    }
}

/// `-o ProxyCommand=…` or `-o LocalCommand=…` (also written with a space or attached to `-o`).
fn ssh_command(args: &[Arg]) -> Option<Arg> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let setting = match arg.value() {
            Some("-o") => {
                i += 1;
                args.get(i - 1)?
            }
            Some(v) if v.starts_with("-o") => arg,
            _ => continue,
        };
        let Some(text) = setting.value() else {
            return Some(setting.clone());
        };
        let text = text.strip_prefix("-o").unwrap_or(text);
        let (key, command) = text
            .split_once(['=', ' '])
            .map_or((text, ""), |(k, v)| (k, v.trim_start_matches(['=', ' '])));
        if matches!(
            key.to_ascii_lowercase().as_str(),
            "proxycommand" | "localcommand"
        ) {
            return Some(Arg::literal(command));
        }
    }
    None
}

fn generic(wrapper: &Wrapper, args: &[Arg]) -> Runs {
    let options = &wrapper.options;
    if wrapper
        .no_command
        .iter()
        .any(|&(short, long)| options.has(args, short, long))
    {
        return Runs::Nothing;
    }
    let mut at = match options.operands(args) {
        Ok(at) => at,
        Err(e) => return Runs::Unknown(e),
    };
    for _ in 0..wrapper.operands {
        match args.get(at) {
            Some(arg) if arg.splits => {
                return Runs::Unknown(format!(
                    "an operand known only at run time (`{}`)",
                    arg.text
                ));
            }
            Some(_) => at += 1,
            None => return Runs::Nothing,
        }
    }
    command_at(Ok(at)).within(args)
}

fn command_at(at: Result<usize, String>) -> Runs {
    match at {
        Ok(at) => Runs::Command(at),
        Err(e) => Runs::Unknown(e),
    }
}

impl Runs {
    /// `Command` past the end of `args` runs nothing.
    fn within(self, args: &[Arg]) -> Runs {
        match self {
            Runs::Command(at) if at >= args.len() => Runs::Nothing,
            other => other,
        }
    }
}

/// The words a wrapper joins with spaces and hands to a shell.
fn script_of(words: &[Arg]) -> Runs {
    let values: Option<Vec<&str>> = words.iter().map(Arg::value).collect();
    match values {
        Some(values) => Runs::Script(values.join(" ")),
        None => Runs::Unknown("a script known only at run time".into()),
    }
}

fn flock(args: &[Arg]) -> Runs {
    let at = match FLOCK.operands(args) {
        Ok(at) => at,
        Err(e) => return Runs::Unknown(e),
    };
    // The lock file (or a descriptor number, with nothing to run), then the command.
    match args.get(at + 1) {
        Some(c) if c.is("-c") || c.is("--command") => match args.get(at + 2) {
            Some(script) => script_of(std::slice::from_ref(script)),
            None => Runs::Nothing,
        },
        Some(_) => Runs::Command(at + 1),
        None => Runs::Nothing,
    }
}

/// `parallel CMD ::: a b`: CMD runs once per input, through a shell, with `{}` replaced by it
/// (or the input appended). Without `:::` the inputs come from standard input.
fn parallel(args: &[Arg]) -> Runs {
    let at = match PARALLEL.operands(args) {
        Ok(at) => at,
        Err(e) => return Runs::Unknown(e),
    };
    let separator = |a: &Arg| matches!(a.value(), Some(":::" | "::::" | ":::+" | "::::+"));
    let end = args[at..]
        .iter()
        .position(separator)
        .map_or(args.len(), |p| at + p);
    if end == at {
        return Runs::Nothing;
    }
    let inputs: Vec<Arg> = match args.get(end).and_then(Arg::value) {
        Some(":::" | ":::+") => args[end + 1..]
            .iter()
            .filter(|a| !separator(a))
            .cloned()
            .collect(),
        _ => vec![Arg::unknown("{input}")],
    };
    let command = &args[at..end];
    let one_word_script = command.len() == 1
        && command[0]
            .value()
            .is_some_and(|v| v.contains(|c: char| c.is_whitespace() || ";&|<>$`(".contains(c)));
    if !one_word_script {
        return Runs::WithInput([&args[at..end], &inputs[..]].concat());
    }
    let Some(template) = command[0].value() else {
        return Runs::Unknown("a script known only at run time".into());
    };
    // Each input replaces the placeholders; inputs known only at run time stand as `"$@"`,
    // which the gate reads as any arguments at all.
    let script = inputs
        .iter()
        .map(|input| {
            let value = input.value().map_or_else(|| "\"$@\"".to_string(), quote);
            if template.contains('{') {
                replace_placeholders(template, &value)
            } else {
                format!("{template} {value}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    Runs::Script(script)
}

fn replace_placeholders(template: &str, value: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        match after.find('}') {
            Some(close)
                if after[1..close]
                    .chars()
                    .all(|c| ".//#%0123456789".contains(c)) =>
            {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `value` quoted for a shell, as `parallel` quotes its inputs.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}
