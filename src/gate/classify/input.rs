//! Where shells, `source` and interpreters read their commands from, and whether the gate can
//! see them there.

use super::args::{self, Arg};
use super::builtin;
use super::shell::{Redirect, RedirectKind, Word};

/// Where a command's standard input comes from, as far as the script shows it.
#[derive(Clone, Copy, Default)]
pub(super) struct Stdin {
    pub(super) piped: bool,
    pub(super) download: bool,
    /// Something other than a file or the terminal feeds it: a here-document, a here-string,
    /// another descriptor, a pipe path.
    pub(super) fed: Option<&'static str>,
}

/// The script file an interpreter runs: a shell's or `source`'s file operand, or the first
/// operand of `python`, `perl`, `node`, ….
pub(super) fn script_file<'a>(name: &str, args: &'a [Arg]) -> Option<&'a Arg> {
    if is_shell(name) {
        return match shell_input(args) {
            ShellInput::File(file) => Some(file),
            _ => None,
        };
    }
    if matches!(name, "source" | ".") {
        return args.iter().find(|a| !a.is("--"));
    }
    if is_interpreter(name) {
        return args
            .iter()
            .find(|a| !a.value().is_some_and(|v| v.starts_with('-')));
    }
    None
}

/// What feeds standard input among `redirects`, when it is not a file.
pub(super) fn stdin_feed(redirects: &[Redirect]) -> Option<&'static str> {
    redirects
        .iter()
        .filter(|r| r.fd.is_none_or(|fd| fd == 0))
        .find_map(|r| match r.kind {
            RedirectKind::HereDoc => Some("a here-document"),
            RedirectKind::HereString => Some("a here-string"),
            RedirectKind::DuplicateInput => Some("another file descriptor"),
            RedirectKind::Read if reads_pipe(&r.target) => Some("a pipe"),
            _ => None,
        })
}

fn reads_pipe(word: &Word) -> bool {
    args::expand_word(word)
        .first()
        .is_some_and(reads_descriptor)
}

/// `/dev/stdin`, `/dev/fd/N`, `/proc/self/fd/N`, …: a path that reads an open descriptor (or,
/// known only at run time, may: `/proc/$$/fd/0`), or a process substitution.
fn reads_descriptor(file: &Arg) -> bool {
    let path = match file.value() {
        Some(path) => builtin::normalize(path),
        None if file.pipe => return true,
        None => {
            let written = builtin::normalize(&file.text);
            if !(written.starts_with("/dev/") || written.starts_with("/proc/")) {
                return false;
            }
            written
        }
    };
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["", "dev", "stdin"] | ["", "dev", "fd", _] | ["", "proc", _, "fd", _] => true,
        // Only a path known to lie elsewhere is cleared.
        _ => file.value().is_none(),
    }
}

/// `source FILE`/`. FILE` of something that is not a file: the commands cannot be seen.
pub(super) fn sourced(name: &str, args: &[Arg], stdin: Stdin) -> Option<String> {
    let file = args.iter().find(|a| !a.is("--"));
    match file {
        None => Some(match stdin.fed {
            Some(feed) => format!("`{name}` reading commands from {feed}"),
            None => format!("`{name}` without a file to read"),
        }),
        Some(file) if file.pipe => Some(format!(
            "`{name}` of a process substitution (`{}`)",
            file.text
        )),
        Some(file) if reads_descriptor(file) => Some(format!(
            "`{name}` reading commands from standard input or a descriptor (`{}`)",
            file.text
        )),
        Some(_) => None,
    }
}

/// For `bash`, `sh`, …: the `-c` script to follow, after noting in `unseen` a script it cannot see.
pub(super) fn shell_script(
    name: &str,
    args: &[Arg],
    stdin: Stdin,
    unseen: &mut Vec<String>,
) -> Option<String> {
    match shell_input(args) {
        ShellInput::Script(Some(script)) => {
            if script.value().is_none() {
                unseen.push(format!(
                    "`{name} -c` with a script known only at run time (`{}`)",
                    script.text
                ));
            }
            script.value().map(str::to_string)
        }
        ShellInput::Script(None) => None,
        ShellInput::Stdin => {
            if let Some(feed) = stdin.fed {
                unseen.push(format!("`{name}` reading commands from {feed}"));
            } else if stdin.piped && !stdin.download {
                unseen.push(format!("`{name}` reading commands from a pipe"));
            }
            None
        }
        ShellInput::File(file) => {
            if reads_descriptor(file) {
                unseen.push(format!(
                    "`{name}` reading commands from a pipe or descriptor (`{}`)",
                    file.text
                ));
            }
            None
        }
        ShellInput::Unknown(arg) => {
            unseen.push(format!(
                "`{name}` with options known only at run time (`{}`)",
                arg.text
            ));
            None
        }
    }
}

pub(super) fn is_shell(name: &str) -> bool {
    matches!(
        name,
        "sh" | "bash"
            | "rbash"
            | "zsh"
            | "dash"
            | "ksh"
            | "mksh"
            | "ash"
            | "yash"
            | "fish"
            | "csh"
            | "tcsh"
    )
}

pub(super) fn is_interpreter(name: &str) -> bool {
    is_shell(name)
        || name.starts_with("python")
        || matches!(
            name,
            "perl" | "ruby" | "node" | "nodejs" | "php" | "lua" | "eval" | "source" | "."
        )
}

enum ShellInput<'a> {
    /// `-c`: the script is the first operand.
    Script(Option<&'a Arg>),
    File(&'a Arg),
    Stdin,
    /// An argument known only at run time where an option could be.
    Unknown(&'a Arg),
}

fn shell_input(args: &[Arg]) -> ShellInput<'_> {
    let mut i = 0;
    let mut command = false;
    let mut stdin = false;
    while let Some(arg) = args.get(i) {
        let Some(value) = arg.value() else {
            if !command && (arg.could_start("-") || arg.could_start("+")) {
                return ShellInput::Unknown(arg);
            }
            break;
        };
        if value == "--" || value == "-" {
            i += 1;
            break;
        }
        if value.starts_with("--") {
            i += if matches!(value, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        let Some(cluster) = value.strip_prefix(['-', '+']).filter(|c| !c.is_empty()) else {
            break;
        };
        command |= cluster.contains('c');
        stdin |= cluster.contains('s');
        i += if cluster.contains(['o', 'O']) { 2 } else { 1 };
    }
    if command {
        ShellInput::Script(args.get(i))
    } else if stdin || i >= args.len() {
        ShellInput::Stdin
    } else {
        ShellInput::File(&args[i])
    }
}

pub(super) fn is_download(name: &str) -> bool {
    matches!(name, "curl" | "wget")
}
