//! Fork bombs: functions that call themselves, directly or through other functions the script
//! defines, where at least one call on the way starts a new process — in the background
//! (`f & `), as a member of a pipeline (`f | f`), in a subshell (`( f )`) or in a substitution
//! (`$(f)`, `<(f)`). Each such call forks while the caller goes on (or waits), so the number of
//! processes grows until the machine runs out. Plain recursion (`f(){ f; }`) forks nothing and
//! is left alone: bash itself runs out of stack.

use super::shell::{Command, Script, Simple};
use super::walk::skip_assignments;

/// The functions `script` defines (at any depth) that reach themselves through a forking call.
pub(super) fn forking_recursion(script: &Script) -> Vec<String> {
    let mut functions = Vec::new();
    collect_script(script, None, false, &mut functions);
    let mut flagged = Vec::new();
    for f in &functions {
        if !flagged.contains(&f.name) && reaches_itself(&f.name, &functions) {
            flagged.push(f.name.clone());
        }
    }
    flagged
}

/// One function definition and the functions its body calls (by name, with whether the call
/// forks). Functions defined inside its body are definitions of their own.
struct Function {
    name: String,
    calls: Vec<(String, bool)>,
}

/// Walks `script`, adding calls to `functions[current]` (when inside a function) and a new
/// entry for each definition.
fn collect_script(
    script: &Script,
    current: Option<usize>,
    forked: bool,
    functions: &mut Vec<Function>,
) {
    for pipeline in &script.pipelines {
        let forked = forked || pipeline.background || pipeline.commands.len() > 1;
        for command in &pipeline.commands {
            collect_command(command, current, forked, functions);
        }
    }
}

fn collect_command(
    command: &Command,
    current: Option<usize>,
    forked: bool,
    functions: &mut Vec<Function>,
) {
    match command {
        Command::Simple(simple) => collect_simple(simple, current, forked, functions),
        Command::Compound {
            text,
            body,
            redirects,
        } => {
            // A subshell, or (without text) the scripts of substitutions.
            let subshell = text.is_empty() || (text.starts_with('(') && !text.starts_with("(("));
            collect_script(body, current, forked || subshell, functions);
            for redirect in redirects {
                for sub in &redirect.target.subs {
                    collect_script(sub, current, true, functions);
                }
            }
        }
        Command::Function { name, body, .. } => {
            functions.push(Function {
                name: name.clone(),
                calls: Vec::new(),
            });
            let index = functions.len() - 1;
            collect_command(body, Some(index), false, functions);
        }
    }
}

fn collect_simple(
    simple: &Simple,
    current: Option<usize>,
    forked: bool,
    functions: &mut Vec<Function>,
) {
    let targets = simple.redirects.iter().map(|r| &r.target);
    for word in simple.words.iter().chain(targets) {
        for sub in &word.subs {
            collect_script(sub, current, true, functions);
        }
    }
    let Some(current) = current else {
        return;
    };
    let words = &simple.words[skip_assignments(&simple.words)..];
    // `time` and `!` are keywords before a pipeline, not commands.
    let callee = words
        .iter()
        .map(|w| w.value.as_str())
        .find(|w| !matches!(*w, "time" | "!"));
    if let Some(callee) = callee {
        functions[current].calls.push((callee.to_owned(), forked));
    }
}

/// A path of calls from `name` back to `name` with at least one forking call on it.
fn reaches_itself(name: &str, functions: &[Function]) -> bool {
    // (function, a fork on the way so far)
    let mut seen: Vec<(&str, bool)> = Vec::new();
    let mut stack = vec![(name, false)];
    while let Some((at, forked)) = stack.pop() {
        for f in functions.iter().filter(|f| f.name == at) {
            for (callee, forks) in &f.calls {
                let state = (callee.as_str(), forked || *forks);
                if state == (name, true) {
                    return true;
                }
                if !seen.contains(&state) {
                    seen.push(state);
                    stack.push(state);
                }
            }
        }
    }
    false
}
