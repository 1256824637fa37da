//! The permission gate's classifier: may this bash command run without asking the user?
//!
//! [`classify`] reads the command as bash will run it, and looks at every simple command in it:
//! those separated by `;`, `&&`, `||`, `|`, `|&`, `&` and newlines; those inside `$( )`,
//! backticks, `<( )`/`>( )`, `( )` subshells, `{ …; }` groups, `if`/`for`/`while`/`case` bodies
//! and function bodies; the scripts of `bash -c`, `eval`, `trap`, `su -c`, `env -S`, `watch`,
//! `flock -c`, `script -c`, `sg`, `parallel`, of aliases the command defines, of git settings
//! that run programs and of the programs other tools take in an option (`tar --to-command`,
//! `tar -I`, `rsync -e`, `ssh -o ProxyCommand=…`, `zip -TT`); and, through wrappers, the command
//! a wrapper runs: `env`, `command`, `builtin`, `exec`, `nohup`, `time`, `nice`, `ionice`,
//! `timeout`, `stdbuf`, `unbuffer`, `setsid`, `taskset`, `chrt`, `flock`, `setpriv`, `strace`,
//! `ltrace`, `chroot`, `nsenter`, `unshare`, `firejail`, `fakeroot`, `eatmydata`, `systemd-run`,
//! `busybox`, `toybox`, `sudo`, `doas`, `run0`, `xargs`, `parallel`, `watch -x`, `find -exec`
//! and others, each with its own options skipped as it reads them (so `timeout -s KILL 5 rm`
//! runs `rm`).
//!
//! Each word is turned into what the command will receive. Quotes and escapes are resolved
//! (`c\url`, `"curl"`, `$'\x63url'` are all `curl`), brace expansion is done (`{rm,-rf,x}` is
//! `rm -rf x`), and what is only known at run time — a variable, `"$@"`, a substitution, a glob
//! that depends on the files present — is kept as a pattern of what it could be: `"$f"` could be
//! `-rf`, `./"$f"` could not, `$f` could be several words. When a command name or an argument
//! that decides whether the command is flagged is known only at run time, and could be the
//! flagged one, the command is flagged. Here-document bodies are data, except the substitutions
//! an unquoted delimiter lets run. Input the parser cannot follow (an unclosed quote, `$(` or
//! `{`, a stray `)`, nesting beyond any real use) is asked about, never run.
//!
//! # The built-in list
//!
//! A simple command is flagged when its command (matched by name, so `/bin/rm` is `rm`) is:
//!
//! - `rm` with a recursive or force option in any spelling: `-r`, `-R`, `-f`, clusters such as
//!   `-rf`, `-vfR`, `--recursive`/`--force` or any abbreviation (`--rec`, `--f`), anywhere
//!   before `--`, or with an argument there known only at run time that could be one (`$OPTS`,
//!   `"$@"`, `-$x`, `*`);
//! - `sudo`, `su`, `doas`, `pkexec`, `run0`, `runuser`;
//! - `git push` with `--force`, `-f`, `--force-with-lease`, `--force-if-includes`, `--delete`,
//!   `-d`, `--mirror`, `--prune`, `--receive-pack`, a `+refspec` or a `:branch` deletion;
//!   `git reset --hard`; `git clean -f`; `git checkout -f` or of a whole-tree pathspec (`.`,
//!   `:/`, `*`, …); `git switch -f`/`--discard-changes`; `git restore` of a whole-tree pathspec
//!   unless it only touches the index; `git clone`/`fetch`/`pull` with `--upload-pack`; long
//!   options abbreviated as git allows (`--forc`, `--ha`), global options such as `-C dir`,
//!   `--git-dir=…`, `--no-pager` skipped;
//! - `git` given a setting (`-c key=value`, `--config-env`, `GIT_CONFIG_*` variables) that
//!   switches off a safeguard (`clean.requireForce`, `core.hooksPath`, `include.*`,
//!   `protocol.*`) or that the gate does not know to be harmless; settings and variables whose
//!   value git runs as a command (`alias.x=!…`, `core.pager`, `core.sshCommand`, `GIT_PAGER`, …)
//!   have that command judged, and an alias for a flagged git command is flagged; `git config`
//!   writing such a setting likewise;
//! - `chmod`, `chown`, `chgrp` with `-R`, `--recursive` or an abbreviation of it;
//! - `dd`, `mkfs`, `mkfs.*`, `mke2fs`, `mkswap`, `wipefs`, `blkdiscard`, `shred`, `truncate`,
//!   `find -delete`, and `find -exec rm`/`unlink` (which deletes just the same);
//! - `shutdown`, `reboot`, `halt`, `poweroff`; `init`/`telinit` `0`, `1`, `6` or `s`;
//!   `systemctl`/`loginctl` `poweroff`, `reboot`, `halt`, `kexec`, `suspend`, `hibernate`,
//!   `rescue`, `emergency`, …; `systemctl start`/`isolate`/`enable`/`set-default`/… of a unit
//!   that stops the machine (`poweroff.target`, `reboot.target`, `halt.target`,
//!   `kexec.target`, `rescue.target`, … and glob patterns matching one); logind's `PowerOff`,
//!   `Reboot`, … called through `busctl`, `dbus-send`, `gdbus` or `qdbus`; output written to
//!   `/proc/sysrq-trigger` or `/sys/power/state`;
//! - `kill` aimed at every process: a target of `-1` in any spelling (`-01`, `' -1'`,
//!   `$((-1))`, `$[-1]`, after `-s KILL`, `-n 9` or `--`), or one known only at run time that
//!   could be `-1` (`$pid`; not `$!`, `$$`, `$(pgrep …)`, `$(pidof …)`, `$(lsof -t …)`, which
//!   print process IDs); `killall`, `pkill`, `killall5`;
//! - a download (`curl`, `wget`) piped into a shell or interpreter (`sh`, `bash`, `zsh`, `dash`,
//!   `ksh`, `fish`, `python*`, `perl`, `ruby`, `node`, `php`, `lua`, `source`, `eval`), or handed
//!   to one through a substitution (`bash <(curl …)`, `sh -c "$(curl …)"`);
//! - a shell, `.` or `source` reading commands the gate cannot see: from a pipe, a
//!   here-document or here-string, a process substitution, another descriptor (`bash <&3`,
//!   also after `exec 0<&3`), a descriptor path (`/dev/stdin`, `/dev/fd/N`,
//!   `/proc/self/fd/N`), or a script file the same command writes first (`> s.sh`, `tee`,
//!   `cp`, `curl -o`, `wget -O`), which goes for running such a file by its path too;
//! - output redirected onto a block device (`/dev/sd*`, `/dev/hd*`, `/dev/vd*`, `/dev/xvd*`,
//!   `/dev/nvme*`, `/dev/mmcblk*`, `/dev/disk*`, `/dev/mapper/*`, `/dev/dm-*`, `/dev/md*`,
//!   `/dev/loop*`, `/dev/nbd*`, `/dev/mem`, …), however the path is spelled (`/dev//sda`,
//!   `//dev/sda`, `/dev/../dev/sda`, `../../dev/sda`), or `cp`/`mv`/`tee` onto one; a target
//!   known only at run time counts when it mentions a device (`/dev/$d`, `"$DEV"`);
//! - a command whose name is known only at run time (`$CMD args`, `$(which x) args`), chosen by
//!   pathname expansion (`/bin/r?`, `r[m]`), or run from `/proc` or a descriptor
//!   (`/proc/self/exe`, the shell itself; `/dev/fd/3`);
//! - a wrapper whose own options or operands are known only at run time, so the command it runs
//!   cannot be told (`timeout $T rm x`); an `alias`, `eval` or `bash -c` of text known only at
//!   run time;
//! - a function that calls itself, directly or through other functions the script defines, in
//!   the background, a pipeline, a subshell or a substitution (the fork bomb `:(){ :|:& };:`,
//!   `f(){ f & }; f`).
//!
//! Aliases defined in the command (`alias x='rm -rf'; x /`, also `BASH_ALIASES[x]=…`,
//! `BASH_CMDS[x]=…` and `hash -p path x`) are expanded where they are used; their bodies are
//! judged on their own too. `xargs` adds arguments known only at run time (or, with `-I`, puts
//! them where its replacement string stands), and `parallel` its inputs.
//!
//! # Rules from settings
//!
//! `permissions.bash` in `settings.json`: `mode` is `"flagged"` (the default: ask for flagged
//! commands), `"always"` (ask for every command) or `"never"` (ask for none); `ask`, `allow` and
//! `deny` are lists of patterns, matched against each simple command and each command a wrapper
//! in it runs, as it will run: words expanded where their value is known, a program in a system
//! directory by its name (`/usr/bin/curl` is `curl`), `git` without its global options
//! (`git -C . push` is `git push`). Values holding spaces or shell characters are shown
//! single-quoted. `ask` and `deny` patterns also see the command as written, and the program of
//! any path by its name (`./curl`); `allow` patterns only see the resolved command, so writing
//! a command differently cannot widen what they allow.
//!
//! A pattern must match the whole command, with runs of whitespace collapsed to one space:
//! `git push*` matches `git   push origin main`, and matches `cd x && git push` only through its
//! second simple command. `?` stands for one byte (one ASCII character) and `*` for any run of
//! characters, **spaces included**: `*` spans arguments, so `rm -rf build*` also allows
//! `rm -rf build /`, and `git push*` matches `git push --force`. Nothing else is special:
//! `[`, `{` and `\` are text, as they are in most commands ([`crate::glob::Glob::command`]).
//! A pattern starting with `=` is matched word by word instead: the command must have exactly
//! as many words as the pattern, and `*` and `?` stay within one word, so `=rm -rf build*`
//! allows `rm -rf build-x` but not `rm -rf build /`. A word known only at run time (`"$d"`)
//! matches no word of an `=` pattern.
//!
//! - `deny` refuses the command without asking and wins over everything, modes included.
//!   While any deny rule exists, a command whose programs the gate cannot name before it runs
//!   (a command name known only at run time: `$c x`, `$(…) x`, `"${a[@]}"`, `command $c`,
//!   `xargs -I{} {}`; `eval`, `bash -c`, `trap` or an alias of text known only at run time; a
//!   shell or `source` reading commands from a pipe, here-string or descriptor; a script the same
//!   command writes; a command the gate cannot parse) is [`Verdict::Unchecked`]: no rule can be
//!   checked against it, and `allow` does not exempt it. The model's call is asked about where
//!   someone can answer and the mode is not `"never"`, and refused otherwise; the user's own
//!   `bash` command is refused. Function bodies, aliases and `eval` of literal text are read,
//!   so `f(){ curl "$@"; }; f x` is denied outright.
//! - `allow` exempts a matching simple command from `ask`, from the built-in list and from mode
//!   `"always"`; matching a wrapper (`sudo make install`) also covers the command it runs
//!   (`make install`), but commands in substitutions, aliases or scripts (`-c`, `watch`, …)
//!   stand on their own.
//! - `ask` adds patterns to the built-in list.
//!
//! A command runs without asking only when none of the simple commands in it is flagged.

mod args;
mod builtin;
mod git;
mod input;
mod layer;
mod options;
mod pattern;
mod recursion;
mod shell;
mod walk;
mod wrappers;

use pattern::{List, Pattern, first_match};
use serde_json::Value;

/// `permissions.bash.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Flagged,
    Always,
    Never,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rules {
    pub mode: Mode,
    pub ask: Vec<String>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl Rules {
    /// Reads the `permissions.bash` object of the settings; absent or `null` means the defaults.
    pub fn from_settings(value: Option<&Value>) -> Result<Rules, String> {
        let mut rules = Rules::default();
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(rules);
        };
        let Value::Object(map) = value else {
            return Err("permissions.bash: expected an object".into());
        };
        for (key, value) in map {
            match key.as_str() {
                "mode" => {
                    rules.mode = match value.as_str() {
                        Some("flagged") => Mode::Flagged,
                        Some("always") => Mode::Always,
                        Some("never") => Mode::Never,
                        _ => {
                            return Err(format!(
                                "permissions.bash.mode: expected \"flagged\", \"always\" or \
                                 \"never\", got {value}"
                            ));
                        }
                    }
                }
                "ask" => rules.ask = patterns(key, value)?,
                "allow" => rules.allow = patterns(key, value)?,
                "deny" => rules.deny = patterns(key, value)?,
                _ => {
                    return Err(format!(
                        "permissions.bash.{key}: unknown key (expected mode, ask, allow or deny)"
                    ));
                }
            }
        }
        Ok(rules)
    }
}

fn patterns(key: &str, value: &Value) -> Result<Vec<String>, String> {
    let Value::Array(items) = value else {
        return Err(format!(
            "permissions.bash.{key}: expected a list of patterns"
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("permissions.bash.{key}[{i}]: expected a string"))
        })
        .collect()
}

/// The rules compiled, once, when the settings are loaded: what [`classify`] checks commands
/// against.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    pub mode: Mode,
    ask: Vec<Pattern>,
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
}

impl Gate {
    /// An invalid pattern is an error naming its list and the pattern.
    pub fn new(rules: &Rules) -> Result<Gate, String> {
        let compile = |patterns: &[String], list: &str| -> Result<Vec<Pattern>, String> {
            patterns
                .iter()
                .map(|p| {
                    Pattern::new(p)
                        .map_err(|e| format!("permissions.bash.{list}: invalid pattern `{p}`: {e}"))
                })
                .collect()
        };
        Ok(Gate {
            mode: rules.mode,
            ask: compile(&rules.ask, "ask")?,
            allow: compile(&rules.allow, "allow")?,
            deny: compile(&rules.deny, "deny")?,
        })
    }

    /// Asks before every command: what broken rules fall back to.
    pub fn ask_always() -> Gate {
        Gate {
            mode: Mode::Always,
            ..Gate::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Run,
    /// Ask the user first; `reason` names what matched and in which simple command.
    Ask {
        reason: String,
    },
    /// Refuse without asking: the `deny` pattern that matched.
    Deny {
        rule: String,
    },
    /// Deny rules exist, but what the command runs is known only at run time (`$c x`,
    /// `eval "$x"`, `… | bash`), so they cannot be checked. The caller asks where someone can
    /// answer and the mode asks at all, and refuses otherwise; `reason` says why, rules named.
    Unchecked {
        reason: String,
    },
}

/// `value` as one shell word that bash reads back as exactly `value`: bare when every character
/// is one bash never treats specially, single-quoted otherwise.
pub fn shell_word(value: &str) -> String {
    let bare = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%".contains(&b));
    if bare {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', "'\\''"))
    }
}

pub fn classify(command: &str, rules: &Gate) -> Verdict {
    judge(command, rules).verdict()
}

/// [`classify`] with every simple command that asks, not only the first: what the gate needs to
/// remember an answer for exactly those commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    Run,
    Deny {
        rule: String,
    },
    Unchecked {
        reason: String,
    },
    /// At least one.
    Ask(Vec<Asking>),
}

/// One simple command (or wrapper layer) that asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asking {
    /// What matched, and in which simple command.
    pub reason: String,
    /// What an answer about this command can be remembered for, when every word of it is known
    /// before it runs: the command as written, as it will run and every reason it asks, so that
    /// only the very same command asking for the very same reasons matches. `None` when any part
    /// is known only at run time, where the same text may run something else.
    pub exact: Option<Exact>,
}

/// See [`Asking::exact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exact {
    /// As it will run, words expanded: what a person is shown.
    pub command: String,
    written: String,
    reasons: Vec<String>,
}

impl Judgement {
    pub fn verdict(self) -> Verdict {
        match self {
            Judgement::Run => Verdict::Run,
            Judgement::Deny { rule } => Verdict::Deny { rule },
            Judgement::Unchecked { reason } => Verdict::Unchecked { reason },
            Judgement::Ask(asking) => Verdict::Ask {
                reason: asking
                    .into_iter()
                    .next()
                    .map(|a| a.reason)
                    .unwrap_or_default(),
            },
        }
    }
}

pub fn judge(command: &str, rules: &Gate) -> Judgement {
    let invocations = match shell::parse(command, 0) {
        Ok(script) => walk::invocations(&script),
        Err(e) => {
            let layer = layer::Layer::written(&shell::collapse(command), Vec::new());
            if let Some(rule) = first_match(&rules.deny, &layer, List::AskOrDeny) {
                return Judgement::Deny { rule: rule.into() };
            }
            if !rules.deny.is_empty() {
                return Judgement::Unchecked {
                    reason: unchecked(
                        &rules.deny,
                        &format!("the gate could not parse this command to check it ({e})"),
                    ),
                };
            }
            return match rules.mode {
                Mode::Never => Judgement::Run,
                _ => Judgement::Ask(vec![Asking {
                    reason: format!("could not parse the command: {e}"),
                    exact: None,
                }]),
            };
        }
    };
    let layers = invocations.iter().flat_map(|i| &i.layers);
    for layer in layers.clone() {
        if let Some(rule) = first_match(&rules.deny, layer, List::AskOrDeny) {
            return Judgement::Deny { rule: rule.into() };
        }
    }
    // Before `allow` and the mode: neither may let through what the deny rules cannot see.
    let mut unseen = layers.filter_map(|l| Some((l.unseen.first()?, &l.raw)));
    if !rules.deny.is_empty()
        && let Some((why, raw)) = unseen.next()
    {
        let what = format!(
            "what this command runs is known only at run time: {why} in `{}`",
            shorten(raw)
        );
        return Judgement::Unchecked {
            reason: unchecked(&rules.deny, &what),
        };
    }
    if rules.mode == Mode::Never {
        return Judgement::Run;
    }
    if rules.mode == Mode::Always && invocations.is_empty() {
        return Judgement::Ask(vec![Asking {
            reason: "permissions.bash.mode is \"always\"".into(),
            exact: None,
        }]);
    }
    let mut asking = Vec::new();
    for invocation in &invocations {
        for (k, layer) in invocation.layers.iter().enumerate() {
            let allowed = invocation.layers[..=k]
                .iter()
                .any(|l| first_match(&rules.allow, l, List::Allow).is_some());
            if allowed {
                continue;
            }
            let innermost = k + 1 == invocation.layers.len();
            let reason = if let Some(flag) = layer.flags.first().or(layer.unseen.first()) {
                flag.clone()
            } else if let Some(rule) = first_match(&rules.ask, layer, List::AskOrDeny) {
                format!("the ask rule `{rule}`")
            } else if rules.mode == Mode::Always && innermost {
                "permissions.bash.mode \"always\"".to_string()
            } else {
                continue;
            };
            let known = layer.unseen.is_empty() && layer.words.iter().all(|w| w.known);
            let reason = format!("{reason} in `{}`", shorten(&layer.raw));
            let exact = known.then(|| Exact {
                command: layer.resolved(),
                written: layer.raw.clone(),
                reasons: layer
                    .flags
                    .iter()
                    .cloned()
                    .chain([reason.clone()])
                    .collect(),
            });
            asking.push(Asking { reason, exact });
        }
    }
    if asking.is_empty() {
        Judgement::Run
    } else {
        Judgement::Ask(asking)
    }
}

/// Why `deny` cannot be checked (`what`), naming the rules.
fn unchecked(deny: &[Pattern], what: &str) -> String {
    const NAMED: usize = 3;
    let mut named: Vec<String> = deny
        .iter()
        .take(NAMED)
        .map(|r| format!("`{}`", r.written()))
        .collect();
    if deny.len() > NAMED {
        named.push(format!("{} more", deny.len() - NAMED));
    }
    let named = named.join(", ");
    match deny.len() {
        1 => format!("a permissions.bash deny rule ({named}) exists, and {what}"),
        _ => format!("permissions.bash deny rules ({named}) exist, and {what}"),
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests;
