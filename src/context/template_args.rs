//! A template command's arguments, with Pi's rules so templates behave the same in both.
//!
//! Splitting is shell-like but forgiving, which no shell-words crate does: a quote opens only
//! at the start of an argument (so `doesn't` stays one word), a quote that is never closed is
//! kept as text, and inside quotes a backslash escapes only the quote that opened them (any
//! other backslash is kept as typed).

/// Splits `text` into arguments.
pub fn split(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut args = Vec::new();
    let mut current = String::new();
    // Set once an argument has begun, so a quoted empty string ("") is still an argument.
    let mut started = false;
    let mut quote: Option<(char, usize)> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some((q, _)) if c == '\\' && chars.get(i + 1) == Some(&q) => {
                current.push(q);
                i += 1;
            }
            Some((q, _)) if c == q => quote = None,
            Some(_) => current.push(c),
            None if (c == '"' || c == '\'') && !started => {
                quote = Some((c, i));
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    args.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            None => {
                current.push(c);
                started = true;
            }
        }
        if let Some((q, at)) = quote.filter(|_| i + 1 >= chars.len()) {
            // Never closed: the quote was plain text after all. It opened the argument, so the
            // argument restarts as that one character and the rest is read again unquoted.
            quote = None;
            current = q.to_string();
            i = at;
        }
        i += 1;
    }
    if started {
        args.push(current);
    }
    args
}

/// Fills a template's placeholders in one pass over the template (so an argument that itself
/// contains `$1` is not expanded again):
///
/// | placeholder | becomes |
/// |---|---|
/// | `$1`, `$2`, … | that argument, or nothing |
/// | `$@`, `$ARGUMENTS` | every argument, joined with spaces |
/// | `${N:-default}`, `${@:-default}` | the same, or `default` when empty |
/// | `${@:N}`, `${@:N:L}` | arguments from the Nth on (L of them), joined with spaces |
pub fn substitute(template: &str, args: &[String]) -> String {
    let all = args.join(" ");
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        match placeholder(tail, args, &all) {
            Some((value, len)) => {
                out.push_str(&value);
                rest = &tail[len..];
            }
            None => {
                out.push('$');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of the placeholder at the start of `text` (which starts with `$`) and its length.
fn placeholder(text: &str, args: &[String], all: &str) -> Option<(String, usize)> {
    if let Some(inner) = text.strip_prefix("${") {
        let close = inner.find('}')?;
        let body = &inner[..close];
        let len = 2 + close + 1;
        if let Some((target, default)) = body.split_once(":-") {
            let value = match target {
                "@" | "ARGUMENTS" => all,
                n if is_number(n) => nth(args, n),
                _ => return None,
            };
            let value = if value.is_empty() { default } else { value };
            return Some((value.to_owned(), len));
        }
        let slice = body.strip_prefix("@:")?;
        let (start, count) = match slice.split_once(':') {
            Some((s, c)) if is_number(s) && is_number(c) => (s, Some(c)),
            None if is_number(slice) => (slice, None),
            _ => return None,
        };
        // `${@:0}` means from the first, as in bash.
        let start = number(start).saturating_sub(1).min(args.len());
        let end = count.map_or(args.len(), |c| {
            start.saturating_add(number(c)).min(args.len())
        });
        return Some((args[start..end].join(" "), len));
    }
    let name = &text[1..];
    for word in ["ARGUMENTS", "@"] {
        if name.starts_with(word) {
            return Some((all.to_owned(), 1 + word.len()));
        }
    }
    let digits = name.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0).then(|| (nth(args, &name[..digits]).to_owned(), 1 + digits))
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Digits too many for a `usize` name an argument that cannot exist.
fn number(digits: &str) -> usize {
    digits.parse().unwrap_or(usize::MAX)
}

/// Argument `n` (1-based), or `""`.
fn nth<'a>(args: &'a [String], n: &str) -> &'a str {
    number(n)
        .checked_sub(1)
        .and_then(|i| args.get(i))
        .map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn splitting_follows_pis_quoting() {
        assert_eq!(split("  a  b\tc\n"), args(&["a", "b", "c"]));
        assert_eq!(split(r#""API compat" 'x y'"#), args(&["API compat", "x y"]));
        assert_eq!(split("doesn't stop"), args(&["doesn't", "stop"]));
        assert_eq!(split(r#"a"b c"#), args(&["a\"b", "c"]));
        assert_eq!(
            split(r#""the \"fast\" path""#),
            args(&[r#"the "fast" path"#])
        );
        assert_eq!(split(r#"'it\'s' "a\'b\n""#), args(&["it's", r"a\'b\n"]));
        assert_eq!(split(r#""" x ''"#), args(&["", "x", ""]));
        assert_eq!(
            split(r#""unclosed and 'quoted'"#),
            args(&["\"unclosed", "and", "quoted"])
        );
        assert_eq!(split(r#"x ""#), args(&["x", "\""]));
        assert_eq!(split(r#""end\""#), args(&["\"end\\\""]));
        assert_eq!(split("ab\"cd ef\""), args(&["ab\"cd", "ef\""]));
        assert!(split("   ").is_empty());
    }

    #[test]
    fn positional_and_all() {
        let a = args(&["one", "two words", "three"]);
        assert_eq!(substitute("$1|$2|$3|$4|$0", &a), "one|two words|three||");
        assert_eq!(
            substitute("[$@] [$ARGUMENTS]", &a),
            "[one two words three] [one two words three]"
        );
        assert_eq!(substitute("$10 $1x $ $$1 $A", &a), " onex $ $one $A");
        assert_eq!(substitute("cost: $5.00", &args(&[])), "cost: .00");
    }

    #[test]
    fn defaults() {
        let a = args(&["", "b"]);
        assert_eq!(
            substitute("${1:-none} ${2:-none} ${3:-x y}", &a),
            "none b x y"
        );
        assert_eq!(
            substitute("${@:-all} ${ARGUMENTS:-all}", &args(&[])),
            "all all"
        );
        assert_eq!(substitute("${@:-all}", &a), " b");
        assert_eq!(substitute("${x:-y} ${1:-}", &args(&[])), "${x:-y} ");
    }

    #[test]
    fn slices() {
        let a = args(&["a", "b", "c", "d"]);
        assert_eq!(substitute("${@:2}", &a), "b c d");
        assert_eq!(substitute("${@:2:2}", &a), "b c");
        assert_eq!(substitute("${@:0}", &a), "a b c d");
        assert_eq!(substitute("${@:1:0}|${@:9}|${@:3:99}", &a), "||c d");
        assert_eq!(substitute("${@:99999999999999999999999}", &a), "");
        assert_eq!(substitute("${@:x} ${@:} ${@:1", &a), "${@:x} ${@:} ${@:1");
    }

    #[test]
    fn arguments_are_not_expanded_again() {
        assert_eq!(substitute("$1 $2", &args(&["$2", "x"])), "$2 x");
    }
}
