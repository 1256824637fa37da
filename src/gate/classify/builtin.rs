//! The built-in list: which commands, with which arguments, are asked about. An argument known
//! only at run time counts against the command when it could be the one that decides.

use super::args::Arg;
use super::options::{Dangerous, Getopt};

const RM: Dangerous = Dangerous {
    short: "rRf",
    long: &["recursive", "force"],
    others: "dvIi",
};

const RECURSIVE: Dangerous = Dangerous {
    short: "R",
    long: &["recursive"],
    others: "cfvhHLP",
};

/// Why the built-in list flags command `name` run with `args` (`git` is judged in its own module).
pub(super) fn flags(name: &str, args: &[Arg]) -> Option<String> {
    match name {
        "rm" => RM
            .any(args)
            .map(|why| format!("`rm` with a recursive or force flag ({why})")),
        "sudo" | "su" | "doas" | "pkexec" | "run0" | "runuser" => {
            Some(format!("`{name}` (runs as another user)"))
        }
        "chmod" | "chown" | "chgrp" => RECURSIVE
            .any(args)
            .map(|why| format!("recursive `{name}` ({why})")),
        "dd" | "shred" | "truncate" | "wipefs" | "mke2fs" | "mkswap" | "blkdiscard" => {
            Some(format!("`{name}` (overwrites data)"))
        }
        _ if name == "mkfs" || name.starts_with("mkfs.") => {
            Some(format!("`{name}` (formats a file system)"))
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            Some(format!("`{name}` (stops the machine)"))
        }
        "init" | "telinit" => runlevel(name, args),
        "systemctl" | "loginctl" => systemctl(name, args),
        "busctl" | "dbus-send" | "gdbus" | "qdbus" => power_method(name, args),
        "kill" => kills_everything(args),
        "killall" | "pkill" | "killall5" => Some(format!("`{name}` (kills processes by name)")),
        "cp" | "mv" => copy_target(args)
            .and_then(device)
            .map(|t| format!("`{name}` onto the block device `{t}`")),
        "tee" => args
            .iter()
            .find_map(device)
            .map(|t| format!("`tee` onto the block device `{t}`"))
            .or_else(|| {
                args.iter()
                    .find_map(control_file)
                    .map(|t| format!("`tee` into the system control file `{t}`"))
            }),
        "find" => find(args),
        _ => None,
    }
}

/// `init 0`, `telinit 6`, … (and single-user mode, which stops every service).
fn runlevel(name: &str, args: &[Arg]) -> Option<String> {
    const STOPPING: [&str; 6] = ["0", "1", "6", "s", "S", "single"];
    let getopt = Getopt {
        short: "t:e:",
        long: &[],
    };
    let start = getopt.operands(args).unwrap_or(0);
    args[start..]
        .iter()
        .find(|a| STOPPING.iter().any(|level| a.could_be(level)))
        .map(|a| format!("`{name} {}` (stops the machine or its services)", a.text))
}

const SYSTEMCTL: Getopt = Getopt {
    short: "t:s:p:P:H:M:n:o:aliqfr",
    long: &[
        "type",
        "signal",
        "property",
        "host",
        "machine",
        "lines",
        "output",
        "root",
        "image",
        "kill-whom",
        "kill-value",
        "state",
        "job-mode",
        "what",
        "timestamp",
        "message",
        "boot-loader-entry",
        "boot-loader-menu",
        "when",
        "preset-mode",
        "reboot-argument",
        "drop-in",
        "check-inhibitors",
    ],
};

/// Verbs that stop, suspend or strip down the machine on their own.
const POWER_VERBS: [&str; 14] = [
    "poweroff",
    "reboot",
    "halt",
    "kexec",
    "soft-reboot",
    "suspend",
    "hibernate",
    "hybrid-sleep",
    "suspend-then-hibernate",
    "sleep",
    "rescue",
    "emergency",
    "default",
    "switch-root",
];

/// Verbs that start a unit now or make it start at boot.
const START_VERBS: [&str; 13] = [
    "start",
    "restart",
    "reload-or-restart",
    "try-restart",
    "try-reload-or-restart",
    "condrestart",
    "force-reload",
    "isolate",
    "enable",
    "reenable",
    "set-default",
    "add-wants",
    "add-requires",
];

/// Units whose start stops, reboots or suspends the machine, or stops every service.
const POWER_UNITS: [&str; 25] = [
    "poweroff.target",
    "reboot.target",
    "halt.target",
    "kexec.target",
    "soft-reboot.target",
    "ctrl-alt-del.target",
    "shutdown.target",
    "rescue.target",
    "emergency.target",
    "runlevel0.target",
    "runlevel1.target",
    "runlevel6.target",
    "suspend.target",
    "hibernate.target",
    "hybrid-sleep.target",
    "suspend-then-hibernate.target",
    "sleep.target",
    "exit.target",
    "final.target",
    "systemd-poweroff.service",
    "systemd-reboot.service",
    "systemd-halt.service",
    "systemd-kexec.service",
    "systemd-suspend.service",
    "systemd-hibernate.service",
];

fn systemctl(name: &str, args: &[Arg]) -> Option<String> {
    let positional = positionals(&SYSTEMCTL, args);
    let verb = positional.first()?;
    let Some(verb_name) = verb.value() else {
        return Some(format!(
            "`{name}` with a verb known only at run time (`{}`)",
            verb.text
        ));
    };
    if POWER_VERBS.contains(&verb_name) {
        return Some(format!("`{name} {verb_name}` (stops the machine)"));
    }
    if name != "systemctl" || !START_VERBS.contains(&verb_name) {
        return None;
    }
    // A unit named without a suffix is a target for `isolate` and `set-default`, and systemd
    // matches glob patterns against unit names itself, even quoted.
    let default_suffix = if matches!(verb_name, "isolate" | "set-default") {
        ".target"
    } else {
        ".service"
    };
    positional[1..]
        .iter()
        .find(|unit| match unit.value() {
            Some(u) if u.contains(['*', '?', '[']) => {
                POWER_UNITS.iter().any(|p| Arg::pattern(u).could_be(p))
            }
            Some(u) if u.contains('.') => POWER_UNITS.contains(&u),
            Some(u) => POWER_UNITS.contains(&format!("{u}{default_suffix}").as_str()),
            None => POWER_UNITS
                .iter()
                .any(|p| unit.could_be(p) || unit.could_be(p.split('.').next().unwrap_or(p))),
        })
        .map(|unit| format!("`systemctl {verb_name} {}` (stops the machine)", unit.text))
}

/// The same requests made to logind over D-Bus: `busctl call … PowerOff b false`,
/// `dbus-send … org.freedesktop.login1.Manager.Reboot`.
fn power_method(name: &str, args: &[Arg]) -> Option<String> {
    const METHODS: [&str; 9] = [
        "PowerOff",
        "Reboot",
        "Halt",
        "KExec",
        "SoftReboot",
        "Suspend",
        "Hibernate",
        "HybridSleep",
        "SuspendThenHibernate",
    ];
    args.iter()
        .filter_map(Arg::value)
        .find(|v| {
            METHODS
                .iter()
                .any(|m| *v == *m || v.strip_suffix(m).is_some_and(|head| head.ends_with('.')))
        })
        .map(|v| format!("`{name}` asking the system to `{v}` (stops the machine)"))
}

/// The arguments that are not options or option values, for commands that take options
/// anywhere. An argument known only at run time counts as one.
fn positionals<'a>(getopt: &Getopt, args: &'a [Arg]) -> Vec<&'a Arg> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.value() {
            Some("--") => {
                found.extend(&args[i + 1..]);
                break;
            }
            Some(v) if v.starts_with('-') && v.len() > 1 => {
                i += 1 + usize::from(getopt.takes_next(v));
                continue;
            }
            _ => found.push(arg),
        }
        i += 1;
    }
    found
}

/// `kill` aimed at every process the user may signal: a target of `-1`.
fn kills_everything(args: &[Arg]) -> Option<String> {
    let first = args.first()?;
    let mut i = match first.value() {
        Some("-l" | "-L" | "--list" | "--table") => return None,
        Some("-s" | "-n" | "--signal" | "-q" | "--queue") => 2,
        Some("--") => 0,
        Some(v) if v.starts_with('-') => 1,
        // Known only at run time: it may be the signal or a target, so it is both.
        _ => 0,
    };
    if args.get(i).is_some_and(|a| a.is("--")) {
        i += 1;
    }
    args.get(i..)?
        .iter()
        .find(|a| match a.value() {
            Some(v) => v.trim().parse::<i64>() == Ok(-1),
            None => a.could_be("-1"),
        })
        .map(|a| format!("`kill` of every process (`{}`)", a.text))
}

/// The destination of `cp`/`mv`: `-t DIR`, else the last operand.
fn copy_target(args: &[Arg]) -> Option<&Arg> {
    let mut operands = Vec::new();
    let mut options_done = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        match arg.value() {
            Some("--") if !options_done => options_done = true,
            Some("-t" | "--target-directory") if !options_done => return args.get(i),
            Some(v) if !options_done && v.starts_with("--target-directory=") => return Some(arg),
            Some(v) if !options_done && v.starts_with('-') && v != "-" => {}
            _ => operands.push(arg),
        }
    }
    operands.last().copied()
}

/// The block device `arg` names (or, known only at run time, may name): its text, for reasons.
pub(super) fn device(arg: &Arg) -> Option<String> {
    const SAMPLES: [&str; 8] = [
        "/dev/sda",
        "/dev/nvme0n1",
        "/dev/vda",
        "/dev/mmcblk0",
        "/dev/mapper/root",
        "/dev/dm-0",
        "/dev/md0",
        "/dev/mem",
    ];
    let path = match arg.value() {
        Some(path) => is_block_device(path.strip_prefix("--target-directory=").unwrap_or(path)),
        // Only a target that mentions a device (`/dev/$d`, `$DEV`) is held against the command:
        // every `> "$log"` in a script is known only at run time too.
        None => {
            arg.text.to_ascii_lowercase().contains("dev")
                && (arg.splits
                    || SAMPLES.iter().any(|s| arg.could_be(s))
                    || is_block_device(&arg.text))
        }
    };
    path.then(|| arg.text.clone())
}

/// `/proc/sysrq-trigger` (one letter reboots or crashes the machine) and `/sys/power/state`.
pub(super) fn control_file(arg: &Arg) -> Option<String> {
    let path = normalize(arg.value()?);
    matches!(path.as_str(), "/proc/sysrq-trigger" | "/sys/power/state").then(|| arg.text.clone())
}

/// The files `name` writes, where the arguments name them: a script written and then run in
/// the same command is as unknown as one read from a pipe.
pub(super) fn writes(name: &str, args: &[Arg]) -> Vec<String> {
    let paths: Vec<Option<String>> = match name {
        "tee" => args
            .iter()
            .filter(|a| !a.value().is_some_and(|v| v.starts_with('-')))
            .map(|a| a.known.clone())
            .collect(),
        "cp" | "mv" | "install" | "ln" => vec![copy_target(args).and_then(|a| a.known.clone())],
        "curl" => vec![Getopt::anywhere(args, Some('o'), "output").and_then(|a| a.known)],
        "wget" => vec![Getopt::anywhere(args, Some('O'), "output-document").and_then(|a| a.known)],
        _ => Vec::new(),
    };
    paths.into_iter().flatten().map(|p| normalize(&p)).collect()
}

/// `path` with `.`, `..` and repeated slashes resolved as far as the text allows:
/// `/dev/../dev//sda` is `/dev/sda`; a relative path keeps its leading `..`.
pub(super) fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Whether `path` names a disk, a partition or memory, however it is spelled (`/dev//sda`,
/// `/dev/../dev/sda`, `../../dev/sda`).
pub(super) fn is_block_device(path: &str) -> bool {
    const DISKS: [&str; 17] = [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "mapper/", "dm-", "md", "loop", "nbd",
        "mem", "kmem", "port", "block/", "root",
    ];
    let normal = normalize(path);
    // `../../dev/sda` reaches `/dev` from any directory deep enough; a plain `dev/…` is taken
    // for a project directory.
    let mut rest = normal.as_str();
    let mut climbs = normal.starts_with('/');
    rest = rest.trim_start_matches('/');
    while let Some(up) = rest.strip_prefix("../") {
        rest = up;
        climbs = true;
    }
    climbs
        && rest
            .strip_prefix("dev/")
            .is_some_and(|device| DISKS.iter().any(|d| device.starts_with(d)))
}

/// `find -delete`, or an argument known only at run time where `-delete` could stand.
fn find(args: &[Arg]) -> Option<String> {
    const WITH_VALUE: [&str; 35] = [
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-type",
        "-xtype",
        "-size",
        "-user",
        "-group",
        "-uid",
        "-gid",
        "-perm",
        "-anewer",
        "-cnewer",
        "-mtime",
        "-atime",
        "-ctime",
        "-mmin",
        "-amin",
        "-cmin",
        "-maxdepth",
        "-mindepth",
        "-links",
        "-inum",
        "-samefile",
        "-lname",
        "-ilname",
        "-fstype",
        "-printf",
        "-fprint",
        "-regextype",
    ];
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        match arg.value() {
            Some("-delete") => return Some("`find -delete`".into()),
            Some("-exec" | "-execdir" | "-ok" | "-okdir") => {
                while args.get(i).is_some_and(|a| !a.is(";") && !a.is("+")) {
                    i += 1;
                }
                i += 1;
            }
            Some("-fprintf") => i += 2,
            Some(v) if WITH_VALUE.contains(&v) || v.starts_with("-newer") => i += 1,
            Some(_) => {}
            None if arg.could_be("-delete") => {
                return Some(format!(
                    "`find` with `{}`, known only at run time, where `-delete` could stand",
                    arg.text
                ));
            }
            None => {}
        }
    }
    None
}
