//! The permission gate's classifier: may this bash command run without asking the user?
//!
//! [`classify`] parses the command as bash would split it and looks at every simple command it
//! would run: those separated by `;`, `&&`, `||`, `|`, `|&`, `&` and newlines; those inside
//! `$( )`, backticks, `<( )`/`>( )`, `( )` subshells, `{ …; }` groups, `if`/`for`/`while`/`case`
//! bodies and function bodies; the script of `bash -c`/`sh -c`/`zsh -c`/`eval`/`su -c`/`env -S`
//! and of `trap 'script' SIGNAL`; the command run by `xargs`, `find -exec`, and the wrappers
//! `env`, `command`, `nohup`, `time`, `nice`, `timeout`, `exec`, `stdbuf`, `setsid`, `sudo`,
//! `doas`; and the command after leading `VAR=value` assignments. Quotes and escapes are resolved first, so `echo "rm -rf /"` is only an
//! `echo`, while `echo "$(rm -rf /)"` runs `rm`. Here-document bodies are data, except the
//! substitutions an unquoted delimiter lets run. Input the parser cannot follow (an unclosed
//! quote, `$(` or `{`, a stray `)`, nesting beyond any real use) is asked about, never run.
//!
//! # The built-in list
//!
//! A simple command is flagged when its command (matched by basename, so `/bin/rm` is `rm`) is:
//!
//! - `rm` with a recursive or force option in any spelling: `-r`, `-R`, `-f`, clusters such as
//!   `-rf`, `-vfR`, or `--recursive`/`--force`, anywhere before `--`;
//! - `sudo`, `su`, `doas`, `pkexec`;
//! - `git push` with `--force`, `-f`, `--force-with-lease`, `--force-if-includes`, `--delete`,
//!   `-d`, `--mirror`, `--prune`, a `+refspec` or a `:branch` deletion; `git reset --hard`;
//!   `git clean` with `-f`/`--force`; `git checkout` with `-f` or a whole-tree pathspec (`.`,
//!   `:/`, `*`, …); `git restore` of a whole-tree pathspec unless it only touches the index
//!   (`--staged` without `--worktree`);
//! - `chmod`, `chown`, `chgrp` with `-R` or `--recursive`;
//! - `dd`, `mkfs`, `mkfs.*`, `mke2fs`, `wipefs`, `shred`, `truncate`, `find -delete`;
//! - `shutdown`, `reboot`, `halt`, `poweroff`, `init 0`/`init 6`, `systemctl poweroff|reboot|halt`;
//! - `kill` aimed at every process (`kill -9 -1`, `kill -KILL -1`, `kill -- -1`), `killall`,
//!   `pkill`;
//! - a download (`curl`, `wget`) piped into a shell or interpreter (`sh`, `bash`, `zsh`, `dash`,
//!   `ksh`, `fish`, `python*`, `perl`, `ruby`, `node`, `php`, `lua`, `source`, `eval`), or handed
//!   to one through a substitution (`bash <(curl …)`, `sh -c "$(curl …)"`);
//! - a shell reading its commands from a pipe or a here-document (`… | bash`, `bash <<EOF`),
//!   since the gate cannot see that script;
//! - output redirected onto a block device (`/dev/sd*`, `/dev/hd*`, `/dev/vd*`, `/dev/xvd*`,
//!   `/dev/nvme*`, `/dev/mmcblk*`, `/dev/disk*`, `/dev/mapper/*`, `/dev/dm-*`, `/dev/md*`,
//!   `/dev/loop*`, `/dev/nbd*`), or `cp`/`mv`/`tee` onto one;
//! - a command whose name is only known at run time (`$CMD args`, `$(which x) args`);
//! - a function that pipes into itself (the fork bomb `:(){ :|:& };:`).
//!
//! # Rules from settings
//!
//! `permissions.bash` in `settings.json`: `mode` is `"flagged"` (the default: ask for flagged
//! commands), `"always"` (ask for every command) or `"never"` (ask for none); `ask`, `allow` and
//! `deny` are lists of patterns. A pattern is matched against the text of each simple command
//! (and of each command a wrapper in it runs) with runs of whitespace collapsed to one space, and
//! must match the whole text: `*` stands for any run of characters, spaces included, `?` for
//! exactly one character, every other character for itself. So `git push*` matches
//! `git   push origin main` but not `cd x && git push` as a whole — its second simple command does.
//!
//! - `deny` refuses the command without asking and wins over everything, modes included.
//! - `allow` exempts a matching simple command from `ask`, from the built-in list and from mode
//!   `"always"`; matching a wrapper (`sudo make install`) also covers the command it runs
//!   (`make install`), but commands in substitutions or `-c` scripts stand on their own.
//! - `ask` adds patterns to the built-in list.
//!
//! A command runs without asking only when none of the simple commands in it is flagged.

mod args;
mod builtin;
mod git;
mod options;
mod pattern;
mod shell;
mod walk;
mod wrappers;

use pattern::{List, first_match};
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
}

pub fn classify(command: &str, rules: &Rules) -> Verdict {
    let invocations = match shell::parse(command, 0) {
        Ok(script) => walk::invocations(&script),
        Err(e) => {
            let layer = walk::Layer::written(&shell::collapse(command), Vec::new());
            if let Some(rule) = first_match(&rules.deny, &layer, List::AskOrDeny) {
                return Verdict::Deny { rule: rule.into() };
            }
            return match rules.mode {
                Mode::Never => Verdict::Run,
                _ => Verdict::Ask {
                    reason: format!("could not parse the command: {e}"),
                },
            };
        }
    };
    let layers = invocations.iter().flat_map(|i| &i.layers);
    for layer in layers {
        if let Some(rule) = first_match(&rules.deny, layer, List::AskOrDeny) {
            return Verdict::Deny { rule: rule.into() };
        }
    }
    if rules.mode == Mode::Never {
        return Verdict::Run;
    }
    if rules.mode == Mode::Always && invocations.is_empty() {
        return Verdict::Ask {
            reason: "permissions.bash.mode is \"always\"".into(),
        };
    }
    for invocation in &invocations {
        for (k, layer) in invocation.layers.iter().enumerate() {
            let allowed = invocation.layers[..=k]
                .iter()
                .any(|l| first_match(&rules.allow, l, List::Allow).is_some());
            if allowed {
                continue;
            }
            let innermost = k + 1 == invocation.layers.len();
            let reason = if let Some(flag) = layer.flags.first() {
                flag.clone()
            } else if let Some(rule) = first_match(&rules.ask, layer, List::AskOrDeny) {
                format!("the ask rule `{rule}`")
            } else if rules.mode == Mode::Always && innermost {
                "permissions.bash.mode \"always\"".to_string()
            } else {
                continue;
            };
            return Verdict::Ask {
                reason: format!("{reason} in `{}`", shorten(&layer.raw)),
            };
        }
    }
    Verdict::Run
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
