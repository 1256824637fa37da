//! The built-in list of flagged commands, and the walk that finds every command a script runs.

use super::shell::{self, Command, Redirect, RedirectKind, Script, Simple, Word};

/// Scripts given to `bash -c`, `eval`, … nested deeper than this are flagged, not followed.
const MAX_REPARSE: usize = 8;

/// One simple command as the rules see it: the command as written, then each command that a
/// wrapper in it runs (`sudo X`, `env A=1 X`, `xargs X`, …), outermost first.
pub(super) struct Invocation {
    pub(super) layers: Vec<Layer>,
}

pub(super) struct Layer {
    pub(super) text: String,
    /// Why the built-in list flags the command this layer starts with.
    pub(super) flags: Vec<String>,
}

/// Where a command's standard input comes from, as far as the pipeline shows it.
#[derive(Clone, Copy, Default)]
struct Stdin {
    piped: bool,
    download: bool,
}

#[derive(Clone, Copy, Default)]
struct Context {
    stdin: Stdin,
    /// A here-document or here-string feeds standard input.
    here_input: bool,
    /// A substitution among the words or redirections downloads something.
    downloads: bool,
}

pub(super) fn invocations(script: &Script) -> Vec<Invocation> {
    let mut walker = Walker {
        out: Vec::new(),
        reparsed: 0,
    };
    walker.script(script, Stdin::default());
    walker.out
}

struct Walker {
    out: Vec<Invocation>,
    reparsed: usize,
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
                self.script(body, stdin);
                for redirect in redirects {
                    self.substitutions(&redirect.target);
                }
                let flags = redirect_flags(redirects);
                if !flags.is_empty() {
                    self.out.push(Invocation {
                        layers: vec![Layer {
                            text: text.clone(),
                            flags,
                        }],
                    });
                }
            }
            Command::Function { text, name, body } => {
                if pipes_into(name, body) {
                    self.out.push(Invocation {
                        layers: vec![Layer {
                            text: text.clone(),
                            flags: vec!["a fork bomb (a function piping into itself)".into()],
                        }],
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
        let context = Context {
            stdin,
            here_input: simple
                .redirects
                .iter()
                .any(|r| matches!(r.kind, RedirectKind::HereDoc | RedirectKind::HereString)),
            downloads: simple
                .words
                .iter()
                .chain(targets)
                .any(|w| w.subs.iter().any(script_downloads)),
        };
        let mut invocation = Invocation {
            layers: vec![Layer {
                text: simple.text.clone(),
                flags: redirect_flags(&simple.redirects),
            }],
        };
        self.chain(&simple.words, &mut invocation, context);
        self.out.push(invocation);
    }

    /// Checks the command `words` runs, then the command each wrapper in it runs.
    fn chain(&mut self, words: &[Word], invocation: &mut Invocation, context: Context) {
        let mut i = skip_assignments(words, 0);
        if i > 0 && i < words.len() {
            invocation.layers.push(layer(&words[i..]));
        }
        while let Some(word) = words.get(i) {
            let args = &words[i + 1..];
            let name = basename(&word.value);
            let mut flags = Vec::new();
            if word.dynamic {
                flags.push("a command name known only at run time".to_string());
            }
            flags.extend(builtin(name, args));
            self.interpreter(name, args, context, &mut flags);
            if name == "find" {
                self.find_exec(args);
            }
            if let Some(last) = invocation.layers.last_mut() {
                last.flags.extend(flags);
            }
            let Some(skip) = inner_command(name, args) else {
                break;
            };
            i = skip_assignments(words, i + 1 + skip);
            if i < words.len() {
                invocation.layers.push(layer(&words[i..]));
            }
        }
    }

    /// Shells, interpreters and `eval`: where their code comes from decides the flag.
    fn interpreter(
        &mut self,
        name: &str,
        args: &[Word],
        context: Context,
        flags: &mut Vec<String>,
    ) {
        if is_interpreter(name) {
            if context.stdin.download {
                flags.push(format!("a download piped into `{name}`"));
            } else if context.downloads {
                flags.push(format!("`{name}` running downloaded code"));
            }
        }
        let script = if is_shell(name) {
            match shell_input(args) {
                ShellInput::Script(Some(script)) => Some(script.value.clone()),
                ShellInput::Stdin if context.here_input => {
                    flags.push(format!("`{name}` reading commands from a here-document"));
                    None
                }
                ShellInput::Stdin if context.stdin.piped && !context.stdin.download => {
                    flags.push(format!("`{name}` reading commands from a pipe"));
                    None
                }
                _ => None,
            }
        } else if name == "eval" {
            Some(values(args).collect::<Vec<_>>().join(" "))
        } else if name == "trap" {
            // `trap 'cmd' SIGNAL…`: the script runs later, when the signal arrives.
            (args.len() >= 2 && !args[0].value.starts_with('-')).then(|| args[0].value.clone())
        } else if name == "su" {
            option_value(args, "-c", "--command").map(str::to_string)
        } else if name == "env" {
            option_value(args, "-S", "--split-string").map(str::to_string)
        } else {
            None
        };
        if let Some(script) = script {
            self.reparse(name, &script, context.stdin, flags);
        }
    }

    fn reparse(&mut self, name: &str, script: &str, stdin: Stdin, flags: &mut Vec<String>) {
        if self.reparsed >= MAX_REPARSE {
            flags.push(format!("scripts nested too deeply under `{name}`"));
            return;
        }
        match shell::parse(script, 0) {
            Ok(parsed) => {
                self.reparsed += 1;
                self.script(&parsed, stdin);
                self.reparsed -= 1;
            }
            Err(e) => flags.push(format!(
                "a script given to `{name}` that could not be parsed ({e})"
            )),
        }
    }

    /// `find -exec CMD … ;`: each runs CMD, so each is a command of its own.
    fn find_exec(&mut self, args: &[Word]) {
        let mut i = 0;
        while i < args.len() {
            let action = args[i].value.as_str();
            i += 1;
            if !matches!(action, "-exec" | "-execdir" | "-ok" | "-okdir") {
                continue;
            }
            let start = i;
            while i < args.len() && !matches!(args[i].value.as_str(), ";" | "+") {
                i += 1;
            }
            let words = &args[start..i];
            if !words.is_empty() {
                let mut invocation = Invocation {
                    layers: vec![layer(words)],
                };
                self.chain(words, &mut invocation, Context::default());
                self.out.push(invocation);
            }
        }
    }
}

fn layer(words: &[Word]) -> Layer {
    let raw: Vec<&str> = words.iter().map(|w| w.raw.as_str()).collect();
    Layer {
        text: shell::collapse(&raw.join(" ")),
        flags: Vec::new(),
    }
}

fn values(words: &[Word]) -> impl Iterator<Item = &str> {
    words.iter().map(|w| w.value.as_str())
}

fn basename(path: &str) -> &str {
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

fn skip_assignments(words: &[Word], mut i: usize) -> usize {
    while words.get(i).is_some_and(|w| is_assignment(&w.value)) {
        i += 1;
    }
    i
}

/// How many leading `args` are options, given the short and long ones that take a value.
fn skip_options(args: &[Word], short_with_value: &str, long_with_value: &[&str]) -> usize {
    let mut i = 0;
    while let Some(arg) = args.get(i).map(|w| w.value.as_str()) {
        if arg == "--" {
            return i + 1;
        }
        if !arg.starts_with('-') || arg == "-" {
            break;
        }
        let takes_next = if arg.starts_with("--") {
            long_with_value.contains(&arg)
        } else {
            let cluster = &arg[1..];
            cluster
                .char_indices()
                .find(|(_, c)| short_with_value.contains(*c))
                .is_some_and(|(at, c)| at + c.len_utf8() == cluster.len())
        };
        i += if takes_next { 2 } else { 1 };
    }
    i
}

/// Where in `args` the command run by the wrapper `name` starts, if `name` is one and runs one.
fn inner_command(name: &str, args: &[Word]) -> Option<usize> {
    let start = match name {
        "nohup" | "setsid" | "builtin" => skip_options(args, "", &[]),
        "busybox" => 0,
        "env" => {
            if option_value(args, "-S", "--split-string").is_some() {
                return None;
            }
            skip_options(args, "uC", &["--unset", "--chdir"])
        }
        "command" => {
            let options = skip_options(args, "", &[]);
            let lookup = values(&args[..options.min(args.len())])
                .any(|a| !a.starts_with("--") && a.contains(['v', 'V']));
            if lookup {
                return None;
            }
            options
        }
        "exec" => skip_options(args, "a", &[]),
        "time" => skip_options(args, "fo", &["--format", "--output"]),
        "nice" => skip_options(args, "n", &["--adjustment"]),
        "stdbuf" => skip_options(args, "ioe", &["--input", "--output", "--error"]),
        "timeout" => {
            skip_options(args, "sk", &["--signal", "--kill-after"]) + 1 // the duration
        }
        "sudo" => skip_options(
            args,
            "ughpCDrtTUR",
            &[
                "--user",
                "--group",
                "--host",
                "--prompt",
                "--close-from",
                "--chdir",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
                "--chroot",
            ],
        ),
        "doas" => skip_options(args, "uC", &[]),
        "xargs" => skip_options(
            args,
            "ILnPsdEa",
            &[
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--max-lines",
                "--eof",
            ],
        ),
        _ => return None,
    };
    (start < args.len()).then_some(start)
}

/// The value of option `short`/`long` in `args`, in any of its spellings.
fn option_value<'a>(args: &'a [Word], short: &str, long: &str) -> Option<&'a str> {
    let mut values = values(args);
    while let Some(arg) = values.next() {
        if arg == short || arg == long {
            return values.next();
        }
        if let Some(value) = arg.strip_prefix(long).and_then(|v| v.strip_prefix('=')) {
            return Some(value);
        }
        if let Some(value) = arg.strip_prefix(short).filter(|v| !v.is_empty()) {
            return Some(value);
        }
    }
    None
}

fn is_shell(name: &str) -> bool {
    matches!(
        name,
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "fish"
    )
}

fn is_interpreter(name: &str) -> bool {
    is_shell(name)
        || name.starts_with("python")
        || matches!(
            name,
            "perl" | "ruby" | "node" | "nodejs" | "php" | "lua" | "eval" | "source" | "."
        )
}

enum ShellInput<'a> {
    /// `-c`: the script is the first operand.
    Script(Option<&'a Word>),
    File,
    Stdin,
}

fn shell_input(args: &[Word]) -> ShellInput<'_> {
    let mut i = 0;
    let mut command = false;
    let mut stdin = false;
    while let Some(arg) = args.get(i).map(|w| w.value.as_str()) {
        if arg == "--" || arg == "-" {
            i += 1;
            break;
        }
        if arg.starts_with("--") {
            i += if matches!(arg, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        let Some(cluster) = arg.strip_prefix(['-', '+']).filter(|c| !c.is_empty()) else {
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
        ShellInput::File
    }
}

fn is_download(name: &str) -> bool {
    matches!(name, "curl" | "wget")
}

fn command_names(words: &[Word]) -> Vec<&str> {
    let mut names = Vec::new();
    let mut i = skip_assignments(words, 0);
    while let Some(word) = words.get(i) {
        let name = basename(&word.value);
        names.push(name);
        match inner_command(name, &words[i + 1..]) {
            Some(skip) => i = skip_assignments(words, i + 1 + skip),
            None => break,
        }
    }
    names
}

fn command_downloads(command: &Command) -> bool {
    match command {
        Command::Simple(simple) => {
            command_names(&simple.words).into_iter().any(is_download)
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

/// A function whose body pipes into itself: `:(){ :|:& };:`.
fn pipes_into(name: &str, body: &Command) -> bool {
    let Command::Compound { body, .. } = body else {
        return false;
    };
    body.pipelines.iter().any(|p| {
        p.commands.len() > 1
            && p.commands.iter().any(|c| match c {
                Command::Simple(s) => s.words.first().is_some_and(|w| w.value == name),
                compound @ Command::Compound { .. } => pipes_into(name, compound),
                Command::Function { .. } => false,
            })
    }) || body
        .pipelines
        .iter()
        .flat_map(|p| &p.commands)
        .any(|c| matches!(c, Command::Compound { .. }) && pipes_into(name, c))
}

fn is_block_device(path: &str) -> bool {
    const DISKS: [&str; 12] = [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "mapper/", "dm-", "md", "loop", "nbd",
    ];
    path.strip_prefix("/dev/")
        .is_some_and(|device| DISKS.iter().any(|d| device.starts_with(d)))
}

fn redirect_flags(redirects: &[Redirect]) -> Vec<String> {
    redirects
        .iter()
        .filter(|r| r.kind == RedirectKind::Write && is_block_device(&r.target.value))
        .map(|r| {
            format!(
                "output redirected onto the block device `{}`",
                r.target.value
            )
        })
        .collect()
}

/// The options among `args`: GNU tools accept them anywhere before `--`.
fn options(args: &[Word]) -> impl Iterator<Item = &str> {
    values(args)
        .take_while(|a| *a != "--")
        .filter(|a| a.starts_with('-') && a.len() > 1)
}

/// The letters of a short-option cluster (`-vrf` → `vrf`), or `None` for a long option.
fn cluster(option: &str) -> Option<&str> {
    option.strip_prefix('-').filter(|c| !c.starts_with('-'))
}

/// Why the built-in list flags command `name` run with `args`.
fn builtin(name: &str, args: &[Word]) -> Option<String> {
    let has = |wanted: &[&str]| values(args).any(|a| wanted.contains(&a));
    match name {
        "rm" => options(args)
            .any(|o| {
                matches!(o, "--recursive" | "--force")
                    || cluster(o).is_some_and(|c| c.contains(['r', 'R', 'f']))
            })
            .then(|| "`rm` with a recursive or force flag".to_string()),
        "sudo" | "su" | "doas" | "pkexec" => Some(format!("`{name}` (runs as another user)")),
        "git" => git(args),
        "chmod" | "chown" | "chgrp" => options(args)
            .any(|o| o == "--recursive" || cluster(o).is_some_and(|c| c.contains('R')))
            .then(|| format!("recursive `{name}`")),
        "dd" | "shred" | "truncate" | "wipefs" | "mke2fs" => {
            Some(format!("`{name}` (overwrites data)"))
        }
        _ if name == "mkfs" || name.starts_with("mkfs.") => {
            Some(format!("`{name}` (formats a file system)"))
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            Some(format!("`{name}` (stops the machine)"))
        }
        "init" | "telinit" => has(&["0", "6"]).then(|| format!("`{name}` (stops the machine)")),
        "systemctl" => has(&["poweroff", "reboot", "halt", "kexec"])
            .then(|| "`systemctl` stopping the machine".to_string()),
        "kill" => kills_everything(args).then(|| "`kill` of every process (`-1`)".to_string()),
        "killall" | "pkill" => Some(format!("`{name}` (kills processes by name)")),
        "cp" | "mv" => copy_target(args)
            .filter(|t| is_block_device(t))
            .map(|t| format!("`{name}` onto the block device `{t}`")),
        "tee" => values(args)
            .find(|a| is_block_device(a))
            .map(|t| format!("`tee` onto the block device `{t}`")),
        "find" => has(&["-delete"]).then(|| "`find -delete`".to_string()),
        _ => None,
    }
}

fn kills_everything(args: &[Word]) -> bool {
    let args: Vec<&str> = values(args).collect();
    let mut i = match args.first() {
        Some(&("-s" | "-n" | "--signal")) => 2,
        Some(&"--") => 0,
        Some(first) if first.starts_with('-') => 1,
        _ => 0,
    };
    if args.get(i) == Some(&"--") {
        i += 1;
    }
    args.get(i..).is_some_and(|targets| targets.contains(&"-1"))
}

/// The destination of `cp`/`mv`: `-t DIR`, else the last operand.
fn copy_target(args: &[Word]) -> Option<&str> {
    let mut operands = Vec::new();
    let mut values = values(args);
    let mut options_done = false;
    while let Some(arg) = values.next() {
        if options_done || !arg.starts_with('-') || arg == "-" {
            operands.push(arg);
        } else if arg == "--" {
            options_done = true;
        } else if arg == "-t" || arg == "--target-directory" {
            return values.next();
        } else if let Some(dir) = arg.strip_prefix("--target-directory=") {
            return Some(dir);
        }
    }
    operands.last().copied()
}

/// A pathspec naming the whole tree (or all of a directory above it).
fn is_broad_pathspec(path: &str) -> bool {
    matches!(
        path,
        "." | "./" | ".." | "../" | "*" | ":/" | ":/." | ":/*" | ":(top)" | "/"
    )
}

fn git(args: &[Word]) -> Option<String> {
    let all: Vec<&str> = values(args).collect();
    let mut i = 0;
    while let Some(arg) = all.get(i) {
        if matches!(
            *arg,
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
        ) {
            i += 2;
        } else if arg.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    let subcommand = *all.get(i)?;
    let rest = &args[i + 1..];
    let rest_values: Vec<&str> = values(rest).collect();
    let flagged = match subcommand {
        "push" => rest_values.iter().any(|a| {
            matches!(
                *a,
                "--force"
                    | "--force-with-lease"
                    | "--force-if-includes"
                    | "--delete"
                    | "--mirror"
                    | "--prune"
            ) || a.starts_with("--force-with-lease=")
                || cluster(a).is_some_and(|c| c.contains(['f', 'd']))
                || a.starts_with('+')
                || a.starts_with(':')
        }),
        "reset" => rest_values.contains(&"--hard"),
        "clean" => {
            options(rest).any(|o| o == "--force" || cluster(o).is_some_and(|c| c.contains('f')))
        }
        "checkout" => rest_values
            .iter()
            .any(|a| matches!(*a, "-f" | "--force") || is_broad_pathspec(a)),
        "restore" => {
            let staged = options(rest)
                .any(|o| o == "--staged" || cluster(o).is_some_and(|c| c.contains('S')));
            let worktree = options(rest)
                .any(|o| o == "--worktree" || cluster(o).is_some_and(|c| c.contains('W')));
            rest_values.iter().any(|a| is_broad_pathspec(a)) && (worktree || !staged)
        }
        _ => false,
    };
    let what = match subcommand {
        "push" => "a force push or remote branch deletion",
        "reset" => "`git reset --hard`",
        "clean" => "`git clean -f`",
        _ => "discarding changes in the whole work tree",
    };
    flagged.then(|| what.to_string())
}
