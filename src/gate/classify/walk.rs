//! The walk that finds every command a script runs: each simple command, the scripts in its
//! substitutions, and what each wrapper, shell, alias or `git` setting in it runs in turn.

use std::collections::HashMap;

use super::args::{self, Arg};
use super::input::{self, Stdin};
use super::layer::{Invocation, Layer};
use super::shell::{self, Command, Redirect, RedirectKind, Script, Simple, Word};
use super::wrappers::{self, Runs};
use super::{builtin, git, recursion};

/// Scripts given to `bash -c`, `eval`, aliases, … nested deeper than this are flagged, not followed.
const MAX_REPARSE: usize = 8;

#[derive(Clone, Copy, Default)]
struct Context {
    stdin: Stdin,
    /// A substitution among the words or redirections downloads something.
    downloads: bool,
}

pub(super) fn invocations(script: &Script) -> Vec<Invocation> {
    let mut walker = Walker {
        forking: recursion::forking_recursion(script),
        ..Walker::default()
    };
    walker.script(script, Stdin::default());
    if walker.aliases.is_empty() {
        return walker.out;
    }
    // A second walk knows every alias the script defines, wherever it is used: a loop may use
    // an alias before the line that defines it.
    let mut walker = Walker {
        aliases: walker.aliases,
        forking: recursion::forking_recursion(script),
        ..Walker::default()
    };
    walker.script(script, Stdin::default());
    walker.out
}

#[derive(Default)]
struct Walker {
    out: Vec<Invocation>,
    reparsed: usize,
    aliases: HashMap<String, String>,
    /// Aliases being expanded, which bash does not expand again inside themselves.
    expanding: Vec<String>,
    /// `exec <…` with no command gave the rest of the script this standard input.
    stdin_replaced: Option<&'static str>,
    /// Files the command writes (normalized paths), in the order it gets to them.
    written: Vec<String>,
    /// Functions of the scripts walked that reach themselves through a forking call.
    forking: Vec<String>,
}

impl Walker {
    fn script(&mut self, script: &Script, stdin: Stdin) {
        for pipeline in &script.pipelines {
            let mut download = stdin.download;
            for (i, command) in pipeline.commands.iter().enumerate() {
                let this = if i == 0 {
                    stdin
                } else {
                    Stdin {
                        piped: true,
                        download,
                        fed: None,
                    }
                };
                self.command(command, this);
                download |= command_downloads(command);
            }
        }
    }

    fn command(&mut self, command: &Command, stdin: Stdin) {
        match command {
            Command::Simple(simple) => self.simple(simple, stdin),
            Command::Compound {
                text,
                body,
                redirects,
            } => {
                let stdin = Stdin {
                    fed: input::stdin_feed(redirects).or(stdin.fed),
                    ..stdin
                };
                self.script(body, stdin);
                for redirect in redirects {
                    self.substitutions(&redirect.target);
                }
                let flags = redirect_flags(redirects);
                if !flags.is_empty() {
                    self.out.push(Invocation {
                        layers: vec![Layer::written(text, flags)],
                    });
                }
            }
            Command::Function { text, name, body } => {
                if self.forking.contains(name) {
                    let flags = vec![
                        "a fork bomb (a function that calls itself in the background, a \
                         pipeline or a subshell)"
                            .into(),
                    ];
                    self.out.push(Invocation {
                        layers: vec![Layer::written(text, flags)],
                    });
                }
                self.command(body, Stdin::default());
            }
        }
    }

    fn substitutions(&mut self, word: &Word) {
        for sub in &word.subs {
            self.script(sub, Stdin::default());
        }
    }

    fn simple(&mut self, simple: &Simple, stdin: Stdin) {
        let targets = simple.redirects.iter().map(|r| &r.target);
        for word in simple.words.iter().chain(targets.clone()) {
            self.substitutions(word);
        }
        let own_feed = input::stdin_feed(&simple.redirects);
        let context = Context {
            stdin: Stdin {
                fed: own_feed.or(stdin.fed).or(self.stdin_replaced),
                ..stdin
            },
            downloads: simple
                .words
                .iter()
                .chain(targets)
                .any(|w| w.subs.iter().any(script_downloads)),
        };
        self.written.extend(
            simple
                .redirects
                .iter()
                .filter(|r| r.kind == RedirectKind::Write && r.target.parts.iter().all(is_text))
                .map(|r| builtin::normalize(&r.target.value)),
        );
        let start = skip_assignments(&simple.words);
        let (assignments, words) = simple.words.split_at(start);
        // Why the names this command defines cannot be seen (`BASH_ALIASES[x]=$y`).
        let mut defined = Vec::new();
        for word in assignments {
            let table = ["BASH_ALIASES[", "BASH_CMDS["]
                .into_iter()
                .find_map(|t| word.value.strip_prefix(t));
            if let Some((name, body)) = table.and_then(|rest| rest.split_once("]=")) {
                let literal = word.parts.iter().all(is_text);
                let (name, body) = (literal.then_some(name), literal.then_some(body));
                self.define(name, body, &word.raw, &mut defined);
            }
        }
        if words.len() == 1 && words[0].value == "exec" && own_feed.is_some() {
            self.stdin_replaced = own_feed;
        }
        if let Some(expansion) = self.alias_expansion(words) {
            self.expanding.push(words[0].raw.clone());
            self.reparse("an alias", &expansion, context.stdin, &mut defined);
            self.expanding.pop();
            let mut layer = Layer::written(&simple.text, redirect_flags(&simple.redirects));
            layer.unseen = defined;
            self.out.push(Invocation {
                layers: vec![layer],
            });
            return;
        }
        let args = args::expand(words);
        let mut first = Layer::of(assignments, &args);
        first.raw.clone_from(&simple.text);
        first.flags = redirect_flags(&simple.redirects);
        first.unseen = defined;
        let mut invocation = Invocation {
            layers: vec![first],
        };
        if !assignments.is_empty() && !args.is_empty() {
            invocation.layers.push(Layer::of(&[], &args));
        }
        let assigned = assignments
            .iter()
            .filter_map(|w| {
                let (name, value) = w.value.split_once('=')?;
                let literal = w.parts.iter().all(is_text);
                Some((
                    name.trim_end_matches('+').to_string(),
                    literal.then(|| value.to_string()),
                ))
            })
            .collect();
        self.chain(args, assigned, &mut invocation, context);
        self.out.push(invocation);
    }

    /// Checks the command `args` runs, then the command each wrapper in it runs.
    fn chain(
        &mut self,
        mut args: Vec<Arg>,
        mut assigned: Vec<(String, Option<String>)>,
        invocation: &mut Invocation,
        context: Context,
    ) {
        while let Some((first, rest)) = args.split_first() {
            let mut flags = Vec::new();
            let mut unseen = Vec::new();
            let Some(path) = first.value() else {
                unseen.push(if first.glob {
                    format!(
                        "a command name chosen by pathname expansion (`{}`)",
                        first.text
                    )
                } else {
                    format!("a command name known only at run time (`{}`)", first.text)
                });
                push_flags(invocation, flags, unseen);
                return;
            };
            let name = basename(path);
            let normal = builtin::normalize(path);
            if normal.starts_with("/proc/") || normal.starts_with("/dev/fd/") {
                // `/proc/self/exe` is the shell itself; `/dev/fd/3` a program from a descriptor.
                unseen.push(format!("a program run from `{path}`"));
            }
            if path.contains('/') && self.wrote(path) {
                unseen.push(format!("`{path}`, which this same command writes"));
            }
            if let Some(script) = input::script_file(name, rest)
                .and_then(Arg::value)
                .filter(|s| self.wrote(s))
            {
                unseen.push(format!(
                    "`{name}` running `{script}`, which this same command writes"
                ));
            }
            self.written.extend(builtin::writes(name, rest));
            if name == "git" {
                let found = git::check(rest, &assigned);
                flags.extend(found.flags);
                for script in found.scripts {
                    self.reparse("git", &script, Stdin::default(), &mut unseen);
                }
            } else {
                flags.extend(builtin::flags(name, rest));
            }
            self.interpreter(name, rest, context, &mut unseen);
            match name {
                "find" => self.find_exec(rest),
                "alias" => self.define_aliases(rest, &mut unseen),
                "hash" => {
                    if let Some((path, names)) = hashed(rest) {
                        for name in names {
                            self.define(name.value(), path, &name.text, &mut unseen);
                        }
                    }
                }
                _ => {}
            }
            let next = match wrappers::runs(name, rest) {
                Runs::Nothing => None,
                Runs::Command(at) => Some(rest[at..].to_vec()),
                Runs::WithInput(command) => Some(command),
                Runs::Script(script) => {
                    self.reparse(name, &script, context.stdin, &mut unseen);
                    None
                }
                Runs::Unknown(why) => {
                    unseen.push(format!(
                        "`{name}` running a command that cannot be known ({why})"
                    ));
                    None
                }
            };
            push_flags(invocation, flags, unseen);
            let Some(next) = next else { return };
            // `env A=1 cmd`, `sudo A=1 cmd`: assignments the inner command runs with.
            let skip = next
                .iter()
                .take_while(|a| a.value().is_some_and(is_assignment))
                .count();
            assigned.extend(next[..skip].iter().filter_map(|a| {
                let (name, value) = a.value()?.split_once('=')?;
                Some((name.to_string(), Some(value.to_string())))
            }));
            args = next[skip..].to_vec();
            if !args.is_empty() {
                invocation.layers.push(Layer::of(&[], &args));
            }
        }
    }

    /// Shells, interpreters, `eval`, `trap` and `source`: where their code comes from decides.
    /// What cannot be seen goes to `unseen`.
    fn interpreter(
        &mut self,
        name: &str,
        args: &[Arg],
        context: Context,
        unseen: &mut Vec<String>,
    ) {
        if input::is_interpreter(name) {
            if context.stdin.download {
                unseen.push(format!("a download piped into `{name}`"));
            } else if context.downloads {
                unseen.push(format!("`{name}` running downloaded code"));
            }
        }
        let script = if input::is_shell(name) {
            input::shell_script(name, args, context.stdin, unseen)
        } else if name == "eval" {
            let values: Option<Vec<&str>> = args.iter().map(Arg::value).collect();
            if values.is_none() {
                unseen.push("`eval` of text known only at run time".into());
            }
            values.map(|v| v.join(" "))
        } else if name == "trap" {
            // `trap 'cmd' SIGNAL…`: the script runs later, when the signal arrives.
            match args {
                [action, _, ..] if !action.value().is_some_and(|v| v.starts_with('-')) => {
                    if action.value().is_none() {
                        unseen.push("a `trap` action known only at run time".into());
                    }
                    action.value().map(str::to_string)
                }
                _ => None,
            }
        } else {
            if matches!(name, "source" | ".") {
                unseen.extend(input::sourced(name, args, context.stdin));
            }
            None
        };
        if let Some(script) = script {
            self.reparse(name, &script, context.stdin, unseen);
        }
    }

    fn reparse(&mut self, name: &str, script: &str, stdin: Stdin, unseen: &mut Vec<String>) {
        if self.reparsed >= MAX_REPARSE {
            unseen.push(format!("scripts nested too deeply under `{name}`"));
            return;
        }
        match shell::parse(script, 0) {
            Ok(parsed) => {
                self.forking.extend(recursion::forking_recursion(&parsed));
                self.reparsed += 1;
                self.script(&parsed, stdin);
                self.reparsed -= 1;
            }
            Err(e) => unseen.push(format!(
                "a script given to `{name}` that could not be parsed ({e})"
            )),
        }
    }

    /// `find -exec CMD … ;`: each runs CMD, so each is a command of its own.
    fn find_exec(&mut self, args: &[Arg]) {
        let mut i = 0;
        while i < args.len() {
            let action = args[i].value().unwrap_or_default();
            i += 1;
            if !matches!(action, "-exec" | "-execdir" | "-ok" | "-okdir") {
                continue;
            }
            let start = i;
            while i < args.len() && !args[i].is(";") && !args[i].is("+") {
                i += 1;
            }
            let words = &args[start..i];
            if !words.is_empty() {
                let mut invocation = Invocation {
                    layers: vec![Layer::of(&[], words)],
                };
                if words[0]
                    .value()
                    .map(basename)
                    .is_some_and(|n| matches!(n, "rm" | "unlink"))
                {
                    invocation.layers[0].flags.push(format!(
                        "`find {action} rm` (deletes every file found, like `-delete`)"
                    ));
                }
                self.chain(
                    words.to_vec(),
                    Vec::new(),
                    &mut invocation,
                    Context::default(),
                );
                self.out.push(invocation);
            }
        }
    }

    /// `alias name='body'…`: remembered for where the names are used, and the bodies judged
    /// as commands of their own.
    fn define_aliases(&mut self, args: &[Arg], unseen: &mut Vec<String>) {
        for arg in args {
            match arg.value() {
                None => unseen.push(format!("an alias defined at run time (`{}`)", arg.text)),
                Some(value) => {
                    if let Some((name, body)) = value.split_once('=') {
                        self.define(Some(name), Some(body), &arg.text, unseen);
                    }
                }
            }
        }
    }

    /// Makes `name` run `body`, as `alias`, `hash -p`, `BASH_ALIASES[name]=…` and
    /// `BASH_CMDS[name]=…` do; either known only at run time is flagged.
    fn define(
        &mut self,
        name: Option<&str>,
        body: Option<&str>,
        text: &str,
        unseen: &mut Vec<String>,
    ) {
        match (name, body) {
            (Some(name), Some(body)) => {
                self.aliases.insert(name.to_string(), body.to_string());
                self.reparse("an alias", body, Stdin::default(), unseen);
            }
            _ => unseen.push(format!("a command name defined at run time (`{text}`)")),
        }
    }

    /// The text bash runs for `words` when their command is an alias.
    fn alias_expansion(&self, words: &[Word]) -> Option<String> {
        let usable = |word: &Word| {
            self.aliases
                .get(&word.raw)
                .filter(|_| !self.expanding.contains(&word.raw))
        };
        let mut text = usable(words.first()?)?.clone();
        let mut next = 1;
        // A body ending in a blank makes the next word an alias candidate too.
        while text.ends_with([' ', '\t'])
            && let Some(body) = words.get(next).and_then(usable)
        {
            text.push_str(body);
            next += 1;
        }
        for word in &words[next..] {
            text.push(' ');
            text.push_str(&word.raw);
        }
        Some(text)
    }
}

impl Walker {
    fn wrote(&self, path: &str) -> bool {
        self.written.contains(&builtin::normalize(path))
    }
}

pub(super) fn is_text(part: &shell::Part) -> bool {
    matches!(part, shell::Part::Text { .. })
}

/// `hash -p PATH NAME…`, which makes each NAME run PATH: the path (if known) and the names.
fn hashed(args: &[Arg]) -> Option<(Option<&str>, &[Arg])> {
    let at = args
        .iter()
        .position(|a| a.value().is_some_and(|v| v.starts_with("-p")))?;
    match args[at]
        .value()?
        .strip_prefix("-p")
        .filter(|p| !p.is_empty())
    {
        Some(path) => Some((Some(path), &args[at + 1..])),
        None => Some((args.get(at + 1)?.value(), args.get(at + 2..)?)),
    }
}

fn push_flags(invocation: &mut Invocation, flags: Vec<String>, unseen: Vec<String>) {
    if let Some(last) = invocation.layers.last_mut() {
        last.flags.extend(flags);
        last.unseen.extend(unseen);
    }
}

fn redirect_flags(redirects: &[Redirect]) -> Vec<String> {
    redirects
        .iter()
        .filter(|r| r.kind == RedirectKind::Write)
        .filter_map(|r| {
            let mut target = args::expand_word(&r.target).into_iter().next()?;
            // A redirection target is never split into several words (bash refuses it instead).
            target.splits = false;
            builtin::device(&target)
                .map(|t| format!("output redirected onto the block device `{t}`"))
                .or_else(|| {
                    builtin::control_file(&target)
                        .map(|t| format!("output written to the system control file `{t}`"))
                })
        })
        .collect()
}

pub(super) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn is_assignment(value: &str) -> bool {
    let Some((name, _)) = value.split_once('=') else {
        return false;
    };
    let name = name.strip_suffix('+').unwrap_or(name);
    let name = match name.split_once('[') {
        Some((base, index)) if index.ends_with(']') => base,
        _ => name,
    };
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn skip_assignments(words: &[Word]) -> usize {
    words.iter().take_while(|w| is_assignment(&w.value)).count()
}

/// The commands a simple command runs: its own, then each a wrapper in it runs.
fn command_names(words: &[Word]) -> Vec<String> {
    let mut names = Vec::new();
    let mut args = args::expand(&words[skip_assignments(words)..]);
    while let Some((first, rest)) = args.split_first() {
        let Some(name) = first.value().map(basename) else {
            break;
        };
        names.push(name.to_string());
        let next = match wrappers::runs(name, rest) {
            Runs::Command(at) => rest[at..].to_vec(),
            Runs::WithInput(command) => command,
            _ => break,
        };
        let skip = next
            .iter()
            .take_while(|a| a.value().is_some_and(is_assignment))
            .count();
        args = next[skip..].to_vec();
    }
    names
}

fn command_downloads(command: &Command) -> bool {
    match command {
        Command::Simple(simple) => {
            command_names(&simple.words)
                .iter()
                .any(|n| input::is_download(n))
                || simple
                    .words
                    .iter()
                    .any(|w| w.subs.iter().any(script_downloads))
        }
        Command::Compound { body, .. } => script_downloads(body),
        Command::Function { .. } => false,
    }
}

fn script_downloads(script: &Script) -> bool {
    script
        .pipelines
        .iter()
        .flat_map(|p| &p.commands)
        .any(command_downloads)
}
