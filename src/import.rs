//! `nova import pi [--auth] [--dry-run]`: brings a Pi user's agent dir (`$PI_CODING_AGENT_DIR`,
//! else `~/.pi/agent`) into nova's, once, at the user's word.
//!
//! nova never reads Pi's dir in place: two programs using one OAuth login would each refresh it
//! and spend the refresh token the other still holds. A copy is the user's decision, made once,
//! and credentials come over only when asked (`--auth`).
//!
//! Nothing nova already has is overwritten: a file is written through a private temporary file
//! linked to its name (a link, unlike a rename, fails when the name exists), a directory entry
//! of `skills/`, `prompts/` or `extensions/` (a skill, a template, an extension) is copied whole
//! or not at all, and auth.json gains only the providers nova has no credential for. Every
//! decision is said on stderr.

use crate::config::oauth::store;
use crate::frontend::{fatal, note, usage_error};
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: nova import pi [--auth] [--dry-run]";

const HELP: &str = "usage: nova import pi [--auth] [--dry-run]

Copy a Pi user's agent dir ($PI_CODING_AGENT_DIR, else ~/.pi/agent) into nova's
($NOVA_AGENT_DIR, else ~/.nova/agent): models.json, settings.json, trust.json, mcp.json,
the context files (AGENTS.md, CLAUDE.md and their variants), SYSTEM.md, APPEND_SYSTEM.md, and
each skill, prompt template and extension. A file or entry nova already has is kept and the Pi one skipped; stderr says what was
copied and what was skipped, and why.

  --auth      also copy auth.json's credentials (the file stays private, mode 0600); a
              provider nova already has a credential for keeps nova's
  --dry-run   say what would be copied, write nothing";

/// Files nova reads from its agent dir under the same names and formats as Pi.
/// (The context files, [`crate::context::CONTEXT_FILE_NAMES`], come after them.)
const FILES: [&str; 6] = [
    "models.json",
    "trust.json",
    "mcp.json",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
    "settings.json",
];

/// Directories whose entries nova discovers in its agent dir, as Pi does in its own.
const DIRS: [&str; 3] = ["skills", "prompts", "extensions"];

/// Settings keys holding resource paths, which count from the settings file's directory.
const PATH_LISTS: [&str; 4] = ["skills", "prompts", "extensions", "themes"];

const AUTH_FILE: &str = "auth.json";

/// What `nova import` was asked.
pub enum Request {
    Help,
    Pi { auth: bool, dry_run: bool },
}

/// `Some` when the arguments (after the program's name) are an import command; a malformed one
/// is a usage error right away.
pub fn parse(args: &[String]) -> Option<Result<Request, ExitCode>> {
    let (command, rest) = args.split_first()?;
    if command != "import" {
        return None;
    }
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        return Some(Ok(Request::Help));
    }
    let Some((source, flags)) = rest.split_first() else {
        return Some(Err(usage_error(&format!(
            "{USAGE} (say what to import from: only `pi` is known)"
        ))));
    };
    if source != "pi" {
        return Some(Err(usage_error(&format!(
            "{USAGE} (nova imports only from Pi, not from `{source}`)"
        ))));
    }
    let (mut auth, mut dry_run) = (false, false);
    for flag in flags {
        match flag.as_str() {
            "--auth" => auth = true,
            "--dry-run" => dry_run = true,
            other => {
                return Some(Err(usage_error(&format!(
                    "{USAGE} (`{other}` is not an option)"
                ))));
            }
        }
    }
    Some(Ok(Request::Pi { auth, dry_run }))
}

/// Pi's agent dir: `$PI_CODING_AGENT_DIR` (a leading `~` meaning the home directory, as Pi
/// reads it), else `~/.pi/agent`.
pub fn pi_agent_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    match std::env::var("PI_CODING_AGENT_DIR") {
        Ok(dir) if dir == "~" => home,
        Ok(dir) if dir.starts_with("~/") => home.join(&dir[2..]),
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => home.join(".pi").join("agent"),
    }
}

/// Runs the request: `pi` is Pi's agent dir, `nova` nova's.
pub async fn run(request: Request, pi: &Path, nova: &Path) -> ExitCode {
    let (auth, dry_run) = match request {
        Request::Help => {
            let _ = writeln!(std::io::stdout(), "{HELP}");
            return ExitCode::SUCCESS;
        }
        Request::Pi { auth, dry_run } => (auth, dry_run),
    };
    match std::fs::metadata(pi) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return fatal(&format!("{} is not a directory", pi.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fatal(&format!(
                "there is no Pi agent dir at {}: nothing to import (set PI_CODING_AGENT_DIR to \
                 the directory Pi keeps its settings in)",
                pi.display()
            ));
        }
        Err(e) => return fatal(&format!("cannot read {}: {e}", pi.display())),
    }
    let pi = std::path::absolute(pi).unwrap_or_else(|_| pi.to_path_buf());
    if let (Ok(a), Ok(b)) = (pi.canonicalize(), nova.canonicalize())
        && a == b
    {
        return fatal(&format!(
            "Pi's agent dir and nova's are the same directory ({}): nothing to import",
            a.display()
        ));
    }
    let mut import = Import {
        pi: &pi,
        nova,
        dry_run,
        copied: 0,
        skipped: 0,
        failed: 0,
    };
    for name in FILES.into_iter().chain(crate::context::CONTEXT_FILE_NAMES) {
        import.file(name);
    }
    for dir in DIRS {
        import.entries(dir);
    }
    if auth {
        import.auth().await;
    } else if pi.join(AUTH_FILE).exists() {
        import.skip(AUTH_FILE, "credentials are imported only with --auth");
    }
    let Import {
        copied,
        skipped,
        failed,
        ..
    } = import;
    let verb = if dry_run { "would import" } else { "imported" };
    note(&format!(
        "{verb} {copied} item(s) from {} into {}, skipped {skipped}{}{}",
        pi.display(),
        nova.display(),
        if failed > 0 {
            format!(", {failed} failed")
        } else {
            String::new()
        },
        if dry_run {
            " (--dry-run: nothing written)"
        } else {
            ""
        }
    ));
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

struct Import<'a> {
    pi: &'a Path,
    nova: &'a Path,
    dry_run: bool,
    copied: usize,
    skipped: usize,
    failed: usize,
}

impl Import<'_> {
    fn copied(&mut self, what: &str, extra: &str) {
        self.copied += 1;
        let verb = if self.dry_run { "would copy" } else { "copied" };
        note(&format!("{verb} {what}{extra}"));
    }

    fn skip(&mut self, what: &str, why: &str) {
        self.skipped += 1;
        note(&format!("skipped {what}: {why}"));
    }

    fn fail(&mut self, what: &str, why: &str) {
        self.failed += 1;
        note(&format!("cannot import {what}: {why}"));
    }

    /// One file of the agent dir's top level.
    fn file(&mut self, name: &str) {
        let from = self.pi.join(name);
        let to = self.nova.join(name);
        if from.symlink_metadata().is_err() {
            return;
        }
        if to.symlink_metadata().is_ok() {
            return self.skip(name, &format!("nova already has {}", to.display()));
        }
        let Some((bytes, mode)) = self.read_source(name, &from) else {
            return;
        };
        let (bytes, extra) = if name == "settings.json" {
            match settings_for_nova(bytes, self.pi) {
                Ok(rebased) => rebased,
                Err(why) => return self.fail(name, &why),
            }
        } else {
            (bytes, String::new())
        };
        if self.dry_run {
            return self.copied(name, &extra);
        }
        match write_new(&to, &bytes, mode) {
            Ok(()) => self.copied(name, &extra),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                self.skip(name, &format!("nova already has {}", to.display()))
            }
            Err(e) => self.fail(name, &format!("cannot write {}: {e}", to.display())),
        }
    }

    /// The bytes and permission bits of a file of Pi's, `None` (said) when it cannot be read.
    fn read_source(&mut self, name: &str, from: &Path) -> Option<(Vec<u8>, u32)> {
        let read = crate::files::safe_open::open_regular(from).and_then(|mut file| {
            let mode = file.metadata()?.permissions().mode() & 0o777;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok((bytes, mode))
        });
        match read {
            Ok(found) => Some(found),
            Err(e) => {
                self.fail(name, &format!("cannot read {}: {e}", from.display()));
                None
            }
        }
    }

    /// Each entry of `skills/`, `prompts/` or `extensions/`, whole.
    fn entries(&mut self, dir: &str) {
        let from_dir = self.pi.join(dir);
        let read = match std::fs::read_dir(&from_dir) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => return self.fail(dir, &format!("cannot read {}: {e}", from_dir.display())),
        };
        let mut names: Vec<_> = read.filter_map(Result::ok).map(|e| e.file_name()).collect();
        names.sort();
        for name in names {
            let what = format!("{dir}/{}", name.to_string_lossy());
            let from = from_dir.join(&name);
            let to = self.nova.join(dir).join(&name);
            if to.symlink_metadata().is_ok() {
                self.skip(
                    &what,
                    &format!("nova already has {} of that name", to.display()),
                );
                continue;
            }
            if self.dry_run {
                self.copied(&what, "");
                continue;
            }
            match copy_entry(&from, &to) {
                Ok(()) => self.copied(&what, ""),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self.skip(
                    &what,
                    &format!("nova already has {} of that name", to.display()),
                ),
                Err(e) => self.fail(&what, &e.to_string()),
            }
        }
    }

    /// The providers of Pi's auth.json that nova has no credential for, added to nova's under
    /// the lock every change of auth.json takes.
    async fn auth(&mut self) {
        let from = self.pi.join(AUTH_FILE);
        if from.symlink_metadata().is_err() {
            return;
        }
        let theirs = match store::read_all(&from) {
            Ok(all) => all,
            Err(e) => return self.fail(AUTH_FILE, &e),
        };
        let to = self.nova.join(AUTH_FILE);
        let merged = crate::config::auth::add_missing(&to, theirs, !self.dry_run).await;
        let (added, kept) = match merged {
            Ok(outcome) => outcome,
            Err(e) => return self.fail(AUTH_FILE, &e),
        };
        for provider in kept {
            self.skip(
                &format!("the {AUTH_FILE} entry of {provider}"),
                "nova already has a credential for it",
            );
        }
        for (provider, oauth) in added {
            let what = format!("the {AUTH_FILE} entry of {provider}");
            let extra = if oauth {
                " (an OAuth login: Pi and nova now share it, and a refresh by one can sign the \
                 other out; log in again in one of them to give each its own)"
            } else {
                ""
            };
            self.copied(&what, extra);
        }
    }
}

/// Pi's settings.json, read as nova reads settings, made ready for nova's dir: a resource path
/// written relative to Pi's dir is made absolute, so it still names the same file, unless it
/// points into a directory this import copies. The file's bytes are kept as they are when
/// nothing needs changing (a changed file is written out again, keys sorted). Keys nova does
/// not know are kept either way: Pi may read this file again, and nova may learn them.
fn settings_for_nova(bytes: Vec<u8>, pi: &Path) -> Result<(Vec<u8>, String), String> {
    let path = pi.join("settings.json");
    let text = String::from_utf8(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut settings = crate::config::settings::parse_object(&text, &path)?;
    let mut rebased = Vec::new();
    for key in PATH_LISTS {
        if let Some(Value::Array(entries)) = settings.get_mut(key) {
            for entry in entries {
                if let Value::String(s) = entry
                    && let Some(new) = rebase_resource(s, pi)
                {
                    rebased.push(format!("{key} \"{s}\" → \"{new}\""));
                    *s = new;
                }
            }
        }
    }
    if let Some(Value::Array(packages)) = settings.get_mut("packages") {
        for package in packages {
            let source = match package {
                Value::String(s) => Some(s),
                Value::Object(o) => match o.get_mut("source") {
                    Some(Value::String(s)) => Some(s),
                    _ => None,
                },
                _ => None,
            };
            if let Some(s) = source
                && let Some(new) = rebase_package(s, pi)
            {
                rebased.push(format!("packages \"{s}\" → \"{new}\""));
                *s = new;
            }
        }
    }
    if rebased.is_empty() {
        return Ok((text.into_bytes(), String::new()));
    }
    let mut out = serde_json::to_vec_pretty(&Value::Object(settings))
        .map_err(|e| format!("cannot write settings back out: {e}"))?;
    out.push(b'\n');
    let said = format!(
        " (paths relative to Pi's dir made absolute: {})",
        rebased.join(", ")
    );
    Ok((out, said))
}

/// An entry of a resource list (`path`, `+path`, `-path`; `!glob` and `builtin:` names are not
/// paths) as it must read in nova's dir, `None` when it can stay.
fn rebase_resource(entry: &str, pi: &Path) -> Option<String> {
    if entry.starts_with('!') {
        return None;
    }
    let (sign, path) = match entry.strip_prefix(['+', '-']) {
        Some(rest) => (&entry[..1], rest),
        None => ("", entry),
    };
    if path.starts_with("builtin:") || !is_plain_relative(path) || into_copied_dir(path) {
        return None;
    }
    Some(format!("{sign}{}", pi.join(path).display()))
}

/// A package source: only a local path written relative (`./x`, `../x`) counts from the
/// settings file; `npm:`, `git:` and addresses do not.
fn rebase_package(source: &str, pi: &Path) -> Option<String> {
    let relative =
        source == "." || source == ".." || source.starts_with("./") || source.starts_with("../");
    if !relative || into_copied_dir(source) {
        return None;
    }
    Some(pi.join(source).display().to_string())
}

fn is_plain_relative(path: &str) -> bool {
    !path.is_empty() && !path.starts_with('~') && Path::new(path).is_relative()
}

/// Whether a relative path stays inside one of the directories this import copies (where the
/// copy now is), such as `skills/review` or `./prompts`.
fn into_copied_dir(path: &str) -> bool {
    let mut parts = Path::new(path)
        .components()
        .filter(|c| !matches!(c, Component::CurDir));
    let first = parts.next();
    first.is_some_and(|c| DIRS.iter().any(|d| c.as_os_str() == *d))
        && parts.all(|c| matches!(c, Component::Normal(_)))
}

/// Writes a file that must not exist yet: the bytes go to a private temporary file first, which
/// is then linked to `to` (failing with `AlreadyExists` rather than replacing anything), so no
/// half-written file is ever left under the name.
fn write_new(to: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = to.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.nova-import-{}", std::process::id()));
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()?;
        std::fs::hard_link(&temp, to)
    })();
    let _ = std::fs::remove_file(&temp);
    written
}

/// Copies one entry of a resource directory: a file, a directory (built under a temporary name
/// and renamed into place, so a failure leaves nothing half-copied), or a symlink (made again,
/// its target absolute so it still points where Pi's did).
fn copy_entry(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = from.symlink_metadata()?;
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from)?;
        let target = from.parent().unwrap_or(Path::new("/")).join(target);
        return std::os::unix::fs::symlink(target, to);
    }
    if meta.is_file() {
        return copy_file(from, to);
    }
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is neither a file, a directory nor a symlink",
            from.display()
        )));
    }
    let name = to.file_name().unwrap_or_default().to_string_lossy();
    let temp = parent.join(format!(".{name}.nova-import-{}", std::process::id()));
    let copied = copy_tree(from, &temp).and_then(|()| {
        if to.symlink_metadata().is_ok() {
            return Err(std::io::ErrorKind::AlreadyExists.into());
        }
        std::fs::rename(&temp, to)
    });
    if copied.is_err() {
        let _ = std::fs::remove_dir_all(&temp);
    }
    copied
}

/// Hand-written rather than a crate's recursive copy: symlinks inside a skill or an extension
/// (`node_modules/.bin`) must stay links with their targets as written, special files must be
/// refused rather than opened, and the destination must be new.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            copy_file(&src, &dst)?;
        }
    }
    let mode = std::fs::metadata(from)?.permissions().mode() & 0o777;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
}

/// A regular file to a new name, with its permission bits (a script stays executable).
fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut source = crate::files::safe_open::open_regular(from)?;
    let mode = source.metadata()?.permissions().mode() & 0o777;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut dest = options.open(to)?;
    std::io::copy(&mut source, &mut dest)?;
    dest.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn resource_paths_keep_their_meaning() {
        let pi = Path::new("/home/u/.pi/agent");
        assert_eq!(
            rebase_resource("./mine", pi).as_deref(),
            Some("/home/u/.pi/agent/./mine")
        );
        assert_eq!(
            rebase_resource("-../shared/x", pi).as_deref(),
            Some("-/home/u/.pi/agent/../shared/x")
        );
        for stays in [
            "skills/review",
            "./prompts",
            "+extensions/a.ts",
            "/abs",
            "~/x",
            "!**/draft*",
            "builtin:mcp",
            "-builtin:mcp",
        ] {
            assert_eq!(rebase_resource(stays, pi), None, "{stays}");
        }
        assert!(rebase_resource("skills/../elsewhere", pi).is_some());
        assert_eq!(
            rebase_package("./tools", pi).as_deref(),
            Some("/home/u/.pi/agent/./tools")
        );
        for stays in ["npm:@x/y", "git:github.com/a/b", "./extensions/x", "tools"] {
            assert_eq!(rebase_package(stays, pi), None, "{stays}");
        }
    }

    #[test]
    fn settings_are_kept_byte_for_byte_unless_a_path_moves() {
        let pi = Path::new("/p");
        let text = "{\n  \"theme\": \"dark\",  \"defaultModel\": \"x\"\n}\n";
        let (out, said) = settings_for_nova(text.as_bytes().to_vec(), pi).unwrap();
        assert_eq!(out, text.as_bytes());
        assert!(said.is_empty());
        let text = r#"{"unknownKey": {"a": 1}, "skills": ["./mine", "skills/x"],
                       "packages": ["./pkg", {"source": "../other", "skills": []}, "npm:z"]}"#;
        let (out, said) = settings_for_nova(text.as_bytes().to_vec(), pi).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["unknownKey"]["a"], 1);
        assert_eq!(v["skills"][0], "/p/./mine");
        assert_eq!(v["skills"][1], "skills/x");
        assert_eq!(v["packages"][0], "/p/./pkg");
        assert_eq!(v["packages"][1]["source"], "/p/../other");
        assert_eq!(v["packages"][2], "npm:z");
        assert!(said.contains("\"./mine\""), "{said}");
        let err = settings_for_nova(b"[1]".to_vec(), pi).unwrap_err();
        assert!(err.contains("must be a JSON object"), "{err}");
        let err = settings_for_nova(b"{\"a\": }".to_vec(), pi).unwrap_err();
        assert!(err.contains("settings.json:1:"), "{err}");
    }
}
