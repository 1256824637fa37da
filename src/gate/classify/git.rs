//! `git`: the global options before the subcommand, settings that run programs or switch off a
//! safety check, and the subcommands that throw work away.

use super::args::Arg;
use super::options::Dangerous;

/// What the built-in list finds in one `git` command.
#[derive(Default)]
pub(super) struct Findings {
    pub(super) flags: Vec<String>,
    /// Shell commands git will run: the values of settings such as `core.pager` or `alias.x=!…`.
    pub(super) scripts: Vec<String>,
}

/// The index of the subcommand in `args` (`None`: there is none), past the global options
/// (`-C dir`, `-c key=value`, `--git-dir=…`, `--no-pager`, …). `Err` when an argument known only
/// at run time stands where the subcommand or an option could be.
pub(super) fn subcommand(args: &[Arg]) -> Result<Option<usize>, String> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let Some(value) = arg.value() else {
            return Err(format!(
                "a `git` subcommand or option known only at run time (`{}`)",
                arg.text
            ));
        };
        if matches!(
            value,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--config-env"
                | "--super-prefix"
                | "--attr-source"
        ) {
            i += 2;
        } else if value.starts_with('-') {
            i += 1;
        } else {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// The settings given before the subcommand, as `(key, value)`.
fn settings(args: &[Arg], end: usize) -> Vec<(String, Option<&Arg>)> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < end {
        let value = args[i].value().unwrap_or_default();
        if value == "-c" {
            if let Some(setting) = args.get(i + 1) {
                found.push(split_setting(setting));
            }
            i += 2;
            continue;
        }
        let config_env = if value == "--config-env" {
            i += 1;
            args.get(i).and_then(Arg::value)
        } else {
            value.strip_prefix("--config-env=")
        };
        if let Some(spec) = config_env {
            // `--config-env=key=ENVVAR`: the value comes from the environment.
            let key = spec.rsplit_once('=').map_or(spec, |(k, _)| k);
            found.push((key.to_ascii_lowercase(), None));
        }
        i += 1;
    }
    found
}

/// `key=value` (a bare `key` means `true`); `None` as the value when it is known only at run time.
fn split_setting(setting: &Arg) -> (String, Option<&Arg>) {
    match setting.value() {
        Some(text) => {
            let key = text.split_once('=').map_or(text, |(k, _)| k);
            (key.to_ascii_lowercase(), Some(setting))
        }
        None => (setting.text.to_ascii_lowercase(), None),
    }
}

/// Settings whose value is a shell command that git runs.
fn runs_program(key: &str) -> bool {
    let (section, rest) = key.split_once('.').unwrap_or((key, ""));
    let variable = rest.rsplit('.').next().unwrap_or(rest);
    matches!(
        key,
        "core.pager"
            | "core.editor"
            | "core.sshcommand"
            | "core.askpass"
            | "core.fsmonitor"
            | "core.gitproxy"
            | "core.alternaterefscommand"
            | "sequence.editor"
            | "diff.external"
            | "gpg.program"
            | "credential.helper"
            | "uploadpack.packobjectshook"
            | "sendemail.smtpserver"
    ) || matches!(section, "pager")
        || (section == "gpg" && variable == "program")
        || (section == "credential" && variable == "helper")
        || (section == "diff" && matches!(variable, "command" | "textconv"))
        || (section == "filter" && matches!(variable, "clean" | "smudge" | "process"))
        || (section == "merge" && variable == "driver")
        || (matches!(section, "difftool" | "mergetool" | "browser" | "man") && variable == "cmd")
        || (section == "remote" && matches!(variable, "uploadpack" | "receivepack"))
}

/// Settings that switch off a safety check or pull in commands from elsewhere.
fn weakens(key: &str) -> bool {
    let section = key.split('.').next().unwrap_or(key);
    matches!(
        key,
        "clean.requireforce" | "core.hookspath" | "include.path"
    ) || matches!(section, "includeif" | "protocol")
}

/// Settings known to change nothing but looks, identity or defaults of harmless commands.
fn harmless(key: &str) -> bool {
    let section = key.split('.').next().unwrap_or(key);
    matches!(
        section,
        "user"
            | "author"
            | "committer"
            | "color"
            | "advice"
            | "init"
            | "log"
            | "format"
            | "pretty"
            | "status"
            | "column"
            | "i18n"
            | "blame"
            | "grep"
            | "pull"
            | "fetch"
            | "rebase"
            | "commit"
            | "tag"
            | "branch"
            | "safe"
            | "gc"
            | "maintenance"
    ) || matches!(
        key,
        "core.quotepath"
            | "core.autocrlf"
            | "core.safecrlf"
            | "core.abbrev"
            | "core.filemode"
            | "core.ignorecase"
            | "core.longpaths"
            | "core.precomposeunicode"
            | "core.whitespace"
            | "diff.renames"
            | "diff.algorithm"
            | "diff.noprefix"
            | "diff.mnemonicprefix"
            | "diff.context"
            | "diff.colormoved"
            | "merge.conflictstyle"
            | "merge.ff"
            | "push.default"
            | "push.autosetupremote"
            | "push.followtags"
    )
}

/// Judges one setting. `strict`: a setting the gate does not know is flagged too (for `-c`,
/// which applies to the very command; `git config` writes are judged only on what they do).
fn judge_setting(key: &str, value: Option<&Arg>, strict: bool, found: &mut Findings) {
    let text = value
        .and_then(Arg::value)
        .map(|v| v.split_once('=').map_or("true", |(_, v)| v));
    judge(key, text, strict, found);
}

fn judge(key: &str, value: Option<&str>, strict: bool, found: &mut Findings) {
    if let Some(alias) = key.strip_prefix("alias.") {
        match value {
            Some(body) => match body.strip_prefix('!') {
                Some(script) => found.scripts.push(script.to_string()),
                None => {
                    let words: Vec<Arg> = body.split_whitespace().map(Arg::literal).collect();
                    let inner = check(&words, &[]);
                    if !inner.flags.is_empty() {
                        found
                            .flags
                            .push(format!("the git alias `{alias}` (`git {body}`)"));
                    }
                    found.scripts.extend(inner.scripts);
                }
            },
            None => found
                .flags
                .push(format!("the git alias `{alias}`, defined at run time")),
        }
    } else if runs_program(key) {
        match value {
            Some(script) => found
                .scripts
                .push(script.strip_prefix('!').unwrap_or(script).to_string()),
            None => found.flags.push(format!(
                "the git setting `{key}` running a program known only at run time"
            )),
        }
    } else if weakens(key) {
        found.flags.push(format!(
            "the git setting `{key}` (disables a safeguard or runs hooks)"
        ));
    } else if strict && !harmless(key) {
        found.flags.push(format!(
            "the git setting `{key}`, which the gate cannot judge"
        ));
    }
}

const PUSH: Dangerous = Dangerous {
    short: "fd",
    long: &[
        "force",
        "force-with-lease",
        "force-if-includes",
        "delete",
        "mirror",
        "prune",
        "receive-pack",
        "exec",
    ],
    others: "nquv46",
};
const RESET: Dangerous = Dangerous {
    short: "",
    long: &["hard"],
    others: "",
};
const CLEAN: Dangerous = Dangerous {
    short: "f",
    long: &["force"],
    others: "dnqxXi",
};
const CHECKOUT: Dangerous = Dangerous {
    short: "f",
    long: &["force"],
    others: "bBlmpqt",
};
const SWITCH: Dangerous = Dangerous {
    short: "f",
    long: &["force", "discard-changes"],
    others: "cCdmqt",
};
const FETCH: Dangerous = Dangerous {
    short: "u",
    long: &["upload-pack", "exec", "template"],
    others: "",
};

/// The environment variables through which git reads settings, like `-c`.
fn configured_by_environment(name: &str) -> bool {
    name.starts_with("GIT_CONFIG")
}

/// Environment variables whose value git runs as a shell command.
fn program_variable(name: &str) -> bool {
    matches!(
        name,
        "GIT_SSH_COMMAND"
            | "GIT_SSH"
            | "GIT_PAGER"
            | "GIT_EDITOR"
            | "GIT_SEQUENCE_EDITOR"
            | "GIT_EXTERNAL_DIFF"
            | "GIT_ASKPASS"
            | "GIT_PROXY_COMMAND"
    )
}

/// What the built-in list finds in `git args`, run with the environment `assigned` (names and
/// values set in front of it).
pub(super) fn check(args: &[Arg], assigned: &[(String, Option<String>)]) -> Findings {
    let mut found = Findings::default();
    for (name, value) in assigned {
        if configured_by_environment(name) {
            found
                .flags
                .push(format!("git settings passed through `{name}`"));
        } else if program_variable(name) {
            match value {
                Some(script) => found.scripts.push(script.clone()),
                None => found
                    .flags
                    .push(format!("`{name}` running a program known only at run time")),
            }
        }
    }
    let sub = match subcommand(args) {
        Ok(Some(sub)) => sub,
        Ok(None) => return found,
        Err(e) => {
            found.flags.push(e);
            return found;
        }
    };
    for (key, value) in settings(args, sub) {
        judge_setting(&key, value, true, &mut found);
    }
    let rest = &args[sub + 1..];
    let subcommand = args[sub].value().unwrap_or_default();
    let flag = match subcommand {
        "push" => PUSH
            .any(rest)
            .or_else(|| {
                rest.iter()
                    .filter(|a| !a.value().is_some_and(|v| v.starts_with('-')))
                    .find(|a| a.could_start("+") || a.could_start(":"))
                    .map(|a| format!("the refspec `{}`", a.text))
            })
            .map(|why| format!("a force push or remote branch deletion ({why})")),
        "reset" => RESET
            .any(rest)
            .map(|why| format!("`git reset --hard` ({why})")),
        "clean" => CLEAN.any(rest).map(|why| format!("`git clean -f` ({why})")),
        "checkout" => CHECKOUT
            .any(rest)
            .or_else(|| broad_pathspec(rest))
            .map(|why| format!("discarding changes in the work tree ({why})")),
        "switch" => SWITCH
            .any(rest)
            .map(|why| format!("discarding changes in the work tree ({why})")),
        "restore" => restore(rest),
        "clone" | "fetch" | "pull" | "ls-remote" | "archive" | "submodule" => FETCH
            .any(if subcommand == "clone" { rest } else { &[] })
            .or_else(|| {
                rest.iter()
                    .filter_map(Arg::value)
                    .find(|v| v.starts_with("--upload-pack") || v.starts_with("--exec"))
                    .map(|v| format!("`{v}`"))
            })
            .map(|why| format!("`git {subcommand}` running a program of its choosing ({why})")),
        "config" => {
            config(rest, &mut found);
            None
        }
        _ => None,
    };
    found.flags.extend(flag);
    found
}

/// A pathspec that names the whole tree (or all of a directory above it), or could.
fn broad_pathspec(args: &[Arg]) -> Option<String> {
    const BROAD: [&str; 10] = [
        ".", "./", "..", "../", "*", ":/", ":/.", ":/*", ":(top)", "/",
    ];
    args.iter()
        .filter(|a| !a.value().is_some_and(|v| v.starts_with('-')))
        .find(|a| match a.value() {
            Some(v) => BROAD.contains(&v),
            None => BROAD.iter().any(|b| a.could_be(b)),
        })
        .map(|a| format!("the pathspec `{}`", a.text))
}

fn restore(args: &[Arg]) -> Option<String> {
    let has = |short: char, long: &str| {
        args.iter()
            .filter_map(Arg::value)
            .any(|v| v == long || (v.starts_with('-') && !v.starts_with("--") && v.contains(short)))
    };
    let staged = has('S', "--staged");
    let worktree = has('W', "--worktree");
    if staged && !worktree {
        return None;
    }
    broad_pathspec(args).map(|why| format!("discarding changes in the whole work tree ({why})"))
}

/// `git config [options] key value` (or `git config set key value`): a write is judged by the
/// setting it makes.
fn config(args: &[Arg], found: &mut Findings) {
    const READS: [&str; 8] = [
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--list",
        "-l",
        "--unset",
        "--unset-all",
    ];
    const WITH_VALUE: [&str; 7] = [
        "-f",
        "--file",
        "--blob",
        "--type",
        "--default",
        "--comment",
        "--value",
    ];
    let mut positional = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.value() {
            Some(v) if READS.contains(&v) => return,
            Some(v) if WITH_VALUE.contains(&v) => i += 1,
            Some(v) if v.starts_with('-') => {}
            _ => positional.push(arg),
        }
        i += 1;
    }
    if let Some(verb) = positional.first().and_then(|a| a.value())
        && matches!(
            verb,
            "set" | "get" | "unset" | "list" | "edit" | "rename-section" | "remove-section"
        )
    {
        if verb != "set" {
            return;
        }
        positional.remove(0);
    }
    let [key, value, ..] = positional.as_slice() else {
        return;
    };
    match key.value() {
        Some(k) => judge(&k.to_ascii_lowercase(), value.value(), false, found),
        None => found.flags.push(format!(
            "`git config` of a setting known only at run time (`{}`)",
            key.text
        )),
    }
}
