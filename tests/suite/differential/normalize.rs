//! What may differ between two runs of the same scenario, whoever answers, is replaced by
//! placeholders before comparing: the temp directories, ids and timestamps, durations. Numbers
//! become floats (JavaScript has no integers: `0` and `0.0` are one value to every client).

use serde_json::Value;
use std::collections::HashMap;

pub struct Normalizer {
    /// (text, placeholder), longest first so that a path inside another is not cut.
    paths: Vec<(String, String)>,
    /// Ids seen so far and their placeholders, in order of first appearance.
    ids: HashMap<String, String>,
}

/// Keys whose value is a moment or a measured duration.
/// Keys whose value is a session entry's id.
const ENTRY_ID_KEYS: &[&str] = &["id", "parentId", "targetId", "firstKeptEntryId"];

const CLOCK_KEYS: &[&str] = &[
    "timestamp",
    "durationMs",
    "wall_time_seconds",
    "created",
    "modified",
    "createdAt",
];

impl Normalizer {
    pub fn new(paths: &[(&str, &str)]) -> Normalizer {
        let mut paths: Vec<(String, String)> = paths
            .iter()
            .map(|(p, name)| ((*p).to_owned(), format!("<{name}>")))
            .collect();
        paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Normalizer {
            paths,
            ids: HashMap::new(),
        }
    }

    pub fn value(&mut self, v: &Value) -> Value {
        match v {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = match v {
                            Value::Number(_) if CLOCK_KEYS.contains(&k.as_str()) => {
                                Value::String("<clock>".into())
                            }
                            // An entry id of digits alone reads as a number anywhere else.
                            Value::String(s)
                                if ENTRY_ID_KEYS.contains(&k.as_str())
                                    && s.len() == 8
                                    && s.bytes().all(|c| c.is_ascii_hexdigit()) =>
                            {
                                Value::String(self.id(s))
                            }
                            _ => self.value(v),
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::String(s) => Value::String(self.text(s)),
            Value::Number(n) => n
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number),
            other => other.clone(),
        }
    }

    /// The placeholder of `found`, the same for every occurrence.
    fn id(&mut self, found: &str) -> String {
        let n = self.ids.len() + 1;
        self.ids
            .entry(found.to_owned())
            .or_insert_with(|| format!("<id{n}>"))
            .clone()
    }

    fn text(&mut self, s: &str) -> String {
        let mut out = s.to_owned();
        for (path, name) in &self.paths {
            out = out.replace(path.as_str(), name);
        }
        let mut result = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some((start, len, kind)) = next_variable(rest) {
            result.push_str(&rest[..start]);
            let found = &rest[start..start + len];
            match kind {
                Variable::Id => result.push_str(&self.id(found)),
                Variable::Time => result.push_str("<time>"),
            }
            rest = &rest[start + len..];
        }
        result.push_str(rest);
        result
    }
}

enum Variable {
    /// A UUID, or the 8-hex-digit ids of session entries.
    Id,
    /// An ISO-8601 moment, in a field or in a session file's name.
    Time,
}

/// The first id or moment in `s`: (start, length, kind).
fn next_variable(s: &str) -> Option<(usize, usize, Variable)> {
    let b = s.as_bytes();
    for i in 0..b.len() {
        if i > 0 && b[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        if let Some(len) = uuid_at(&b[i..]) {
            return Some((i, len, Variable::Id));
        }
        if let Some(len) = time_at(&b[i..]) {
            return Some((i, len, Variable::Time));
        }
        if let Some(len) = hex8_at(&b[i..]) {
            return Some((i, len, Variable::Id));
        }
    }
    None
}

fn uuid_at(b: &[u8]) -> Option<usize> {
    let groups = [8, 4, 4, 4, 12];
    let mut at = 0;
    for (g, len) in groups.iter().enumerate() {
        if g > 0 {
            (b.get(at) == Some(&b'-')).then_some(())?;
            at += 1;
        }
        b.get(at..at + len)?
            .iter()
            .all(u8::is_ascii_hexdigit)
            .then_some(())?;
        at += len;
    }
    Some(at)
}

/// `2026-12-03T16:45:27.008Z`, also with `-` for `:` and `.` as in session file names.
fn time_at(b: &[u8]) -> Option<usize> {
    let shape = b"dddd-dd-ddTdd:dd:dd.dddZ";
    let got = b.get(..shape.len())?;
    let fits = shape.iter().zip(got).all(|(s, c)| match s {
        b'd' => c.is_ascii_digit(),
        b':' | b'.' => *c == *s || *c == b'-',
        _ => c == s,
    });
    fits.then_some(shape.len())
}

fn hex8_at(b: &[u8]) -> Option<usize> {
    let got = b.get(..8)?;
    let ends = b.get(8).is_none_or(|c| !c.is_ascii_alphanumeric());
    (ends
        && got
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
        && got.iter().any(u8::is_ascii_digit)
        && got.iter().any(|c| c.is_ascii_alphabetic()))
    .then_some(8)
}
